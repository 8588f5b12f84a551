"""Vertex fields over each tile's part, from mapping intervals (profiler.poplar.tile_fields), against the
per-element reference: for every tile, the same elements of every operand at the same positions."""

import numpy as np
import pytest

from profiler import Graph, ipu_model, ops
from profiler.ops.core import groups_by_tile, rows
from profiler.poplar.layout import Runs
from profiler.poplar.tile_fields import fields_by_tile


def _by_element(graph: Graph, tensors: list) -> dict[int, list[tuple[np.ndarray, np.ndarray]]]:  # type: ignore[type-arg]
    """tile -> per tensor (variable ids, element indices) of that tile's part, in the first
    tensor's flattened order (the reference: a tile per element, grouped)."""
    out = {}
    for vtiles, idx in groups_by_tile(graph.tile_of(tensors[0])):
        for v, tile in enumerate(vtiles.tolist()):
            out[tile] = [rows(t, idx[v : v + 1]).elements() for t in tensors]
    return out


def _as_sets(parts: list[tuple[np.ndarray, np.ndarray]]) -> list[list[tuple[int, int]]]:
    # the position of an element pairs it with the same-position elements of the other operands
    first = parts[0]
    order = np.lexsort((first[1], first[0]))
    return [list(zip(p[0][order].tolist(), p[1][order].tolist(), strict=True)) for p in parts]


@pytest.mark.parametrize("case", ["contiguous", "transposed clone", "broadcast row", "broadcast channel", "slice"])
def test_fields_by_tile_match_the_per_element_path(case: str) -> None:
    g = Graph(ipu_model(tiles_per_ipu=6, bytes_per_tile=1 << 20))
    rng = np.random.default_rng(7)
    base = ops.add_mapped(g, "float", (3, 5, 4, 16), "x")  # [B, H, W, C] storage
    # a mapping with intervals cut at odd places, so a tile holds several runs
    cuts = np.sort(rng.choice(np.arange(1, base.numel()), 9, replace=False))
    g.variables[base.single_variable()].mapping.set_intervals(
        np.concatenate(([0], cuts)).astype(np.int64), rng.integers(0, 6, 10).astype(np.int32)
    )
    bias = ops.add_mapped(g, "float", (16,), "bias")
    x = base.transpose(0, 3, 1, 2)  # an NCHW view of NHWC storage
    if case == "contiguous":
        tensors = [base, ops.add_like(g, base, "y")]
    elif case == "transposed clone":
        y = ops.add_like(g, x, "y")
        assert g.variables[y.single_variable()].shape == (3, 5, 4, 16)  # stored as x is
        tensors = [y, x]
    elif case == "broadcast row":
        tensors = [base, bias.broadcast_to(base.shape)]
    elif case == "broadcast channel":
        tensors = [x, bias.reshape(1, 16, 1, 1).broadcast_to(x.shape)]
    else:
        tensors = [base[:, 1:4], base[:, 1:4]]
    got = fields_by_tile(g, tensors)
    assert got is not None
    want = _by_element(g, tensors)
    seen = set()
    for vtiles, fields in got:
        assert all(isinstance(f._lay, Runs) for f in fields)
        for v, tile in enumerate(vtiles.tolist()):
            parts = [f[v : v + 1].elements() for f in fields]
            assert _as_sets(parts) == _as_sets(want[tile])
            seen.add(tile)
    assert seen == set(want)


def test_an_output_laid_out_as_its_input_shares_its_runs_arrays() -> None:
    # y = x * scale[c] with y a clone of x: x's and y's runs are the same offsets in their own
    # variables, so they are held once (here the mapping cuts the channels, so the per-channel
    # operand takes a run per 16 elements and so do x and y)
    g = Graph(ipu_model(tiles_per_ipu=6, bytes_per_tile=1 << 20))
    x = ops.add_mapped(g, "float", (4, 8, 8, 16), "x")
    y = ops.add_like(g, x, "y")
    scale = ops.add_mapped(g, "float", (16,), "scale").broadcast_to(x.shape)
    got = fields_by_tile(g, [y, x, scale])
    assert got is not None
    for _, (fy, fx, fs) in got:
        assert fy._lay.start is fx._lay.start and fy.single_variable() != fx.single_variable()
        assert fs._lay.start is not fx._lay.start


