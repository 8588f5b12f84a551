"""Building work remembered by what it reads of the graph (``profiler.poplar.recall``): a layer on
another IPU, or again on the same tiles, takes the first layer's vertex fields and reduction pairs
moved to its own variables and tiles; each answer must be what working it out anew gives, and a
layer mapped otherwise must be worked out anew."""

import importlib

import numpy as np
import pytest

from profiler import Engine, Graph, Sequence, ipu_model, ops
from profiler.ops import core
from profiler.poplar.layout import VarRuns
from profiler.poplar.tensor import concat

TPI = 8  # tiles per IPU
SHAPE = (16, 96)


def _mapped(g: Graph, layer: int, ipu: int, chunks: np.ndarray):  # type: ignore[no-untyped-def]
    """Two variables of one layer, mapped 8 elements a tile by ``chunks`` on ``ipu``."""
    a = g.add_variable("float", SHAPE, f"a{layer}")
    b = g.add_variable("float", SHAPE, f"b{layer}")
    for v in (a, b):
        g.set_tile_mapping(v, np.repeat(chunks, 8) + ipu * TPI)
    return a, b


def _assert_softmaxes(g: Graph, prog: Sequence, layers: int, seed: int) -> None:
    """Run ``prog`` on random ``x{i}`` and hold every layer's ``y{i}`` to numpy's softmax of it."""
    e = Engine(g, [prog])
    e.load()
    rng = np.random.default_rng(seed)
    data = [rng.standard_normal(SHAPE).astype(np.float32) for _ in range(layers)]
    for i, x in enumerate(data):
        e.write_tensor(f"x{i}", x)
    e.run(0)
    for i, x in enumerate(data):
        z = np.exp(x - x.max(axis=-1, keepdims=True))
        np.testing.assert_allclose(e.read_tensor(f"y{i}"), z / z.sum(axis=-1, keepdims=True), rtol=1e-6, atol=1e-7)


def _explicit(t) -> tuple[np.ndarray, np.ndarray]:  # type: ignore[no-untyped-def]
    """(variable, element) of every element of a field."""
    var, idx = t.elements()
    return np.broadcast_to(var, idx.shape), idx


