"""Receive buffers and exchange code on hand-computed graphs: a tile's buffer for a compute set holds
exactly the bytes it receives for it (each remote element once, however many of its vertices read
it; multicast for the sender), and exchange code is ``4 B x (6 + regions sent + regions received)``
(docs/fidelity.md "Exchange model" item 1) with regions judged in tile memory: a variable's mapping
intervals are regions of their own, a clone of a view over several variables is laid out on each
tile as its source (profiler.compiler.element_map.ElementMap.addresses)."""

import numpy as np
import pytest

from profiler import Execute, Graph, Sequence, ipu_model
from profiler.compiler.compile import CompiledGraph, compile_programs
from profiler.compiler.receive_buffers import RECEIVED_SUFFIX, ReceiveBuffer
from profiler.poplar.graph import ComputeSet
from profiler.poplar.tensor import Tensor, concat

F32 = 4  # bytes of a float


def _mapped(g: Graph, name: str, tiles: list[int]) -> Tensor:
    v = g.add_variable("float", [len(tiles)], name)
    g.set_tile_mapping(v, np.array(tiles))
    return v


def _vertices(g: Graph, cs: ComputeSet, in1: list, in2: list, out: list, tiles: list[int]) -> None:
    g.add_vertices(cs, "popops::Add", {"in1": concat([t.reshape(1, -1) for t in in1]),
                                       "in2": concat([t.reshape(1, -1) for t in in2]),
                                       "out": concat([t.reshape(1, -1) for t in out])}, np.array(tiles))  # fmt: skip


def _by_name(compiled: CompiledGraph) -> dict[str, ReceiveBuffer]:
    return {b.name: b for b in compiled.receive_buffers}


def test_a_tile_receives_each_remote_element_once_and_holds_just_that() -> None:
    g = Graph(ipu_model(tiles_per_ipu=4))
    x = _mapped(g, "x", [0] * 4 + [1] * 4 + [2] * 4 + [3] * 4)
    y = _mapped(g, "y", [0] * 4 + [1] * 4 + [2] * 4 + [3] * 4)
    a, b = g.add_compute_set("a"), g.add_compute_set("b")
    # a: two vertices on tile 0 both read x[8:10] (tile 2's): received once; tile 1 reads x[8:12] too
    # (tile 2 sends it once, multicast); tile 3 reads x[0:2] from tile 0
    _vertices(g, a, [x[8:10], x[8:10], x[8:10], x[0:2]], [x[10:12], x[0:2], x[10:12], x[12:14]],
              [y[0:2], y[2:4], y[4:6], y[12:14]], [0, 0, 1, 3])  # fmt: skip
    # b: tile 0 reads x[4:6] (tile 1's); tile 2 reads x[14:16] (tile 3's)
    _vertices(g, b, [x[4:6], x[8:10]], [x[0:2], x[14:16]], [y[0:2], y[8:10]], [0, 2])
    c = compile_programs(g, [Sequence(Execute(a), Execute(b), Execute(a))])
    bufs = _by_name(c)
    assert bufs["a" + RECEIVED_SUFFIX].tile_bytes.tolist() == [4 * F32, 4 * F32, 0, 2 * F32]
    assert bufs["b" + RECEIVED_SUFFIX].tile_bytes.tolist() == [2 * F32, 0, 2 * F32, 0]
    # the buffer is the bytes each tile receives for that compute set, per execution ("a" runs twice)
    for cs, name in ((a, "a"), (b, "b")):
        np.testing.assert_array_equal(bufs[name + RECEIVED_SUFFIX].tile_bytes, c.cs_plans[cs.id].exchange.bytes_in)
    assert len(bufs["a" + RECEIVED_SUFFIX].spans) == 2
    e = c.cs_plans[a.id].exchange
    assert e.bytes_out.tolist() == [2 * F32, 0, 4 * F32, 0]  # x[8:12] sent once for tiles 0 and 1
    # regions: tile 0 receives x[8:12] (1) and sends x[0:2] (1); tiles 1 and 3 receive 1; tile 2 sends 1
    assert e.code_bytes.tolist() == [4 * (6 + 1 + 1), 4 * (6 + 1), 4 * (6 + 1), 4 * (6 + 1)]


