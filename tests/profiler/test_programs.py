"""Programs and codelets beyond Execute/Copy: If, Call, WriteUndef, PrintTensor, user codelets."""

import numpy as np
import pytest

from profiler import (
    Call,
    Codelet,
    CompileError,
    Copy,
    Engine,
    Execute,
    Graph,
    If,
    PrintTensor,
    Sequence,
    WriteUndef,
    ipu_model,
)


def _graph():
    g = Graph(ipu_model(tiles_per_ipu=4))
    a = g.add_variable("float", [4], "a")
    flag = g.add_variable("int", [1], "flag")
    for v in (a, flag):
        g.set_tile_mapping(v, 0)
    g.create_host_write("a", a)
    g.create_host_read("a", a)
    g.create_host_write("flag", flag)
    return g, a, flag


def test_if_runs_the_branch_its_condition_selects():
    g, a, flag = _graph()
    neg, sq = g.add_compute_set("neg"), g.add_compute_set("square")
    g.add_vertex(neg, "popops::Neg", {"in": a, "out": a}, tile=0)
    g.add_vertex(sq, "popops::Square", {"in": a, "out": a}, tile=0)
    e = Engine(g, [Sequence(If(flag, Execute(neg), Execute(sq)))])
    e.load()
    for f, expected in ((1, [-1, -2, -3, -4]), (0, [1, 4, 9, 16])):
        e.write_tensor("a", [1, 2, 3, 4])
        e.write_tensor("flag", [f])
        e.run(0)
        assert e.read_tensor("a").tolist() == expected
    types = [n.type for n in e.compiled.nodes]
    assert types == ["Program", "Sequence", "If", "Sequence", "OnTileExecute", "Sequence", "OnTileExecute"]
    bc = e.memory.by_category
    assert bc["bytes"][bc["category"] == "controlId"].tolist() == [4]  # the If's id, on tile 0 only
    assert bc["tile"][bc["category"] == "controlId"].tolist() == [0]


def test_call_runs_a_function_and_print_tensor_prints(capsys):
    g, a, _ = _graph()
    neg = g.add_compute_set("neg")
    g.add_vertex(neg, "popops::Neg", {"in": a, "out": a}, tile=0)
    f = g.add_function(Execute(neg), "negate")
    e = Engine(g, [Sequence(Call(f), Call(f), PrintTensor("a", a))])
    e.load()
    e.write_tensor("a", [1, 2, 3, 4])
    e.run(0)
    assert e.read_tensor("a").tolist() == [1, 2, 3, 4]
    assert "a: [1. 2. 3. 4.]" in capsys.readouterr().out
    assert [n.type for n in e.compiled.nodes if n.type == "Call"] == ["Call", "Call"]


def _category_total(e: Engine, category: str) -> int:
    bc = e.memory.by_category
    return int(bc["bytes"][bc["category"] == category].sum())


def _control_code_by_tile(e: Engine) -> list[int]:
    bc = e.memory.by_category
    on = bc["category"] == "controlCode"
    return np.bincount(bc["tile"][on], weights=bc["bytes"][on], minlength=4).astype(int).tolist()


def test_control_code_is_held_by_the_tiles_taking_part_in_each_step():
    # a host copy into ``a`` (tile 0) then a compute set on tile 2 reading it. Per tile: Program and
    # Sequence (8 B each, every tile); StreamCopyBegin, the host sync (8 B, every tile); StreamCopyMid
    # (tile 0, which receives); StreamCopyEnd (no tile spends a cycle: none); the Sync before the
    # exchange (every tile); DoExchange (tiles 0 and 2, sending and receiving); OnTileExecute (tile 2).
    g, a, _ = _graph()
    out = g.add_variable("float", [4], "out")
    g.set_tile_mapping(out, 2)
    cs = g.add_compute_set("neg")
    g.add_vertex(cs, "popops::Neg", {"in": a, "out": out}, tile=2)
    feed = g.add_host_to_device_fifo("feed", "float", [4])
    e = Engine(g, [Sequence(Copy(feed, a), Execute(cs))])
    e.load()
    every = 8 * 4  # Program, Sequence, StreamCopyBegin, Sync
    assert _control_code_by_tile(e) == [every + 8 + 8, every, every + 8 + 8, every]