def test_a_per_channel_operand_over_whole_channel_groups_is_one_periodic_run_per_piece() -> None:
    """x[B=3, H=5, W=4, C=16] stored channel-innermost (960 elements), mapped by whole positions:
    [0, 320) on tile 0, [320, 480) on tile 1, [480, 800) on tile 0, [800, 960) on tile 2. For
    x * scale[c] each tile's x part is its intervals (tile 0: 2 runs, 640 elements) and the scale is
    one run per piece cycling through its 16 channels (Runs.period 16, as PopLibs' BroadcastVectorInner
    reads B), not a run per position (40 on tile 0); it reads one region, scale[0:16], per tile."""
    from profiler.poplar.regions import field_regions

    g = Graph(ipu_model(tiles_per_ipu=4, bytes_per_tile=1 << 20))
    base = ops.add_mapped(g, "float", (3, 5, 4, 16), "x")
    g.variables[base.single_variable()].mapping.set_intervals(
        np.array([0, 320, 480, 800], np.int64), np.array([0, 1, 0, 2], np.int32)
    )
    scale = ops.add_mapped(g, "float", (16,), "scale")
    x = base.transpose(0, 3, 1, 2)  # NCHW view
    tensors = [x, scale.reshape(1, 16, 1, 1).broadcast_to(x.shape)]
    got = fields_by_tile(g, tensors)
    assert got is not None
    want = _by_element(g, tensors)
    runs = {}
    for vtiles, (fx, fs) in got:
        assert fs._lay.period is not None and set(fs._lay.period.tolist()) == {16}
        regions = field_regions(fs, np.zeros(len(g.variables), np.int64))  # lengths do not depend on the base
        for v, tile in enumerate(vtiles.tolist()):
            lo, hi = fs._lay.row_first[v], fs._lay.row_first[v + 1]
            runs[tile] = (fx._lay.length[lo:hi].tolist(), fs._lay.length[lo:hi].tolist())
            assert _as_sets([fx[v : v + 1].elements(), fs[v : v + 1].elements()]) == _as_sets(want[tile])
            mine = regions.owner == v
            assert regions.length[mine].tolist() == [16]
    assert runs == {0: ([320, 320], [320, 320]), 1: ([160], [160]), 2: ([160], [160])}


def test_fields_by_tile_declines_short_runs() -> None:
    g = Graph(ipu_model(tiles_per_ipu=4, bytes_per_tile=1 << 20))
    a = ops.add_mapped(g, "float", (64, 2), "a")
    # element by element over the tiles: runs of one, where an index per element is smaller
    g.variables[a.single_variable()].mapping.set_dense(np.arange(128, dtype=np.int32) % 4)
    assert fields_by_tile(g, [a, a]) is None


@pytest.mark.parametrize("seed", range(4))
def test_tile_order_is_a_stable_sort_of_the_runs_tiles(seed: int) -> None:
    from profiler.ops.core import tile_order

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300))
    start = np.unique(np.concatenate([[0], rng.integers(0, n, int(rng.integers(0, 20)))]))
    tile = rng.integers(0, 6, start.size).astype(np.int32)
    tiles = np.repeat(tile, np.diff(np.append(start, n)))
    utiles, counts, order, breaks = tile_order(start, tile, n)
    want = np.argsort(tiles, kind="stable")
    assert order.tolist() == want.tolist()
    assert breaks.tolist() == (np.flatnonzero(np.diff(want) != 1) + 1).tolist()
    assert utiles.tolist() == np.unique(tiles).tolist() and counts.tolist() == np.bincount(tiles)[utiles].tolist()