def _clone_of_concat(g: Graph) -> Tensor:
    """z = a clone of concat(p[0:4], q) (``ops.add_like``, as an elementwise op's result over a
    concatenation is made; p only in part, so not a clone variable by variable), mapped
    [1, 1, 2, 2, 1, 1, 3, 3]: z[0:2] and z[4:6] on tile 1 with z[2:4] (tile 2's) between them by
    element. Poplar lays a clone's tiles out as its source's, so tile 1 holds them as one region
    (profiler.compiler.element_map.ElementMap.addresses)."""
    from profiler.ops.core import add_like

    p, q = _mapped(g, "p", [1, 1, 2, 2, 0, 0]), _mapped(g, "q", [1, 1, 3, 3])
    z = add_like(g, concat([p[0:4], q]), "z")
    assert g.variable(z).clone_layout and g.tile_of(z).tolist() == [1, 1, 2, 2, 1, 1, 3, 3]
    return z


def test_a_clone_of_whole_variables_is_a_clone_of_each() -> None:
    """A clone of concat(p, q) with both whole (DenseNet's concatenations of convolution outputs) is
    concat(clone(p), clone(q)): each variable's mapping intervals shared, none per element, as
    Poplar's default clone keeps the source's order (PRESERVE_ORDER_UNLESS_ALIASES; popops
    ElementWiseUtil.cpp createOutputForElementWiseOp clones with the default). Tile 1's z[0:2] and
    z[4:6] are then two variables' intervals: two regions sent, as for any variable."""
    from profiler.ops.core import add_like

    p, q = _mapped(g := Graph(ipu_model(tiles_per_ipu=4)), "p", [1, 1, 2, 2]), _mapped(g, "q", [1, 1, 3, 3])
    z = add_like(g, concat([p, q]), "z")
    assert len(z.variable_ids()) == 2 and not set(z.variable_ids()) & set(concat([p, q]).variable_ids())
    assert g.tile_of(z).tolist() == [1, 1, 2, 2, 1, 1, 3, 3]
    for src, new in zip(concat([p, q]).variable_ids(), z.variable_ids(), strict=True):
        assert g.variables[new].mapping.starts is g.variables[src].mapping.starts  # shared, not per element
        assert not g.variables[new].clone_layout
    out = _mapped(g, "out", [0, 0])
    cs = g.add_compute_set("read")
    _vertices(g, cs, [z[0:2]], [z[4:6]], [out[0:2]], [0])
    e = compile_programs(g, [Sequence(Execute(cs))]).cs_plans[cs.id].exchange
    assert (e.regions_out.tolist(), e.regions_in.tolist()) == ([0, 2, 0, 0], [2, 0, 0, 0])


def test_a_clone_of_a_view_that_repeats_a_variable_is_one_variable() -> None:
    """concat(p, p) holds p twice: no clone variable by variable (it would alias); one new variable."""
    from profiler.ops.core import add_like

    g = Graph(ipu_model(tiles_per_ipu=4))
    p = _mapped(g, "p", [1, 1, 2, 2])
    z = add_like(g, concat([p, p]), "z")
    assert z.single_variable() is not None and g.tile_of(z).tolist() == [1, 1, 2, 2, 1, 1, 2, 2]


def test_exchange_regions_are_runs_in_the_holding_tiles_memory() -> None:
    """Sending z[0:2] and z[4:6] (next to each other in tile 1's memory) is one region, and the
    receiver takes them as one region of one message. z[6:8] comes from another tile: a second
    message, a second region."""
    g = Graph(ipu_model(tiles_per_ipu=4))
    z = _clone_of_concat(g)
    out = _mapped(g, "out", [0, 0, 0, 0])
    cs = g.add_compute_set("read")
    _vertices(g, cs, [z[0:2], z[0:2]], [z[4:6], z[6:8]], [out[0:2], out[2:4]], [0, 0])
    c = compile_programs(g, [Sequence(Execute(cs))])
    e = c.cs_plans[cs.id].exchange
    assert e.bytes_in.tolist() == [6 * F32, 0, 0, 0]
    assert e.regions_out.tolist() == [0, 1, 0, 1]
    assert e.regions_in.tolist() == [2, 0, 0, 0]  # one per sender
    assert e.messages.tolist() == [2, 1, 0, 1]
    assert e.code_bytes.tolist() == [4 * (6 + 2), 4 * (6 + 1), 0, 4 * (6 + 1)]
    assert _by_name(c)["read" + RECEIVED_SUFFIX].tile_bytes.tolist() == [6 * F32, 0, 0, 0]