def test_a_function_called_twice_holds_its_code_once():
    # the body reads ``a`` (tile 0) on tile 1: an exchange then a compute set. Poplar compiles a
    # function's body once, so a second Call adds only its own call node (8 B of control code on
    # each of the 4 tiles), not another copy of the body's exchange or control code.
    def engine(calls: int) -> Engine:
        g, a, _ = _graph()
        out = g.add_variable("float", [4], "out")
        g.set_tile_mapping(out, 1)
        neg = g.add_compute_set("neg")
        g.add_vertex(neg, "popops::Neg", {"in": a, "out": out}, tile=1)
        f = g.add_function(Execute(neg), "negate")
        e = Engine(g, [Sequence(*[Call(f) for _ in range(calls)])])
        e.load()
        return e

    once, twice = engine(1), engine(2)
    assert _category_total(once, "internalExchangeCode") > 0
    assert _category_total(twice, "internalExchangeCode") == _category_total(once, "internalExchangeCode")
    # nodes of one call: Program, Sequence, Call (on every tile), then the body: Sync (every tile),
    # DoExchange (tiles 0 and 1, sending and receiving), OnTileExecute (tile 1, the vertex's)
    assert _category_total(once, "controlCode") == (3 + 1) * 8 * 4 + 2 * 8 + 1 * 8
    assert _category_total(twice, "controlCode") == _category_total(once, "controlCode") + 8 * 4
    shared = [n for n in twice.compiled.nodes if n.shares_code]
    assert [n.type for n in shared] == ["Sync", "DoExchange", "OnTileExecute"]
    assert all(int(n.cost.code_bytes.sum()) == 0 for n in shared if n.cost.code_bytes is not None)
    # both calls run: twice the steps, twice the cycles
    twice.run(0)
    once.run(0)
    assert twice.last_run_cycles == 2 * once.last_run_cycles


def test_write_undef_splits_a_variable_lifetime():
    g = Graph(ipu_model(tiles_per_ipu=4))
    t = g.add_variable("float", [4], "t")
    out = g.add_variable("float", [4], "out")
    for v in (t, out):
        g.set_tile_mapping(v, 0)
    g.create_host_read("out", out)
    fill, use = g.add_compute_set("fill"), g.add_compute_set("use")
    g.add_vertex(fill, "popops::Fill", {"out": t}, tile=0, value=3.0)
    g.add_vertex(use, "popops::Add", {"in1": t, "in2": out, "out": out}, tile=0)
    zero = g.add_compute_set("zero")
    g.add_vertex(zero, "popops::Fill", {"out": out}, tile=0, value=0.0)
    # steps: 0 zero, 1 fill, 2 use, 3 undef, 4 fill, 5 use
    e = Engine(g, [Sequence(Execute(zero), Execute(fill), Execute(use), WriteUndef(t), Execute(fill), Execute(use))])
    e.run(0)
    assert e.read_tensor("out").tolist() == [6.0] * 4
    assert [iv for iv in e.liveness.intervals if iv[0] == 0] == [(0, 1, 2), (0, 4, 5)]
    assert e.memory.liveness_steps[:, 0].tolist() == [0, 16, 16, 0, 16, 16]


class Dot(Codelet):
    """A user codelet (Poplar tutorial style): out = sum(a * b), one worker."""

    name = "Dot"
    inputs = ("a", "b")
    outputs = ("out",)

    def compute(self, a, b, out):
        return {"out": np.array([np.dot(a, b)], dtype=out.dtype)}

    def cycle_estimate(self, a, b, out):
        return 10 + 2 * a[0]

    def flop_estimate(self, a, b, out):
        return 2 * a[0]


def test_user_codelet_runs_per_vertex_with_its_estimates():
    g = Graph(ipu_model(tiles_per_ipu=4))
    a = g.add_variable("float", [4, 3], "a")
    out = g.add_variable("float", [4], "out")
    g.map_linearly(a, grain_size=3)
    g.map_linearly(out)
    cs = g.add_compute_set("dots")
    g.add_vertices(cs, Dot(), {"a": a, "b": a, "out": out.reshape(4, 1)}, tiles=range(4))
    g.create_host_write("a", a)
    g.create_host_read("out", out)
    e = Engine(g, [Sequence(Execute(cs))])
    e.load()
    vals = np.arange(12, dtype=np.float32).reshape(4, 3)
    e.write_tensor("a", vals)
    e.run(0)
    assert e.read_tensor("out").tolist() == (vals * vals).sum(axis=1).tolist()
    leaf = e.compiled.steps[0]
    # single-worker vertex: 6 x (10 + 2*3) + 30 supervisor on each tile
    assert leaf.cost.tile_cycles.tolist() == [6 * 16 + 30] * 4
    assert leaf.cost.flops.tolist() == [6] * 4


def test_vertex_output_on_another_tile_is_a_compile_error():
    g = Graph(ipu_model(tiles_per_ipu=4))
    a = g.add_variable("float", [4], "a")
    g.set_tile_mapping(a, 2)
    cs = g.add_compute_set("bad")
    g.add_vertex(cs, "popops::Fill", {"out": a}, tile=1, value=1.0)
    with pytest.raises(CompileError, match=r"'bad'.*field 'out'.*tile 1 writes a\[0\], which is mapped to tile 2"):
        Engine(g, [Execute(cs)]).compile()


def test_copy_between_types_is_a_compile_error():
    g = Graph(ipu_model())
    a = g.add_variable("float", [4], "a")
    b = g.add_variable("half", [4], "b")
    g.set_tile_mapping(a, 0)
    g.set_tile_mapping(b, 0)
    with pytest.raises(CompileError, match="source is float32, destination float16"):
        Engine(g, [Copy(a, b)]).compile()


