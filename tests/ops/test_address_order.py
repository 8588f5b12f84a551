"""Elementwise vertices over a view whose neighbours lie apart in memory take each tile's elements in
memory order, as PopLibs' do (poplar ``Graph::getSortedContiguousRegions``): a concatenation of two
channels-last stores seen as NCHW (DenseNet's batch norms over concatenated features) reads a few
runs a tile, not an element a region, and computes what numpy computes."""

import numpy as np

from profiler import Engine, Graph, Sequence, ipu_model, ops
from profiler.ops import core
from profiler.poplar.regions import field_regions
from profiler.poplar.tensor import concat

H = W = 4
CA, CB = 6, 8  # the two stores' channels


def _two_stores(g: Graph):  # type: ignore[no-untyped-def]
    """Two channels-last stores, each its first half on tile 0 and its second on tile 1, and
    their NCHW views concatenated along the channels."""
    a = g.add_variable("float", (1, H, W, CA), "a")
    b = g.add_variable("float", (1, H, W, CB), "b")
    for v in (a, b):
        half = v.numel() // 2
        g.set_tile_mapping(v, np.repeat([0, 1], half))
    return a, b, concat([a.transpose(0, 3, 1, 2), b.transpose(0, 3, 1, 2)], 1)


def test_a_tiles_elements_are_taken_in_memory_order() -> None:
    g = Graph(ipu_model(tiles_per_ipu=2, bytes_per_tile=1 << 20))
    a, b, x = _two_stores(g)
    scale = g.add_variable("float", (CA + CB,), "scale")
    g.set_tile_mapping(scale, np.zeros(CA + CB, dtype=np.int64))
    y = ops.add_like(g, x, "y")
    tensors = [y, x, scale.reshape(1, CA + CB, 1, 1).broadcast_to(x.shape)]
    batches = list(core.vertex_fields(g, tensors, ("out", "in1", "in2")))
    assert len(batches) == 1  # both tiles hold half of each store: one batch of two vertices
    vtiles, fields = batches[0]
    assert vtiles.tolist() == [0, 1]
    base = np.cumsum([0] + [v.numel for v in g.variables], dtype=np.int64)
    # each tile: half of a, then half of b, each one run (before: an element a region, 224 of them)
    for name in ("in1", "out"):
        r = field_regions(fields[name], base)
        assert r.count == 4, name
        np.testing.assert_array_equal(r.length, [H * W * CA // 2, H * W * CB // 2] * 2)
    # the scale as each tile reads it, a's pixels then b's, each pixel its store's channels: its
    # regions are the runs of consecutive channels (a's last pixel runs on into b's first)
    ids = np.concatenate([np.tile(np.arange(CA), H * W // 2), np.tile(np.arange(CA, CA + CB), H * W // 2)])
    breaks = np.flatnonzero(np.diff(ids) != 1) + 1
    want = np.diff(np.concatenate(([0], breaks, [ids.size])))
    r = field_regions(fields["in2"], base)
    np.testing.assert_array_equal(r.length, np.tile(want, 2))
    assert r.count == 30


def test_values_are_numpys_whatever_the_order() -> None:
    g = Graph(ipu_model(tiles_per_ipu=2, bytes_per_tile=1 << 20))
    a, b, x = _two_stores(g)
    scale = g.add_variable("float", (1, CA + CB, 1, 1), "scale")
    g.set_tile_mapping(scale, np.arange(CA + CB) % 2)
    for name, t in (("a", a), ("b", b), ("scale", scale)):
        g.create_host_write(name, t)
    prog = Sequence()
    z = ops.add(g, ops.mul(g, x, scale, prog), scale, prog)
    g.create_host_read("z", z)
    e = Engine(g, [prog])
    e.load()
    rng = np.random.default_rng(5)
    va = rng.standard_normal((1, H, W, CA)).astype(np.float32)
    vb = rng.standard_normal((1, H, W, CB)).astype(np.float32)
    vs = rng.standard_normal((1, CA + CB, 1, 1)).astype(np.float32)
    for name, v in (("a", va), ("b", vb), ("scale", vs)):
        e.write_tensor(name, v)
    e.run(0)
    want = np.concatenate([va.transpose(0, 3, 1, 2), vb.transpose(0, 3, 1, 2)], 1) * vs + vs
    np.testing.assert_array_equal(e.read_tensor("z"), want)
