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
        "inner-strided": g.add_variable("float16", [a, 8 + b, c], "w").transpose(0, 2, 1),
    }


@pytest.mark.parametrize(
    "kind", ["transposed", "broadcast-rows", "broadcast-inner", "inner-transposed", "grouped", "inner-strided"]
)
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


def test_a_result_stored_in_groups_of_4_columns_is_read_as_runs_of_blocks() -> None:
    """x[S, N] held as its store [N/4, S, 4] (a matmul result in groups of 4 columns), read in rows of
    row-major positions (an in-place residual add's operand): each row of a tile's positions is one
    run of blocks of 4, 4 S apart (Runs.block), not a run a group (too short: an index each before),
    with the elements and the regions (profiler.poplar.regions) indexing gives."""
    from profiler.poplar.layout import Runs
    from profiler.poplar.regions import field_regions

    s, n = 6, 32
    g = Graph(ipu_model(tiles_per_ipu=4))
    store = g.add_variable("float16", [n // 4, s, 4], "store")
    x = store.transpose(1, 0, 2).group_dims(1, 2)  # [S, N]: (s, n) at (n // 4) * 4 S + 4 s + n % 4
    # the positions of rows 1-4, columns 8-31, in row-major order, as 4 rows of one row each
    index = np.arange(s * n)
    first = np.array([1, 2, 3, 4]) * n + 8
    breaks = np.zeros(0, np.int64)
    got = x.affine_rows(index, breaks, first, n - 8)
    want = x.reshape(-1)[index[first[:, None] + np.arange(n - 8)]]
    assert isinstance(got._lay, Runs) and got._lay.block == 4 and got._lay.stride == 4 * s
    assert got._lay.start.size == 4  # one run of 6 blocks a row
    assert got.shape == want.shape and np.array_equal(got._idx, want._idx)
    base = np.zeros(len(g.variables), np.int64)
    a, b = field_regions(got, base), field_regions(want, base)
    assert all(np.array_equal(getattr(a, f), getattr(b, f)) for f in ("start", "length", "owner"))
    assert a.count == 4 * 6  # a region a block: what the exchange reads is unchanged


def test_a_tiles_rows_of_one_group_of_4_columns_are_one_run() -> None:
    """x[S, N] held as its store [N/4, S, 4], a tile holding one group's rows (more tiles than
    groups: a decoder's [2,048, 4,096] projection over 1,472 tiles): the tile's positions, row-major,
    are 4 columns a row, a break every 4 positions, but the group's rows are consecutive elements of
    the store: one run, not an index per element (issue 38: 192 MiB of a 2-layer decoder's import)."""
    from profiler.poplar.layout import Runs

    s, n = 6, 32
    g = Graph(ipu_model(tiles_per_ipu=4))
    store = g.add_variable("float16", [n // 4, s, 4], "store")
    x = store.transpose(1, 0, 2).group_dims(1, 2)  # [S, N]
    index = (np.arange(s)[:, None] * n + 8 + np.arange(4)).reshape(-1)  # group 2's rows, row by row
    breaks = np.arange(4, index.size, 4)
    got = x.affine_rows(index, breaks, np.array([0]), index.size)
    want = x.reshape(-1)[index[None, :]]
    assert isinstance(got._lay, Runs) and got._lay.start.tolist() == [2 * 4 * s]
    assert got.shape == want.shape and np.array_equal(got._idx, want._idx)


def test_a_per_row_operand_over_a_tiles_rows_of_one_group_is_one_run_of_repeats() -> None:
    """A per-row operand [S, 1] broadcast over [S, N] (RMSNorm's 1 / rms), read by the vertex of a
    tile holding rows 1-4 of one group of 4 columns: 4 positions a row, each row's element repeated
    4 times, is one run of repeats (Runs.repeat), not an index per element."""
    from profiler.poplar.layout import Runs

    s, n = 6, 32
    g = Graph(ipu_model(tiles_per_ipu=4))
    scale = g.add_variable("float16", [s, 1], "scale").broadcast_to((s, n))
    index = (np.arange(s)[:, None] * n + 8 + np.arange(4)).reshape(-1)
    breaks = np.arange(4, index.size, 4)
    got = scale.affine_rows(index, breaks, np.array([4, 0]), 16)  # rows 1-4, then rows 0-3
    want = scale.reshape(-1)[index[np.array([4, 0])[:, None] + np.arange(16)]]
    assert isinstance(got._lay, Runs) and got._lay.repeat == 4 and got._lay.start.tolist() == [1, 0]
    assert got.shape == want.shape and np.array_equal(got._idx, want._idx)
    ragged = scale.affine_rows(index, np.sort(np.r_[breaks, 1]), np.array([1]), 8)  # starts inside a row's repeats
    assert np.array_equal(ragged._idx, scale.reshape(-1)[index[1:9][None, :]]._idx)


def test_a_transposed_read_is_runs_of_one_element_blocks() -> None:
    """A view whose inner dim reads every 16th element (a serial matmul's rhs K^T rearranged from K's
    store in groups of 16): a run a piece of the inner dim, one element every 16 (Runs.block 1),
    not an index per element (issue 38: 192 MiB of a 2-layer decoder's import), with the elements
    indexing gives; the compiler's regions are each row's set of elements, not a region an element."""
    from profiler.poplar.layout import Runs
    from profiler.poplar.regions import field_regions

    g = Graph(ipu_model(tiles_per_ipu=4))
    kt = g.add_variable("float16", [2, 40, 16], "k").transpose(0, 2, 1)  # [2, 16, 40]: 40 positions 16 apart
    index = np.arange(kt.numel())
    got = kt.affine_rows(index, np.array([50, 700]), np.array([0, 640]), 640)
    want = kt.reshape(-1)[index[np.array([0, 640])[:, None] + np.arange(640)]]
    assert isinstance(got._lay, Runs) and got._lay.block == 1 and got._lay.stride == 16
    assert got._lay.start.size == 2 * 16 + 2  # a run a row of 40, and the pieces cut at 50 and 700
    assert got.shape == want.shape and np.array_equal(got._idx, want._idx)
    # the compiler's regions: each row's set of elements, consecutive ones one region (a field is a
    # set of elements to the exchange): here each row reads a whole [40, 16] block, one region
    base = np.zeros(len(g.variables), np.int64)
    regions = field_regions(got, base)
    rows = want._idx.reshape(2, -1)
    want_regions = []
    for r, elements in enumerate(rows):
        e = np.unique(elements)
        cut = np.flatnonzero(np.diff(e) != 1) + 1
        want_regions += [(r, int(p[0]), p.size) for p in np.split(e, cut)]
    got_regions = list(zip(regions.owner.tolist(), regions.start.tolist(), regions.length.tolist(), strict=True))
    assert got_regions == want_regions == [(0, 0, 640), (1, 640, 640)]


def test_runs_of_blocks_are_not_made_over_a_broadcast() -> None:
    # a block read again (stride 0) would join regions the explicit path keeps apart: indexed instead
    g = Graph(ipu_model(tiles_per_ipu=4))
    v = g.add_variable("float16", [1, 4], "v")
    t = v.broadcast_to((6, 4))
    index = np.arange(24)
    got = t.affine_rows(index, np.zeros(0, np.int64), np.array([0]), 24)
    assert not isinstance(got._lay, type(None)) and getattr(got._lay, "block", 0) == 0
    assert np.array_equal(got._idx.reshape(-1), np.tile(np.arange(4), 6))


def _rectangles(g: Graph, store, bands: list[int], rng: np.random.Generator) -> None:  # type: ignore[no-untyped-def]
    """Map ``store`` [groups, S, 8] as a matmul maps its result: each group's rows cut at ``bands``
    (the same rows for every group), each rectangle of rows x groups on one tile."""
    groups, s, c = store.shape
    per_group = np.zeros(s, np.int64)
    per_group[bands] = 1
    band = np.cumsum(per_group)  # each row's band
    group_block = np.arange(groups) // 3  # three groups a tile
    tile = (group_block[:, None] * (len(bands) + 1) + band[None, :]) % 4
    g.set_tile_mapping(store, np.repeat(tile.reshape(-1), c))


@pytest.mark.parametrize("width", [8, 4])
@pytest.mark.parametrize("seed", range(6))
def test_view_runs_of_a_grouped_store_by_bands_are_its_tiles(seed: int, width: int) -> None:
    """The scores held as PopLibs creates a product's result ([2 heads, N/8, S, 8] seen as [2, S, N];
    groups of 4 too, shorter than runs are worth per row: a decoder's projections before a residual add),
    mapped by rectangles of rows x groups: view_runs (by bands of rows, profiler.poplar.bands) gives
    each run of positions on one tile, maximal, as the tile of every element says; with one tile
    everywhere, one run a band of rows. A mapping cut inside a group's run of 8 is declined."""
    from profiler.poplar.bands import band_runs

    rng = np.random.default_rng(seed)
    g = Graph(ipu_model(tiles_per_ipu=4))
    heads, groups, s = 2, int(rng.integers(2, 7)), int(rng.integers(4, 30))
    store = g.add_variable("float16", [heads * groups, s, width], "store")
    _rectangles(g, store, sorted(set(rng.integers(1, s, int(rng.integers(0, 4))).tolist())), rng)
    view = store.reshape(heads, groups, s, width).transpose(0, 2, 1, 3).group_dims(1, 1, 2)  # [2, S, N]
    runs = g.view_runs(view)
    assert runs is not None
    start, tiles = runs
    assert start[0] == 0 and (np.diff(start) > 0).all() and (tiles[1:] != tiles[:-1]).all()
    assert np.array_equal(np.repeat(tiles, np.diff(np.append(start, view.numel()))), g.tile_of(view).reshape(-1))
    m = g.variables[store.single_variable()].mapping
    lay = view._lay.flat
    assert band_runs(lay, width, m.starts, m.tiles) is not None
    cut = m.starts.copy()
    cut[1:] += 3  # intervals starting inside a group's elements
    assert band_runs(lay, width, np.unique(cut), m.tiles[: np.unique(cut).size]) is None


def test_view_runs_by_bands_hand_worked() -> None:
    # [1 head, 2 groups, S = 4 rows, 8]: group 0's rows 0-1 on tile 1, rows 2-3 on tile 2; group 1 on
    # tile 1 throughout. Row-major over [S, 16]: rows 0-1 are 32 positions on tile 1 (one run); rows
    # 2 and 3 each 8 positions on tile 2 then 8 on tile 1
    g = Graph(ipu_model(tiles_per_ipu=4))
    store = g.add_variable("float16", [2, 4, 8], "store")
    g.set_tile_mapping(store, np.repeat([1, 2, 1], [16, 16, 32]))
    view = store.transpose(1, 0, 2).group_dims(1, 2)
    start, tiles = g.view_runs(view)  # type: ignore[misc]
    assert start.tolist() == [0, 32, 40, 48, 56] and tiles.tolist() == [1, 2, 1, 2, 1]


def test_regions_of_runs_of_blocks_read_across_groups_are_each_rows_set() -> None:
    """Runs of blocks a stride past their block (a store in groups of 16 read across its groups: the
    lhs of attention's P.V rearranged) give each row's set of elements, touching blocks one region:
    three runs of two 16-blocks 48 apart at starts 0, 16, 32 cover 0-95, one region (and 96-191 for
    the second row); runs reading every other block keep a region a block. The elements are those the
    runs list one by one."""
    from profiler.poplar.layout import Runs
    from profiler.poplar.regions import field_regions
    from profiler.poplar.tensor import Tensor

    g = Graph(ipu_model(tiles_per_ipu=4))
    v = g.add_variable("float16", [192], "store")
    base = np.zeros(1, np.int64)
    step = np.ones(6, np.int64)
    rows = Runs(np.array([0, 16, 32, 96, 112, 128]), np.full(6, 32), step, np.array([0, 3, 6]), 96, block=16, stride=48)
    r = field_regions(Tensor(g, v.single_variable(), rows, v.dtype), base)
    assert list(zip(r.owner.tolist(), r.start.tolist(), r.length.tolist(), strict=True)) == [(0, 0, 96), (1, 96, 96)]
    assert [sorted(row) for row in rows.indices().tolist()] == [list(range(96)), list(range(96, 192))]
    apart = Runs(np.array([0, 32]), np.full(2, 32), step[:2], np.array([0, 2]), 64, block=16, stride=64)
    r = field_regions(Tensor(g, v.single_variable(), apart, v.dtype), base)
    assert r.start.tolist() == [0, 32, 64, 96] and r.length.tolist() == [16] * 4
