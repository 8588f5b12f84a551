"""Reductions (popops::reduce) with multi-stage reduction across tiles.

``reduce_groups`` is the engine of every reduction here (and of col2im in convolution gradients
and pooling of inputs that are not affine views; matmul partials use profiler.ops.matmul_reduce): members of each group are first reduced on the tile that
holds them (one partial per group and tile), the partials are exchanged and reduced again - in one
more stage, or, when a group has many partials, through intermediate stages of about
sqrt(partials) each (ref §3.5 "Multi-stage plan": stage depths ~ depth^(1/n)) - and the last stage
writes the result on the output's tile.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from typing import Any

import numpy as np

from profiler.chip.dtypes import as_dtype
from profiler.host import sorting
from profiler.ops.core import (
    OpError,
    constant_per_tile,
    float_accumulator,
    op,
    padded_rows,
    padded_runs,
    rows,
    set_attributes,
)
from profiler.ops.core import execute as new_compute_set
from profiler.ops.elementwise import broadcast
from profiler.ops.elementwise import scale as scale_op
from profiler.ops.poplibs_codelets import (
    CONTINUOUS_REDUCE_CODELETS,
    REDUCE_CODELETS,
    REDUCE_SEGMENT_CODELETS,
    reduce_identity,
)
from profiler.poplar import recall
from profiler.poplar.graph import ComputeSet, Graph
from profiler.poplar.layout import Affine, Factored, VarRuns
from profiler.poplar.programs import Sequence as Prog
from profiler.poplar.tensor import Tensor

# ref §3.5 ConvReducePlan: one stage below 16 partials per output.
SINGLE_STAGE_MAX_PARTIALS = 16


class _SharedSets:
    """The compute sets of the first of several reductions of one input, handed in order to the
    others (``reduce_many``): popops::reduceMany puts every reduction's vertices of a stage in one
    compute set (lib/popops/Reduce.cpp ``reduceMany``; popnn's layer norm takes its mean and mean
    square so, lib/poplin/Norms.cpp ``normStatisticsImpl``)."""

    def __init__(self) -> None:
        self.sets: list[ComputeSet] = []
        self.next: int | None = None  # None: recording the first reduction's; else the next to hand out

    def take(self, graph: Graph, prog: Prog, name: str) -> ComputeSet:
        if self.next is None:
            cs = new_compute_set(graph, prog, name)
            self.sets.append(cs)
            return cs
        if self.next >= len(self.sets):
            raise OpError("reduce_many: a reduction planned more stages than the first one")
        cs = self.sets[self.next]
        self.next += 1
        return cs


_SHARED: ContextVar[_SharedSets | None] = ContextVar("reduce_shared_sets", default=None)


def execute(graph: Graph, prog: Prog, name: str) -> ComputeSet:
    """A new compute set appended to ``prog`` (ops.core.execute), or, inside ``reduce_many``, the
    first reduction's compute set of this stage."""
    shared = _SHARED.get()
    return new_compute_set(graph, prog, name) if shared is None else shared.take(graph, prog, name)