@pytest.mark.parametrize("seed", range(4))
def test_fields_of_a_whole_variable_by_runs_are_those_by_element(seed: int) -> None:
    # a whole variable (its field built from the runs of its mapping) with a view that is not affine:
    # the same batches, tiles and fields (layout kind and elements) as grouping a tile per element
    from profiler.ops.core import vertex_fields

    rng = np.random.default_rng(seed)
    g = Graph(ipu_model(tiles_per_ipu=6))
    v = g.add_variable("float", [12, 20], "v")
    cuts = np.unique(np.concatenate([[0], rng.integers(0, 240, 12)]))
    g.set_tile_mapping(v, np.repeat(rng.integers(0, 6, cuts.size), np.diff(np.append(cuts, 240))))
    src = g.add_variable("float", [240], "src")[rng.permutation(240)].reshape(12, 20)
    want = [(t, {"out": rows(v, idx), "in": rows(src, idx)}) for t, idx in groups_by_tile(g.tile_of(v))]
    got = list(vertex_fields(g, [v, src], ("out", "in")))
    assert len(got) == len(want)
    for (gt, gf), (wt, wf) in zip(got, want, strict=True):
        assert gt.tolist() == wt.tolist() and list(gf) == list(wf)
        for k in wf:
            assert type(gf[k]._lay) is type(wf[k]._lay) and gf[k].shape == wf[k].shape
            assert [a.tolist() for a in gf[k].elements()] == [a.tolist() for a in wf[k].elements()]


def _row_union(start: list, length: list, owner: list) -> tuple:  # type: ignore[type-arg]
    """Regions as each owner's set of elements, sorted, touching stretches merged: (starts, lengths, owners)."""
    out: list[tuple[int, int, int]] = []
    for o, s0, n in sorted(zip(owner, start, length, strict=True)):
        if out and out[-1][0] == o and s0 <= out[-1][1] + out[-1][2]:
            last = out[-1]
            out[-1] = (o, last[1], max(last[2], s0 + n - last[1]))
        else:
            out.append((o, s0, n))
    return tuple(x[1] for x in out), tuple(x[2] for x in out), tuple(x[0] for x in out)


