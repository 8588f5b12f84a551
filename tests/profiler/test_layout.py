"""Tensor layouts (profiler.poplar.layout) and field regions (profiler.poplar.regions), each checked against plain
numpy indexing of an index array written separately: a view held as a few integers must select
exactly the elements numpy's own view selects, and its regions must cover exactly those elements."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profiler import Graph, ipu_model
from profiler.executable.access import Access
from profiler.poplar.layout import Affine, Blocks, Runs, Window, WindowBlocks
from profiler.poplar.regions import _position_units, canonical, field_regions, rows_of_blocks, union_length
from profiler.poplar.tensor import Tensor


def _graph(tiles: int = 8) -> Graph:
    return Graph(ipu_model(tiles_per_ipu=tiles))


VIEWS = [
    lambda a: a[1:, ::2],
    lambda a: a[::-1, 2],
    lambda a: a.T,
    lambda a: a.transpose(1, 0, 2),
    lambda a: a.reshape(4, 15),
    lambda a: a.reshape(-1),
    lambda a: a[:, 1:3].reshape(8, 3),  # numpy cannot merge (4, 2) without a copy: one offset per row
    lambda a: a[None, 1],
    lambda a: a[..., 0],
    lambda a: a[1:2].broadcast_to((4, 5, 3)),
]


@pytest.mark.parametrize("view", range(len(VIEWS)))
def test_affine_views_select_what_numpy_selects(view: int) -> None:
    g = _graph()
    a = g.add_variable("float", [4, 5, 3], "a")
    ref = np.arange(60).reshape(4, 5, 3)
    t = VIEWS[view](a)
    want = VIEWS[view](_NumpyView(ref)).arr
    assert t.shape == want.shape
    np.testing.assert_array_equal(t._idx, want)


class _NumpyView:
    """numpy's own views, spelled like Tensor's (the reference)."""

    def __init__(self, arr: np.ndarray) -> None:
        self.arr = arr

    def __getitem__(self, key):  # type: ignore[no-untyped-def]
        return _NumpyView(self.arr[key])

    def reshape(self, *s):  # type: ignore[no-untyped-def]
        return _NumpyView(self.arr.reshape(*s))

    def transpose(self, *axes):  # type: ignore[no-untyped-def]
        return _NumpyView(self.arr.transpose(*axes))

    @property
    def T(self):  # type: ignore[no-untyped-def]  # noqa: N802
        return _NumpyView(self.arr.T)

    def broadcast_to(self, shape):  # type: ignore[no-untyped-def]
        return _NumpyView(np.broadcast_to(self.arr, shape))


def test_variables_and_their_views_hold_no_index_per_element() -> None:
    g = _graph()
    a = g.add_variable("half", [1000, 1000], "big")
    assert isinstance(a._lay, Affine) and isinstance(a.T[10:20]._lay, Affine)
    assert a.T[10:20]._lay == Affine(10, (10, 1000), (1, 1000))


def test_reshape_numpy_cannot_view_keeps_a_row_offset_each() -> None:
    # heads of a projection: [B, S, H, dh] -> [B, H, S, dh] -> [B*H, S, dh]
    g = _graph()
    x = g.add_variable("float", [2, 3, 4, 5], "x")
    t = x.transpose(0, 2, 1, 3).reshape(8, 3, 5)
    assert isinstance(t._lay, Blocks) and t._lay.offsets.size == 8
    np.testing.assert_array_equal(t._idx, np.arange(120).reshape(2, 3, 4, 5).transpose(0, 2, 1, 3).reshape(8, 3, 5))


def test_blocks_select_each_rows_sub_block() -> None:
    g = _graph()
    a = g.add_variable("float", [3, 6, 7], "a")
    ref = np.arange(126).reshape(3, 6, 7)
    g0, r0, c0 = np.array([0, 2, 1]), np.array([0, 3, 4]), np.array([1, 0, 3])
    for view, rv in ((a, ref), (a.transpose(0, 2, 1)[:, :6], ref.transpose(0, 2, 1)[:, :6])):
        b = view.blocks([g0, r0, c0], (1, 2, 3), drop=(0,))
        want = np.stack([rv[g, r : r + 2, c : c + 3] for g, r, c in zip(g0, r0, c0, strict=True)])
        np.testing.assert_array_equal(b._idx, want)
    with pytest.raises(IndexError):
        a.blocks([g0, r0 + 4, c0], (1, 3, 3), drop=(0,))


def test_fancy_rows_become_blocks_or_runs_with_the_same_elements() -> None:
    g = _graph()
    v = g.add_variable("float", [100], "v")
    regular = np.array([[[0, 1, 2], [10, 11, 12]], [[40, 41, 42], [50, 51, 52]]])  # one affine pattern per row
    ragged = np.array([list(range(0, 12)) + list(range(60, 72)), list(range(5, 17)) + [30] * 12])  # long runs, repeats
    scattered = np.array([[0, 7, 3, 9], [1, 8, 2, 4]])
    assert isinstance(v[regular]._lay, Blocks)
    assert isinstance(v[ragged]._lay, Runs)
    assert isinstance(v[scattered]._lay, np.ndarray)
    for key in (regular, ragged, scattered):
        np.testing.assert_array_equal(v[key]._idx, key)
        np.testing.assert_array_equal(v[2:][key]._idx, key + 2)


def test_runs_encode_and_decode() -> None:
    idx = np.array([[3, 4, 5, 9, 10, 7], [11, 12, 4, 4, 4, 5]])
    r = Runs.encode(idx)
    assert r.start.tolist() == [3, 9, 7, 11, 4, 5] and r.length.tolist() == [3, 2, 1, 2, 3, 1]
    assert r.step.tolist() == [1, 1, 1, 1, 0, 1] and r.row_first.tolist() == [0, 3, 6]  # 4, 4, 4: a repeat
    np.testing.assert_array_equal(r.indices(), idx)
    rng = np.random.default_rng(0)  # any index array round-trips, runs never cross rows
    for _ in range(300):
        rows, width = (int(x) for x in rng.integers(1, 6, 2))
        jumps = rng.choice([0, 1, 5], size=rows * width, p=[0.3, 0.5, 0.2])
        idx = np.cumsum(jumps).reshape(rows, width)
        np.testing.assert_array_equal(Runs.encode(idx).indices(), idx)


def _element_sets(t, base):  # type: ignore[no-untyped-def]
    """Per row, the set of global elements a field reads (the reference, from explicit indices)."""
    var, idx = t.elements()
    gid = (base[var] + idx.astype(np.int64)).reshape(t.shape[0], -1)
    return [set(row.tolist()) for row in gid]


def _region_sets(r, rows):  # type: ignore[no-untyped-def]
    out = [set() for _ in range(rows)]
    for s, n, o in zip(r.start.tolist(), r.length.tolist(), r.owner.tolist(), strict=True):
        out[o] |= set(range(s, s + n))
    return out


def test_field_regions_cover_exactly_the_fields_elements() -> None:
    g = _graph()
    g.add_variable("float", [7], "other")  # so variable 1 does not start at global id 0
    a = g.add_variable("float", [4, 6, 5], "a")
    base = np.array([0, 7, 7 + 120])
    fields = [
        a.reshape(4, 30),
        a.transpose(0, 2, 1),  # runs along the stride-1 dim, whatever the order
        a.blocks([np.array([0, 3]), np.array([1, 2]), np.array([0, 2])], (1, 3, 3), drop=(0,)),
        a.reshape(-1)[np.array([[0, 1, 2, 50, 51], [7, 8, 9, 10, 100]])],
        a.reshape(-1)[np.array([[5, 1], [3, 3]])],
    ]
    for t in fields:
        r = field_regions(t, base)
        assert _region_sets(r, t.shape[0]) == _element_sets(t, base)


@pytest.mark.parametrize(
    "kernel,stride,padding,dilation,groups",
    [((3, 3), (1, 1), (1, 1), (1, 1), 1), ((1, 1), (2, 2), (0, 0), (1, 1), 1), ((3, 3), (2, 2), (1, 1), (1, 1), 2),
     ((3, 2), (1, 2), (2, 0), (2, 1), 1), ((2, 2), (2, 1), (0, 1), (1, 2), 1)],
)  # fmt: skip
@pytest.mark.parametrize("storage", ["NCHW", "NHWC", "grouped"])
# columns (c // grp, i, j, c % grp): 1 (c, i, j), 2 two-channel groups, 0 C/groups (i, j, c)
@pytest.mark.parametrize("channel_group", [1, 2, 0])
@pytest.mark.parametrize("rows", [5, 13])  # blocks over one or two output rows, and over three or more
def test_window_regions_match_the_explicit_im2col(
    kernel, stride, padding, dilation, groups, storage, channel_group, rows
) -> None:  # type: ignore[no-untyped-def]
    from profiler import Sequence, ops
    from profiler.ops import conv

    g = _graph(8)
    if storage == "NCHW":
        x = ops.add_mapped(g, "float", (2, 4, 7, 6), "x")
    elif storage == "NHWC":  # channels innermost: runs of channels
        x = ops.add_mapped(g, "float", (2, 7, 6, 4), "x").transpose(0, 3, 1, 2)
    else:  # a convolution's result: channel groups of 2, stored [C/2][B][H][W][2] (layout.Factored)
        x = ops.add_mapped(g, "float", (2, 2, 7, 6, 2), "x").transpose(1, 0, 4, 2, 3).group_dims(1, 2, 1, 1)
    grp = channel_group or 4 // groups
    cols = conv._window_view(g, x, kernel, stride, padding, dilation, groups, channel_group=grp)
    assert isinstance(cols._lay, Window)
    gn, m, k = cols.shape
    rng = np.random.default_rng(0)
    v = 40
    gi, r0, c0 = rng.integers(0, gn, v), rng.integers(0, m - rows, v), rng.integers(0, k - 3, v)
    gi[1::4], r0[1::4], c0[1::4] = gi[::4][: v // 4], r0[::4][: v // 4], c0[::4][: v // 4]  # rows sharing a block
    blocks = cols.blocks([gi, r0, c0], (1, rows, 3), drop=(0,))
    assert isinstance(blocks._lay, WindowBlocks)
    base = np.cumsum([0] + [var.numel for var in g.variables])
    r = field_regions(blocks, base).per_row()
    got = _region_sets(r, v)
    # padding: the pad element of the tile holding each nearest input element
    if r.pad is not None:
        tiles = g.variables[x.single_variable()].mapping.dense().astype(np.int64)  # by position in the variable
        for s, n, o in zip(r.pad.start.tolist(), r.pad.length.tolist(), r.pad.owner.tolist(), strict=True):
            got[o] |= {r.pad_first + int(tiles[e - base[x.single_variable()]]) * r.pad_step for e in range(s, s + n)}
    explicit = cols._explicit().blocks([gi, r0, c0], (1, rows, 3), drop=(0,))
    want = _element_sets(explicit, base)
    if storage == "NCHW" or stride[1] == 1:
        assert got == want
    else:  # strided over whole positions: PopLibs' contiguous slice of each input row, gaps included
        row_len = 6 * (2 if storage == "grouped" else 4)  # elements of one stored input row
        for g_set, w_set in zip(got, want, strict=True):
            assert g_set >= w_set
            spans = {}
            for e in w_set:
                lo, hi = spans.get(e // row_len, (e, e))
                spans[e // row_len] = (min(lo, e), max(hi, e))
            extra = g_set - w_set
            assert all(e // row_len in spans and spans[e // row_len][0] <= e <= spans[e // row_len][1] for e in extra)
    # and the values a run reads through sliding windows are the explicit gather's
    state = [np.arange(var.numel, dtype=np.float32) + 1000 * i for i, var in enumerate(g.variables)]
    for var in g.variables:
        if var.value is not None:
            state[var.id] = var.value.astype(np.float32)
    np.testing.assert_array_equal(Access(cols).gather(state), Access(cols._explicit()).gather(state))
    _ = Sequence


def test_union_length_and_canonical() -> None:
    start = np.array([0, 2, 3, 10, 12])
    end = np.array([5, 4, 7, 11, 13])
    assert union_length(start, end).tolist() == [5, 0, 2, 1, 1]
    s, e = canonical(np.array([10, 0, 3, 7]), np.array([2, 4, 2, 3]))
    assert s.tolist() == [0, 7] and e.tolist() == [5, 12]


def test_overlapping_windows_of_a_strided_convolution_are_one_region() -> None:
    # kernel 1 x 3, stride 2 over a row of 20: output position w reads [2w, 2w + 3), so a vertex
    # holding positions 0..4 at one kernel row reads elements 0..10 - one region of 11, not 5 of 3
    from profiler import ops
    from profiler.ops import conv

    g = _graph(8)
    x = ops.add_mapped(g, "float", (1, 1, 1, 20), "x")
    cols = conv._window_view(g, x, (1, 3), (1, 2), (0, 0), (1, 1), 1)
    blocks = cols.blocks([np.array([0]), np.array([0]), np.array([0])], (1, 5, 3), drop=(0,))
    base = np.cumsum([0] + [var.numel for var in g.variables])
    r = field_regions(blocks, base)
    x0 = int(base[x.single_variable()])
    assert (r.start.tolist(), r.length.tolist(), r.owner.tolist()) == ([x0], [11], [0])


def test_a_strided_window_over_whole_positions_is_read_as_a_slice_of_each_row() -> None:
    # a 1x1 stride-2 conv over a grouped store [C/2][B][H][W][2] (8 x 8): output row r reads input
    # row 2r at columns 0, 2, 4, 6. As PopLibs slices a tile's input (a contiguous range per field
    # dim, the vertex skipping with its in-stride), a block of two output rows reads, per output
    # row, columns 0..6 of its input row: 7 positions x 2 channels = 14 elements from 2 * 8 * r * 2
    from profiler import ops
    from profiler.ops import conv

    g = _graph(8)
    x = ops.add_mapped(g, "float", (1, 1, 8, 8, 2), "x").transpose(1, 0, 4, 2, 3).group_dims(1, 2, 1, 1)
    cols = conv._window_view(g, x, (1, 1), (2, 2), (0, 0), (1, 1), 1, channel_group=2)
    blocks = cols.blocks([np.array([0]), np.array([0]), np.array([0])], (1, 8, 2), drop=(0,))
    base = np.cumsum([0] + [var.numel for var in g.variables])
    r = field_regions(blocks, base)
    x0 = int(base[x.single_variable()])
    assert (r.start.tolist(), r.length.tolist()) == ([x0, x0 + 32], [14, 14])


def test_position_units_cut_blocks_at_output_rows_or_into_positions() -> None:
    rng = np.random.default_rng(3)
    width, count = 7, 12
    start = rng.integers(0, 40, 30)
    joins = rng.random(30) < 0.5
    got = list(zip(*(a.tolist() for a in _position_units(start, count, width, joins)), strict=True))
    want = []  # per block, its positions grouped by output row (whole rows joined, else one each)
    for i, (s, j) in enumerate(zip(start.tolist(), joins.tolist(), strict=True)):
        by_row: dict[int, list[int]] = {}
        for p in range(s, s + count):
            by_row.setdefault(p // width, []).append(p % width)
        for q, cols in by_row.items():
            want += [(i, q, cols[0], cols[-1])] if j else [(i, q, c, c) for c in cols]
    assert got == want


def test_a_broadcast_or_contiguous_runs_field_is_one_region_per_row() -> None:
    # an elementwise operand over whole rows, and a per-channel operand read once per pixel
    g = _graph()
    a = g.add_variable("float", [4, 6], "a")
    p = g.add_variable("float", [3], "p")
    base = np.cumsum([0] + [var.numel for var in g.variables])
    # as profiler.poplar.tile_fields connects a field: runs of 3 laid end to end, per row
    runs = Runs(np.arange(8) * 3, np.full(8, 3), np.ones(8, np.int64), np.array([0, 4, 8]), 12)
    rows = Tensor(g, a.single_variable(), runs, a.dtype)
    repeat = Runs(np.zeros(8, np.int64), np.full(8, 3), np.ones(8, np.int64), np.array([0, 4, 8]), 12)
    per_pixel = Tensor(g, p.single_variable(), repeat, p.dtype)
    r = field_regions(rows, base)
    assert (r.start.tolist(), r.length.tolist(), r.owner.tolist()) == ([0, 12], [12, 12], [0, 1])
    r = field_regions(per_pixel, base)
    assert (r.start.tolist(), r.length.tolist(), r.owner.tolist()) == ([24, 24], [3, 3], [0, 1])


def test_rows_of_blocks_give_each_row_its_blocks_items_in_order() -> None:
    rng = np.random.default_rng(5)
    owner = rng.integers(0, 6, 40)
    block = rng.integers(0, 6, 15)
    idx, row = rows_of_blocks(owner, block)
    want = [(i, v) for v, b in enumerate(block.tolist()) for i in range(owner.size) if owner[i] == b]
    assert list(zip(idx.tolist(), row.tolist(), strict=True)) == want


def test_cut_ranges_cuts_each_range_at_the_breaks_inside_it() -> None:
    from profiler.poplar.layout import cut_ranges, piece_lengths

    rng = np.random.default_rng(3)
    breaks = np.flatnonzero(rng.random(400) < 0.2)
    first = np.sort(rng.choice(380, 40, replace=False))
    length = rng.integers(1, 20, first.size)
    start, pieces = cut_ranges(breaks, first, length)
    lengths = piece_lengths(start, pieces, first, length)
    want_start, want_len = [], []  # the reference: position by position
    for f, n in zip(first.tolist(), length.tolist(), strict=True):
        cuts = [f] + [b for b in breaks.tolist() if f < b < f + n] + [f + n]
        want_start += cuts[:-1]
        want_len += np.diff(cuts).tolist()
    assert start.tolist() == want_start and lengths.tolist() == want_len
    assert pieces.sum() == start.size and (pieces >= 1).all()
    empty = cut_ranges(breaks, np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert empty[0].size == 0 and empty[1].size == 0


def _layout_and_elements(t: Tensor) -> tuple:
    var, idx = t.elements()
    lay = t._lay
    arrays = {k: np.asarray(v).tolist() for k, v in vars(lay).items() if isinstance(v, np.ndarray)} if not isinstance(
        lay, np.ndarray) else {}  # fmt: skip
    return type(lay).__name__, t.shape, var.tolist(), idx.tolist(), arrays


@pytest.mark.parametrize(
    "runs,width,kind",
    [
        ([(0, 64)], 8, "Blocks"),  # one run: every row one run
        ([(20, 44), (0, 20)], 32, "Runs"),  # a row across the seam: two runs
        ([(i * 7 % 64, 1) for i in range(64)], 4, "ndarray"),  # no run longer than one: indexing decides
        ([(32, 16), (0, 16), (48, 16), (16, 16)], 16, "Blocks"),  # rows of whole runs
        ([(0, 1), (10, 30), (1, 9), (40, 24)], 5, "ndarray"),  # runs too short to be worth it
        ([(0, 64)], 1, "Blocks"),
    ],
)
def test_permuted_rows_index_as_indexing_does(runs: list[tuple[int, int]], width: int, kind: str) -> None:
    # the reference is plain indexing: the same layout kind (blocks, runs, explicit), shape and elements
    g = Graph(ipu_model(tiles_per_ipu=4))
    index = np.concatenate([np.arange(s, s + n) for s, n in runs])
    breaks = np.flatnonzero(np.diff(index) != 1) + 1
    first = np.arange(0, index.size - width + 1, width)
    views = [g.add_variable("float", [64], "v"), g.add_variable("float", [70], "w")[3:67]]  # contiguous
    for t in [*views, g.add_variable("float", [128], "s")[::2]]:  # the last is strided: indexed
        want = t[index[first[:, None] + np.arange(width)]]
        got = t.permuted_rows(index, breaks, first, width)
        assert _layout_and_elements(got) == _layout_and_elements(want)
    assert all(type(t.permuted_rows(index, breaks, first, width)._lay).__name__ == kind for t in views)


def test_head_is_the_first_elements_of_any_view() -> None:
    from profiler.poplar.tensor import concat

    g = Graph(ipu_model(tiles_per_ipu=4))
    v = g.add_variable("float", [6, 8, 10], "v")
    w = g.add_variable("float", [4, 10], "w")
    views = {
        "affine": v.transpose(2, 0, 1)[1:, ::2],
        "factored": v.transpose(0, 2, 1).group_dims(1, 2),
        "blocks": v.reshape(48, 10).blocks([np.array([5, 0, 20]), np.array([0, 2, 1])], (7, 8)),
        "explicit": v.reshape(-1)[np.array([[3, 1], [40, 41], [7, 7]])],
        "two variables": concat([v.reshape(48, 10), w]),
    }
    for name, t in views.items():
        var, idx = t.elements()
        for k in (0, 1, 5, t.numel(), t.numel() + 3):
            h = t.head(k)
            hv, hi = h.elements()
            assert hv.tolist() == var[:k].tolist() and hi.tolist() == idx[:k].tolist(), (name, k)


def test_a_few_elements_are_searched_without_building_the_lookup() -> None:
    from profiler.poplar.variables import FEW_ELEMENTS, TileMapping

    m = TileMapping(FEW_ELEMENTS * 10)
    m.set_dense(np.arange(m.n) // 7 % 4)
    few = np.array([0, 6, 7, 300, m.n - 1])
    assert m.tile_of(few).tolist() == (few // 7 % 4).tolist() and m._lookup is None
    every = np.arange(m.n)
    assert m.tile_of(every).tolist() == (every // 7 % 4).tolist() and m._lookup is not None


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 60), st.integers(0, 8)), min_size=1, max_size=40))
def test_canonical_is_the_union_element_by_element(pieces) -> None:
    # against a set of the covered elements (independent of both ways canonical takes: in order and not)
    start = np.array([p[0] for p in pieces], dtype=np.int64)
    length = np.array([p[1] for p in pieces], dtype=np.int64)
    s, e = canonical(start, length)
    covered = {x for a, n in pieces for x in range(a, a + n)}
    assert {x for a, b in zip(s.tolist(), e.tolist(), strict=True) for x in range(a, b)} == covered
    assert (s[1:] > e[:-1]).all() and (e >= s).all()  # sorted, disjoint and not touching
    # pieces of no element only where no other piece covers or touches them
    for a, b in zip(s.tolist(), e.tolist(), strict=True):
        if a == b:
            assert a not in covered and a - 1 not in covered