@pytest.mark.parametrize(
    ("level", "expected"), [("tile", [8, 8, 8, 8]), ("ipu", [8, 0, 0, 0]), ("vertex", [16, 8, 0, 0])]
)
def test_instrumentation_results_follow_the_level(level, expected):
    g = Graph(ipu_model(tiles_per_ipu=4))
    a = g.add_variable("float", [3], "a")
    g.set_tile_mapping(a[:2], 0)
    g.set_tile_mapping(a[2:], 1)
    g.create_host_read("a", a)
    cs = g.add_compute_set("fill")
    g.add_vertices(cs, "popops::Fill", {"out": a.reshape(3, 1)}, tiles=[0, 0, 1], value=1.0)
    e = Engine(g, [Execute(cs)], options={"debug.instrument": "true", "debug.computeInstrumentationLevel": level})
    e.compile()
    bc = e.memory.by_category
    got = [int(bc["bytes"][(bc["tile"] == t) & (bc["category"] == "instrumentationResults")].sum()) for t in range(4)]
    assert got == expected


def test_vertices_added_one_at_a_time_match_a_batch():
    def build(one_by_one):
        g = Graph(ipu_model(tiles_per_ipu=4))
        a = g.add_variable("float", [8, 2], "a")
        b = g.add_variable("float", [8, 2], "b")
        g.map_linearly(a, grain_size=4)
        g.map_linearly(b, grain_size=4)
        cs = g.add_compute_set("relu")
        tiles = [i // 2 for i in range(8)]
        if one_by_one:
            for i in range(8):
                g.add_vertex(cs, "popops::Relu", {"in": a[i], "out": b[i]}, tile=tiles[i])
        else:
            g.add_vertices(cs, "popops::Relu", {"in": a, "out": b}, tiles=tiles)
        g.create_host_write("a", a)
        g.create_host_read("b", b)
        e = Engine(g, [Execute(cs)])
        e.load()
        e.write_tensor("a", np.linspace(-1, 1, 16))
        e.run(0)
        return e.read_tensor("b"), e.compiled.steps[0].cost.tile_cycles

    (b1, c1), (b2, c2) = build(True), build(False)
    assert np.array_equal(b1, np.maximum(np.linspace(-1, 1, 16, dtype=np.float32), 0).reshape(8, 2))
    assert np.array_equal(b1, b2) and np.array_equal(c1, c2)


def test_switch_runs_the_matching_case_or_the_default():
    from profiler import Switch

    g, a, flag = _graph()
    neg, sq = g.add_compute_set("neg"), g.add_compute_set("square")
    g.add_vertex(neg, "popops::Neg", {"in": a, "out": a}, tile=0)
    g.add_vertex(sq, "popops::Square", {"in": a, "out": a}, tile=0)
    e = Engine(g, [Switch(flag, {3: Execute(neg), 7: Execute(sq)})])
    e.load()
    for f, expected in ((3, [-1, -2, -3, -4]), (7, [1, 4, 9, 16]), (5, [1, 2, 3, 4])):
        e.write_tensor("a", [1, 2, 3, 4])
        e.write_tensor("flag", [f])
        e.run(0)
        assert e.read_tensor("a").tolist() == expected
    assert [n.type for n in e.compiled.nodes][:2] == ["Program", "Switch"]


def test_host_io_errors_name_the_stream_or_handle():
    from profiler import EngineError

    g, a, _ = _graph()
    s = g.add_host_to_device_fifo("feed", "float", [4])
    e = Engine(g, [Copy(s, a)])
    with pytest.raises(EngineError, match="stream 'feed' is not connected"):
        e.run(0)
    with pytest.raises(EngineError, match="no host read named 'nope'"):
        e.read_tensor("nope")
    with pytest.raises(EngineError, match="stream 'feed': buffer has 3 elements, a transfer has 4"):
        e.connect_stream("feed", np.zeros(3, np.float32))
    with pytest.raises(EngineError, match=r"run\(2\): the engine has 1 program"):
        e.run(2)


def test_compute_sets_run_walks_every_branch_loop_and_call() -> None:
    from profiler.poplar.programs import Repeat, Switch, compute_sets_run

    g = Graph(ipu_model(tiles_per_ipu=2))
    flag = g.add_variable("int", [1], "flag")
    cs = [g.add_compute_set(f"cs{i}") for i in range(7)]
    f = g.add_function(Sequence(Execute(cs[4]), Execute(cs[0])), "f")
    prog = Sequence(
        Execute(cs[0]),
        Repeat(3, Execute(cs[1])),
        If(flag, Execute(cs[2]), Call(f)),
        Switch(flag, {1: Execute(cs[3])}, Execute(cs[5])),
        Call(f),
    )
    assert compute_sets_run(prog) == {c.id for c in cs[:6]}  # cs6 is never executed
