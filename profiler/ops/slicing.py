"""Dynamic slice / update and gather (embedding lookup) with its gradient (popops::dynamicSlice,
dynamicUpdate, multiSlice, multiUpdateAdd).

Vertices run where the sliced tensor's data lives: for ``t[S, ...]`` the vertex on a tile selects
among the S candidates of the slice elements that tile holds; for a table ``[V, D]`` mapped by
columns, each tile gathers its columns for every index (the indices are broadcast to those tiles).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from numpy.typing import DTypeLike

from profiler.chip import cost_model
from profiler.host import sorting
from profiler.ops.core import OpError, add_like, execute, groups_by_tile, linear_tiles, op
from profiler.ops.elementwise import apply_map, binary_in_place, copy, fill
from profiler.ops.poplibs_codelets import DynamicSlice, DynamicUpdate, MultiSlice, MultiUpdateAdd, map_codelet
from profiler.poplar import recall, shape_only
from profiler.poplar.graph import Graph
from profiler.poplar.layout import Runs
from profiler.poplar.programs import Sequence as Prog
from profiler.poplar.tensor import Tensor

_SLICE, _UPDATE, _GATHER, _SCATTER = DynamicSlice(), DynamicUpdate(), MultiSlice(), MultiUpdateAdd()
_MUL, _ADD = cost_model.binary("multiply"), cost_model.binary("add")


def _check_index(index: Tensor, what: str) -> None:
    n = index.graph.target.num_tiles
    if index.numel() not in (1, n) or index.dtype.kind not in "iu":
        raise OpError(f"{what}: the index must be one integer element (or one per tile), got {index!r}")


def _index_field(index: Tensor, vtiles: np.ndarray) -> Tensor:
    """Each vertex's view of the index: the single element (broadcast to every tile that slices), or
    with a per-tile replicated index (``replicated_index``), the copy on the vertex's own tile."""
    if index.numel() == 1:
        return index.reshape(1, 1).broadcast(vtiles.size, 0)
    return index.reshape(-1)[vtiles[:, None]]


def replicated_index(graph: Graph, name: str) -> Tensor:
    """An int32 index held once per tile (element t on tile t): slicing with it needs no exchange of
    the index; update it with elementwise ops (one vertex per tile)."""
    t = graph.add_variable(np.int32, [graph.target.num_tiles], name)
    graph.set_tile_mapping(t, np.arange(graph.target.num_tiles))
    return t


@op("DynamicSlice")
def dynamic_slice(graph: Graph, t: Tensor, index: Tensor, prog: Prog, out: Tensor | None = None) -> Tensor:
    """``t[index]`` along the first dimension, ``index`` a device tensor (clamped to range); into
    ``out`` when given (a restore in place, as PopART's RestoreInplace), else a new tensor."""
    _check_index(index, "dynamic_slice")
    s = t.shape[0]
    if out is None:
        out = add_like(graph, t[0], "dynamic slice")
    elif out.shape != t.shape[1:] or out.dtype != t.dtype:
        raise OpError(f"dynamic_slice: out {out.shape} {out.dtype} is not a slice of {t.shape} {t.dtype}")
    cand, flat = t.reshape(s, -1), out.reshape(-1)
    cs = execute(graph, prog, "dynamic slice")
    # a repeated layer's serial matmul slices its operands alike (profiler.poplar.recall)
    batches = recall.remembered_batches(
        graph, [flat, cand], ("slice_fields",),
        lambda: [(v, [dst, src]) for v, src, dst in _slice_fields(graph, cand, flat, graph.tile_runs(out))],
    )  # fmt: skip
    for vtiles, (dst, src) in batches:
        graph.add_vertices(cs, _SLICE, {"in": src, "index": _index_field(index, vtiles), "out": dst}, vtiles)
    return out