def _bucket(counts: np.ndarray) -> np.ndarray:
    """Vertex input length per vertex: exact up to 16, else rounded up to a quarter power of two
    (at most 25% padding), so a reduction has few distinct vertex shapes (batches)."""
    c = np.maximum(counts, 1)
    step = np.where(c <= 16, 1, 2 ** np.maximum(np.floor(np.log2(np.maximum(c, 1))) - 2, 0).astype(np.int64))
    return -(-c // step) * step


def _non_decreasing(x: np.ndarray) -> bool:
    return bool((x[1:] >= x[:-1]).all())


def _stable_order(key: np.ndarray) -> np.ndarray | None:
    """``np.argsort(key, kind="stable")``, or None when that is the identity (``key`` already sorted,
    as a reduction over trailing axes gives it): one pass instead of a sort, and no gathers."""
    return None if _non_decreasing(key) else np.argsort(key, kind="stable")


def _unique_inverse(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(key, return_inverse=True)``: without a sort when ``key`` is already sorted, else by
    a stable sort, which merges the long ascending runs (group-major keys, a few tiles per group)
    that np.unique's quicksort does not exploit."""
    order = None if _non_decreasing(key) else np.argsort(key, kind="stable")
    sk = key if order is None else key[order]
    new = np.ones(key.size, dtype=bool)
    new[1:] = sk[1:] != sk[:-1]
    rank = np.cumsum(new) - 1
    if order is None:
        return sk[new], rank
    inverse = np.empty(key.size, dtype=rank.dtype)
    inverse[order] = rank
    return sk[new], inverse


def _worker_runs(tile: np.ndarray, count: np.ndarray, workers: int) -> np.ndarray:
    """Which vertex each output goes to, as popops hands a tile's reductions to its workers: the outputs
    on one tile with as many partials each (``count``), in order, split into at most ``workers`` runs of
    near-equal size, two outputs at least (popops ReductionConnection.cpp ``splitRowsToWorkers``; three
    or fewer stay together), each run of several one ContinuousReduce vertex. Returns a run id per
    output, runs numbered in order of (tile, count, first output)."""
    nv = tile.size
    if nv == 0:
        return np.zeros(0, dtype=np.int64)
    # np.lexsort((np.arange(nv), count, tile)) as one stable sort of a combined key (a third of the
    # time over a million outputs: an RMSNorm's (row, tile) pairs)
    count64 = count.astype(np.int64)
    order = np.argsort(tile.astype(np.int64) * (int(count64.max()) + 1) + count64, kind="stable")
    t, c = tile[order], count[order]
    new_seg = np.ones(nv, dtype=bool)
    new_seg[1:] = (t[1:] != t[:-1]) | (c[1:] != c[:-1])
    seg = np.cumsum(new_seg) - 1
    seg_start = np.flatnonzero(new_seg)
    r = np.diff(np.append(seg_start, nv))[seg]  # outputs in this output's segment
    pos = np.arange(nv) - seg_start[seg]
    max_rows = -(-r // workers)
    n_runs = np.where(r <= 3, 1, np.minimum(r // 2, -(-r // max_rows)))
    base, extra = r // n_runs, r % n_runs  # the first ``extra`` runs take one more
    big = extra * (base + 1)
    run_in_seg = np.where(pos < big, pos // (base + 1), extra + (pos - big) // np.maximum(base, 1))
    new_run = new_seg.copy()
    new_run[1:] |= run_in_seg[1:] != run_in_seg[:-1]
    out = np.empty(nv, dtype=np.int64)
    out[order] = np.cumsum(new_run) - 1
    return out


def _runs_by_shape(run: np.ndarray, count: np.ndarray, length: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """The runs by shape: (partials per output, the runs' outputs as a matrix [runs, k]), runs in id
    order. A run of several outputs takes their exact count; a lone output the bucketed ``length``
    (padded), so that few shapes of single vertices arise."""
    order = np.argsort(run, kind="stable")
    sizes = np.bincount(run)
    first = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    lead = order[first]
    run_len = np.where(sizes > 1, count[lead], length[lead])
    for k, lb in sorting.unique_rows(np.stack([sizes, run_len], axis=1)).tolist():  # the shapes, sorted
        rs = np.flatnonzero((sizes == k) & (run_len == lb))
        yield lb, order[first[rs][:, None] + np.arange(k)]


def _reduce_stage(
    graph: Graph,
    src: Tensor,
    member: np.ndarray,
    vertex: np.ndarray,
    vertex_tile: np.ndarray,
    out: Tensor,
    op_name: str,
    prog: Prog,
    name: str,
    scale: float = 1.0,
) -> ComputeSet:
    """One compute set: vertex v (on vertex_tile[v]) reduces src[member[vertex == v]] into out[v]."""
    nv = vertex_tile.size
    order = _stable_order(vertex)
    if order is not None:
        member, vertex = member[order], vertex[order]
    counts = np.bincount(vertex, minlength=nv)
    length = _bucket(counts)
    pad = constant_per_tile(graph, src.dtype, reduce_identity(op_name, src.dtype))
    cs = execute(graph, prog, name)
    run = _worker_runs(vertex_tile, counts, graph.target.num_worker_contexts)
    if nv and (counts == length[0]).all():  # every output reduces as many members: its row of ``member``
        idx_of = member.reshape(nv, -1)
        for _, outs in _runs_by_shape(run, counts, length):
            _add_reduce_vertices(graph, cs, op_name, rows(src, idx_of[outs]), out, outs, vertex_tile, scale)
        return cs
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    pos = np.arange(member.size) - starts[vertex]
    row_of = np.full(nv, -1, dtype=np.int64)
    idx_of, valid_of = {}, {}
    for lb in sorting.unique(length):  # each output's members as a row of its length's index matrix
        vs = np.flatnonzero(length == lb)
        row_of[vs] = np.arange(vs.size)
        sel = length[vertex] == lb
        idx = np.zeros((vs.size, int(lb)), dtype=np.int64)
        valid = np.zeros((vs.size, int(lb)), dtype=bool)
        idx[row_of[vertex[sel]], pos[sel]] = member[sel]
        valid[row_of[vertex[sel]], pos[sel]] = True
        idx_of[int(lb)], valid_of[int(lb)] = idx, valid
    for lb, outs in _runs_by_shape(run, counts, length):
        full = int(length[outs[0, 0]])  # a run of several takes its exact count, the first lb of its rows
        idx, valid = idx_of[full][row_of[outs]][..., :lb], valid_of[full][row_of[outs]][..., :lb]
        field = rows(src, idx) if valid.all() else padded_rows(src, idx, valid, pad, vertex_tile[outs[:, 0]])
        _add_reduce_vertices(graph, cs, op_name, field, out, outs, vertex_tile, scale)
    return cs


def _add_reduce_vertices(
    graph: Graph, cs: ComputeSet, op_name: str, field: Tensor, out: Tensor, outs: np.ndarray,
    output_tile: np.ndarray, scale: float,
) -> None:  # fmt: skip
    """Vertices reducing ``field`` [runs, k, partials] into ``out[outs]`` [runs, k]: one output each (popops'
    single-input reduction) when k is 1, else a ContinuousReduce each."""
    k = outs.shape[1]
    tiles = output_tile[outs[:, 0]]
    if k == 1:
        fields = {"in": field.reshape(field.shape[0], -1), "out": rows(out, outs)}
        graph.add_vertices(cs, REDUCE_CODELETS[op_name], fields, tiles, scale=float(scale))
    else:
        fields = {"in": field, "out": rows(out, outs)}
        graph.add_vertices(cs, CONTINUOUS_REDUCE_CODELETS[op_name], fields, tiles, scale=float(scale))


def _add_kernel(
    graph: Graph,
    cs: ComputeSet,
    src: Tensor,
    member: np.ndarray,
    group: np.ndarray,
    out: Tensor,
    op_name: str,
    scale: float,
) -> None:
    """The whole reduction as ``cs``'s kernel, straight from ``src`` (the earlier stages' compute
    sets defer to it): rows of a view when every group has as many members, else segments."""
    n = out.numel()
    order = _stable_order(group)
    ordered = member if order is None else member[order]
    counts = np.bincount(group, minlength=n)
    flat_src = src.reshape(-1)
    if (counts == counts[0]).all():
        fields = {"in": rows(flat_src, ordered.reshape(n, -1)), "out": out.reshape(n, 1)}
        graph.add_kernel(cs, REDUCE_CODELETS[op_name], fields, scale=float(scale))
        return
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    fields = {"in": rows(flat_src, ordered).expand(0), "out": out.reshape(1, n)}
    graph.add_kernel(cs, REDUCE_SEGMENT_CODELETS[op_name], fields, starts=starts, scale=float(scale))


class _ElementPairs:
    """Stage 1's (group, tile) pairs found per element: any members and groups."""

    def __init__(self, graph: Graph, src: Tensor, member: np.ndarray, group: np.ndarray) -> None:
        nt = graph.target.num_tiles
        src_tiles = graph.tile_of(src.reshape(-1)).astype(np.int64)[member]
        key = group.astype(np.int64) * nt + src_tiles
        ukey, self.pair = _unique_inverse(key)
        self.group, self.tile = ukey // nt, ukey % nt
        self.graph, self.src, self.member, self.member_group = graph, src, member, group

    def stage(self, out: Tensor, op_name: str, prog: Prog, name: str, scale: float = 1.0) -> ComputeSet:
        """Stage 1: vertex v (on ``self.tile[v]``) reduces pair v's members into ``out[v]``."""
        return _reduce_stage(self.graph, self.src, self.member, self.pair, self.tile, out, op_name, prog, name, scale)

    def kernel(self, cs: ComputeSet, out: Tensor, op_name: str, scale: float) -> None:
        _add_kernel(self.graph, cs, self.src, self.member, self.member_group, out, op_name, scale)


class _RunPairs:
    """Stage 1's (group, tile) pairs of groups of ``size`` consecutive elements of a one-dimensional
    affine view, found per run of elements on one tile: the pairs, their fields and the kernel come
    out as ``_ElementPairs`` gives them, without an array per element beyond the tiles (an attention
    score tensor at batch 8 has 14 M elements per layer). A pair is one run, or several when a
    group leaves a tile and comes back (scores computed in column chunks: each chunk of a row on
    the same tiles); its members are then its runs, in order."""

    def __init__(self, graph: Graph, flat: Tensor, size: int, pair_group: np.ndarray, pair_tile: np.ndarray,
                 start: np.ndarray, count: np.ndarray,
                 ranges: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> None:  # fmt: skip
        self.graph, self.flat, self.size = graph, flat, size
        self.group, self.tile, self.start, self.count = pair_group, pair_tile, start, count
        # with several runs to a pair: (first run, runs) per pair and each run's elements; ``start``
        # is then per run and ``count`` per pair (its runs' sum)
        self.ranges = ranges

    @classmethod
    def find(cls, graph: Graph, src: Tensor, size: int) -> _RunPairs | None:
        """The pairs, or None when ``src`` flattened is neither affine nor a grouped (factored) view,
        e.g. a layer norm's input held in a matmul result's channel groups."""
        flat = src.reshape(-1)
        if not isinstance(flat._lay, Affine | Factored) or flat.numel() == 0:
            return None
        # a repeated layer's reduction over a view mapped alike finds the same pairs, tiles moved
        # (profiler.poplar.recall): worked out once for a decoder's 32 softmaxes
        found = recall.remembered(
            graph, [flat], ("run_pairs", size), lambda: _pairs_of_runs(graph, flat, size),
            _kept_pairs, lambda p, read: (p[0], read.tiles(p[1]), *p[2:]),
        )  # fmt: skip
        assert found is not None
        return cls(graph, flat, size, *found)

    def stage(self, out: Tensor, op_name: str, prog: Prog, name: str, scale: float = 1.0) -> ComputeSet:
        """``_reduce_stage`` of consecutive members: each batch of vertices reducing as many members
        takes blocks of ``self.flat`` (what indexing it by members finds), padded rows element by element."""
        graph = self.graph
        pad = constant_per_tile(graph, self.flat.dtype, reduce_identity(op_name, self.flat.dtype))
        cs = execute(graph, prog, name)
        for field, outs in self._fields(pad):
            _add_reduce_vertices(graph, cs, op_name, field, out, outs, self.tile, scale)
        return cs

    def _fields(self, pad: Tensor) -> list[tuple[Tensor, np.ndarray]]:
        """The stage's (field, outputs) batches. A repeated layer's reduction over a view mapped alike
        takes the same fields (``profiler.poplar.recall``) on its own variables, its padding (the
        element of ``pad`` on each tile, whose offset is the tile) moved with its tiles."""
        found = recall.remembered(
            self.graph, [self.flat, pad], ("reduce_stage_fields", self.size), lambda: list(self._fields_worked(pad)),
            _kept_stage_fields, lambda kept, read: _stage_fields_rebuilt(self.graph, kept, read),
        )  # fmt: skip
        assert found is not None
        return found

    def _fields_worked(self, pad: Tensor) -> Iterator[tuple[Tensor, np.ndarray]]:
        """``_fields`` worked out."""
        length = _bucket(self.count)
        run = _worker_runs(self.tile, self.count, self.graph.target.num_worker_contexts)
        for lb, outs in _runs_by_shape(run, self.count, length):
            if self.ranges is not None:
                yield self._ranges_field(outs, lb, pad), outs
                continue
            k = outs.shape[1]
            start = self.start[outs]
            count = self.count[outs]
            if not (count == lb).all():  # padded (ragged) outputs: one each
                field = padded_runs(self.flat, start, count, lb, pad, self.tile[outs[:, 0]])
                if field is None:  # not runs of one variable: an index per element
                    valid = np.arange(lb) < count[:, :, None]
                    idx = np.where(valid, start[:, :, None] + np.arange(lb), 0)
                    field = padded_rows(self.flat, idx, valid, pad, self.tile[outs[:, 0]])
                yield field, outs
                continue
            # a run's outputs a constant stride apart: one pattern per vertex, no index per element
            step = np.diff(start, axis=1) if k > 1 else np.zeros((start.shape[0], 0), np.int64)
            stride = step[:, 0] if k > 1 else np.zeros(start.shape[0], np.int64)
            regular = (step == stride[:, None]).all(axis=1) & (stride >= 0)
            for s in sorting.unique(stride[regular]):
                rs = np.flatnonzero(regular & (stride == s))
                yield self.flat.pattern_rows(start[rs, 0], (k, lb), (int(s), 1)), outs[rs]
            rs = np.flatnonzero(~regular)
            if rs.size:
                idx = start[rs][:, :, None] + np.arange(lb)
                yield rows(self.flat, idx), outs[rs]

    def _ranges_field(self, outs: np.ndarray, lb: int, pad: Tensor) -> Tensor:
        """The field [runs, k, lb] of outputs ``outs`` whose pairs are several runs each: the runs one
        after another, padded to ``lb``; by element only where runs are not worth it."""
        assert self.ranges is not None
        head, runs, run_count = self.ranges
        parts = outs.reshape(-1)
        per = runs[parts]
        before = np.cumsum(per) - per
        ridx = np.repeat(head[parts] - before, per) + np.arange(int(per.sum()))  # the parts' runs, in order
        rstart, rcount = self.start[ridx], run_count[ridx]
        field = padded_runs(self.flat, rstart, rcount, lb, pad, self.tile[outs[:, 0]], per.reshape(outs.shape))
        if field is not None:
            return field
        # an index per element: each part's runs' positions, then padding
        pos = np.repeat(rstart - np.cumsum(rcount) + rcount, rcount) + np.arange(int(rcount.sum()))
        filled = self.count[parts]
        valid = (np.arange(lb) < filled[:, None]).reshape(*outs.shape, lb)
        idx = np.zeros(valid.shape, np.int64)
        idx[valid] = pos
        if valid.all():
            return rows(self.flat, idx)
        return padded_rows(self.flat, idx, valid, pad, self.tile[outs[:, 0]])

    def kernel(self, cs: ComputeSet, out: Tensor, op_name: str, scale: float) -> None:
        """``_add_kernel``: every group has ``size`` members, one row of the flattened source each."""
        n = out.numel()
        if self.flat.affine is None:  # a factored view: its rows stay a view, not an index per element
            members = self.flat.reshape(n, self.size)
        else:
            members = self.flat.pattern_rows(np.arange(n) * self.size, (self.size,), (1,))
        fields = {"in": members, "out": out.reshape(n, 1)}
        self.graph.add_kernel(cs, REDUCE_CODELETS[op_name], fields, scale=float(scale))


def _kept_stage_fields(batches: list[tuple[Tensor, np.ndarray]], read: recall.Read) -> list[Any] | None:
    """A stage's batches as remembered: fields by ``recall.unbound``, the padding's offsets (its
    tiles) counted from ``read.pad_base``; None when a field cannot be."""
    kept = []
    for field, outs in batches:
        unbound = recall.unbound(field, read.variables)
        moved = None if unbound is None else _pad_moved(unbound, -read.pad_base)
        if moved is None:
            return None
        outs.flags.writeable = False
        kept.append((moved, outs))
    return kept


def _stage_fields_rebuilt(graph: Graph, kept: list[Any], read: recall.Read) -> list[tuple[Tensor, np.ndarray]]:
    rebuilt = []
    for unbound, outs in kept:
        moved = _pad_moved(unbound, read.pad_base)
        assert moved is not None, "a kept stage field was moved once already"
        rebuilt.append((recall.bound(graph, moved, read.variables), outs))
    return rebuilt


# the padding's place among a stage's variables (``_RunPairs._fields`` asks about [flat, pad]): after
# the flattened source's one variable
_PAD_PLACE = 1


def _pad_moved(unbound: tuple[Any, Any, np.dtype], delta: int) -> tuple[Any, Any, np.dtype] | None:
    """A field as ``recall.unbound`` keeps it with the padding's offsets moved by ``delta`` (the
    padding variable holds a tile's element at the tile's offset); None for a field held otherwise."""
    var, lay, dtype = unbound
    if delta == 0:
        return unbound
    if isinstance(lay, VarRuns):
        on_pad = lay.var == _PAD_PLACE
        if not on_pad.any():
            return unbound
        start = lay.runs.start.astype(np.int64)
        start[on_pad] += delta
        return var, VarRuns(dataclasses.replace(lay.runs, start=start), lay.var), dtype
    if isinstance(var, np.ndarray) and isinstance(lay, np.ndarray):
        idx = lay.astype(np.int64)
        idx[var == _PAD_PLACE] += delta
        idx = idx.astype(lay.dtype)
        idx.flags.writeable = False
        return var, idx, dtype
    if isinstance(var, int) and var != _PAD_PLACE:
        return unbound
    return None


def _kept_pairs(pairs: tuple[Any, ...], read: recall.Read) -> tuple[Any, ...]:
    """Pairs as remembered: tiles by ``read.kept_tiles``; the other arrays, now read by every layer
    that finds these pairs, made read-only."""
    group, tile, start, count, ranges = pairs
    for a in (group, start, count, *(ranges or ())):
        a.flags.writeable = False
    return group, read.kept_tiles(tile), start, count, ranges


def _pairs_of_runs(
    graph: Graph, flat: Tensor, size: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray] | None]:
    """``_RunPairs.find``'s pairs of ``flat`` (an affine or grouped view): (group, tile, start,
    count, ranges) as ``_RunPairs`` takes them."""
    nt, n = graph.target.num_tiles, flat.numel()
    first, tile = _runs_and_groups(graph, flat, size)
    key = (first // size) * nt + tile.astype(np.int64)
    order = np.argsort(key, kind="stable")  # a pair's runs stay in order of their first element
    sk = key[order]
    count = np.diff(np.append(first, n))[order]
    new = np.ones(sk.size, dtype=bool)
    new[1:] = sk[1:] != sk[:-1]
    if new.all():  # a run to a pair
        return sk // nt, sk % nt, first[order], count, None
    head = np.flatnonzero(new)
    runs = np.diff(np.append(head, sk.size))
    total = np.add.reduceat(count, head)
    return sk[head] // nt, sk[head] % nt, first[order], total, (head, runs, count)


def _runs_and_groups(graph: Graph, flat: Tensor, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(first element, tile) of each run of ``flat``'s elements that lie on one tile within one group of
    ``size``: a run starts where a group begins or the tile changes. From the mapping's runs when
    ``flat`` is a whole variable or a view whose inner dims read runs of it (Graph.view_runs: scores
    stored in column chunks), else from a tile per element."""
    n = flat.numel()
    runs = graph.view_runs(flat)
    if runs is not None:
        mapped, tiles = runs
        first = np.concatenate([mapped, np.arange(0, n, size)])
        first.sort(kind="stable")
        first = first[np.append(True, first[1:] != first[:-1])]
        return first, tiles[np.searchsorted(mapped, first, side="right") - 1]
    tiles = graph.tile_of(flat)
    new_run = np.empty(n, dtype=bool)
    new_run[0] = True
    np.not_equal(tiles[1:], tiles[:-1], out=new_run[1:])
    new_run[::size] = True
    first = np.flatnonzero(new_run)
    return first, tiles[first]


def reduce_groups(
    graph: Graph,
    src: Tensor,
    member: np.ndarray,
    group: np.ndarray,
    out: Tensor,
    op_name: str,
    prog: Prog,
    scale: float = 1.0,
    partials_dtype: object | None = None,
) -> dict[str, int]:
    """out[g] = scale * op(src.flat[member[group == g]]) for every g (groups must be non-empty).

    Returns the plan (stages, largest number of partials per output) for the debug context.
    """
    _check_op(op_name)
    if np.bincount(group, minlength=out.numel()).min(initial=1) == 0:
        raise OpError("reduce: every output needs at least one input")
    pairs = _ElementPairs(graph, src, member, group)
    return _reduce_pairs(graph, pairs, out, src.dtype, op_name, prog, scale, partials_dtype)


def reduce_consecutive(
    graph: Graph, src: Tensor, size: int, out: Tensor, op_name: str, prog: Prog, scale: float = 1.0
) -> dict[str, int]:
    """``reduce_groups`` of groups of ``size`` consecutive elements of ``src`` (flattened): group g
    is elements ``[g * size, (g + 1) * size)``. Planned per run of elements on one tile when it can
    (``_RunPairs``), else per element; the plan is the same."""
    _check_op(op_name)
    pairs = _RunPairs.find(graph, src, size)
    if pairs is None:
        member = np.arange(src.numel(), dtype=np.int64)
        group = np.repeat(np.arange(out.numel(), dtype=np.int64), size)  # member // size, without a division
        return reduce_groups(graph, src, member, group, out, op_name, prog, scale)
    return _reduce_pairs(graph, pairs, out, src.dtype, op_name, prog, scale, None)


def _check_op(op_name: str) -> None:
    if op_name not in REDUCE_CODELETS:
        raise OpError(f"reduce: unknown operation {op_name!r}; known: {', '.join(REDUCE_CODELETS)}")


def _reduce_pairs(
    graph: Graph,
    pairs: _ElementPairs | _RunPairs,
    out: Tensor,
    src_dtype: np.dtype,
    op_name: str,
    prog: Prog,
    scale: float,
    partials_dtype: object | None,
) -> dict[str, int]:
    """The stages after the (group, tile) pairs: one when each group is one pair on its output's
    tile, else the pairs' partials reduced in further stages (see the module's docstring)."""
    flat_out = out.reshape(-1)
    n_groups = flat_out.numel()
    pdt = as_dtype(partials_dtype) if partials_dtype is not None else float_accumulator(src_dtype)
    out_tiles = graph.tile_of(flat_out).astype(np.int64)
    pair_group, pair_tile = pairs.group, pairs.tile
    stages, max_partials = 1, 1
    if pair_group.size == n_groups and np.array_equal(pair_tile, out_tiles[pair_group]):
        # one pair per group: pair_group is 0, 1, ..., so the pairs are the outputs
        cs = pairs.stage(flat_out, op_name, prog, "reduce", scale)
        pairs.kernel(cs, flat_out, op_name, scale)
        return {"stages": 1, "max_partials_per_output": 1}
    partial = _per_tile(graph, pdt, pair_tile, "reduce partials")
    graph.defer_kernel(pairs.stage(partial, op_name, prog, "reduce/stage1"))
    # the first stage squares (SQUARE_ADD), the later ones add its partials (popops' reduction
    # stages apply the operation's own first step only to the input, lib/popops/reduction)
    later = "add" if op_name == "square_add" else op_name
    cur, cur_group, cur_tile = partial, pair_group, pair_tile
    while True:
        stages += 1
        per_group = np.bincount(cur_group, minlength=n_groups)
        depth = int(per_group.max())
        max_partials = max(max_partials, depth)
        if depth < SINGLE_STAGE_MAX_PARTIALS:
            cs = _reduce_stage(
                graph, cur, np.arange(cur.numel()), cur_group, out_tiles, flat_out, later, prog,
                f"reduce/stage{stages}", scale,
            )  # fmt: skip
            pairs.kernel(cs, flat_out, op_name, scale)
            return {"stages": stages, "max_partials_per_output": max_partials}
        # an intermediate stage: chunks of ~sqrt(depth) partials, each reduced where its first lies
        chunk = int(np.ceil(np.sqrt(depth)))
        order = np.argsort(cur_group, kind="stable")
        g_sorted = cur_group[order]
        first = np.concatenate(([0], np.cumsum(per_group)[:-1]))
        rank = np.arange(order.size) - first[g_sorted]
        ckey = g_sorted * (depth // chunk + 2) + rank // chunk
        uck, chunk_of = np.unique(ckey, return_inverse=True)
        chunk_first = np.zeros(uck.size, dtype=np.int64)
        chunk_first[chunk_of[::-1]] = order[::-1]  # first member of each chunk (lowest rank wins)
        ctile = cur_tile[chunk_first]
        nxt = _per_tile(graph, pdt, ctile, f"reduce partials {stages}")
        members = order
        graph.defer_kernel(
            _reduce_stage(graph, cur, members, chunk_of, ctile, nxt, later, prog, f"reduce/stage{stages}")
        )
        cur, cur_group, cur_tile = nxt, cur_group[chunk_first], ctile


def _per_tile(graph: Graph, dtype: np.dtype, tiles: np.ndarray, name: str) -> Tensor:
    """A variable of one partial per entry of ``tiles`` (element i on ``tiles[i]``), stored tile by
    tile: PopLibs keeps a reduction's intermediate partials in a tensor per tile (popops
    IntermediatePartials), so a tile's partials are one region, and the partials of neighbouring
    groups a reducer takes from one tile arrive as one region rather than one per element. Returns
    the view in ``tiles``' order."""
    order = np.argsort(tiles, kind="stable")
    var = graph.add_variable(dtype, [tiles.size], name)
    graph.set_tile_mapping(var, tiles[order])
    if (order[1:] > order[:-1]).all():  # already tile by tile
        return var
    where = np.empty_like(order)
    where[order] = np.arange(order.size)
    return var[where]


def _axes(rank: int, axes: int | Sequence[int] | None) -> tuple[int, ...]:
    if axes is None:
        return tuple(range(rank))
    ax = (axes,) if isinstance(axes, int) else tuple(axes)
    if any(not -rank <= a < max(rank, 1) for a in ax):
        raise OpError(f"reduce: axes {ax} out of range for a tensor of rank {rank}")
    return tuple(sorted({a % rank if rank else 0 for a in ax}))


@op("Reduce")
def reduce(
    graph: Graph,
    x: Tensor,
    axes: int | Sequence[int] | None,
    prog: Prog,
    op_name: str = "add",
    scale: float = 1.0,
    out_dtype: object | None = None,
    keepdims: bool = False,
) -> Tensor:
    """``scale * op(x)`` over ``axes`` (None = all); op is "add", "max" or "min"; ``mean`` is
    ``reduce(..., scale=1/count)``. The result is mapped linearly over the tiles."""
    ax = _axes(x.rank, axes)
    kept = tuple(a for a in range(x.rank) if a not in ax)
    out_shape = tuple(x.shape[a] for a in kept)
    r = int(np.prod([x.shape[a] for a in ax], dtype=np.int64))
    if r == 0:
        raise OpError(f"reduce: nothing to reduce over axes {ax} of shape {x.shape}")
    dt = x.dtype if out_dtype is None else as_dtype(out_dtype)
    out = graph.add_variable(dt, out_shape, "reduce")
    graph.map_linearly(out)
    xt = x.transpose(*(kept + ax)) if x.rank else x
    plan = reduce_consecutive(graph, xt, r, out, op_name, prog, scale)
    set_attributes(graph, {"op": op_name, "axes": list(ax), **plan})
    if keepdims:
        return out.reshape(tuple(1 if a in ax else s for a, s in enumerate(x.shape)))
    return out


def _by_use(graph: Graph, src: Tensor, size: int) -> np.ndarray:
    """A tile for each group of ``size`` consecutive elements of ``src``: the one holding most of
    them (the first such), as poputil's ``createBroadcastOperand`` maps a norm's statistics to the
    tiles using them (TileMapping.cpp: by use, constrained to the used tiles), so the whitening's
    broadcasts are mostly on-tile. PopLibs balances a group used on several tiles among them, in
    grains of a data-path width; here each group takes one tile [INF]."""
    flat, nt = src.reshape(-1), graph.target.num_tiles
    first, tile = _runs_and_groups(graph, flat, size)
    count = np.diff(np.append(first, flat.numel()))
    # elements of each (group, tile), a group's runs on one tile summed
    pair, inverse = np.unique((first // size) * nt + tile.astype(np.int64), return_inverse=True)
    held = np.bincount(inverse, weights=count).astype(np.int64)
    group, on = pair // nt, pair % nt
    best = np.lexsort((-held, group))  # by group, the tile holding most first
    lead = np.ones(best.size, dtype=bool)
    lead[1:] = group[best][1:] != group[best][:-1]
    return on[best[lead]]


@op("ReduceMany")
def reduce_many(
    graph: Graph, x: Tensor, axes: int | Sequence[int] | None, prog: Prog,
    reductions: Sequence[tuple[str, float, object | None]], by_use: bool = False,
) -> list[Tensor]:  # fmt: skip
    """Several reductions of ``x`` over ``axes`` at once, as popops::reduceMany runs them: each
    ``(op, scale, out_dtype)`` gives ``scale * op(x)`` (op "add", "square_add", "max" or "min";
    out_dtype None: x's), each stage of all of them one compute set (so one exchange and one sync a
    stage, not one per reduction). The results are mapped linearly like ``reduce``'s, or with
    ``by_use`` each where its group of ``x`` lies (``_by_use``)."""
    ax = _axes(x.rank, axes)
    kept = tuple(a for a in range(x.rank) if a not in ax)
    out_shape = tuple(x.shape[a] for a in kept)
    r = int(np.prod([x.shape[a] for a in ax], dtype=np.int64))
    if r == 0 or not reductions:
        raise OpError(f"reduce_many: nothing to reduce over axes {ax} of shape {x.shape}")
    xt = x.transpose(*(kept + ax)) if x.rank else x
    shared, outs, plans = _SharedSets(), [], []
    where = _by_use(graph, xt, r) if by_use else None
    for i, (op_name, scale, out_dtype) in enumerate(reductions):
        dt = x.dtype if out_dtype is None else as_dtype(out_dtype)
        out = graph.add_variable(dt, out_shape, f"reduce {op_name}")
        if where is None:
            graph.map_linearly(out)
        else:
            graph.set_tile_mapping(out, where)
        shared.next = None if i == 0 else 0
        token = _SHARED.set(shared)
        try:  # the same input, groups and output mapping: the same stages as the first
            plans.append(reduce_consecutive(graph, xt, r, out, op_name, prog, scale))
        finally:
            _SHARED.reset(token)
        if i and shared.next != len(shared.sets):
            raise OpError("reduce_many: a reduction planned fewer stages than the first one")
        outs.append(out)
    set_attributes(graph, {"ops": [op for op, _, _ in reductions], "axes": list(ax), **plans[0]})
    return outs


def reduce_sum(graph: Graph, x: Tensor, axes, prog: Prog, debug_name: str = "", **kw) -> Tensor:  # type: ignore[no-untyped-def]
    return reduce(graph, x, axes, prog, op_name="add", debug_name=debug_name or "reduce_sum", **kw)


def reduce_max(graph: Graph, x: Tensor, axes, prog: Prog, debug_name: str = "", **kw) -> Tensor:  # type: ignore[no-untyped-def]
    return reduce(graph, x, axes, prog, op_name="max", debug_name=debug_name or "reduce_max", **kw)


def reduce_mean(graph: Graph, x: Tensor, axes, prog: Prog, debug_name: str = "", **kw) -> Tensor:  # type: ignore[no-untyped-def]
    ax = _axes(x.rank, axes)
    count = int(np.prod([x.shape[a] for a in ax], dtype=np.int64))
    return reduce(graph, x, axes, prog, op_name="add", scale=1.0 / count, debug_name=debug_name or "reduce_mean", **kw)


@op("ReduceGrad")
def reduce_sum_grad(
    graph: Graph, dy: Tensor, input_shape: Sequence[int], axes: int | Sequence[int] | None, prog: Prog,
    scale: float = 1.0,
) -> Tensor:  # fmt: skip
    """Gradient of ``reduce(x, axes, scale=scale)`` (sum or mean): ``scale * dy`` broadcast back to
    ``input_shape``."""
    shape = tuple(input_shape)
    ax = _axes(len(shape), axes)
    kept = tuple(1 if a in ax else s for a, s in enumerate(shape))
    g = broadcast(graph, dy.reshape(kept), shape, prog)
    return g if scale == 1.0 else scale_op(graph, g, scale, prog)
