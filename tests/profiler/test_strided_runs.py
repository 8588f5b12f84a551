"""Vertex fields and tiles of strided views built from runs (Tensor.affine_rows, Graph.view_runs,
Graph.tile_runs of a range) equal what indexing element by element gives."""

from __future__ import annotations

import numpy as np
import pytest

from profiler import Graph, ipu_model
from profiler.ops.core import tile_order


def _views(g: Graph, a: int, b: int, c: int):
    v = g.add_variable("float16", [a, b, c], "v")
    return {
        "transposed": v.transpose(1, 0, 2),
        "broadcast-rows": v[:, :1].broadcast_to((a, 5, c)),
        "broadcast-inner": v[:, :, :1].broadcast_to((a, b, c)),
        "inner-transposed": v.transpose(2, 0, 1),
        "grouped": v.transpose(1, 0, 2).group_dims(2, 1),
    }


@pytest.mark.parametrize("kind", ["transposed", "broadcast-rows", "broadcast-inner", "inner-transposed", "grouped"])
def test_affine_rows_equal_indexing_by_element(kind: str) -> None:
    rng = np.random.default_rng(7)
    g = Graph(ipu_model(tiles_per_ipu=4))
    for _ in range(40):
        a, b, c = (int(x) for x in rng.integers(1, 7, 3))
        t = _views(g, a, b, 4 * c)[kind]
        n = t.numel()
        start = np.unique(np.r_[0, rng.integers(1, n, 6)]) if n > 1 else np.array([0])
        utiles, counts, order, breaks = tile_order(start, rng.integers(0, 4, start.size), n)
        first = np.cumsum(counts) - counts
        for c_ in np.unique(counts):
            sel = first[counts == c_]
            got = t.affine_rows(order, breaks, sel, int(c_))
            want = t.reshape(-1)[order[sel[:, None] + np.arange(c_)]]
            assert got.shape == want.shape and np.array_equal(got._idx, want._idx)


def test_view_runs_are_the_tiles_of_a_transposed_view() -> None:
    g = Graph(ipu_model(tiles_per_ipu=4))
    v = g.add_variable("float16", [3, 4, 16], "v")
    g.set_tile_mapping(v, np.repeat([0, 1, 2, 3, 1, 0], [40, 24, 50, 30, 28, 20]))
    for t in (v.transpose(1, 0, 2), v.transpose(1, 0, 2).group_dims(2, 1), v[1:]):
        runs = g.view_runs(t)
        assert runs is not None
        start, tiles = runs
        assert np.array_equal(np.repeat(tiles, np.diff(np.append(start, t.numel()))), g.tile_of(t).reshape(-1))
    assert g.view_runs(v.transpose(2, 0, 1)) is None  # inner dim of stride 64: no run worth it
