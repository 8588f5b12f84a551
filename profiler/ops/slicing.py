"""Dynamic slice / update and gather (embedding lookup) with its gradient (popops::dynamicSlice,
dynamicUpdate, multiSlice, multiUpdateAdd).

Vertices run where the sliced tensor's data lives: for ``t[S, ...]`` the vertex on a tile selects
among the S candidates of the slice elements that tile holds; for a table ``[V, D]`` mapped by
columns, each tile gathers its columns for every index (the indices are broadcast to those tiles).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import DTypeLike

from profiler.ops.core import OpError, add_like, execute, groups_by_tile, linear_tiles, op
from profiler.ops.elementwise import fill
from profiler.ops.poplibs_codelets import DynamicSlice, DynamicUpdate, MultiSlice, MultiUpdateAdd
from profiler.poplar import shape_only
from profiler.poplar.graph import Graph
from profiler.poplar.programs import Sequence as Prog
from profiler.poplar.tensor import Tensor

_SLICE, _UPDATE, _GATHER, _SCATTER = DynamicSlice(), DynamicUpdate(), MultiSlice(), MultiUpdateAdd()


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
    cand = t.reshape(s, -1)
    cs = execute(graph, prog, "dynamic slice")
    for vtiles, idx in groups_by_tile(graph.tile_of(out)):
        src = cand.reshape(-1)[np.arange(s)[None, :, None] * cand.shape[1] + idx[:, None, :]]
        ix = _index_field(index, vtiles)
        graph.add_vertices(cs, _SLICE, {"in": src, "index": ix, "out": out.reshape(-1)[idx]}, vtiles)
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
    tiles = graph.tile_of(base).reshape(s, -1)
    if (tiles != tiles[0]).any():
        raise OpError(f"dynamic_update: {t!r} is not mapped slice by slice alike; create it with sliceable()")
    cs = execute(graph, prog, "dynamic update")
    for vtiles, idx in groups_by_tile(graph.tile_of(t[0])):
        dst = base.reshape(-1)[np.arange(s)[None, :, None] * base.shape[1] + idx[:, None, :]]
        ix = _index_field(index, vtiles)
        graph.add_vertices(cs, _UPDATE, {"base": dst, "update": update.reshape(-1)[idx], "index": ix}, vtiles)
    return t


def sliceable(graph: Graph, dtype: DTypeLike, shape: tuple[int, ...], name: str) -> Tensor:
    """A tensor for dynamic_update: the positions within a slice are spread over the tiles, and every
    slice's position sits on the same tile (popops::createSliceableTensor)."""
    t = graph.add_variable(dtype, shape, name)
    per_slice = int(np.prod(shape[1:], dtype=np.int64))
    tiles = linear_tiles(per_slice, graph.target.num_tiles)
    graph.set_tile_mapping(t, np.broadcast_to(tiles, (shape[0], per_slice)).reshape(-1))
    return t


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
    Each tile holding columns of row 0 gathers those columns (others are exchanged to it)."""
    if table.rank != 2 or indices.rank != 1 or indices.dtype.kind not in "iu":
        raise OpError(f"gather: needs table[V, D] and 1-D integer indices, got {table.shape} and {indices!r}")
    v, d = table.shape
    n = indices.shape[0]
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