def test_short_storage_rows_are_runs_of_blocks_with_the_same_elements_and_regions(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A result stored in groups of 16 columns ([N/16, S, 16], seen as [S, N]) beside a row-major
    operand: its fields are a run per vertex and stretch of rows (plain: its rows are contiguous)
    and the operand's a run of blocks of 16, 64 apart (Runs.block), not a run per 16 elements; the
    elements and the compiler's regions are those of a run a row (SHORT_ROW = 0)."""
    import profiler.poplar.tile_fields as tf
    from profiler.poplar.regions import field_regions

    def build(short_row: int) -> list:  # type: ignore[type-arg]
        monkeypatch.setattr(tf, "SHORT_ROW", short_row)
        g = Graph(ipu_model(tiles_per_ipu=4, bytes_per_tile=1 << 20))
        store = g.add_variable("float16", (4, 6, 16), "store")
        g.set_tile_mapping(store, np.repeat([0, 1, 2, 3, 1], [100, 92, 96, 64, 32]))
        grouped = store.transpose(1, 0, 2).group_dims(1, 2)  # [6, 64]
        plain = g.add_variable("float16", (6, 64), "plain")
        got = fields_by_tile(g, [grouped, plain])
        assert got is not None
        want = _by_element(g, [grouped, plain])
        base = np.zeros(len(g.variables), np.int64)
        out = []
        for vtiles, fields in got:
            for v, tile in enumerate(vtiles.tolist()):
                assert _as_sets([f[v : v + 1].elements() for f in fields]) == _as_sets(want[tile])
            regions = [field_regions(f, base) for f in fields]
            out.append([[r.start.tolist(), r.length.tolist(), r.owner.tolist()] for r in regions])
            out.append((vtiles.tolist(), [(f._lay.start.size, f._lay.block, f._lay.stride) for f in fields]))
        return out

    blocks, rows_ = build(tf.SHORT_ROW), build(0)
    # the same elements to the exchange; runs of blocks read across the store's groups give each row's
    # set, touching stretches one region (regions._row_sets), where a run a row gives them in its order
    assert [[_row_union(*r) for r in f] for f in blocks[0::2]] == [[_row_union(*r) for r in f] for f in rows_[0::2]]
    assert [[_row_union(*r) for r in f] for f in blocks[0::2]] == [
        [tuple(map(tuple, r)) for r in f] for f in blocks[0::2]
    ]
    # tile 0 holds group 0's 6 rows and 4 elements of group 1's row 0: the store's part one run (7 a
    # row before), the operand's a run of 6 blocks and one of 4 elements (2 of 7 before)
    assert ([0], [(1, 0, 0), (2, 16, 64)]) in blocks[1::2] and ([0], [(7, 0, 0), (7, 0, 0)]) in rows_[1::2]
    assert sum(n for _, f in blocks[1::2] for n, _, _ in f) < sum(n for _, f in rows_[1::2] for n, _, _ in f) / 3


def _grouped_case(short_row: int, monkeypatch, starts: list[int], tiles: list[int]):  # type: ignore[no-untyped-def]
    """x[S=6, N=64] held as a matmul result in groups of 16 columns ([N/16, S, 16]: element (s, n) at
    96 (n // 16) + 16 s + n % 16), mapped by ``starts``/``tiles``, with the operands a softmax reads
    with it: its row max [S, 1] broadcast along the row, a row-major [S, N] mask, one scalar, and a
    per-column [1, N] vector; fields_by_tile with SHORT_ROW = ``short_row`` (0: a piece a row)."""
    import profiler.poplar.tile_fields as tf

    monkeypatch.setattr(tf, "SHORT_ROW", short_row)
    g = Graph(ipu_model(tiles_per_ipu=4, bytes_per_tile=1 << 20))
    store = g.add_variable("float16", (4, 6, 16), "store")
    g.variables[store.single_variable()].mapping.set_intervals(np.array(starts, np.int64), np.array(tiles, np.int32))
    x = store.transpose(1, 0, 2).group_dims(1, 2)
    row_max = ops.add_mapped(g, "float16", (6, 1), "row max").broadcast_to((6, 64))
    mask = ops.add_mapped(g, "float16", (6, 64), "mask")
    scalar = ops.add_mapped(g, "float16", (1, 1), "scalar").broadcast_to((6, 64))
    column = ops.add_mapped(g, "float16", (1, 64), "column").broadcast_to((6, 64))
    tensors = [x, row_max, mask, scalar, column]
    return g, tensors, fields_by_tile(g, tensors)


def _regions(g: Graph, batches: list) -> list:  # type: ignore[type-arg]
    """The compiler's regions of every field, as each row's set of elements (``_row_union``): runs of
    blocks read across a store's groups give them so (regions._row_sets), a run a row in its order."""
    from profiler.poplar.regions import field_regions

    base = np.zeros(len(g.variables), np.int64)
    out = []
    for _, fields in batches:
        for f in fields:
            r = field_regions(f, base)
            out.append(_row_union(r.start.tolist(), r.length.tolist(), r.owner.tolist()))
    return out


def test_a_grouped_store_is_a_run_an_interval_of_every_operand_a_softmax_reads(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Hand-worked: tile 0 holds group 0 ([0, 96): rows 0-5), tile 1 group 1 and the first 8 elements
    of group 2's row 0 ([96, 200)), tile 2 the rest ([200, 384)). On tile 2 the row max is 3 runs
    each reading consecutive rows 16 times each (Runs.repeat): row 0 for 8 elements (the piece
    starting inside a row), rows 1-5 (80), rows 0-5 (96); the store's part is one run; the mask's
    and the per-column vector's are runs of blocks of 16, 64 and 0 apart (Runs.block). A run a row
    gave the row max 25 runs in all (12 on tile 2), not 7. The elements are those of the per-element
    path, and the compiler's regions those of a run a row."""
    cut = ([0, 96, 200], [0, 1, 2])
    g, tensors, got = _grouped_case(64, monkeypatch, *cut)
    assert got is not None
    want = _by_element(g, tensors)
    runs = {}
    for vtiles, fields in got:
        for v, tile in enumerate(vtiles.tolist()):
            assert _as_sets([f[v : v + 1].elements() for f in fields]) == _as_sets(want[tile])
            lo_hi = [(f._lay.row_first[v], f._lay.row_first[v + 1]) for f in fields]
            runs[tile] = [(f._lay.start[lo:hi].tolist(), f._lay.length[lo:hi].tolist())
                          for f, (lo, hi) in zip(fields, lo_hi, strict=True)]  # fmt: skip
    x_runs, max_runs, mask_runs, scalar_runs, column_runs = runs[2]
    assert x_runs == ([200], [184])
    assert max_runs == ([0, 1, 0], [8, 80, 96])
    assert mask_runs == ([40, 96, 48], [8, 80, 96])  # (row 0, column 40), (row 1, column 32), (row 0, column 48)
    assert scalar_runs == ([0], [184])
    assert column_runs == ([40, 32, 48], [8, 80, 96])
    assert runs[1][0] == ([96], [104]) and runs[1][1] == ([0, 0], [96, 8])  # group 2's row 0: rows from 0 again
    kinds = [(f._lay.block, f._lay.stride, f._lay.repeat, int(np.asarray(f._lay.step)[0])) for f in got[0][1]]
    assert kinds == [(0, 0, 0, 1), (0, 0, 16, 0), (16, 64, 0, 1), (0, 0, 0, 0), (16, 0, 0, 1)]
    assert sum(f._lay.start.size for _, fs in got for f in fs[1:2]) == 1 + 2 + 3
    g0, _, by_row = _grouped_case(0, monkeypatch, *cut)
    assert by_row is not None
    assert sum(f._lay.start.size for _, fs in by_row for f in fs[1:2]) == 6 + 7 + 12
    assert _regions(g, got) == _regions(g0, by_row)


@pytest.mark.parametrize("seed", range(8))
def test_grouped_store_fields_by_interval_are_those_a_row_at_a_time(monkeypatch, seed: int) -> None:  # type: ignore[no-untyped-def]
    # intervals cut anywhere (inside rows, across groups), a tile holding several: the same vertices,
    # elements in the same order and the same sets of compiler regions as a piece a row (SHORT_ROW = 0), in no more runs
    rng = np.random.default_rng(seed)
    cuts = np.unique(np.concatenate([[0], rng.integers(1, 384, int(rng.integers(1, 10)))]))
    cut = (cuts.tolist(), rng.integers(0, 4, cuts.size).tolist())
    g, tensors, got = _grouped_case(64, monkeypatch, *cut)
    g0, _, by_row = _grouped_case(0, monkeypatch, *cut)
    assert got is not None and by_row is not None
    want = _by_element(g, tensors)
    for (vt, fields), (vt0, fields0) in zip(got, by_row, strict=True):
        assert vt.tolist() == vt0.tolist()
        for v, tile in enumerate(vt.tolist()):
            assert _as_sets([f[v : v + 1].elements() for f in fields]) == _as_sets(want[tile])
        for f, f0 in zip(fields, fields0, strict=True):
            assert np.array_equal(f._idx, f0._idx)
            assert f._lay.start.size <= f0._lay.start.size
    assert _regions(g, got) == _regions(g0, by_row)
