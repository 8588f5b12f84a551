"""A positionwise batch over a concatenation (a field of several variables) runs as a batch per part
(profiler.executable.plans.BatchPlan.pieces), each part's fields strided views of one variable: the
same bits as the batch read and written element by element."""

import numpy as np
import pytest

from profiler import ops
from profiler.executable import plans
from profiler.executable.access import Access
from profiler.poplar.tensor import concat
from tests.ops.helpers import rng, run
from tests.ops.test_conv import ref_conv


def _dense_block(g, t, prog):
    # DenseNet's pattern: convolutions' results (held channel-grouped) concatenated along the
    # channels, then a per-channel multiply and add over the concatenation, and a copy of it
    y1 = ops.conv2d(g, t["x"], t["w1"], prog, padding=1)
    y2 = ops.conv2d(g, y1, t["w2"], prog, padding=1)
    features = concat([t["x"], y1, y2], axis=1)
    scaled = ops.binary(g, "mul", features, t["s"], prog)
    y3 = ops.conv2d(g, features, t["w3"], prog)  # reads the concatenation copied into its layout
    return {"y": ops.binary(g, "add", scaled, t["b"], prog), "y1": y1, "y2": y2, "y3": y3}


def _inputs(dtype):
    r = rng(5)
    return {
        "x": r.standard_normal((1, 8, 6, 7)).astype(dtype),
        "w1": (r.standard_normal((16, 8, 3, 3)) * 0.3).astype(dtype),
        "w2": (r.standard_normal((8, 16, 3, 3)) * 0.3).astype(dtype),
        "s": r.standard_normal((1, 32, 1, 1)).astype(dtype),
        "b": r.standard_normal((1, 32, 1, 1)).astype(dtype),
        "w3": (r.standard_normal((8, 32, 1, 1)) * 0.3).astype(dtype),
    }


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_a_batch_over_a_concatenation_runs_in_parts_with_the_whole_batchs_bits(dtype, monkeypatch) -> None:
    inputs = _inputs(dtype)
    made: list[list[plans.BatchPlan]] = []
    pieces = plans._pieces
    monkeypatch.setattr(plans, "_pieces", lambda b: made.append(pieces(b)) or made[-1])
    first, _, engine = run(inputs, _dense_block)
    assert not made  # worked out at a batch's second run (a command that runs once pays nothing)
    engine.run(0)
    split = {name: engine.read_tensor(name) for name in first}
    assert all(np.array_equal(split[n].view(np.uint8), first[n].view(np.uint8)) for n in first)
    parted = {p[0].codelet.name for p in made if len(p) == 3}  # the concatenation's three parts
    assert {"popops::Multiply", "popops::Add", "popops::Copy"} <= parted
    # every part of the multiply and add read and written through strided views, the convolutions'
    # channel-grouped results too (as [C/g, g, H, W])
    assert all(a.strided is not None for p in made for piece in p for a in piece.fields.values())
    monkeypatch.setattr(plans, "_pieces", lambda b: [])  # the batch element by element, as before
    whole, _, engine = run(inputs, _dense_block)
    engine.run(0)
    whole = {name: engine.read_tensor(name) for name in whole}
    for name in ("y", "y3"):
        assert np.array_equal(split[name].view(np.uint8), whole[name].view(np.uint8))
    features = np.concatenate([inputs["x"], split["y1"], split["y2"]], axis=1).astype(np.float32)
    f = np.float32
    want = ((features * inputs["s"].astype(f)).astype(dtype).astype(f) + inputs["b"].astype(f)).astype(dtype)
    assert np.array_equal(split["y"], want)
    ref = ref_conv(inputs["x"].astype(np.float64), inputs["w1"].astype(np.float64), 1, 1, 1, 1)
    np.testing.assert_allclose(split["y1"], ref, rtol=2e-2, atol=8e-2)


def test_a_tensor_of_one_variable_held_per_element_is_read_as_a_strided_view() -> None:
    # a part of a concatenation is one variable's, though its elements carry a variable id each
    from profiler import Graph, ipu_model

    g = Graph(ipu_model(tiles_per_ipu=2, bytes_per_tile=1 << 16))
    a = ops.add_mapped(g, "float", (4, 6), "a")
    b = ops.add_mapped(g, "float", (4, 6), "b")
    part = concat([a, b], axis=1).slice(0, 6, 1)
    assert part.single_variable() is None  # held per element
    access = Access(part)
    assert access.strided is not None and access.variable == a.single_variable()
