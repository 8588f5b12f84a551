"""Vertex fields over what each tile holds, built from tile-mapping intervals (no index per element).

An elementwise op puts one vertex on every tile that holds part of its result, and each of its
fields is that tile's part of one operand. Poplar connects such a field to a list of regions; here
the regions come from the result variable's mapping intervals walked in the result's storage
order, and every operand's part is the same positions in its own view, as runs (profiler.poplar.layout.Runs:
step 1, or step 0 for a broadcast operand). Host cost follows rows and intervals, never elements.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from profiler.host import sorting
from profiler.host.sorting import stable_order
from profiler.poplar.layout import Affine, Factored, Runs, common_factors
from profiler.poplar.tensor import RUNS_WORTH_IT, Tensor
from profiler.poplar.variables import TileMapping, VariableStore

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


Batches = list[tuple[np.ndarray, list[Tensor]]]


def fields_by_tile(graph: VariableStore, tensors: Sequence[Tensor]) -> Batches | None:
    """Vertex batches over the tiles holding ``tensors[0]``: for each distinct number of elements
    per tile (ascending), (tiles ascending, [field of each tensor, shaped [vertices, elements]]),
    vertex v's fields holding the same positions of every tensor - those of tensors[0] on tiles[v].

    All tensors have one shape and are affine views of one variable each. None when that does not
    hold, or when the runs would be short (the caller's per-element path is then as small).

    What this reads is the views, which of them share a variable, the variables' sizes and the first
    one's mapping (``profiler.ops.core.vertex_fields`` remembers it so)."""
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
    if last < SHORT_ROW and not any(periods):
        kinds = _short_row_kinds(shape, strides)
        if kinds is not None:
            return _band_batches(graph, tensors, vids, affs, size, shape, strides, kinds)
    row_off = [_row_offsets(a.offset, shape[:-1], st[:-1]) for a, st in zip(affs, strides, strict=True)]
    # cut each row of tensors[0] (contiguous in its variable) at its mapping's interval starts
    cut = _cut(graph.variables[vids[0]].mapping, row_off[0], last)
    total = cut[0].size
    if total * RUNS_WORTH_IT > size:
        return None
    piece_row, begin, length, piece_tile = cut
    if piece_tile.min() < 0:
        return None  # unmapped: the per-element path reports it
    for p in set(periods) - {0}:  # a periodic field's runs start on a period (read from the row's start)
        if (begin % p).any() or (length % p).any():
            return None
    batches = []
    itype = _index_type(graph, vids)
    for vtiles, take, row_first, w in _tile_rows(piece_tile, length):
        # a broadcast operand makes runs as short as its period (16 channels of a per-channel scale):
        # positions / 16 runs, held as int32 where the variables' offsets fit (half the memory)
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
                    blocked[key] = _row_blocks(made[key], lengths, begin[take], row_first, w, last, st[-2])
                fields.append(Tensor(t.graph, vid, blocked[key], t.dtype))
                continue
            period = np.broadcast_to(itype(p), lengths.shape) if p else None
            runs = Runs(made[key], lengths, steps, row_first, w, period=period)
            fields.append(Tensor(t.graph, vid, runs, t.dtype))
        batches.append((vtiles, fields))
    return batches


def _index_type(graph: VariableStore, vids: Sequence[int]) -> type[np.integer]:
    """int32 where every variable's offsets fit (half the memory of a run's start and length)."""
    return np.int32 if max(graph.variables[v].numel for v in vids) < 2**31 else np.int64


def _cut(mapping: TileMapping, p0: np.ndarray, last: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Rows of ``last`` consecutive elements from ``p0`` (one per row) cut at the mapping's interval
    starts: (row, first position in the row, length, tile) of each piece, row by row."""
    starts, tiles = mapping.starts, mapping.tiles
    ends = np.append(starts[1:], mapping.n)
    rows = p0.size
    lo = np.searchsorted(starts, p0, side="right") - 1
    # most rows end inside the interval they start in: only those crossing an interval end are searched
    hi = lo.copy()
    cross = np.flatnonzero((lo < 0) | (p0 + last > ends[np.maximum(lo, 0)]))
    if cross.size:
        hi[cross] = np.searchsorted(starts, p0[cross] + last - 1, side="right") - 1
    count = hi - lo + 1
    total = int(count.sum())
    if total == rows:  # every row inside one interval (the usual case): a piece per row, whole
        return np.arange(rows, dtype=np.int64), np.zeros(rows, dtype=np.int64), np.full(rows, last, np.int64), tiles[lo]
    piece_row = np.repeat(np.arange(rows, dtype=np.int64), count)
    iv = lo[piece_row] + np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(count) - count, count)
    begin = np.maximum(starts[iv], p0[piece_row]) - p0[piece_row]
    length = np.minimum(ends[iv], p0[piece_row] + last) - p0[piece_row] - begin
    return piece_row, begin, length, tiles[iv]


def _tile_rows(piece_tile: np.ndarray, length: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, int]]:
    """The vertices over the pieces, a tile each, batched by width (ascending): (tiles, the pieces of
    each tile in turn, each vertex's first piece among them and one past the last, width)."""
    order = stable_order(piece_tile)
    utiles, first, per_tile = np.unique(piece_tile[order], return_index=True, return_counts=True)
    width = np.add.reduceat(length[order], first)
    for w in sorting.unique(width):
        sel = np.flatnonzero(width == w)
        take = order[_ranges(first[sel], per_tile[sel])]  # the selected tiles' pieces, tile by tile
        row_first = np.concatenate(([0], np.cumsum(per_tile[sel]))).astype(np.int64)
        yield utiles[sel].astype(np.int64), take, row_first, int(w)


# How a view reads a stretch of short storage rows (``_band_batches``), by its strides over the
# rows and within a row: consecutive elements, blocks a row ``stride`` apart (Runs.block), a row's
# element repeated along it (Runs.repeat) or one element throughout
_PLAIN, _BLOCK, _REPEAT, _SAME = range(4)


def _short_row_kinds(shape: list[int], strides: list[list[int]]) -> list[int] | None:
    """Each view's kind (above) when the first view's short rows are contiguous (a grouped store's
    part in one group: ``{C/ocpg, rows, ocpg}``) and every view is one of the kinds; else None."""
    last = shape[-1]
    if len(shape) < 2 or strides[0][-2] != last:
        return None
    kinds = []
    for st in strides:
        across, within = st[-2], st[-1]
        if within == 1:
            kinds.append(_PLAIN if across == last else _BLOCK)
        elif within == 0 and across in (0, 1):
            kinds.append(_SAME if across == 0 else _REPEAT)
        else:
            return None
    return kinds


def _band_batches(
    graph: VariableStore, tensors: Sequence[Tensor], vids: Sequence[int], affs: Sequence[Affine], size: int,
    shape: list[int], strides: list[list[int]], kinds: list[int],
) -> list[tuple[np.ndarray, list[Tensor]]] | None:  # fmt: skip
    """``_batches`` over short storage rows (``shape[-1]`` < SHORT_ROW: a matmul result held in
    groups of 8 or 16 columns) contiguous in the first view: each stretch of rows one mapping
    interval holds (``shape[-2]`` rows a band) is one run of every field, by the views' kinds
    (``_short_row_kinds``), where a piece a row took a run a row; a piece starting inside a row
    gives that row's part its own run. Per interval, never per row: the attention scores held as
    PopLibs creates them have 16 elements a row, 8 M rows a layer at S = 2,048."""
    last, band = shape[-1], shape[-2] * shape[-1]
    row_off = [_row_offsets(a.offset, shape[:-2], st[:-2]) for a, st in zip(affs, strides, strict=True)]
    piece_band, begin, length, piece_tile = _cut(graph.variables[vids[0]].mapping, row_off[0], band)
    # the pieces a row at a time would make (``_batches``): the same test of whether runs are worth it
    rows_touched = -(-(begin + length) // last) - begin // last
    if int(rows_touched.sum()) * RUNS_WORTH_IT > size:
        return None
    if piece_tile.min() < 0:
        return None  # unmapped: the per-element path reports it
    head = np.where(begin % last > 0, np.minimum(length, last - begin % last), length)
    split = head < length  # a piece starting inside a row and running on: its first row's part alone
    if split.any():
        at = np.arange(begin.size, dtype=np.int64) + np.cumsum(split) - split
        n = begin.size + int(split.sum())
        pieces = [np.empty(n, np.int64) for _ in range(3)]
        for out, first, second in zip(pieces, (piece_band, begin, head), (piece_band, begin + head, length - head),
                                      strict=True):  # fmt: skip
            out[at] = first
            out[at[split] + 1] = second[split]
        tiles = np.empty(n, piece_tile.dtype)
        tiles[at], tiles[at[split] + 1] = piece_tile, piece_tile[split]
        (piece_band, begin, length), piece_tile = pieces, tiles
    batches = []
    itype = _index_type(graph, vids)
    for vtiles, take, row_first, w in _tile_rows(piece_tile, length):
        lengths = length[take].astype(itype)
        pb, b = piece_band[take], begin[take]
        fields = []
        made: dict[tuple[int, tuple[int, ...]], Runs] = {}  # fields laid out alike share their runs
        for t, vid, a, off, st, kind in zip(tensors, vids, affs, row_off, strides, kinds, strict=True):
            key = (a.offset, tuple(st))
            if key not in made:
                if kind == _REPEAT:  # the row's element, from the row the piece starts in
                    start = off[pb] + b // last
                elif kind == _SAME:
                    start = off[pb]
                else:
                    start = off[pb] + (b // last) * st[-2] + b % last
                made[key] = _band_runs(start.astype(itype), lengths, b, row_first, w, kind, last, st[-2])
            fields.append(Tensor(t.graph, vid, made[key], t.dtype))
        batches.append((vtiles, fields))
    return batches


def _band_runs(
    start: np.ndarray, length: np.ndarray, begin: np.ndarray, row_first: np.ndarray, width: int, kind: int,
    last: int, across: int,
) -> Runs:  # fmt: skip
    """A field of ``_band_batches``: its pieces (each from ``begin`` in its band, of ``last``-element
    rows ``across`` apart in this view) as runs of its kind, a piece joining the one before it on
    its vertex when it reads on where that one stopped (the next band's rows laid right after, as
    a whole variable's are); one run per vertex and stretch, as ``_row_blocks`` makes."""
    s, n = start.astype(np.int64), length.astype(np.int64)
    whole = (begin % last == 0) & (n % last == 0)  # whole rows: a run of blocks or repeats goes on after it
    cont = np.zeros(s.size, dtype=bool)
    if s.size > 1:
        if kind == _PLAIN:
            cont[1:] = s[1:] == s[:-1] + n[:-1]
        elif kind == _SAME:
            cont[1:] = s[1:] == s[:-1]
        else:
            per_row = across if kind == _BLOCK else 1
            cont[1:] = whole[:-1] & (begin[1:] % last == 0) & (s[1:] == s[:-1] + (n[:-1] // last) * per_row)
    cont[row_first[:-1][row_first[:-1] < s.size]] = False  # a vertex's first piece starts a run
    at = np.flatnonzero(~cont)
    merged = np.add.reduceat(length, at).astype(length.dtype) if at.size else length[:0]
    steps = np.broadcast_to(np.int64(kind in (_PLAIN, _BLOCK)), at.shape)
    firsts = np.searchsorted(at, row_first).astype(np.int64)
    block, stride = (last, across) if kind == _BLOCK else (0, 0)
    return Runs(start[at], merged, steps, firsts, width, block=block, stride=stride,
                repeat=last if kind == _REPEAT else 0)  # fmt: skip


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