@op("DynamicUpdate")
def dynamic_update(graph: Graph, t: Tensor, update: Tensor, index: Tensor, prog: Prog) -> Tensor:
    """``t[index] = update`` in place along the first dimension (vertices on the tiles of ``t[0]``:
    ``t`` should be mapped so that each tile holds the same positions of every slice)."""
    _check_index(index, "dynamic_update")
    if update.shape != t.shape[1:]:
        raise OpError(f"dynamic_update: update shape {update.shape} is not a slice of {t.shape}")
    s = t.shape[0]
    base = t.reshape(s, -1)
    runs = _alike_runs(graph, t)
    if runs is None:  # not a whole variable mapped by runs: check element by element
        tiles = graph.tile_of(base).reshape(s, -1)
        if (tiles != tiles[0]).any():
            raise OpError(f"dynamic_update: {t!r} is not mapped slice by slice alike; create it with sliceable()")
    cs = execute(graph, prog, "dynamic update")
    flat = update.reshape(-1)
    batches = recall.remembered_batches(
        graph, [base, flat], ("update_fields",),
        lambda: [(v, [dst, src]) for v, dst, src in _slice_fields(graph, base, flat, runs, t[0])],
    )  # fmt: skip
    for vtiles, (dst, src) in batches:
        graph.add_vertices(cs, _UPDATE, {"base": dst, "update": src, "index": _index_field(index, vtiles)}, vtiles)
    return t


def _alike_runs(graph: Graph, t: Tensor) -> tuple[np.ndarray, np.ndarray] | None:
    """(start, tile) of the runs of ``t``'s first slice when ``t`` is a whole variable whose every
    slice is mapped as its first (``sliceable``), from its mapping's intervals; None otherwise (the
    caller then checks element by element, and an irregular variable is an error there)."""
    runs = graph.tile_runs(t)
    if runs is None:
        return None
    start, tile = runs
    s, per = t.shape[0], t.numel() // max(1, t.shape[0])
    first = start < per
    start0, tile0 = start[first], tile[first]
    alike = start.size == s * start0.size and bool(
        (start == (np.arange(s)[:, None] * per + start0).ravel()).all() and (tile == np.tile(tile0, s)).all()
    )
    # not alike by runs (e.g. a slice's last run and the next slice's first on one tile merge into one
    # run): the caller checks element by element
    return (start0, tile0) if alike else None


def _slice_fields(
    graph: Graph, cand: Tensor, flat: Tensor, runs: tuple[np.ndarray, np.ndarray] | None, like: Tensor | None = None
) -> Iterator[tuple[np.ndarray, Tensor, Tensor]]:
    """Per batch of vertices (one a tile): (tiles, the candidates [vertices, S, n] of ``cand[S, P]``,
    the positions [vertices, n] of ``flat[P]``) for the positions each tile holds (``runs`` of the
    slice's mapping, or ``like``'s / ``flat``'s tile per element when None). Tiles holding one
    contiguous run each, in order (a linear mapping), take strided views, so the fields cost a few
    integers a batch rather than an index per element: host cost follows the tiles, not the data."""
    s, per = cand.shape
    if runs is not None:
        start, tile = runs
        length = np.diff(np.append(start, per))
        if sorting.unique(tile).size == tile.size and (tile >= 0).all():  # one run a tile
            for n in sorting.unique(length):
                sel = np.flatnonzero(length == n)
                o, v = int(start[sel[0]]), sel.size
                if (np.diff(start[sel]) == n).all():  # consecutive runs: one strided view
                    src = cand[:, o : o + v * n].reshape(s, v, n).transpose(1, 0, 2)
                    yield tile[sel], src, flat[o : o + v * n].reshape(v, n)
                else:
                    idx = start[sel][:, None] + np.arange(n)
                    yield tile[sel], cand.reshape(-1)[np.arange(s)[None, :, None] * per + idx[:, None, :]], flat[idx]
            return
        if (tile >= 0).all():
            found = _run_fields(cand, flat, start, tile)
            if found is not None:
                yield from found
                return
    tiles = graph.tile_of(like if like is not None else flat)
    for vtiles, idx in groups_by_tile(tiles):
        yield vtiles, cand.reshape(-1)[np.arange(s)[None, :, None] * per + idx[:, None, :]], flat.reshape(-1)[idx]