@pytest.mark.parametrize("ipus, odd", [(2, False), (1, False), (2, True)])
def test_fields_recalled_are_the_fields_worked_out(ipus: int, odd: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Layer 1 on the other IPU (or the same tiles) reads as layer 0: it is recalled, and its
    fields and tiles are what working them out gives; mapped otherwise (``odd``), it is worked out."""
    worked: list[int] = []
    real = core._vertex_fields
    monkeypatch.setattr(core, "_vertex_fields", lambda g, ts: worked.append(1) or real(g, ts))
    g = Graph(ipu_model(tiles_per_ipu=TPI, num_ipus=2))
    chunks = np.random.default_rng(3).integers(0, TPI, int(np.prod(SHAPE)) // 8)
    a0, b0 = _mapped(g, 0, 0, chunks)
    other = np.roll(chunks, 1) if odd else chunks
    a1, b1 = _mapped(g, 1, ipus - 1, other)
    first = list(core.vertex_fields(g, [a0, b0.T.T], ("a", "b")))
    assert first and len(worked) == 1
    got = [(t, list(f.values())) for t, f in core.vertex_fields(g, [a1, b1], ("a", "b"))]
    assert len(worked) == (2 if odd else 1)
    want = list(real(g, [a1, b1]))
    assert len(got) == len(want)
    for (gt, gf), (wt, wf) in zip(got, want, strict=True):
        np.testing.assert_array_equal(gt, wt)
        assert gt.min() >= (ipus - 1) * TPI  # on layer 1's own IPU
        for x, y in zip(gf, wf, strict=True):
            for p, q in zip(_explicit(x), _explicit(y), strict=True):
                np.testing.assert_array_equal(p, q)


def test_a_softmax_a_layer_finds_its_pairs_once_and_each_computes_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """Four layers' softmaxes over two IPUs: the reduction pairs are found for the first max only
    (the sum reads a clone of it, the other layers are mapped alike), and every layer's values are
    numpy's."""
    found: list[int] = []
    staged: list[int] = []
    reduce_mod = importlib.import_module("profiler.ops.reduce")  # the module (ops.reduce is the op)
    real = reduce_mod._pairs_of_runs
    monkeypatch.setattr(reduce_mod, "_pairs_of_runs", lambda g, f, s: found.append(1) or real(g, f, s))
    worked = reduce_mod._RunPairs._fields_worked
    monkeypatch.setattr(reduce_mod._RunPairs, "_fields_worked", lambda p, pad: staged.append(1) or worked(p, pad))
    g = Graph(ipu_model(tiles_per_ipu=TPI, num_ipus=2))
    prog = Sequence()
    chunks = np.random.default_rng(4).integers(0, TPI, int(np.prod(SHAPE)) // 8)
    layers = []
    for layer in range(4):
        x, _ = _mapped(g, layer, layer // 2, chunks)
        y = ops.softmax(g, x, prog)
        g.create_host_write(f"x{layer}", x)
        g.create_host_read(f"y{layer}", y)
        layers.append(x)
    # the pairs and the stage's fields are found once: the sum's stage takes the max's fields with
    # its own padding (the identity 0, not -inf), layers 2 and 3 with their padding on IPU 1
    assert len(found) == 1 and len(staged) == 1
    _assert_softmaxes(g, prog, len(layers), seed=5)


def test_a_rotary_product_over_runs_of_two_variables_is_recalled_and_computes_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Four layers' rotate-half products ([-x2, x1] * sin, the concatenation runs of two variables)
    over two IPUs: the product's fields are worked out for the first layer only, and every layer's
    values are numpy's."""
    worked: list[int] = []
    real = core._vertex_fields
    monkeypatch.setattr(core, "_vertex_fields", lambda g, ts: worked.append(1) or real(g, ts))
    g = Graph(ipu_model(tiles_per_ipu=TPI, num_ipus=2))
    prog = Sequence()
    chunks = np.random.default_rng(6).integers(0, TPI, int(np.prod(SHAPE)) // 8)
    half = SHAPE[1] // 2
    sin = g.add_variable("float", SHAPE, "sin")
    g.set_tile_mapping(sin, np.repeat(chunks, 8))
    g.create_host_write("sin", sin)
    for layer in range(4):
        x, _ = _mapped(g, layer, layer // 2, chunks)
        neg = ops.unary(g, "neg", x[:, half:], prog)
        rotated = concat([neg, x[:, :half]], axis=1)
        assert isinstance(rotated._lay, VarRuns)  # the case asked about: runs of two variables
        y = ops.mul(g, rotated, sin, prog)
        g.create_host_write(f"x{layer}", x)
        g.create_host_read(f"y{layer}", y)
    calls = len(worked)
    assert calls == 2, calls  # the first layer's neg and product; the others recall both
    e = Engine(g, [prog])
    e.load()
    rng = np.random.default_rng(7)
    s = rng.standard_normal(SHAPE).astype(np.float32)
    e.write_tensor("sin", s)
    data = [rng.standard_normal(SHAPE).astype(np.float32) for _ in range(4)]
    for i, x in enumerate(data):
        e.write_tensor(f"x{i}", x)
    e.run(0)
    for i, x in enumerate(data):
        want = np.concatenate([-x[:, half:], x[:, :half]], axis=1) * s
        np.testing.assert_array_equal(e.read_tensor(f"y{i}"), want)


def test_layers_built_inside_virtual_graphs_recall_positions_not_device_ids() -> None:
    """Pipeline stages build inside ``virtual_graph(ipu)``, where tiles are given and read as positions
    within the IPU. Four layers' softmaxes over two IPUs, each on its stage's virtual graph: the
    layers on IPU 1 recall IPU 0's pairs and stage fields as positions (a device id there indexed a
    one-IPU table of padding elements past its end: BERT-large's pipelined LayerNorm failed so), and
    every layer computes numpy's values."""
    g = Graph(ipu_model(tiles_per_ipu=TPI, num_ipus=2))
    prog = Sequence()
    chunks = np.random.default_rng(8).integers(0, TPI, int(np.prod(SHAPE)) // 3)  # ragged: padded rows
    for layer in range(4):
        with g.virtual_graph(layer // 2):
            x = g.add_variable("float", SHAPE, f"x{layer}")
            g.set_tile_mapping(x, np.repeat(chunks, 3))  # positions: on the stage's own IPU
            y = ops.softmax(g, x, prog)
        g.create_host_write(f"x{layer}", x)
        g.create_host_read(f"y{layer}", y)
    _assert_softmaxes(g, prog, 4, seed=9)
