"""Vertex fields over what each tile holds, built from tile-mapping intervals (no index per element).

An elementwise op puts one vertex on every tile that holds part of its result, and each of its
fields is that tile's part of one operand. Poplar connects such a field to a list of regions; here
the regions come from the result variable's mapping intervals walked in the result's storage
order, and every operand's part is the same positions in its own view, as runs (profiler.poplar.layout.Runs:
step 1, or step 0 for a broadcast operand). Host cost follows rows and intervals, never elements.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from profiler.poplar.layout import Affine, Factored, Runs, common_factors
from profiler.poplar.tensor import RUNS_WORTH_IT, Tensor
from profiler.poplar.variables import VariableStore

# Storage rows shorter than this (a matmul result stored in groups of 16 columns) are read as runs
# of blocks across rows (Runs.block), not a run a row: 16 elements a run was ~6 B an element kept
SHORT_ROW = 64


def _storage_dims(affs: Sequence[Affine]) -> tuple[list[int], list[list[int]]] | None:
    """The views' common shape in the first view's storage order (dims by decreasing stride), with
    neighbouring dims merged where every view is regular across them; None if the first view is not
    one-to-one with non-negative strides."""
    first = affs[0]
    dims = sorted((d for d, n in enumerate(first.shape) if n != 1), key=lambda d: -first.strides[d])
    if any(first.strides[d] <= 0 for d in dims):
        return None
    shape = [first.shape[d] for d in dims]
    strides = [[a.strides[d] for d in dims] for a in affs]
    for k in range(len(dims) - 1):  # one-to-one: no element of the first view is reached twice
        if first.strides[dims[k]] < first.strides[dims[k + 1]] * shape[k + 1]:
            return None
    m_shape: list[int] = []
    m_strides: list[list[int]] = [[] for _ in affs]
    for k, n in enumerate(shape):
        if m_shape and all(st[-1] == s[k] * n for st, s in zip(m_strides, strides, strict=True)):
            m_shape[-1] *= n
            for st, s in zip(m_strides, strides, strict=True):
                st[-1] = s[k]
            continue
        m_shape.append(n)
        for st, s in zip(m_strides, strides, strict=True):
            st.append(s[k])
    return m_shape, m_strides


def _row_offsets(offset: int, shape: Sequence[int], strides: Sequence[int]) -> np.ndarray:
    off = np.full(1, offset, dtype=np.int64)
    for n, s in zip(shape, strides, strict=True):
        off = (off[:, None] + np.arange(n, dtype=np.int64) * s).reshape(-1)
    return off


def fields_by_tile(graph: VariableStore, tensors: Sequence[Tensor]) -> list[tuple[np.ndarray, list[Tensor]]] | None:
    """Vertex batches over the tiles holding ``tensors[0]``: for each distinct number of elements
    per tile (ascending), (tiles ascending, [field of each tensor, shaped [vertices, elements]]),
    vertex v's fields holding the same positions of every tensor - those of tensors[0] on tiles[v].

    All tensors have one shape and are affine views of one variable each. None when that does not
    hold, or when the runs would be short (the caller's per-element path is then as small)."""
    lays: list[Affine | Factored] = []
    vids: list[int] = []
    for t in tensors:
        lay, vid = t._lay, t.single_variable()
        if not isinstance(lay, Affine | Factored) or vid is None:
            return None
        lays.append(lay)
        vids.append(vid)
    size = lays[0].size
    if size == 0 or any(a.shape != lays[0].shape for a in lays):
        return None
    plain = [a for a in lays if isinstance(a, Affine)]
    # grouped stores (a Factored view): walk common factor dims instead
    affs = plain if len(plain) == len(lays) else common_factors(lays)
    if affs is None:
        return None
    found = _storage_dims(affs)
    if found is None:
        return None
    shape, strides = found
    if not shape:  # one element: nothing to gain
        return None
    if strides[0][-1] != 1 or any(st[-1] not in (0, 1) for st in strides):
        return None
    periodic = _periodic(shape, strides)
    if periodic is not None:
        batches = _batches(graph, tensors, vids, affs, size, *periodic)
        if batches is not None:
            return batches
    return _batches(graph, tensors, vids, affs, size, shape, strides, [0] * len(affs))


def _periodic(shape: list[int], strides: list[list[int]]) -> tuple[list[int], list[list[int]], list[int]] | None:
    """The storage dims with the innermost one extended over the dims outside it that a per-channel
    operand repeats (stride 0 there, step 1 inside: it cycles through the same channels while the
    others run on); (shape, strides, period of each view: 0 for none) or None when no view repeats."""
    shape, strides = list(shape), [list(st) for st in strides]
    periods = [0] * len(strides)
    while len(shape) > 1:
        n, k = shape[-1], len(shape) - 2
        regular = [st[k] == st[-1] * n and periods[j] == 0 for j, st in enumerate(strides)]
        repeats = [st[k] == 0 and st[-1] == 1 for st in strides]
        if not regular[0] or not all(r or p for r, p in zip(regular, repeats, strict=True)):
            break
        for j, st in enumerate(strides):
            if not regular[j]:
                periods[j] = periods[j] or n
            del st[k]
        shape[-2:] = [shape[k] * n]
    return (shape, strides, periods) if any(periods) else None


def _batches(
    graph: VariableStore, tensors: Sequence[Tensor], vids: Sequence[int], affs: Sequence[Affine], size: int,
    shape: list[int], strides: list[list[int]], periods: list[int],
) -> list[tuple[np.ndarray, list[Tensor]]] | None:  # fmt: skip
    """fields_by_tile's batches over the storage dims ``shape`` (each view's ``strides``; a view with
    a period cycles through that many elements along the innermost dim); None when the runs would be
    short, or when a piece would start or end inside a period. ``vids``: the tensors' variables."""
    last = shape[-1]
    rows = size // last
    if rows * RUNS_WORTH_IT > size:
        return None
    row_off = [_row_offsets(a.offset, shape[:-1], st[:-1]) for a, st in zip(affs, strides, strict=True)]
    # cut each row of tensors[0] (contiguous in its variable) at its mapping's interval starts
    mapping = graph.variables[vids[0]].mapping
    starts, tiles = mapping.starts, mapping.tiles
    ends = np.append(starts[1:], mapping.n)
    p0 = row_off[0]
    lo = np.searchsorted(starts, p0, side="right") - 1
    # most rows end inside the interval they start in: only those crossing an interval end are searched
    hi = lo.copy()
    cross = np.flatnonzero((lo < 0) | (p0 + last > ends[np.maximum(lo, 0)]))
    if cross.size:
        hi[cross] = np.searchsorted(starts, p0[cross] + last - 1, side="right") - 1
    count = hi - lo + 1
    total = int(count.sum())
    if total * RUNS_WORTH_IT > size:
        return None
    if total == rows:  # every row inside one interval (the usual case): a piece per row, whole
        piece_row = np.arange(rows, dtype=np.int64)
        iv = lo
        begin = np.zeros(rows, dtype=np.int64)
        length = np.full(rows, last, dtype=np.int64)
    else:
        piece_row = np.repeat(np.arange(rows, dtype=np.int64), count)
        iv = lo[piece_row] + np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(count) - count, count)
        begin = np.maximum(starts[iv], p0[piece_row]) - p0[piece_row]
        length = np.minimum(ends[iv], p0[piece_row] + last) - p0[piece_row] - begin
    piece_tile = tiles[iv]
    if piece_tile.min() < 0:
        return None  # unmapped: the per-element path reports it
    for p in set(periods) - {0}:  # a periodic field's runs start on a period (read from the row's start)
        if (begin % p).any() or (length % p).any():
            return None
    order = np.argsort(piece_tile, kind="stable")
    utiles, first, per_tile = np.unique(piece_tile[order], return_index=True, return_counts=True)
    width = np.add.reduceat(length[order], first)
    batches = []
    for w in np.unique(width):
        sel = np.flatnonzero(width == w)
        take = order[_ranges(first[sel], per_tile[sel])]  # the selected tiles' pieces, tile by tile
        row_first = np.concatenate(([0], np.cumsum(per_tile[sel]))).astype(np.int64)
        # a broadcast operand makes runs as short as its period (16 channels of a per-channel scale):
        # positions / 16 runs, held as int32 where the variables' offsets fit (half the memory)
        itype = np.int32 if max(graph.variables[v].numel for v in vids) < 2**31 else np.int64
        lengths = length[take].astype(itype)  # shared by the fields: their runs line up
        fields = []
        made: dict[tuple[int, tuple[int, ...], int], np.ndarray] = {}  # fields laid out alike share starts
        blocked: dict[tuple[int, tuple[int, ...], int], Runs] = {}
        for t, vid, a, off, st, p in zip(tensors, vids, affs, row_off, strides, periods, strict=True):
            step = st[-1]
            # one step for all of a field's runs: a read-only broadcast, no array per run
            steps = np.broadcast_to(np.int64(step), lengths.shape)
            key = (a.offset, tuple(st), p)  # an op's output is laid out as its input (a clone): same runs
            if key not in made:
                made[key] = (off[piece_row[take]] + (0 if p else begin[take] * step)).astype(itype)
            if last < SHORT_ROW and len(st) > 1 and step == 1 and not p:
                if key not in blocked:
                    blocked[key] = _row_blocks(made[key], lengths, begin[take], row_first, int(w), last, st[-2])
                fields.append(Tensor(t.graph, vid, blocked[key], t.dtype))
                continue
            period = np.broadcast_to(itype(p), lengths.shape) if p else None
            runs = Runs(made[key], lengths, steps, row_first, int(w), period=period)
            fields.append(Tensor(t.graph, vid, runs, t.dtype))
        batches.append((utiles[sel].astype(np.int64), fields))
    return batches