def _run_fields(
    cand: Tensor, flat: Tensor, start: np.ndarray, tile: np.ndarray
) -> list[tuple[np.ndarray, Tensor, Tensor]] | None:
    """``_slice_fields`` for tiles that hold several runs of the slice (a rearranged matmul operand
    mapped slice by slice alike: each tile one run per inner slice), built run by run: the vertices
    are those the per-element grouping (``groups_by_tile``) makes, in its order (by elements held,
    then tile), each field a ``Runs`` of its tile's runs (the candidates' runs once per slice S).
    Host memory follows runs x S, never elements x S (a 4,096 x 32,000 LM head's operand was 5.7 GB
    of index arrays at 512 tokens). None when ``cand`` or ``flat`` is not a contiguous affine view."""
    s, per = cand.shape
    ca, fa = cand.affine, flat.reshape(-1).affine
    cv, fv = cand.single_variable(), flat.single_variable()
    # contiguous slices (a dim of one element has stride 0 in an affine layout)
    if ca is None or fa is None or cv is None or fv is None or (per > 1 and (ca.strides[1] != 1 or fa.strides[0] != 1)):
        return None
    length = np.diff(np.append(start, per))
    by_tile = np.argsort(tile, kind="stable")  # a tile's runs stay in element order
    utiles, first_run, k = np.unique(tile[by_tile], return_index=True, return_counts=True)
    held = np.add.reduceat(length[by_tile], first_run)
    out = []
    for c in sorting.unique(held):
        rows = np.flatnonzero(held == c)  # the tiles holding c positions, ascending
        kr = k[rows]
        # the runs of those tiles, tile by tile
        ri = by_tile[np.repeat(first_run[rows] - np.cumsum(kr) + kr, kr) + np.arange(int(kr.sum()))]
        pos = _row_runs(fa.offset + start[ri], length[ri], kr, int(c), ())
        # candidates: row v is slice 0's runs, then slice 1's, ... (each run once per slice)
        n_c = s * kr
        q = np.arange(int(n_c.sum())) - np.repeat(np.cumsum(n_c) - n_c, n_c)
        row_k = np.repeat(kr, n_c)
        run = ri[np.repeat(np.cumsum(kr) - kr, n_c) + q % row_k]
        src = _row_runs(
            ca.offset + (q // row_k) * ca.strides[0] + start[run], length[run], n_c, s * int(c), (s, int(c))
        )
        out.append((utiles[rows], Tensor(cand.graph, cv, src, cand.dtype),
                    Tensor(flat.graph, fv, pos, flat.dtype)))  # fmt: skip
    return out


def _row_runs(start: np.ndarray, length: np.ndarray, per_row: np.ndarray, width: int, inner: tuple[int, ...]) -> Runs:
    """Rows of step-1 runs (``per_row[v]`` runs in row v), neighbours that continue each other
    within a row merged (as ``Runs.encode`` finds them from an index per element)."""
    row = np.repeat(np.arange(per_row.size), per_row)
    head = np.ones(start.size, dtype=bool)
    head[1:] = (start[1:] != start[:-1] + length[:-1]) | (row[1:] != row[:-1])
    first = np.flatnonzero(head)
    merged = np.add.reduceat(length, first) if first.size else length[:0]
    row_first = np.searchsorted(first, np.append(np.cumsum(per_row) - per_row, start.size))
    step = np.broadcast_to(np.ones(1, dtype=np.int64), first.shape)
    return Runs(start[first].astype(np.int64), merged.astype(np.int64), step, row_first.astype(np.int64), width, inner)


def sliceable(graph: Graph, dtype: DTypeLike, shape: tuple[int, ...], name: str) -> Tensor:
    """A tensor for dynamic_update: the positions within a slice are spread over the tiles, and every
    slice's position sits on the same tile (popops::createSliceableTensor)."""
    t = graph.add_variable(dtype, shape, name)
    map_slices_alike(graph, t, 1)
    return t


def map_slices_alike(graph: Graph, t: Tensor, levels: int) -> None:
    """Map the whole variable ``t`` so that the positions of each slice (its first ``levels`` dims
    are slice indices) are spread linearly over the tiles, identically for every slice
    (poputil::mapTensorLinearly per slice, as createSliceableTensor): given as one interval per tile
    and slice, never a tile per element."""
    slices = int(np.prod(t.shape[:levels], dtype=np.int64))
    per = int(np.prod(t.shape[levels:], dtype=np.int64))
    if slices * per == 0:
        return
    num_tiles = graph.target.num_tiles
    per_tile = max(1, -(-per // num_tiles))  # linear_tiles' runs with a grain of one element
    start0 = np.arange(0, per, per_tile, dtype=np.int64)
    tile0 = np.arange(start0.size, dtype=np.int64) % num_tiles
    starts = (np.arange(slices, dtype=np.int64)[:, None] * per + start0).ravel()
    vid = t.single_variable()
    assert vid is not None and t.numel() == graph.variables[vid].numel, "map_slices_alike maps a whole variable"
    graph.variables[vid].mapping.set_intervals(starts, graph._to_device_tiles(np.tile(tile0, slices)))


def embedding_table(graph: Graph, dtype: DTypeLike, rows: int, cols: int, name: str) -> Tensor:
    """A [rows, cols] table mapped by columns (each tile holds whole columns), as multiSlice wants."""
    t = graph.add_variable(dtype, [rows, cols], name)
    map_by_columns(graph, t)
    return t


class ColumnStorage:
    """A [rows, cols] table stored [cols, rows], as createSliceableTensor stores an embedding: each
    tile's columns are then one contiguous run of the variable (a few intervals a tile, not one per
    element), so mapping and planning cost follows the tiles, not the vocabulary's size."""

    def shape(self, shape: tuple[int, ...]) -> list[int]:
        rows, cols = shape
        return [cols, rows]

    def view(self, stored: Tensor) -> Tensor:
        return stored.transpose(1, 0)

    def stored(self, data: np.ndarray) -> np.ndarray:
        return shape_only.contiguous(data.T)


def map_by_columns(graph: Graph, table: Tensor) -> None:
    """Map a [rows, cols] table as popops::createSliceableTensor lays out an embedding for
    multiSlice: its columns spread over the tiles, every row of a column on that column's tile, so
    a lookup reads each row where it is held (a 30,522 x 768 vocabulary over 768 tiles, not on one)."""
    rows, cols = table.shape
    col_tile = linear_tiles(cols, graph.target.num_tiles)
    stored = table.transpose(1, 0)
    lay = stored.affine
    if lay is not None and lay.offset == 0 and lay.strides == (rows, 1) and stored.single_variable() is not None:
        # stored column by column (ColumnStorage): a run of columns on one tile is one interval of
        # the variable, so the mapping is built from the runs, never from a tile per element
        heads = np.flatnonzero(np.r_[True, col_tile[1:] != col_tile[:-1]])
        lengths = np.diff(np.append(heads, cols))
        graph.map_intervals(stored, heads * rows, lengths * rows, col_tile[heads])
        return
    graph.set_tile_mapping(table, np.broadcast_to(col_tile, (rows, cols)).reshape(-1))


def _column_blocks(t: Tensor, cols: np.ndarray) -> Tensor:
    """``t[:, cols].transpose(1, 0, 2)`` for a [rows, columns] view and a [vertices, c] column matrix:
    a vertex's rows of its columns. When each vertex's columns are a run following the previous
    vertex's (as linear_tiles spreads them), the view is a slice and reshape, with no index per element."""
    nv, c = cols.shape
    s0 = int(cols[0, 0])
    if np.array_equal(cols.reshape(-1), np.arange(s0, s0 + nv * c)):
        return t[:, s0 : s0 + nv * c].reshape(t.shape[0], nv, c).transpose(1, 0, 2)
    return t[:, cols].transpose(1, 0, 2)


def _column_tiles(graph: Graph, table: Tensor) -> np.ndarray:
    return graph.tile_of(table[0]).astype(np.int64)


@op("Gather")
def gather(graph: Graph, table: Tensor, indices: Tensor, prog: Prog) -> Tensor:
    """``table[indices]`` for a [V, D] table and 1-D integer indices -> [N, D] (embedding lookup).
    A table mapped by ``map_for_lookup`` is looked up as PopLibs' planned multiSlice: each tile looks up
    its block for every index, then the candidates are combined on the output's tiles; a table mapped
    by whole columns (``map_by_columns``): each tile gathers its columns, the output stays there."""
    if table.rank != 2 or indices.rank != 1 or indices.dtype.kind not in "iu":
        raise OpError(f"gather: needs table[V, D] and 1-D integer indices, got {table.shape} and {indices!r}")
    v, d = table.shape
    n = indices.shape[0]
    if _is_planned(graph, table):
        return _planned_gather(graph, table, indices, prog)
    col_tile = _column_tiles(graph, table)
    out = graph.add_variable(table.dtype, [n, d], "gather out")
    graph.set_tile_mapping(out, np.broadcast_to(col_tile, (n, d)).reshape(-1))
    cs = execute(graph, prog, "multi slice")
    for vtiles, cols in groups_by_tile(col_tile):
        fields = {
            "table": _column_blocks(table, cols),
            "indices": indices.reshape(1, n).broadcast(vtiles.size, 0),
            "out": _column_blocks(out, cols),
        }
        graph.add_vertices(cs, _GATHER, fields, vtiles)
    return out


# popops::embedding's planner (graphcore/poplibs lib/popops/DynamicSlice.cpp, the plan's model):
# minGrainSizeBytes = the target's data path width / 8 (64 bits: 8 bytes), unslicedGrainSize =
# lcm(minGrainSizeBytes, element size) / element size (4 halves, 2 floats); unslicedDimSplit <= the
# number of such grains; the dictionary split ("entriesSplit") <= ceil(entries / 2).
LOOKUP_GRAIN_BYTES = 8


@dataclass(frozen=True)
class LookupPlan:
    """How a [rows, cols] table is split for multiSlice: ``dict_split`` row chunks of ``chunk`` rows
    times ``col_split`` column grains of ``grain`` columns, block (s, u) on tile s * col_split + u."""

    rows: int
    cols: int
    grain: int
    col_split: int
    dict_split: int

    @property
    def chunk(self) -> int:
        return -(-self.rows // self.dict_split)


def lookup_plan(rows: int, cols: int, itemsize: int, num_tiles: int) -> LookupPlan:
    """PopLibs' split of an embedding table: the columns in grains of the data path's width, each grain
    on its own tiles, and the dictionary split so that the blocks fill the tiles. PopLibs chooses the
    splits with a cost model (popsolver); this takes the most tiles the grains allow, lookups not
    split (lookupParallelSplit 1) [INF]."""
    grain = int(np.lcm(LOOKUP_GRAIN_BYTES, itemsize)) // itemsize
    col_split = -(-cols // grain)
    if col_split > num_tiles:  # more grains than tiles: whole grains, several a tile
        grain *= -(-col_split // num_tiles)
        return LookupPlan(rows, cols, grain, -(-cols // grain), 1)
    dict_split = max(1, min(num_tiles // col_split, -(-rows // 2)))
    dict_split = -(-rows // -(-rows // dict_split))  # chunks of equal rows: no empty chunk at the end
    return LookupPlan(rows, cols, grain, col_split, dict_split)


def _block_tiles(plan: LookupPlan) -> np.ndarray:
    """[rows, cols] tile of every element under ``plan``."""
    s = np.arange(plan.rows) // plan.chunk
    u = np.minimum(np.arange(plan.cols) // plan.grain, plan.col_split - 1)
    return s[:, None] * plan.col_split + u[None, :]


def map_for_lookup(graph: Graph, table: Tensor) -> None:
    """Map a [rows, cols] table as popops::createSliceableTensor does with a plan (``lookup_plan``):
    blocks of a dictionary chunk by a column grain, one a tile."""
    rows, cols = table.shape
    plan = lookup_plan(rows, cols, table.dtype.itemsize, graph.target.num_tiles)
    stored = table.transpose(1, 0)
    lay = stored.affine
    if lay is not None and lay.offset == 0 and lay.strides == (rows, 1) and stored.single_variable() is not None:
        # stored column by column (ColumnStorage): each column's chunks are runs of the variable, so
        # the mapping is cols x dict_split intervals, never a tile per element
        c, k = np.arange(cols, dtype=np.int64), np.arange(plan.dict_split, dtype=np.int64)
        u = np.minimum(c // plan.grain, plan.col_split - 1)
        lengths = np.minimum(plan.chunk, rows - k * plan.chunk)
        graph.map_intervals(
            stored,
            (c[:, None] * rows + k[None, :] * plan.chunk).reshape(-1),
            np.broadcast_to(lengths, (cols, k.size)).reshape(-1),
            (k[None, :] * plan.col_split + u[:, None]).reshape(-1),
        )
        return
    graph.set_tile_mapping(table, _block_tiles(plan).reshape(-1))


def _map_rows_by_grains(graph: Graph, t: Tensor, row_block: np.ndarray, plan: LookupPlan) -> None:
    """Map a fresh [rows, cols] variable whose row r's grain u sits on tile row_block[r] * col_split
    + u (the lookup's candidates and output): one interval a row and grain, not a tile per element."""
    n_rows, cols = t.shape
    u0 = np.arange(plan.col_split, dtype=np.int64) * plan.grain
    lengths = np.diff(np.append(u0, cols))
    r = np.arange(n_rows, dtype=np.int64)
    graph.map_intervals(
        t,
        (r[:, None] * cols + u0[None, :]).reshape(-1),
        np.broadcast_to(lengths, (n_rows, plan.col_split)).reshape(-1),
        (row_block[:, None] * plan.col_split + np.arange(plan.col_split)[None, :]).reshape(-1),
    )


def _is_planned(graph: Graph, table: Tensor) -> bool:
    """Whether ``table`` is mapped by ``map_for_lookup``: its first row and first column are where the
    plan puts them (a table mapped by whole columns has its first column on one tile)."""
    rows, cols = table.shape
    plan = lookup_plan(rows, cols, table.dtype.itemsize, graph.target.num_tiles)
    first_row = np.minimum(np.arange(cols) // plan.grain, plan.col_split - 1)  # _block_tiles' row 0 and
    first_col = (np.arange(rows) // plan.chunk) * plan.col_split  # column 0, without the [rows, cols] array
    return bool(
        np.array_equal(graph.tile_of(table[0]), first_row) and np.array_equal(graph.tile_of(table[:, 0]), first_col)
    )


def _stage1_index(i: np.ndarray, inner: np.ndarray, elems: np.ndarray, chunk: int) -> np.ndarray:
    """PopLibs' adjustedIndicesStage1 map: _2 + (_1 / sElemsPerPartition) * _3 (lib/popops/DynamicSlice.cpp
    multiSlice): the row of a lookup's right candidate among its block's ``elems`` x dict_split candidates."""
    return (i // chunk) * elems + inner


def _partition_store(graph: Graph, dtype: DTypeLike, parts: int, plan: LookupPlan, rows: int, name: str) -> Tensor:
    """A [parts, col_split, rows, grain] variable, partition (p, u) one contiguous interval on tile
    p * col_split + u (popops createPartitionableTensor: "each partition ... is a single contiguous region")."""
    store = graph.add_variable(dtype, [parts, plan.col_split, rows, plan.grain], name)
    k = np.arange(parts * plan.col_split, dtype=np.int64)
    size = rows * plan.grain
    graph.map_intervals(store, k * size, np.full(k.size, size, np.int64), k)
    return store


def _planned_gather(graph: Graph, table: Tensor, indices: Tensor, prog: Prog) -> Tensor:
    """PopLibs' multiSlice over a split dictionary (lib/popops/DynamicSlice.cpp): stage 0, on each
    table block's tile, looks up every index among its rows (zeros for an index outside them), giving
    one candidate row per dictionary chunk; stage 1, one compute set, selects each lookup's candidate
    (a second MultiSlice by the adjusted indices) on the output's tiles. The candidates and the output
    are created as PopLibs creates them (createPartitionableTensor, createSliceTensor): each tile's block
    one contiguous region of its variable, so a tile's part of an exchange from or into them is a region
    per peer tile. Held row by row instead (a row's grain an interval of its own), the lookup's output
    and the adds after it cost BERT-base (packed, batch 8 x 384) ~2,600 regions a tile per exchange:
    82 KB of exchange code on the fullest tile for the three embeddings. A table whose columns are not
    whole grains takes ``_planned_gather_by_rows``."""
    rows, cols = table.shape
    n = indices.shape[0]
    plan = lookup_plan(rows, cols, table.dtype.itemsize, graph.target.num_tiles)
    if cols != plan.col_split * plan.grain:
        return _planned_gather_by_rows(graph, table, indices, prog)
    S, U, g = plan.dict_split, plan.col_split, plan.grain
    # stage 0's output: partition (s, u) = every lookup's candidate from chunk s, grain u; with the
    # dictionary whole (S 1) it is the output, and there is no second stage (multiSlice: sSplit 1)
    cand = _partition_store(graph, table.dtype, S, plan, n, "gather out" if S == 1 else "multi slice stage0Output")
    cols_u = np.arange(U, dtype=np.int64)[:, None] * g + np.arange(g)
    cs = execute(graph, prog, "multi slice")
    for s in range(S):
        r0, r1 = s * plan.chunk, min(rows, (s + 1) * plan.chunk)
        fields = {
            "table": _column_blocks(table[r0:r1], cols_u),
            "indices": indices.reshape(1, n).broadcast(U, 0),
            "out": cand[s],
        }
        graph.add_vertices(cs, _GATHER, fields, s * U + np.arange(U), offset=r0)
    if S == 1:
        return cand[0].transpose(1, 0, 2).group_dims(1, 2)
    # the output as createSliceTensor creates it: lookups in S blocks (the second stage's split), block
    # (i, u) contiguous on block (i, u)'s tile; the last block padded to the others' size and sliced off
    per = -(-n // S)
    blocks = [(i * per, min(n, (i + 1) * per)) for i in range(-(-n // per))]
    out_store = _partition_store(graph, table.dtype, len(blocks), plan, per, "gather out")
    out = out_store.transpose(0, 2, 1, 3).group_dims(2, 2)[:n]
    # the adjusted indices: innerIdx (0, 1, ... within a block; PopLibs iotas it, here a constant),
    # innerElems (the block's lookups) and the map expression, one compute set
    inner = graph.add_constant(indices.dtype, [per], np.arange(per), name="multi slice innerIdx")
    graph.map_linearly(inner)
    lens = np.array([b - a for a, b in blocks])
    elems = graph.add_constant(indices.dtype, [lens.size], lens, name="multi slice innerElems")
    graph.set_tile_mapping(elems, 0)
    r = np.arange(n)
    # costed as a multiply, a multiply and an add: popopsCycleEstimators.cpp has no integer DIVIDE entry,
    # and a division by a compile-time constant is a multiply-high and a shift [INF]
    codelet = map_codelet("popops::Map", _stage1_index, 3, (_MUL, _MUL, _ADD))
    adjusted = apply_map(graph, codelet, [indices, inner[r % per], elems[r // per]], prog, "adjustedIndicesStage1",
                         chunk=plan.chunk)  # fmt: skip
    cs2 = execute(graph, prog, "multi slice")
    for i, (a, b) in enumerate(blocks):
        fields = {  # tile (i, u) reads its lookups' candidates from the S tiles (s, u): one region each
            "table": cand[:, :, a:b, :].transpose(1, 0, 2, 3).group_dims(1, 2, 1),
            "indices": adjusted[a:b].reshape(1, b - a).broadcast(U, 0),
            "out": out_store[i, :, : b - a, :],
        }
        graph.add_vertices(cs2, _GATHER, fields, i * U + np.arange(U))
    return out


def _planned_gather_by_rows(graph: Graph, table: Tensor, indices: Tensor, prog: Prog) -> Tensor:
    """The planned lookup with its candidates and output held row by row (a row's grain one interval),
    the second stage as a copy and adds (exact: all candidates but one are zero); for a table whose
    columns are not whole grains (more grains than tiles)."""
    rows, cols = table.shape
    n = indices.shape[0]
    plan = lookup_plan(rows, cols, table.dtype.itemsize, graph.target.num_tiles)
    cand = graph.add_variable(table.dtype, [plan.dict_split, n, cols], "multi slice candidates")
    # candidate s of a lookup sits on the tile of its chunk's block
    _map_rows_by_grains(graph, cand.reshape(plan.dict_split * n, cols), np.repeat(np.arange(plan.dict_split), n), plan)
    # the grains by width (all but the last are ``grain`` wide): per width, its grains and their columns
    first = np.arange(plan.col_split, dtype=np.int64) * plan.grain
    width = np.diff(np.append(first, cols))
    by_width = [
        (us, first[us][:, None] + np.arange(w)) for w in sorting.unique(width) for us in [np.flatnonzero(width == w)]
    ]
    cs = execute(graph, prog, "multi slice")
    for s in range(plan.dict_split):
        r0, r1 = s * plan.chunk, min(rows, (s + 1) * plan.chunk)
        for us, cidx in by_width:  # one vertex a tile: its rows of its columns, every index
            fields = {
                "table": _column_blocks(table[r0:r1], cidx),
                "indices": indices.reshape(1, n).broadcast(us.size, 0),
                "out": _column_blocks(cand[s], cidx),
            }
            graph.add_vertices(cs, _GATHER, fields, s * plan.col_split + us, offset=r0)
    # the output as createSliceTensor maps it: the second stage splits the lookups over the dictionary's
    # tile groups, so lookup block i of grain u sits on block (i, u)'s tile and gets its candidates from
    # the tiles (s, u) as one region each
    out = graph.add_variable(table.dtype, [n, cols], "gather out")
    per_block = -(-n // plan.dict_split)
    _map_rows_by_grains(graph, out, np.arange(n) // per_block, plan)
    copy(graph, cand[0], prog, dst=out)
    for s in range(1, plan.dict_split):
        binary_in_place(graph, "add", out, cand[s], prog)
    return out


@op("GatherGrad")
def gather_grad(graph: Graph, table: Tensor, indices: Tensor, dout: Tensor, prog: Prog, scale: float = 1.0) -> Tensor:
    """``table[indices[i]] += scale * dout[i]`` in place (popops::multiUpdateAdd): the embedding
    gradient step (with ``scale = -learning rate``) or, on a zeroed table, the dense gradient."""
    n, d = dout.shape
    col_tile = _column_tiles(graph, table)
    cs = execute(graph, prog, "multi update add")
    for vtiles, cols in groups_by_tile(col_tile):
        fields = {
            "table": _column_blocks(table, cols),
            "indices": indices.reshape(1, n).broadcast(vtiles.size, 0),
            "updates": _column_blocks(dout, cols),
        }
        graph.add_vertices(cs, _SCATTER, fields, vtiles, scale=float(scale))
    return table


@op("DynamicSliceGrad")
def dynamic_slice_grad(graph: Graph, like: Tensor, dout: Tensor, index: Tensor, prog: Prog) -> Tensor:
    """Gradient of ``dynamic_slice(like, index)``: zeros shaped like ``like`` with ``dout`` at ``index``
    (a sliceable tensor, zero-filled then dynamically updated)."""
    grad = sliceable(graph, dout.dtype, like.shape, "dynamic slice grad")
    fill(graph, grad, 0.0, prog)
    return dynamic_update(graph, grad, dout, index, prog)
