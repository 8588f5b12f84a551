"""Regions: a vertex field as runs of consecutive elements of variables, as Poplar connects edges.

A field of ``V`` vertices (a tensor with a leading vertex dimension) becomes columnar arrays over
its regions: the global element id of each region's first element (``profiler.compiler.compile`` numbers
every variable's elements consecutively), its length and the vertex (row) that reads it. An
affine or blocked view gives its regions without touching elements: the cost follows the number
of regions, which is what Poplar's exchange code and vertex state follow too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from profiler.host.sorting import stable_order
from profiler.poplar.layout import Affine, Blocks, Factored, Runs, VarRuns, WindowBlocks
from profiler.poplar.tensor import Tensor


@dataclass
class Regions:
    """Region r covers global elements ``[start[r], start[r] + length[r])``, read or written by row ``owner[r]``."""

    start: np.ndarray  # int64
    length: np.ndarray  # int64
    owner: np.ndarray  # int64: the vertex (row of the field's leading dimension)

    # reads of a per-tile pad constant (convolution padding): runs of global elements of the input
    # whose tiles' pad elements are read (pad element of tile t: pad_first + t * pad_step)
    pad: Regions | None = None
    pad_first: int = 0
    pad_step: int = 1
    # rows that read the same block of a window read the same elements: when set, ``owner`` (here
    # and in ``pad``) numbers distinct blocks and row v reads block ``block[v]``'s regions, so that
    # the compiler cuts them at tile-mapping intervals once (``per_row`` gives a copy per row)
    block: np.ndarray | None = None

    @property
    def count(self) -> int:
        return int(self.start.size)

    def per_row(self) -> Regions:
        """These regions owned by rows: each block's regions once per row reading it."""
        if self.block is None:
            return self
        idx, row = rows_of_blocks(self.owner, self.block)
        out = Regions(self.start[idx], self.length[idx], row, pad_first=self.pad_first, pad_step=self.pad_step)
        if self.pad is not None:
            idx, row = rows_of_blocks(self.pad.owner, self.block)
            out.pad = Regions(self.pad.start[idx], self.pad.length[idx], row)
        return out

    def elements(self) -> int:
        return int(self.length.sum())