def test_a_variables_mapping_intervals_are_regions_of_their_own() -> None:
    """A variable (not a clone) mapped [1, 1, 2, 2, 1, 1, 3, 3]: tile 1's two intervals are separate
    regions of memory (PopLibs' tests/popops/ElementWiseUtilTest.cpp: a column of a variable mapped
    to one tile is "B contiguous regions per-tile"), so sending z[0:2] and z[4:6] is two regions."""
    g = Graph(ipu_model(tiles_per_ipu=4))
    z = _mapped(g, "z", [1, 1, 2, 2, 1, 1, 3, 3])
    out = _mapped(g, "out", [0, 0])
    cs = g.add_compute_set("read")
    _vertices(g, cs, [z[0:2]], [z[4:6]], [out[0:2]], [0])
    e = compile_programs(g, [Sequence(Execute(cs))]).cs_plans[cs.id].exchange
    assert (e.regions_out.tolist(), e.regions_in.tolist()) == ([0, 2, 0, 0], [2, 0, 0, 0])
    assert e.code_bytes.tolist() == [4 * (6 + 2), 4 * (6 + 2), 0, 0]


def test_a_run_broken_in_the_holders_memory_is_two_regions() -> None:
    """Tile 1 holds all of w[0:6] in one interval; w[2:4] is not read: what is sent is two runs."""
    g = Graph(ipu_model(tiles_per_ipu=4))
    w = _mapped(g, "w", [1, 1, 1, 1, 1, 1, 2, 2])
    out = _mapped(g, "out", [0, 0])
    cs = g.add_compute_set("read")
    _vertices(g, cs, [w[0:2]], [w[4:6]], [out[0:2]], [0])
    e = compile_programs(g, [Sequence(Execute(cs))]).cs_plans[cs.id].exchange
    assert (e.regions_out.tolist(), e.regions_in.tolist()) == ([0, 2, 0, 0], [2, 0, 0, 0])


@pytest.mark.slow  # compiles ResNet-50 at batch 32 and BERT-base (12 layers, seq 384): ~1-2 min
@pytest.mark.parametrize("sample", ["resnet50_b32", "bert_base_b1"])
def test_no_receive_buffer_on_the_real_size_samples_exceeds_what_its_tile_receives(sample: str) -> None:
    from profiler.chip.targets import get_target
    from profiler.frontends.onnx import examples, import_model, load_model
    from tilescope.samples import REAL_SIZE_SAMPLES

    s = next(x for x in REAL_SIZE_SAMPLES if x.name == sample)
    onnx_model = examples.resnet(image=s.image) if s.model == "resnet50" else examples.bert_layer(s.seq, s.layers)
    model = import_model(load_model(onnx_model), get_target(s.target), s.batch, s.dtype, partials=s.partials)
    c = compile_programs(model.graph, list(model.programs))
    assert c.receive_buffers
    for buf in c.receive_buffers:
        plan = c.cs_plans[buf.compute_set_id]
        received = plan.exchange.bytes_in + (0 if plan.global_exchange is None else plan.global_exchange.bytes_in)
        assert (buf.tile_bytes <= received).all(), buf.name
        np.testing.assert_array_equal(buf.tile_bytes, received)


def test_a_copy_from_one_tiles_memory_run_is_one_region() -> None:
    """Copying the clone's z[0:2] and z[4:6] (tile 1's, next to each other in its memory) into four
    floats on tile 0: one region sent, one received; by global id it would be two of each."""
    from profiler import Copy
    from report_format.vocabulary import StepType

    g = Graph(ipu_model(tiles_per_ipu=4))
    z = _clone_of_concat(g)
    dst = _mapped(g, "dst", [0, 0, 0, 0])
    c = compile_programs(g, [Sequence(Copy(concat([z[0:2], z[4:6]]), dst))])
    (step,) = [s for s in c.steps if s.type == StepType.DO_EXCHANGE]
    assert np.asarray(step.cost.code_bytes).tolist() == [4 * (6 + 1), 4 * (6 + 1), 0, 0]


def test_a_clone_of_a_clone_keeps_its_layout() -> None:
    from profiler.ops.core import add_like

    g = Graph(ipu_model(tiles_per_ipu=4))
    z = _clone_of_concat(g)
    assert g.variable(add_like(g, z, "again")).clone_layout
    assert not g.variable(add_like(g, _mapped(g, "plain", [0, 1]), "copy")).clone_layout