def _row_blocks(
    start: np.ndarray, length: np.ndarray, begin: np.ndarray, row_first: np.ndarray, width: int, last: int, stride: int
) -> Runs:
    """A field's pieces of short storage rows (``last`` elements: a store in groups of 16 columns)
    as runs of blocks (``Runs.block``): a piece joins the one before it on its vertex when that
    one is a whole row and it starts a row ``stride`` after it; contiguous rows (``stride`` equal
    to ``last``) make plain runs. One run per vertex and stretch of rows, not one a row."""
    cont = np.zeros(start.size, dtype=bool)
    if start.size > 1:
        cont[1:] = (length[:-1] == last) & (begin[1:] == 0) & (np.diff(start.astype(np.int64)) == stride)
    cont[row_first[:-1][row_first[:-1] < start.size]] = False  # a vertex's first piece starts a run
    at = np.flatnonzero(~cont)
    merged = np.add.reduceat(length, at).astype(length.dtype) if at.size else length[:0]
    steps = np.broadcast_to(np.int64(1), at.shape)
    block, by = (0, 0) if stride == last else (last, stride)
    firsts = np.searchsorted(at, row_first).astype(np.int64)
    return Runs(start[at], merged, steps, firsts, width, block=block, stride=by)


def _ranges(first: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Concatenated ``arange(first[i], first[i] + count[i])`` without a Python loop."""
    total = int(count.sum())
    return np.repeat(first - (np.cumsum(count) - count), count) + np.arange(total, dtype=np.int64)
