"""Host values follow liveness: a tensor that is not always-live holds no host array once its last
step has run, and the results are unchanged (checked against numpy written separately)."""

import numpy as np

from profiler import Engine, Graph, Sequence, ipu_model, ops
from profiler.chip import cost_model


def test_dead_intermediates_are_dropped_and_results_stay_right() -> None:
    g = Graph(ipu_model(tiles_per_ipu=8))
    prog = Sequence()
    x = ops.add_mapped(g, "float", (16, 32), "x")
    w = ops.add_mapped(g, "float", (32, 8), "w")
    g.create_host_write("x", x)
    g.create_host_write("w", w)
    h = ops.relu(g, ops.matmul(g, x, w, prog), prog)  # the matmul result dies once relu has read it
    y = ops.add(g, h, h, prog)
    g.create_host_read("y", y)
    e = Engine(g, [prog])
    rng = np.random.default_rng(0)
    xv, wv = rng.standard_normal((16, 32)).astype(np.float32), rng.standard_normal((32, 8)).astype(np.float32)
    e.write_tensor("x", xv)
    e.write_tensor("w", wv)
    for _ in range(2):  # a second run makes dropped values again
        e.run(0)
        np.testing.assert_allclose(e.read_tensor("y"), 2 * np.maximum(xv @ wv, 0), rtol=1e-5)
    by_name = {v.name: v for v in g.variables}
    for name in ("matmul out", "relu"):  # not always-live: gone after the last step that reads them
        v = by_name[name]
        assert e._state[v.id].size == 0 and v.id in e._dropped
    for name in ("x", "w", "add"):  # read or written by the host: always-live, kept
        v = by_name[name]
        assert e._state[v.id].size == v.numel


def test_a_value_made_for_a_full_write_is_not_zeroed_and_a_partial_one_reads_zeros() -> None:
    from profiler.ops.elementwise import BINARY, UNARY, apply_map, map_codelet

    g = Graph(ipu_model(tiles_per_ipu=4))
    prog = Sequence()
    x = ops.add_mapped(g, "float", (64,), "x")
    g.create_host_write("x", x)
    a = ops.unary(g, "neg", x, prog)  # written whole at its first step: no zeros needed
    b = ops.add(g, a, a, prog)  # the last read of a: its values are handed to the next of its size
    z = ops.add_mapped(g, "float", (64,), "z")
    neg = map_codelet("popops::Negate", UNARY["neg"][0], 1, (cost_model.unary("negate"),))
    apply_map(g, neg, [x[:32]], prog, "half of z", out=z[:32])  # writes half of z: the rest reads zeros
    add = map_codelet("popops::Add", BINARY["add"][0], 2, (cost_model.binary("add"),))
    y = ops.add(g, z, apply_map(g, add, [b, b], prog, "b+b"), prog)
    g.create_host_read("y", y)
    e = Engine(g, [prog])
    xv = np.arange(1, 65, dtype=np.float32)
    e.write_tensor("x", xv)
    for _ in range(2):
        e.run(0)
        half = np.concatenate([-xv[:32], np.zeros(32, np.float32)])
        np.testing.assert_array_equal(e.read_tensor("y"), half - 4 * xv)
    fills = {v for p in e.compiled.cs_plans.values() for v in p.fills}  # type: ignore[union-attr]
    assert a._var in fills and z._var not in fills
    made_empty = {v for vs in e._unzeroed.values() for v in vs}
    assert a._var in made_empty and z._var not in made_empty


def test_values_a_run_drops_are_reused_by_the_next_run_and_freed_at_close() -> None:
    g = Graph(ipu_model(tiles_per_ipu=4))
    prog = Sequence()
    x = ops.add_mapped(g, "float", (64,), "x")
    g.create_host_write("x", x)
    y = ops.add(g, ops.unary(g, "neg", x, prog), x, prog)  # neg's value is dropped after the add
    g.create_host_read("y", y)
    e = Engine(g, [prog])
    e.write_tensor("x", np.arange(64, dtype=np.float32))
    e.run(0)
    kept = [id(a) for arrays in e._values._waiting.values() for a in arrays]
    assert kept  # neg's array waits for the next run
    e.run(0)
    assert [id(a) for arrays in e._values._waiting.values() for a in arrays] == kept  # the same array again
    np.testing.assert_array_equal(e.read_tensor("y"), np.zeros(64, np.float32))
    e.close()
    assert not e._values._waiting


def test_inside_a_repeat_a_value_made_each_iteration_is_dropped_and_a_carried_one_kept() -> None:
    """A pipeline's micro-batches are a Repeat: a temporary written before it is read in each
    iteration is made and dropped every iteration; a value from before the body (read in every
    iteration) crosses the body's boundary and is kept, else the second iteration would read zeros."""
    from profiler.poplar.programs import Repeat

    g = Graph(ipu_model(tiles_per_ipu=4))
    prog, body = Sequence(), Sequence()
    x = ops.add_mapped(g, "float", (64,), "x")
    g.create_host_write("x", x)
    c = ops.unary(g, "neg", x, prog)  # before the body, read in every iteration: carried
    t = ops.add(g, x, x, body)  # made and last read inside one iteration
    y = ops.add(g, ops.add(g, t, c, body), x, body)  # 2x - x + x
    prog.add(Repeat(3, body))
    g.create_host_read("y", y)
    e = Engine(g, [prog])
    xv = np.arange(1, 65, dtype=np.float32)
    e.write_tensor("x", xv)
    e.run(0)
    np.testing.assert_array_equal(e.read_tensor("y"), 2 * xv)  # c dropped after iteration 1 would give 3x
    assert e.liveness is not None
    assert c._var in e.liveness.carried and t._var not in e.liveness.carried
    assert t._var in e._dropped and e._state[t._var].size == 0
    assert c._var not in e._dropped and e._state[c._var].size == 64
