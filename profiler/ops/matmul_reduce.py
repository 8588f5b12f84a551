"""A matmul's partial-sum reduction as PopLibs plans it (ref §3.5 ``ConvReducePlan``).

When the planner splits K over ``ks`` tiles, each output block has ``ks`` partial blocks, one on
each of the block's in-chan tiles. They are reduced in 1 stage if ks < 16, 2 stages if ks < 125,
else 3, each stage of depth ~ks^(1/stages): a stage groups the partials (balanced groups), and
each group's outputs are cut into chunks, one per tile of the group's share of the block's
in-chan tiles, so the reduction work and the result stay spread over the tiles that computed the
partials. Each chunk is one ``poplin::ReduceAdd`` vertex (cost_model.conv_reduce_cycles), of the
single-input variant where PopLibs would pick it (``conv_reduce_codelet``);
its exchange is what the compiler plans from the mappings (regions, multicast). The last stage
writes the result, which is mapped where it is reduced (no spreading to a linear mapping).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from profiler.host import sorting
from profiler.ops.core import execute
from profiler.ops.poplibs_codelets import CONV_REDUCE, conv_reduce_codelet
from profiler.poplar.graph import ComputeSet, Graph
from profiler.poplar.layout import cut_ranges, piece_lengths
from profiler.poplar.programs import Sequence as Prog
from profiler.poplar.tensor import Tensor

# ref §3.5 "Multi-stage plan (ConvReducePlan.cpp): 1 stage if depth < 16, 2 stages if 16 <= depth < 125,
# 3 stages if >= 125".
TWO_STAGES_FROM = 16
THREE_STAGES_FROM = 125


def stage_depths(depth: int) -> list[int]:
    """Partials reduced per output at each stage: ~depth^(1/stages) (ref §3.5), the last stage
    taking what is left."""
    stages = 1 if depth < TWO_STAGES_FROM else 2 if depth < THREE_STAGES_FROM else 3
    out, p = [], depth
    for s in range(stages - 1):
        d = math.ceil(p ** (1 / (stages - s)))
        out.append(d)
        p = -(-p // d)
    return [*out, p]


def _stages(
    graph: Graph, prog: Prog, name: str, partials: Tensor, out: Tensor
) -> Iterator[tuple[bool, np.ndarray, np.ndarray, ComputeSet, Tensor]]:
    """The reduction's stages (ref §3.5): (last?, its groups' bounds in partial rows (balanced),
    each group's share bounds of the block's in-chan tiles, the stage's compute set, its result:
    ``out`` for the last, else new partials [groups, E]); a stage's groups are the next stage's
    partial rows."""
    p_total, e_total = partials.shape
    p = p_total
    depths = stage_depths(p_total)
    for stage, d in enumerate(depths, 1):
        last = stage == len(depths)
        nq = 1 if last else -(-p // d)
        cs = execute(graph, prog, f"{name}/stage{stage}")
        nxt = out if last else graph.add_variable(partials.dtype, [nq, e_total], f"{name} partials {stage}")
        yield last, (np.arange(nq + 1) * p) // nq, (np.arange(nq + 1) * p_total) // nq, cs, nxt
        p = nq


@dataclass(frozen=True, eq=False)
class BlockGrid:
    """The result element of each column of block-major partials, from the blocks' geometry: block b's
    columns start at ``off[b]`` and run over its ``extent[b]`` (groups, rows, cols) positions row-major;
    position (g, m, n) is element ``base[b] + g * strides[0] + m * strides[1] + n`` of the result.
    Indexed like the array of those elements (``grid[j]``), without holding one entry per column."""

    off: np.ndarray  # int64, one per block
    base: np.ndarray  # int64, one per block
    extent: np.ndarray  # int64, [blocks, 3]
    strides: tuple[int, int]  # between groups and rows of a block (1 between its columns)

    def __getitem__(self, j: np.ndarray) -> np.ndarray:
        j = np.asarray(j, dtype=np.int64)
        b = np.searchsorted(self.off, j, side="right") - 1  # an empty block shares its successor's start
        p = j - self.off[b]
        per_group = self.extent[b, 1] * self.extent[b, 2]
        g, m, n = p // per_group, p % per_group // self.extent[b, 2], p % self.extent[b, 2]
        return self.base[b] + g * self.strides[0] + m * self.strides[1] + n

    def breaks(self) -> np.ndarray:
        """The columns whose element is not the previous column's plus one: only where a block row
        begins can it not be (each row's elements are consecutive), and only where a group of rows
        begins when the rows follow one another (a grouped store's rows of one channel group)."""
        whole = self.extent[:, 2] == self.strides[1]  # a group's rows are one run
        unit = np.where(whole, self.extent[:, 1] * self.extent[:, 2], self.extent[:, 2])  # columns
        units = self.extent[:, 0] * np.where(whole, 1, self.extent[:, 1]) * (self.extent[:, 2] > 0)
        of = np.repeat(np.arange(units.size), units)
        k = np.arange(of.size) - np.repeat(np.cumsum(units) - units, units)
        j = self.off[of] + k * unit[of]  # each unit's first column
        j = j[j > 0]
        return j[self[j] != self[j - 1] + 1]


def breaks_of(order: np.ndarray | BlockGrid) -> np.ndarray:
    """The positions where ``order`` (a permutation) stops counting up by one."""
    if isinstance(order, BlockGrid):
        return order.breaks()
    return np.flatnonzero(order[1:] != order[:-1] + 1) + 1


def reduce_partials(
    graph: Graph,
    partials: Tensor,
    out: Tensor,
    block_of: np.ndarray,
    pos: np.ndarray,
    block_size: np.ndarray,
    block_tile: np.ndarray,
    tile_step: int,
    prog: Prog,
    name: str,
    final_kernel: Callable[[ComputeSet], None] | None = None,
    block_row: np.ndarray | None = None,
    block_major: bool = False,
) -> np.ndarray:
    """Reduce ``partials[P, E]`` (row r of output block b on tile ``block_tile[b] + r * tile_step``)
    into ``out`` (E elements, unmapped); output element e is position ``pos[e]`` of block
    ``block_of[e]``, which has ``block_size[b]`` elements. Maps ``out`` and returns its tiles.
    ``block_row[b]``: block b's row length (its positions run row by row; None: rows of one).
    ``final_kernel(cs)``: adds the last stage's kernel computing ``out`` from the op's inputs (the
    partials are op-internal: the stages before defer to it, graph.defer_kernel).
    ``block_major``: ``partials``' columns (and the intermediate stages') are in (block, position)
    order rather than ``out``'s, so a chunk of a block is one run on each tile holding a partial
    (PopLibs creates a split conv's partials per tile; needs ``final_kernel``)."""
    if block_major and final_kernel is None:
        raise ValueError("reduce_partials: block-major partials need the final kernel (out is in element order)")
    if block_major:  # the element of each (block, position) column: rank = block start + pos, inverted
        rank = np.concatenate(([0], np.cumsum(block_size)[:-1])).astype(np.int64)[block_of] + pos
        order = np.empty(rank.size, dtype=np.int64)
        order[rank] = np.arange(rank.size)
        row = np.ones_like(block_size) if block_row is None else block_row
        reduce_block_major(graph, partials, out, order, block_size, row, block_tile, tile_step, prog, name,
                           final_kernel)  # type: ignore[arg-type]  # fmt: skip
        return graph.tile_of(out.reshape(-1)).astype(np.int64)
    p_total, e_total = partials.shape
    order = np.lexsort((pos, block_of))  # elements in (block, position) order: each chunk a run
    blk_s, pos_s = block_of[order], pos[order]
    size_s = block_size[blk_s]
    col = np.arange(e_total)  # each output element's column in the partials and intermediate stages
    if block_major:
        col[order] = np.arange(e_total)
    row_s = np.ones_like(size_s) if block_row is None else block_row[blk_s]
    cur = partials.reshape(-1)
    out_flat = out.reshape(-1)
    out_tiles = np.empty(e_total, dtype=np.int64)
    for last, rows, share, cs, nxt in _stages(graph, prog, name, partials, out):
        nxt_flat = nxt.reshape(-1)
        nq = rows.size - 1
        tiles = np.empty((nq, e_total), dtype=np.int64)
        sizes, reducers = rows[1:] - rows[:-1], share[1:] - share[:-1]  # per group
        classes = []  # groups with the same depth and reducer count share their chunks
        for size, c in sorted({(int(a), int(b)) for a, b in zip(sizes, reducers, strict=True)}):
            qs = np.flatnonzero((sizes == size) & (reducers == c))
            # each element's chunk within its block: whole block rows when the block has at least as
            # many rows as reducers (a chunk's partials are then runs of whole rows), else positions
            rows_s = size_s // row_s
            chunk = np.where(rows_s >= c, (pos_s // row_s) * c // np.maximum(rows_s, 1), pos_s * c // size_s)
            tiles[qs[:, None], order[None, :]] = block_tile[blk_s][None, :] + (share[qs][:, None] + chunk) * tile_step
            classes.append((size, qs, chunk))
        if last:  # outputs live where they are reduced
            out_tiles[:] = tiles[0]
            graph.set_tile_mapping(out_flat, out_tiles)
        else:
            nxt_tiles = np.empty_like(tiles)
            nxt_tiles[:, col] = tiles
            graph.set_tile_mapping(nxt, nxt_tiles.reshape(-1))
        dest = out_flat if last else nxt_flat
        for size, qs, chunk in classes:
            brk = np.ones(e_total, dtype=bool)
            brk[1:] = (blk_s[1:] != blk_s[:-1]) | (chunk[1:] != chunk[:-1])
            start = np.flatnonzero(brk)
            length = np.diff(np.append(start, e_total))
            src_rows = rows[qs][:, None] + np.arange(size)  # [Q, size] partial rows of each group
            for ln in sorting.unique(length):
                sel = start[length == ln]
                elems = order[sel[:, None] + np.arange(ln)]  # [R, ln] output elements of each chunk
                idx = (src_rows[:, None, :, None] * e_total + col[elems][None, :, None, :]).reshape(-1, size, ln)
                dst = (elems[None, :, :] if last else qs[:, None, None] * e_total + col[elems][None, :, :]).reshape(
                    -1, ln
                )
                vt = tiles[qs[:, None], elems[None, :, 0]]  # the chunk's reducer
                reducer = conv_reduce_codelet(int(ln), size, partials.dtype, graph.target)
                graph.add_vertices(cs, reducer, {"in": cur[idx], "out": dest[dst]}, vt.reshape(-1))
            if final_kernel is not None:
                continue
            # the kernel: every group of this class at once, over whole rows
            flat_rows = src_rows.reshape(-1)
            if np.array_equal(flat_rows, np.arange(flat_rows[0], flat_rows[0] + flat_rows.size)):  # a view
                src = cur.reshape(-1, e_total)[int(flat_rows[0]) : int(flat_rows[-1]) + 1]
            else:
                src = cur.reshape(-1, e_total)[flat_rows]
            src = src.reshape(qs.size, size, e_total)
            graph.add_kernel(cs, CONV_REDUCE, {"in": src, "out": out_flat.reshape(1, e_total) if last else nxt[qs]})
        if final_kernel is not None:
            if last:
                final_kernel(cs)
            else:
                graph.defer_kernel(cs)
        if not last:
            cur = nxt_flat
    return out_tiles


def reduce_block_major(
    graph: Graph,
    partials: Tensor,
    out: Tensor,
    order: np.ndarray | BlockGrid,
    block_size: np.ndarray,
    block_row: np.ndarray,
    block_tile: np.ndarray,
    tile_step: int,
    prog: Prog,
    name: str,
    final_kernel: Callable[[ComputeSet], None],
    grain: int = 1,
) -> None:
    """``reduce_partials`` of block-major partials, planned per block: column ``j`` of ``partials[P, E]``
    (and of the intermediate stages) is position ``j - start[b]`` of block b (blocks one after another,
    ``block_size[b]`` columns each), and output element ``order[j]`` of ``out`` (a permutation). A
    block's chunks are runs of its columns whose bounds follow from its size and row length, so the
    stages' mappings and vertex fields come from those runs; the last stage's, in ``out``'s element
    order, from those runs cut where ``order`` stops counting up. A block cut by positions is cut in
    whole ``grain``s as PopLibs' splitRegions cuts a reduction's outputs (poputil/Util.cpp: at most
    ceil(grains / reducers) grains a chunk, so a small block may use fewer reducers). Maps ``out``."""
    p_total, e_total = partials.shape
    block_start = np.concatenate(([0], np.cumsum(block_size)[:-1])).astype(np.int64)
    block_row = np.maximum(block_row, 1)  # an empty block (no columns) may have no rows either
    block_rows = block_size // block_row
    cur = partials.reshape(-1)
    out_flat = out.reshape(-1)
    breaks = breaks_of(order)  # where a run of consecutive elements ends
    for last, rows, share, cs, nxt in _stages(graph, prog, name, partials, out):
        nxt_flat = nxt.reshape(-1)
        sizes, reducers = rows[1:] - rows[:-1], share[1:] - share[:-1]
        classes = []  # groups with the same depth and reducer count share their chunks
        for size, c in sorted({(int(a), int(b)) for a, b in zip(sizes, reducers, strict=True)}):
            qs = np.flatnonzero((sizes == size) & (reducers == c))
            # chunk j of a block: whole block rows when the block has at least as many rows as reducers
            # (chunk of position p: (p // row) * c // rows, so it starts at row ceil(j * rows / c)),
            # else positions in whole grains as splitRegions cuts them: ng grains, at most ceil(ng / c)
            # a chunk, so v = ceil(ng / that) chunks, chunk j from grain floor(j * ng / v) (capped at the
            # block's end; chunks past v are empty); a last part row is chunk c
            j = np.arange(c + 2)
            by_rows = block_row[:, None] * -(-(j[None, :] * block_rows[:, None]) // c)
            ng = np.maximum(1, -(-block_size // grain))
            v = -(-ng // -(-ng // c))
            by_pos = np.minimum((j[None, :] * ng[:, None]) // v[:, None] * grain, block_size[:, None])
            bound = np.where((block_rows >= c)[:, None], by_rows, by_pos)
            bound[:, c + 1] = block_size
            b_run, j_run = np.nonzero(bound[:, 1:] > bound[:, :-1])  # non-empty chunks, in column order
            r_start = block_start[b_run] + bound[b_run, j_run]
            r_len = bound[b_run, j_run + 1] - bound[b_run, j_run]
            r_tile = block_tile[b_run][None, :] + (share[qs][:, None] + j_run[None, :]) * tile_step  # [Q, runs]
            classes.append((size, qs, r_start, r_len, r_tile))
        if last:  # outputs live where they are reduced: each chunk's runs of elements on its reducer
            _, _, r_start, r_len, r_tile = classes[0]
            start, pieces = cut_ranges(breaks, r_start, r_len)
            lengths = piece_lengths(start, pieces, r_start, r_len)
            if e_total:  # (an empty result has no intervals to map)
                graph.map_intervals(out_flat, order[start], lengths, np.repeat(r_tile[0], pieces))
        else:  # each group's row of the next partials, as the chunks' runs
            graph.map_intervals(
                nxt,
                np.concatenate([(qs[:, None] * e_total + s[None, :]).reshape(-1) for _, qs, s, _, _ in classes]),
                np.concatenate([np.tile(ln, qs.size) for _, qs, _, ln, _ in classes]),
                np.concatenate([t.reshape(-1) for *_, t in classes]),
            )
        dest = out_flat if last else nxt_flat
        for size, qs, r_start, r_len, r_tile in classes:
            for ln in sorting.unique(r_len):
                run = r_len == ln
                sel = r_start[run]
                # a chunk is one run of each partial row: blocks from its first column
                fields = {"in": cur.pattern_rows((rows[qs][:, None] * e_total + sel[None, :]).reshape(-1),
                                                 (size, int(ln)), (e_total, 1))}  # fmt: skip
                if last:
                    fields["out"] = dest.permuted_rows(order, breaks, sel, int(ln))
                else:
                    fields["out"] = dest.pattern_rows(
                        (qs[:, None] * e_total + sel[None, :]).reshape(-1), (int(ln),), (1,)
                    )
                reducer = conv_reduce_codelet(int(ln), size, partials.dtype, graph.target)
                graph.add_vertices(cs, reducer, fields, r_tile[:, run].reshape(-1))
        if last:
            final_kernel(cs)
        else:
            graph.defer_kernel(cs)
            cur = nxt_flat