def rows_of_blocks(owner: np.ndarray, block: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Items owned by blocks (``owner[i]``) given to the rows reading them (row v reads block
    ``block[v]``): (item index, row) of every copy, row by row, each row's items in their order."""
    order = stable_order(owner)
    count = np.bincount(owner, minlength=int(block.max()) + 1 if block.size else 0)
    first = np.cumsum(count) - count
    per_row = count[block]
    within = np.arange(int(per_row.sum()), dtype=np.int64) - np.repeat(np.cumsum(per_row) - per_row, per_row)
    return order[np.repeat(first[block], per_row) + within], np.repeat(np.arange(block.size, dtype=np.int64), per_row)


def _distinct_blocks(lay: WindowBlocks) -> tuple[WindowBlocks, np.ndarray | None]:
    """The distinct blocks of ``lay`` (several vertices, e.g. of different output channels, read the
    same window block) and each row's among them; None when every block is distinct."""
    key = np.stack([lay.g, lay.r0, lay.c0], axis=1)
    distinct, first, block = np.unique(key, axis=0, return_index=True, return_inverse=True)
    if distinct.shape[0] == key.shape[0]:
        return lay, None
    return WindowBlocks(lay.window, lay.g[first], lay.r0[first], lay.c0[first], lay.rows, lay.cols), block.reshape(-1)


def _runs(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, int]:
    """(number of trailing dims that form one contiguous run, run length) of an affine block."""
    k, run = len(shape), 1
    while k > 0:
        n, s = shape[k - 1], strides[k - 1]
        if n == 1:
            k -= 1
            continue
        if s != run:  # run * 1 == run: the next dim continues the run only if its stride equals it
            break
        run *= n
        k -= 1
    return k, run


def _grid(offsets: np.ndarray, shape: tuple[int, ...], strides: tuple[int, ...]) -> np.ndarray:
    """offsets[:, None...] + every combination of ``shape`` x ``strides``, flattened per offset."""
    out = offsets.astype(np.int64).reshape(-1, 1)
    for n, s in zip(shape, strides, strict=True):
        out = (out[:, :, None] + np.arange(n, dtype=np.int64) * s).reshape(out.shape[0], -1)
    return out


def field_regions(t: Tensor, base: np.ndarray) -> Regions:
    """Regions of field ``t`` (leading dimension = vertices); ``base[v]`` is the global id of
    variable v's first element."""
    lay = t._lay
    var_base: np.ndarray | int = 0
    if isinstance(lay, VarRuns):  # runs of several variables (a rotary embedding's [-x2, x1]): per run
        var_base, lay = base[lay.var], lay.runs
    elif isinstance(lay, Runs):
        var_base = int(base[t._var])
    if isinstance(lay, Runs):
        per_row = np.diff(lay.row_first)
        owner = np.repeat(np.arange(per_row.size, dtype=np.int64), per_row)
        # a repeated element (step 0) is one element, however often the row reads it; a periodic run
        # reads its period's elements
        start = lay.start.astype(np.int64) + var_base  # int32 runs: global ids may pass 2^31
        length = np.where(lay.step == 0, 1, lay.length if lay.period is None else lay.period).astype(np.int64)
        if lay.block:  # runs of blocks: each block a region (the compiler cuts them at tile intervals)
            start, length, owner = _blocks(start, length, owner, lay.block, lay.stride)
            if lay.stride > lay.block:  # read across a store's groups: the set each row reads
                found = _row_sets(start, length, owner)
                if found is not None:
                    return found
        if lay.repeat:  # never made with ``block`` (tile_fields): a field is one or the other
            start, length, owner = _repeated(start, length, owner, lay)
        # a row's runs laid end to end in memory (an elementwise operand over whole rows) or reading
        # the same elements again (a broadcast operand, once per pixel) are one region
        keep, length = _joined(start, length, owner)
        return Regions(start[keep], length, owner[keep])
    if isinstance(lay, WindowBlocks):
        distinct, block = _distinct_blocks(lay)
        found = window_regions(distinct, base)
        if found is not None:
            found.block = block
            return found
        t = t._explicit()
        lay = t._lay
    if isinstance(lay, Factored) and lay.groups[0] == 1:  # the rows are one factor: walk the factors
        lay = lay.flat
    if isinstance(lay, Affine | Blocks):
        if isinstance(lay, Affine):
            offsets = lay.offset + np.arange(lay.shape[0], dtype=np.int64) * lay.strides[0]
            inner_shape, inner_strides = lay.shape[1:], lay.strides[1:]
        else:
            inner = lay.inner.flat if isinstance(lay.inner, Factored) else lay.inner
            offsets, inner_shape, inner_strides = lay.offsets, inner.shape, inner.strides
        # a field is a set of elements to the exchange: walk the block's dims by decreasing stride so
        # the stride-1 dim (if any) makes the runs, whatever the view's order (a transposed weight)
        dims = sorted(((n, st) for n, st in zip(inner_shape, inner_strides, strict=True) if n != 1),
                      key=lambda d: -abs(d[1]))  # fmt: skip
        inner_shape, inner_strides = tuple(d[0] for d in dims), tuple(d[1] for d in dims)
        k, run = _runs(inner_shape, inner_strides)
        v = offsets.size
        if v == 0 or run == 0 or 0 in inner_shape:
            return Regions(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
        starts = _grid(offsets, inner_shape[:k], inner_strides[:k])
        per = starts.shape[1]
        start = starts.reshape(-1) + int(base[t._var])
        owner = np.repeat(np.arange(v, dtype=np.int64), per)
        return Regions(start, np.full(start.size, run, dtype=np.int64), owner)
    # explicit indices: runs of consecutive elements within a row, along the last axis or, when that
    # gives fewer runs (an im2col block read down its rows), along the second (a field is a set of
    # elements to the exchange: the order within a row does not matter)
    v = t.shape[0] if t.rank else 0
    var_ids, idx = t.elements()
    gid = base[var_ids] + idx.astype(np.int64)
    if gid.size == 0:
        return Regions(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
    best = _explicit_runs(gid, v)
    if t.rank >= 3 and best[0].size * 2 > gid.size:
        alt = _explicit_runs(np.moveaxis(gid.reshape(t.shape), 1, -1).reshape(-1), v)
        best = alt if alt[0].size < best[0].size else best
    return Regions(*best)


def _row_sets(start: np.ndarray, length: np.ndarray, owner: np.ndarray) -> Regions | None:
    """Regions of blocks read across a store's groups (``Runs.block`` with a stride past the block: a
    transposed read of a store in groups of 16, one element or one group every ``stride``) as each
    row's set of elements, sorted, touching ones one region (``canonical`` of each row's, the rows
    packed apart in one key): a field is a set of elements to the exchange, and a row's runs at
    neighbouring starts cover whole blocks of the source (PopLibs moves them so and transposes on the
    tile, popops::rearrange::regroupTensor), where a region a block made up to 16 times the regions.
    Rows in order (``owner`` does not decrease); None when the packed key would pass int64."""
    if start.size == 0:
        return Regions(start, length, owner)
    lo = int(start.min())
    span = int((start + length).max()) - lo + 1  # a row's elements never reach the next row's key
    if (int(owner[-1]) + 1) * span >= 2**62:
        return None
    s, e = canonical(owner.astype(np.int64) * span + (start - lo), length)
    return Regions(s % span + lo, e - s, s // span)


def _blocks(
    start: np.ndarray, length: np.ndarray, owner: np.ndarray, block: int, stride: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Runs of blocks (``Runs.block``) as one run per block, in order: block k of a run starts
    ``k * stride`` after it and holds ``block`` elements, the last what is left."""
    n = -(-length // block)
    run = np.repeat(np.arange(start.size), n)
    k = np.arange(run.size, dtype=np.int64) - np.repeat(np.cumsum(n) - n, n)
    return start[run] + k * stride, np.minimum(block, length[run] - k * block), owner[run]


def _repeated(
    start: np.ndarray, length: np.ndarray, owner: np.ndarray, lay: Runs
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Regions with each step-0 run of ``Runs.repeat`` (``lay``; ``length`` is 1 there) given the
    consecutive elements it reads, ``n`` of them, as two regions: ``[start, n - 1)`` and the last
    element. A run a repeated element (a run per group) made ``n`` one-element regions, which
    ``_joined`` merges by comparing each with the region just before it; two keep those comparisons,
    the first element's with what precedes and the last's with what follows, so the joined regions
    are the same."""
    n = np.where(np.asarray(lay.step) == 0, -(-lay.length.astype(np.int64) // lay.repeat), 1)
    two = n > 1  # a region for the last element after a run of several
    if not two.any():
        return start, length, owner
    at = np.arange(start.size, dtype=np.int64) + np.cumsum(two) - two  # each run's first region
    total = start.size + int(two.sum())
    out_start, out_length = np.empty(total, np.int64), np.empty(total, np.int64)
    out_owner = np.empty(total, owner.dtype)
    out_start[at], out_length[at], out_owner[at] = start, np.where(two, n - 1, length), owner
    last = at[two] + 1
    out_start[last], out_length[last], out_owner[last] = start[two] + n[two] - 1, 1, owner[two]
    return out_start, out_length, out_owner


def _explicit_runs(gid: np.ndarray, rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    per = gid.size // max(rows, 1)
    brk = np.ones(gid.size, dtype=bool)
    np.not_equal(gid[1:], gid[:-1] + 1, out=brk[1:])
    brk[::per] = True
    first = np.flatnonzero(brk)
    length = np.diff(np.append(first, gid.size))
    return gid[first], length.astype(np.int64), first // per


def union_length(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """For intervals sorted by start: how many elements each adds to the union of those before it."""
    if start.size == 0:
        return np.zeros(0, np.int64)
    covered = np.maximum.accumulate(end)
    new = np.empty_like(covered)  # built in place: these arrays run to millions of pieces
    new[0] = start[0]
    np.maximum(start[1:], covered[:-1], out=new[1:])
    np.subtract(end, new, out=new)
    return np.maximum(new, 0, out=new)


def canonical(start: np.ndarray, length: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals as sorted, disjoint, non-touching (start, end) pairs."""
    if start.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    if bool((start[1:] >= start[:-1]).all()):  # regions mostly come in order: no sort
        # each start against the furthest end before it (a running maximum, itself in order)
        s, e = start, np.maximum.accumulate(start + length)
    else:
        # starts and ends sorted apart (numpy sorts values with SIMD; an argsort to keep the pairs
        # is ~7x dearer): between the i-th end and the (i+1)-th start nothing is covered exactly
        # when i starts and i ends lie at or before a point
        s, e = np.sort(start), np.sort(start + length)
    # the union is cut where a start lies past the end before it
    new = np.ones(s.size, dtype=bool)
    np.greater(s[1:], e[:-1], out=new[1:])
    first = np.flatnonzero(new)
    last = np.append(first[1:], s.size) - 1
    return s[first], e[last]


def _segments(
    rows: np.ndarray, start: np.ndarray, count: int, width: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each row's range ``[start, start + count)`` of a flattened (outer, width) axis cut where the
    outer index changes: (row, outer index, first and end inner index) of every segment."""
    first, last = start // width, (start + count - 1) // width
    n = last - first + 1
    row = np.repeat(rows, n)
    outer = np.repeat(first, n) + (np.arange(row.size) - np.repeat(np.cumsum(n) - n, n))
    lo = np.maximum(start[row], outer * width) - outer * width
    hi = np.minimum(start[row] + count, (outer + 1) * width) - outer * width
    return row, outer, lo, hi


def _position_units(
    start: np.ndarray, count: int, width: int, joins: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Output positions ``[start[i], start[i] + count)`` of each block i of a flattened (output
    row, width) axis as units: one per output row the block touches where ``joins[i]`` (its windows
    at neighbouring positions overlap or touch, so their union is one run), else one per position.
    Returns (block, output row, first and last position within the row) of every unit, in order."""
    row, outer, lo, hi = _segments(np.arange(start.size, dtype=np.int64), start, count, width)
    split = ~joins[row]
    if not split.any():
        return row, outer, lo, hi - 1
    n = np.where(split, hi - lo, 1)
    rep = np.repeat(np.arange(row.size), n)
    lo = lo[rep] + (np.arange(rep.size) - np.repeat(np.cumsum(n) - n, n))
    hi = np.where(split[rep], lo + 1, hi[rep])
    return row[rep], outer[rep], lo, hi - 1


def window_regions(lay: WindowBlocks, base: np.ndarray) -> Regions | None:
    """Regions of blocks of a convolution window without an index per element: runs along the
    output row (stride 1) or along the kernel row (dilation 1) of contiguous input rows, each split
    into the part inside the input and the padding around it. None when neither runs (the caller
    then uses the explicit form)."""
    w = lay.window
    x = w.x
    v = lay.g.size
    ms, ks = lay.rows, lay.cols
    if v == 0 or ms == 0 or ks == 0:
        return None
    if isinstance(x, Factored):  # a channel-grouped store: runs of each group's channels
        return _channel_regions(lay, base)
    bsz, c, h, wd = x.shape
    s_b, s_c, s_h, s_w = x.strides
    (kh, kw), (sh, sw), (ph, pw), (dh, dw), (ho, wo) = w.kernel, w.stride, w.padding, w.dilation, w.out
    cg = c // w.groups
    vid = np.arange(v, dtype=np.int64)
    if sw == 1 and s_w == 1:  # runs along the output row: segments of the block's rows within one (b, oh)
        sv, q, lo, hi = _segments(vid, lay.r0, ms, wo)
        kk = lay.c0[sv][:, None] + np.arange(ks)  # [segments, ks]
        b_, oh = (q // ho)[:, None], (q % ho)[:, None]
        c_, i, j = w.column(kk)
        ch = lay.g[sv][:, None] * cg + c_
        w_lo = lo[:, None] + j * dw - pw
        w_hi = (hi - 1)[:, None] + j * dw - pw + 1
        owner = np.broadcast_to(sv[:, None], kk.shape)
    elif dw == 1 and s_w == 1 and w.channel_group > 1:  # runs along the kernel row, per kernel row and channel
        # the block's columns ((c // grp) * kh * kw + i * kw + j) * grp + c % grp of one (i, c): a range of j
        grp = w.channel_group
        i_, c_ = np.divmod(np.arange(kh * cg, dtype=np.int64), cg)
        first_col = ((c_ // grp) * kh * kw + i_ * kw) * grp + c_ % grp  # column of j = 0
        j_lo = np.maximum(0, -(-(lay.c0[:, None] - first_col) // grp))  # [v, kh * cg]
        j_hi = np.minimum(kw - 1, (lay.c0[:, None] + ks - 1 - first_col) // grp)
        sv, pair = np.nonzero(j_hi >= j_lo)
        lo, hi = j_lo[sv, pair], j_hi[sv, pair] + 1
        # a unit: the block's positions along one output row, or one position when windows leave gaps
        u, q, ow0, ow1 = _position_units(lay.r0[sv], ms, wo, hi - lo >= sw)
        b_, oh = q // ho, q % ho
        ch, i = lay.g[sv[u]] * cg + c_[pair[u]], i_[pair[u]]
        w_lo = ow0 * sw + lo[u] - pw  # the union of the unit's windows along the input row
        w_hi = ow1 * sw + (hi - 1)[u] - pw + 1
        owner = sv[u]
    elif dw == 1 and s_w == 1:  # runs along the kernel row: each output position, segments of (c, i)
        sv, e, lo, hi = _segments(vid, lay.c0, ks, kw)
        u, q, ow0, ow1 = _position_units(lay.r0[sv], ms, wo, hi - lo >= sw)  # as in the branch above
        b_, oh = q // ho, q % ho
        ch, i = lay.g[sv[u]] * cg + e[u] // kh, e[u] % kh
        w_lo = ow0 * sw + lo[u] - pw
        w_hi = ow1 * sw + (hi - 1)[u] - pw + 1
        owner = sv[u]
    elif s_c == 1:  # channels innermost (NHWC storage): per output and kernel position, a run of channels
        return _channel_regions(lay, base)
    else:
        return None
    hh = oh * sh + i * dh - ph
    row = x.offset + int(base[w.x_var]) + b_ * s_b + ch * s_c  # global id of x[b, ch, 0, 0]
    row, hh, w_lo, w_hi, owner = (np.broadcast_to(a, owner.shape).reshape(-1) for a in (row, hh, w_lo, w_hi, owner))
    h_in = (hh >= 0) & (hh < h)
    hc = np.clip(hh, 0, h - 1)
    wa, wb = np.clip(w_lo, 0, wd), np.clip(w_hi, 0, wd)
    inside = h_in & (wb > wa)
    start, owner_in = (row + hh * s_h + wa)[inside], owner[inside]
    keep, length = _joined(start, (wb - wa)[inside], owner_in)
    regions = Regions(start[keep], length, owner_in[keep])
    if not (ph or pw):
        return regions
    # padding reads the pad element of the tile of each nearest input element: a padding row's
    # nearest elements are the clipped input row; left/right padding's the row's first/last element
    first, last = np.clip(w_lo, 0, wd - 1), np.clip(w_hi - 1, 0, wd - 1)
    out_row = ~h_in
    left = h_in & (w_lo < 0)
    right = h_in & (w_hi > wd)
    rc = row + hc * s_h
    pad_start = np.concatenate([(rc + first)[out_row], rc[left], (rc + wd - 1)[right]])
    pad_len = np.concatenate([(last - first + 1)[out_row], np.ones(int(left.sum()) + int(right.sum()), np.int64)])
    pad_owner = np.concatenate([owner[out_row], owner[left], owner[right]])
    regions.pad = Regions(pad_start, pad_len, pad_owner)
    pad = w.pad
    assert pad is not None, "a window that reads padding has a pad constant (Window.pad)"
    regions.pad_first = int(base[w.pad_var]) + pad.offset
    regions.pad_step = pad.strides[0]
    return regions


@dataclass(frozen=True)
class _ChannelInput:
    """A window over a channels-innermost input, as _channel_regions' helpers read it: the global id
    of x[0, 0, 0, 0] (channel offsets added per run), the batch, row and column strides, the input's
    height and width, the window's geometry and the blocks' first output positions and row count."""

    origin: int
    s_b: int
    s_h: int
    s_w: int
    h: int
    wd: int
    kernel: tuple[int, int]
    stride: tuple[int, int]
    padding: tuple[int, int]
    dilation: tuple[int, int]
    out: tuple[int, int]
    r0: np.ndarray  # per block
    rows: int


Runs4 = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # (start, length, owner, inside) of runs


def _channel_runs_by_position(
    geo: _ChannelInput, vv: np.ndarray, ee: np.ndarray, chan: np.ndarray, n_ch: np.ndarray
) -> Runs4:
    """One run per output position of block vv[p]'s rows, at kernel position ee[p], of n_ch[p]
    channels from offset chan[p]: at the input element, or (padding) at the nearest one."""
    (_, kw), (sh, sw), (ph, pw), (dh, dw), (ho, wo) = geo.kernel, geo.stride, geo.padding, geo.dilation, geo.out
    r = geo.r0[vv][:, None] + np.arange(geo.rows)  # [pairs, rows]
    b_, oh, ow = r // (ho * wo), (r // wo) % ho, r % wo
    hh = oh * sh + (ee // kw)[:, None] * dh - ph
    ww = ow * sw + (ee % kw)[:, None] * dw - pw
    inside = ((hh >= 0) & (hh < geo.h) & (ww >= 0) & (ww < geo.wd)).reshape(-1)
    hh, ww = np.minimum(np.maximum(hh, 0), geo.h - 1), np.minimum(np.maximum(ww, 0), geo.wd - 1)
    near = (geo.origin + b_ * geo.s_b + chan[:, None] + hh * geo.s_h + ww * geo.s_w).reshape(-1)
    owner = np.repeat(vv, geo.rows)
    return near, np.repeat(n_ch, geo.rows), owner, inside


def _channel_runs_by_row(
    geo: _ChannelInput, vv: np.ndarray, ee: np.ndarray, chan: np.ndarray, n_ch: np.ndarray
) -> Runs4:
    """As _channel_runs_by_position where neighbouring positions' runs touch: per output row of
    the block, up to three runs: positions left of the input (nearest: column 0), the columns inside
    (padding when the input row is), positions right of it (nearest: column wd - 1)."""
    (_, kw), (sh, sw), (ph, pw), (dh, dw), (ho, wo) = geo.kernel, geo.stride, geo.padding, geo.dilation, geo.out
    u, q, ow0, ow1 = _position_units(geo.r0[vv], geo.rows, wo, np.ones(vv.size, dtype=bool))
    n = n_ch[u]
    hh = (q % ho) * sh + (ee // kw)[u] * dh - ph
    off = (ee % kw)[u] * dw - pw  # output position ow reads input column ow * sw + off
    a = np.maximum(ow0, -(off // sw))  # the unit's positions [a, z) read columns inside the input
    z = np.minimum(ow1 + 1, (geo.wd - 1 - off) // sw + 1)
    row = geo.origin + (q // ho) * geo.s_b + chan[u] + np.minimum(np.maximum(hh, 0), geo.h - 1) * geo.s_h
    mid = a < z
    step = sw * geo.s_w
    near = np.stack([row, row + (a * sw + off) * geo.s_w * mid, row + (geo.wd - 1) * geo.s_w], axis=1)
    length = np.stack([n, (z - 1 - a) * step * mid + n, n], axis=1)
    present = np.stack([ow0 < a, mid, z <= ow1], axis=1).reshape(-1)
    inside = np.stack([np.zeros_like(mid), mid & (hh >= 0) & (hh < geo.h), np.zeros_like(mid)], axis=1).reshape(-1)
    return near.reshape(-1)[present], length.reshape(-1)[present], np.repeat(vv[u], 3)[present], inside[present]


def _channel_regions(lay: WindowBlocks, base: np.ndarray) -> Regions | None:
    """Regions of window blocks over an input whose channels are innermost (stride 1), or grouped
    innermost (a store [C/grp][B][H][W][grp], profiler.poplar.layout.Factored): for every output position
    and kernel position of a block, the run of the block's channels there within each group (one
    region per output and kernel position and group, not per element); padding reads the pad
    element of the tile of the nearest input element, channel by channel."""
    w = lay.window
    x = w.x
    bsz, c, h, wd = x.shape
    if isinstance(x, Factored):  # channel c at (c // grp) * s_grp + c % grp (conv._window_view checks it)
        fb, ((_, s_grp), (grp, _)), fh, fw = x.factors()
        s_b, s_h, s_w = fb[0][1], fh[0][1], fw[0][1]
    else:
        s_b, _, s_h, s_w = x.strides
        grp, s_grp = c, 0
    (kh, kw), sw = w.kernel, w.stride[1]
    cg, k = c // w.groups, kh * kw
    ms, ks = lay.rows, lay.cols
    if w.channel_group == 1:  # column c * k + e: per vertex and kernel position e, a channel range
        e = np.arange(k, dtype=np.int64)
        c_lo = np.maximum(0, -(-(lay.c0[:, None] - e) // k))  # [v, k]
        c_hi = np.minimum(cg - 1, (lay.c0[:, None] + ks - 1 - e) // k)
        vv, ee = np.nonzero(c_hi >= c_lo)
        lo_v, hi_v = c_lo[vv, ee], c_hi[vv, ee]
    else:  # per vertex and unit u = (c // grp) * k + e (columns [u * grp, u * grp + grp)): a channel range
        grp_k = w.channel_group
        u0 = lay.c0 // grp_k
        n_u = (lay.c0 + ks - 1) // grp_k - u0 + 1  # units each vertex's block touches
        vv = np.repeat(np.arange(u0.size, dtype=np.int64), n_u)
        uu = u0[vv] + np.arange(vv.size) - np.repeat(np.cumsum(n_u) - n_u, n_u)
        cgrp, ee = np.divmod(uu, k)
        lo_v = cgrp * grp_k + np.maximum(lay.c0[vv] - uu * grp_k, 0)
        hi_v = cgrp * grp_k + np.minimum(lay.c0[vv] + ks - 1 - uu * grp_k, grp_k - 1)
    if vv.size == 0:
        return None
    first, last = lay.g[vv] * cg + lo_v, lay.g[vv] * cg + hi_v  # absolute channels
    # each range cut where a channel group ends: one run per group it touches
    n_grp = last // grp - first // grp + 1
    rep = np.repeat(np.arange(n_grp.size), n_grp)
    gi = (first // grp)[rep] + np.arange(rep.size) - (np.cumsum(n_grp) - n_grp)[rep]
    vv, ee, first, last = vv[rep], ee[rep], first[rep], last[rep]
    lo_c, hi_c = np.maximum(first, gi * grp), np.minimum(last, gi * grp + grp - 1)
    n_ch = hi_c - lo_c + 1
    chan = gi * s_grp + lo_c - gi * grp  # offset of the run's first channel
    geo = _ChannelInput(x.offset + int(base[w.x_var]), s_b, s_h, s_w, h, wd, w.kernel, w.stride, w.padding,
                        w.dilation, w.out, lay.r0, ms)  # fmt: skip
    # the runs of neighbouring output positions touch when the positions' memory step is at most a
    # run (stride 1 over whole groups): then the block's positions along an output row are one run.
    # A strided window over whole positions (a run is all of a position's stored channels) is read
    # as PopLibs slices a tile's input, a contiguous range of each field dim (lib/poplin/Convolution.cpp
    # "Explicitly truncate the input"; the AMP vertex skips positions with transformedInStride): one
    # run along the output row, the skipped positions included (rows stay apart)
    joins = (sw * s_w <= n_ch) | (n_ch == s_w)
    parts = [
        runs(geo, vv[sel], ee[sel], chan[sel], n_ch[sel])
        for runs, sel in ((_channel_runs_by_row, joins), (_channel_runs_by_position, ~joins))
        if sel.any()
    ]
    near, length, owner, inside = (np.concatenate([p[i] for p in parts]) for i in range(4))
    keep, length = _joined(near, length, owner, inside)
    near, inside, owner = near[keep], inside[keep], owner[keep]
    regions = Regions(near[inside], length[inside], owner[inside])
    if inside.all():
        return regions
    out = ~inside
    regions.pad = Regions(near[out], length[out], owner[out])
    pad = w.pad
    assert pad is not None, "a window that reads padding has a pad constant (Window.pad)"
    regions.pad_first = int(base[w.pad_var]) + pad.offset
    regions.pad_step = pad.strides[0]
    return regions


def _joined(
    start: np.ndarray, length: np.ndarray, owner: np.ndarray, kind: np.ndarray | None = None
) -> tuple[np.ndarray | slice, np.ndarray]:
    """Runs that continue or overlap the one before them (same owner, same kind, starting inside
    or right after it) joined: a block over all channels at consecutive positions (a 1x1
    convolution's rows) is one region, not one per position, and so are the overlapping kernel
    rows of neighbouring output positions (a strided convolution's windows). The elements a vertex
    reads are the same (a region may still overlap an earlier, unjoined one: readers take unions).
    Returns which regions start a joined one (a slice of all when none join) and their lengths."""
    if start.size < 2:
        return slice(None), length
    end = start + length
    brk = np.ones(start.size, dtype=bool)
    brk[1:] = (start[1:] < start[:-1]) | (start[1:] > end[:-1]) | (owner[1:] != owner[:-1])
    if kind is not None:
        brk[1:] |= kind[1:] != kind[:-1]
    first = np.flatnonzero(brk)
    if first.size == start.size:
        return slice(None), length
    return first, np.maximum.reduceat(end, first) - start[first]
