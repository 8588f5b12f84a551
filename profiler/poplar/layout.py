"""Affine layouts: where a tensor view's elements sit in its variable, without an index per element.

A view that numpy would make without copying (slices, integer indices, transposes, broadcasts,
reshapes that keep the strides regular) is ``offset + sum(i_d * strides[d])`` over its shape: a few
integers whatever its size. Poplar keeps views as regions of variables for the same reason; a view
that is not affine (fancy indexing, most concatenations) falls back to an explicit index array.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Generic, SupportsIndex, TypeGuard, TypeVar

import numpy as np

from profiler.poplar.shared_arrays import shared

# The explicit form of a Window (a profiler.poplar.tensor.Tensor, which imports this module)
View = TypeVar("View")


@dataclass(frozen=True)
class Affine:
    """Element ``(i_0, ..., i_n)`` of the view is element ``offset + sum(i_d * strides[d])`` of the variable."""

    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]

    @staticmethod
    def contiguous(shape: tuple[int, ...], offset: int = 0) -> Affine:
        strides, step = [], 1
        for n in reversed(shape):
            strides.append(step)
            step *= n
        return Affine(offset, tuple(shape), tuple(reversed(strides)))

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def one_to_one(self) -> bool:
        """Whether the view reaches each of its positions at a distinct element, with no negative
        stride (so a numpy strided view of the variable can be written through it)."""
        span = 0  # furthest element offset reachable by the dims taken so far
        for s, n in sorted((s, n) for s, n in zip(self.strides, self.shape, strict=True) if n > 1):
            if s <= span:
                return False
            span += s * (n - 1)
        return True

    def indices(self, dtype: np.dtype | type = np.int64) -> np.ndarray:
        """The explicit index array (one entry per element: only for paths that need one)."""
        idx = np.asarray(self.offset, dtype=dtype)
        for n, s in zip(self.shape, self.strides, strict=True):
            idx = idx[..., None] + (np.arange(n, dtype=dtype) * s)
        return np.ascontiguousarray(idx.reshape(self.shape))

    # -- views (numpy's rules; None where numpy would copy) -------------------------------------------
    def getitem(self, key: object) -> Affine | None:
        """Basic indexing (ints, slices, None, Ellipsis); None for anything else (fancy indexing)."""
        keys = key if isinstance(key, tuple) else (key,)
        for k in keys:
            if not (k is None or k is Ellipsis or isinstance(k, slice) or _is_int(k)):
                return None
        given = sum(1 for k in keys if k is not None and k is not Ellipsis)
        if given > len(self.shape):
            raise IndexError(f"too many indices: {given} for {len(self.shape)} dimensions")
        ell = [i for i, k in enumerate(keys) if k is Ellipsis]
        if len(ell) > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        fill = (slice(None),) * (len(self.shape) - given)
        keys = keys[: ell[0]] + fill + keys[ell[0] + 1 :] if ell else keys + fill
        offset, shape, strides, d = self.offset, [], [], 0
        for k in keys:
            if k is None:
                shape.append(1)
                strides.append(0)
                continue
            n, s = self.shape[d], self.strides[d]
            d += 1
            if isinstance(k, slice):
                start, stop, step = k.indices(n)
                length = len(range(start, stop, step))
                if length:
                    offset += start * s
                shape.append(length)
                strides.append(s * step)
            else:
                i = operator.index(k)
                if not -n <= i < n:
                    raise IndexError(f"index {i} is out of bounds for axis {d - 1} with size {n}")
                offset += (i % n) * s
        return Affine(offset, tuple(shape), tuple(strides))

    def transpose(self, axes: tuple[int, ...] | None) -> Affine:
        order = tuple(reversed(range(len(self.shape)))) if not axes else tuple(a % len(self.shape) for a in axes)
        if sorted(order) != list(range(len(self.shape))):
            raise ValueError(f"axes {axes} don't match a view of {len(self.shape)} dimensions")
        return Affine(self.offset, tuple(self.shape[a] for a in order), tuple(self.strides[a] for a in order))

    def expand(self, axis: int) -> Affine:
        nd = len(self.shape) + 1
        if not -nd <= axis < nd:
            raise np.exceptions.AxisError(axis, nd)
        a = axis % nd
        return Affine(self.offset, self.shape[:a] + (1,) + self.shape[a:], self.strides[:a] + (0,) + self.strides[a:])

    def broadcast_to(self, shape: tuple[int, ...]) -> Affine:
        if len(shape) < len(self.shape):
            raise ValueError(f"cannot broadcast {self.shape} to {shape}")
        lead = len(shape) - len(self.shape)
        strides = [0] * lead
        for n_old, s, n_new in zip(self.shape, self.strides, shape[lead:], strict=True):
            if n_old == n_new:
                strides.append(s)
            elif n_old == 1:
                strides.append(0)
            else:
                raise ValueError(f"cannot broadcast {self.shape} to {shape}")
        return Affine(self.offset, tuple(int(n) for n in shape), tuple(strides))

    def reshape(self, shape: tuple[int, ...]) -> Affine | None:
        """The reshaped view if it is affine (numpy's no-copy reshape), else None."""
        new = _resolve_shape(shape, self.size, self.shape)
        if self.size == 0:
            return Affine(self.offset, new, (0,) * len(new))
        old = [(n, s) for n, s in zip(self.shape, self.strides, strict=True) if n != 1]
        olds, oldst = [n for n, _ in old], [s for _, s in old]
        strides = [0] * len(new)
        oi, oj, ni, nj = 0, 1, 0, 1
        while ni < len(new) and oi < len(olds):
            np_, op = new[ni], olds[oi]
            while np_ != op:
                if np_ < op:
                    np_ *= new[nj]
                    nj += 1
                else:
                    op *= olds[oj]
                    oj += 1
            for ok in range(oi, oj - 1):
                if oldst[ok] != olds[ok + 1] * oldst[ok + 1]:
                    return None
            strides[nj - 1] = oldst[oj - 1]
            for nk in range(nj - 1, ni, -1):
                strides[nk - 1] = strides[nk] * new[nk]
            ni, oi = nj, oj
            nj, oj = nj + 1, oj + 1
        return Affine(self.offset, new, tuple(strides))


def _is_int(k: object) -> bool:
    if isinstance(k, bool | np.bool_) or not isinstance(k, SupportsIndex):
        return False
    try:  # an array has __index__ too, and raises unless it holds one integer
        operator.index(k)
    except TypeError:
        return False
    return True


def _resolve_shape(shape: tuple[int, ...], size: int, old: tuple[int, ...]) -> tuple[int, ...]:
    """numpy's reshape target with one -1 resolved; ValueError when it does not hold ``size`` elements."""
    shape = tuple(int(n) for n in shape)
    unknown = [i for i, n in enumerate(shape) if n == -1]
    known = int(np.prod([n for n in shape if n != -1], dtype=np.int64))
    if len(unknown) > 1 or any(n < -1 for n in shape):
        raise ValueError(f"cannot reshape {old} to {shape}")
    if unknown:
        if known == 0 or size % known:
            raise ValueError(f"cannot reshape {old} to {shape}")
        shape = shape[: unknown[0]] + (size // known,) + shape[unknown[0] + 1 :]
    elif known != size:
        raise ValueError(f"cannot reshape {old} to {shape}")
    return shape


Factor = tuple[int, int]  # (size, stride) of one factor dim


@dataclass(frozen=True)
class Factored:
    """A view whose dims each stand for one or more *factor* dims of a plain affine view: the index
    of a dim is the mixed-radix number of its factors' indices, outermost first. PopLibs' grouped
    layouts are such views: a convolution result ``[B, C, H, W]`` stored channel-group-major
    ``[C/16][B][H][W][16]`` has channel ``c`` at factors ``(c // 16, c % 16)`` (strides
    ``B*H*W*16`` and 1), which no single stride describes. ``flat`` is the factor-level view: it
    holds the same elements in the same order, so whatever only walks elements uses it as is."""

    flat: Affine
    groups: tuple[int, ...]  # factor dims per dim (each >= 1), summing to the rank of ``flat``

    @property
    def offset(self) -> int:
        return self.flat.offset

    @functools.cached_property
    def shape(self) -> tuple[int, ...]:  # asked often (every Tensor.shape): worked out once
        return tuple(int(math.prod(n for n, _ in g)) for g in self.factors())

    @property
    def size(self) -> int:
        return self.flat.size

    def factors(self) -> list[list[Factor]]:
        out, i = [], 0
        for k in self.groups:
            out.append(list(zip(self.flat.shape[i : i + k], self.flat.strides[i : i + k], strict=True)))
            i += k
        return out

    def indices(self, dtype: np.dtype | type = np.int64) -> np.ndarray:
        return self.flat.indices(dtype).reshape(self.shape)

    def getitem(self, key: object) -> Affine | Factored | None:
        return _getitem(self.offset, self.factors(), key)

    def transpose(self, axes: tuple[int, ...] | None) -> Affine | Factored:
        f = self.factors()
        order = tuple(reversed(range(len(f)))) if not axes else tuple(a % len(f) for a in axes)
        if sorted(order) != list(range(len(f))):
            raise ValueError(f"axes {axes} don't match a view of {len(f)} dimensions")
        return factored(self.offset, [f[a] for a in order])

    def expand(self, axis: int) -> Affine | Factored:
        f = self.factors()
        nd = len(f) + 1
        if not -nd <= axis < nd:
            raise np.exceptions.AxisError(axis, nd)
        a = axis % nd
        return factored(self.offset, f[:a] + [[(1, 0)]] + f[a:])

    def broadcast_to(self, shape: tuple[int, ...]) -> Affine | Factored:
        f, old = self.factors(), self.shape
        if len(shape) < len(old):
            raise ValueError(f"cannot broadcast {old} to {shape}")
        lead = len(shape) - len(old)
        out: list[list[Factor]] = [[(int(n), 0)] for n in shape[:lead]]
        for g, n_old, n_new in zip(f, old, shape[lead:], strict=True):
            if n_old == n_new:
                out.append(g)
            elif n_old == 1:
                out.append([(int(n_new), 0)])
            else:
                raise ValueError(f"cannot broadcast {old} to {shape}")
        return factored(self.offset, out)

    def reshape(self, shape: tuple[int, ...]) -> Affine | Factored | None:
        return _reshape(self.offset, self.factors(), shape, self.size)


def covers_all(lay: object, size: int) -> TypeGuard[Affine | Factored]:
    """Whether view ``lay`` takes each of a ``size``-element variable's elements once (a plain or
    factored affine view from offset 0 whose strides are a contiguous array's in some order)."""
    flat = lay.flat if isinstance(lay, Factored) else lay
    if not isinstance(flat, Affine) or flat.offset != 0 or flat.size != size or size == 0:
        return False
    step = 1
    for s, n in sorted((s, n) for n, s in zip(flat.shape, flat.strides, strict=True) if n != 1):
        if s != step:  # the strides, smallest first, must be those of a contiguous array
            return False
        step *= n
    return True


def factor_groups(lay: Affine | Factored) -> list[list[Factor]]:
    """Each dim's factors (one per dim of a plain affine view)."""
    if isinstance(lay, Factored):
        return lay.factors()
    return [[(n, s)] for n, s in zip(lay.shape, lay.strides, strict=True)]


def factored(offset: int, groups: list[list[Factor]]) -> Affine | Factored:
    """The view with these factors per dim, simplified: size-1 factors dropped and neighbours whose
    strides nest merged, so a dim left with one factor is plain and a view of plain dims an Affine."""
    if any(n == 0 for g in groups for n, _ in g):  # no elements: only the shape matters
        shape = tuple(int(np.prod([n for n, _ in g], dtype=np.int64)) for g in groups)
        return Affine(offset, shape, (0,) * len(shape))
    out: list[list[Factor]] = []
    for g in groups:
        kept: list[Factor] = []
        for n, s in g:
            if n == 1:
                continue
            if kept and kept[-1][1] == n * s:
                kept[-1] = (kept[-1][0] * n, s)
            else:
                kept.append((int(n), int(s)))
        out.append(kept or [(1, 0)])
    if all(len(g) == 1 for g in out):
        return Affine(offset, tuple(g[0][0] for g in out), tuple(g[0][1] for g in out))
    flat = Affine(offset, tuple(n for g in out for n, _ in g), tuple(s for g in out for _, s in g))
    return Factored(flat, tuple(len(g) for g in out))


def group_dims(lay: Affine | Factored, sizes: tuple[int, ...]) -> Affine | Factored:
    """Merge consecutive dims into one, ``sizes[i]`` dims into dim i, keeping their factors: the
    reshape that always stays a view (e.g. ``[G, M, N/nb, nb]`` of a block-major store to ``[G, M, N]``)."""
    f = factor_groups(lay)
    if sum(sizes) != len(f):
        raise ValueError(f"cannot group {len(f)} dimensions as {sizes}")
    out, i = [], 0
    for k in sizes:
        out.append([x for g in f[i : i + k] for x in g])
        i += k
    return factored(lay.offset, out)


def _digits(i: int, g: list[Factor]) -> int:
    """Offset of index ``i`` of a dim with factors ``g``."""
    off = 0
    for n, s in reversed(g):
        off += (i % n) * s
        i //= n
    return off


def _slice_factors(g: list[Factor], start: int, length: int, step: int) -> tuple[int, list[Factor]] | None:
    """(offset, factors) of ``length`` indices from ``start`` by ``step`` of a dim with factors ``g``;
    None when they are not one affine factor set (a slice across factor boundaries)."""
    if len(g) == 1:
        n, s = g[0]
        return start * s, [(length, s * step)]
    if length == 1:
        return _digits(start, g), [(1, 0)]
    s0, rest = g[0][1], g[1:]
    inner = int(np.prod([n for n, _ in rest], dtype=np.int64))
    if step == 1 and start % inner == 0 and length % inner == 0:  # whole inner blocks
        return (start // inner) * s0, [(length // inner, s0)] + rest
    if step > 0 and start // inner == (start + (length - 1) * step) // inner:  # inside one outer index
        found = _slice_factors(rest, start % inner, length, step)
        return None if found is None else ((start // inner) * s0 + found[0], found[1])
    if step > 0 and step % inner == 0:  # the same inner index of every step // inner-th outer index
        return (start // inner) * s0 + _digits(start % inner, rest), [(length, s0 * (step // inner))]
    return None


def _getitem(offset: int, f: list[list[Factor]], key: object) -> Affine | Factored | None:
    keys = key if isinstance(key, tuple) else (key,)
    for k in keys:
        if not (k is None or k is Ellipsis or isinstance(k, slice) or _is_int(k)):
            return None
    given = sum(1 for k in keys if k is not None and k is not Ellipsis)
    if given > len(f):
        raise IndexError(f"too many indices: {given} for {len(f)} dimensions")
    ell = [i for i, k in enumerate(keys) if k is Ellipsis]
    if len(ell) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    fill = (slice(None),) * (len(f) - given)
    keys = keys[: ell[0]] + fill + keys[ell[0] + 1 :] if ell else keys + fill
    out: list[list[Factor]] = []
    d = 0
    for k in keys:
        if k is None:
            out.append([(1, 0)])
            continue
        g = f[d]
        n = int(np.prod([x for x, _ in g], dtype=np.int64))
        d += 1
        if isinstance(k, slice):
            start, stop, step = k.indices(n)
            length = len(range(start, stop, step))
            if length == 0:
                out.append([(0, 0)])
                continue
            found = _slice_factors(g, start, length, step)
            if found is None:
                return None
            offset += found[0]
            out.append(found[1])
        else:
            i = operator.index(k)
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for axis {d - 1} with size {n}")
            offset += _digits(i % n, g)
    return factored(offset, out)


def _cut(flat: list[Factor], cuts: list[int]) -> list[tuple[int, Factor]]:
    """The factors cut at the cumulative products ``cuts`` (which include every factor's own end
    and nest): (cumulative product after the piece, (size, stride)) per piece, outermost first; a
    factor of n cut into a x b keeps its order, strides b*s and s."""
    pieces: list[tuple[int, Factor]] = []
    before = 1
    for n, s in flat:
        end = before * n
        inner = [c for c in cuts if before < c <= end]
        sizes = [b // a for a, b in zip([before] + inner, inner, strict=False)]
        stride_after = np.cumprod([1] + sizes[::-1]).tolist()[::-1][1:]  # product of the sizes after each
        pieces += [(c, (m, s * st)) for c, m, st in zip(inner, sizes, stride_after, strict=True)]
        before = end
    return pieces


def common_factors(lays: list[Affine | Factored]) -> list[Affine] | None:
    """The views (one shape) as plain affine views over one common set of factor dims: each dim
    cut wherever any view's factors cut it, so position i of every result is the same element
    position of every view. None when the cuts do not nest (a store grouped by 8 against one by 12)."""
    per_view = [factor_groups(lay) for lay in lays]
    out: list[list[Factor]] = [[] for _ in lays]
    for d in range(len(per_view[0])):
        groups = [[(n, st) for n, st in f[d] if n != 1] for f in per_view]
        if not any(groups):  # a dim of one
            for o in out:
                o.append((1, 0))
            continue
        cuts = sorted({int(c) for g in groups for c in np.cumprod([n for n, _ in g])})
        if any(b % a for a, b in zip([1] + cuts, cuts, strict=False)):
            return None
        for o, g in zip(out, groups, strict=True):
            o.extend(f for _, f in _cut(g, cuts))
    return [
        Affine(lay.offset, tuple(n for n, _ in o), tuple(st for _, st in o)) for lay, o in zip(lays, out, strict=True)
    ]


def _reshape(offset: int, f: list[list[Factor]], shape: tuple[int, ...], size: int) -> Affine | Factored | None:
    """The reshaped view when every new dim is a run of whole factors, after cutting factors where
    the new dims need it (a factor of n cut into a x b keeps its order: strides b*s and s); None
    when a new dim would need part of a factor that does not divide (numpy would copy)."""
    old = tuple(int(np.prod([n for n, _ in g], dtype=np.int64)) for g in f)
    new = _resolve_shape(shape, size, old)
    if size == 0:
        return Affine(offset, new, (0,) * len(new))
    flat = [(n, s) for g in f for n, s in g if n != 1]
    cuts_old = np.cumprod([n for n, _ in flat]).tolist()
    cuts_new = np.cumprod([n for n in new if n != 1]).tolist()
    cuts = sorted(set(cuts_old) | set(cuts_new))
    if any(b % a for a, b in zip([1] + cuts, cuts, strict=False)):
        return None
    pieces = _cut(flat, cuts)
    out: list[list[Factor]] = []
    i = 0
    for n in new:
        if n == 1:
            out.append([(1, 0)])
            continue
        target = cuts_new.pop(0)
        group = []
        while i < len(pieces) and pieces[i][0] <= target:
            group.append(pieces[i][1])
            i += 1
        out.append(group)
    return factored(offset, out)


@dataclass(frozen=True, eq=False)
class Blocks:
    """Equal blocks of one variable, one per row: element ``(v, i...)`` is ``offsets[v] + inner(i...)``.

    What a planner connects to its vertices (row v is vertex v's block of an operand): a few
    integers per vertex, never an index per element."""

    offsets: np.ndarray  # int64, one per row
    inner: Affine | Factored  # offset 0

    @property
    def shape(self) -> tuple[int, ...]:
        return (int(self.offsets.size),) + self.inner.shape

    @property
    def size(self) -> int:
        return int(self.offsets.size) * self.inner.size

    def indices(self, dtype: np.dtype | type = np.int64) -> np.ndarray:
        inner = self.inner.indices(dtype)
        return (self.offsets.astype(dtype).reshape((-1,) + (1,) * inner.ndim) + inner).reshape(self.shape)


@dataclass(eq=False)
class Window(Generic[View]):
    """The im2col view ``cols[G, B*Ho*Wo, C/G*kh*kw]`` of a convolution input ``x[B, C, H, W]``
    (an affine view): element ``(g, (b, oh, ow), (c, i, j))`` is ``x[b, g*C/G + c, oh*sh + i*dh - ph,
    ow*sw + j*dw - pw]``, or where that is outside ``x``, the element of the per-tile ``pad``
    constant on the tile of the nearest input element. Described by the convolution's geometry,
    never by an index per element; ``explicit`` builds the index form for the paths that need one."""

    x: Affine | Factored  # Factored: a channel-grouped store (conv._channel_grouped)
    x_var: int
    groups: int
    kernel: tuple[int, int]
    stride: tuple[int, int]
    padding: tuple[int, int]
    dilation: tuple[int, int]
    out: tuple[int, int]  # (Ho, Wo)
    pad_var: int  # the per-tile constant read where the window leaves x; -1 when it never does
    pad: Affine | None
    explicit: Callable[[], View]  # the same view with explicit indices (built on first use)
    # columns ordered (c // grp, i, j, c % grp) with grp = channel_group: channel groups outermost,
    # then kernel positions, then a group's channels, as PopLibs orders a convolution's weights
    # ({..., IC/icpg, kh, kw, ..., icpg}, lib/poplin/Convolution.cpp createWeights); 1 gives (c, i, j),
    # C/groups gives (i, j, c)
    channel_group: int = 1
    _cached: View | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        b, c = self.x.shape[:2]
        return (self.groups, b * self.out[0] * self.out[1], c // self.groups * self.kernel[0] * self.kernel[1])

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def column(self, k: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(channel within its convolution group, kernel row i, kernel column j) of columns ``k``."""
        grp, kw = self.channel_group, self.kernel[1]
        q, c = np.divmod(k, grp)
        cgrp, e = np.divmod(q, self.kernel[0] * kw)
        i, j = np.divmod(e, kw)
        return cgrp * grp + c, i, j

    def materialised(self) -> View:
        if self._cached is None:
            self._cached = self.explicit()
        return self._cached


@dataclass(frozen=True, eq=False)
class WindowBlocks(Generic[View]):
    """Blocks of a Window, one per row: row v is ``cols[g[v], r0[v]:+rows, c0[v]:+cols]`` (a
    matmul vertex's operand block of an im2col view)."""

    window: Window[View]
    g: np.ndarray
    r0: np.ndarray
    c0: np.ndarray
    rows: int
    cols: int

    @property
    def shape(self) -> tuple[int, ...]:
        return (int(self.g.size), self.rows, self.cols)

    @property
    def size(self) -> int:
        return int(self.g.size) * self.rows * self.cols


@dataclass(frozen=True, eq=False)
class Runs:
    """Rows of runs of one variable's elements (a vertex field over whatever its tile holds, as
    Poplar connects a field to a list of regions): a run is ``length`` consecutive elements from
    ``start`` (step 1) or one element repeated ``length`` times (step 0: a broadcast operand); row v
    is the runs ``[row_first[v], row_first[v + 1])`` laid end to end, ``width`` elements in all.
    With ``period``, a step-1 run cycles through its first ``period`` elements (element i reads
    ``start + i % period``): a per-channel operand over channel-grouped data, one run per group of
    positions where it would take one per position (PopLibs' BroadcastVectorInner reads it so).
    With ``block``, a step-1 run reads blocks of ``block`` consecutive elements ``stride`` apart
    (element i reads ``start + (i // block) * stride + i % block``): a row of a matmul result stored
    in groups of 4 or 16 columns is one run, where runs of consecutive elements take one a group.
    With ``repeat``, a step-0 run reads consecutive elements, each ``repeat`` times (element i reads
    ``start + i // repeat``): a per-row operand (a softmax's row max) broadcast along rows held in
    groups of ``repeat`` columns is one run a stretch of rows, where a repeated element takes one a group."""

    start: np.ndarray  # int64 (int32 where the variable's offsets fit), one per run
    length: np.ndarray  # as start, one per run
    step: np.ndarray  # int64, 0 or 1, one per run
    row_first: np.ndarray  # int64, one per row + 1
    width: int
    inner: tuple[int, ...] = ()  # a row's shape when not flat (a matmul vertex's [rows, cols] block)
    period: np.ndarray | None = None  # as start, one per run: the elements a run cycles through; None: its length
    block: int = 0  # > 0: every step-1 run reads blocks of this many elements ...
    stride: int = 0  # ... this far apart (one value for the whole field)
    repeat: int = 0  # > 0: every step-0 run reads consecutive elements this many times each (not with block)

    def __post_init__(self) -> None:
        if self.repeat and self.block:  # the compiler's regions read one or the other (regions.field_regions)
            raise ValueError("Runs: repeat and block in one field")
        # starts and lengths held as int32 where they fit: half the host memory of a graph's fields
        # (a decoder layer at S = 2,048 holds ~10^7 runs); readers widen them where sums may pass 2^31
        for name in ("start", "length"):
            a = getattr(self, name)
            if a.dtype == np.int64 and a.size and int(a.max()) < 2**31 and int(a.min()) >= -(2**31):
                object.__setattr__(self, name, a.astype(np.int32))
        step = self.step
        if isinstance(step, np.ndarray) and step.ndim and step.strides[0] and step.dtype.itemsize > 1:
            object.__setattr__(self, "step", step.astype(np.int8))  # 0 or 1 a run: a byte each
        # a repeated layer's runs equal the first one's (offsets within its variables): held once
        for name in ("start", "length", "step", "row_first", "period"):
            a = getattr(self, name)
            if isinstance(a, np.ndarray):
                object.__setattr__(self, name, shared(a))

    @property
    def shape(self) -> tuple[int, ...]:
        return (int(self.row_first.size) - 1, *(self.inner or (self.width,)))

    @property
    def size(self) -> int:
        return (int(self.row_first.size) - 1) * self.width

    def indices(self, dtype: np.dtype | type = np.int64) -> np.ndarray:
        total = int(self.length.sum())
        within = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(self.length) - self.length, self.length)
        if self.period is not None:
            within %= np.repeat(self.period.astype(np.int64), self.length)
        moved = within // self.repeat if self.repeat else None  # a step-0 run's element, ``repeat`` reads each
        if self.block:
            within = (within // self.block) * self.stride + within % self.block
        step = np.repeat(np.asarray(self.step, dtype=np.int64), self.length)
        idx = np.repeat(self.start.astype(np.int64), self.length) + within * step
        if moved is not None:
            idx += np.where(step == 0, moved, 0)
        return idx.astype(dtype).reshape(self.shape)

    @staticmethod
    def encode(idx: np.ndarray) -> Runs:
        """The runs of a [rows, ...] index array (a row of more dims keeps its shape). Each row is
        cut where the step between neighbours stops being the run's (0 or 1); one pass, no loop
        over elements."""
        rows, width = idx.shape[0], int(np.prod(idx.shape[1:], dtype=np.int64))
        inner = tuple(idx.shape[1:]) if idx.ndim > 2 else ()
        flat = idx.reshape(-1).astype(np.int64, copy=False)
        d = np.diff(flat)
        kind = np.where((d == 0) | (d == 1), d, -1)  # the step of each neighbouring pair, -1: none
        brk = np.ones(flat.size, dtype=bool)
        if flat.size > 1:
            # element i continues a run when its pair with i-1 has a step and either the same step
            # as the pair before it or no pair before it in the run (i-1 began one after a jump):
            # every pair inside a run then has the run's one step
            cont = kind >= 0
            cont[1:] &= (kind[1:] == kind[:-1]) | (kind[:-1] < 0)
            brk[1:] = ~cont
        if width:
            brk[::width] = True
            if width > 1 and flat.size > 1:  # a row's second element: the pair before it crosses rows
                brk[1::width] = kind[::width] < 0
        first = np.flatnonzero(brk)
        length = np.diff(np.append(first, flat.size))
        nxt = np.minimum(first, max(flat.size - 2, 0))
        step = np.where(length > 1, kind[nxt] if flat.size > 1 else 1, 1)
        row_first = np.searchsorted(first, np.arange(rows + 1) * width)
        step = step.astype(np.int64)
        if step.size and (step == step[0]).all():  # the usual case: one read-only broadcast, no array per run
            step = np.broadcast_to(step[:1], step.shape)
        return Runs(flat[first], length.astype(np.int64), step, row_first.astype(np.int64), width, inner)


@dataclass(frozen=True, eq=False)
class VarRuns:
    """``Runs`` over several variables: run i reads variable ``var[i]`` (a ragged reduction's rows: a
    run of its input, then its tile's padding element repeated). Poplar connects a field to a list of
    regions of any tensors; this keeps a field of two variables per run, where an index and a variable
    id per element grow with the field (a softmax over [heads, S, S] scores: with S squared).
    ``elements`` gives them per element, for a consumer that asks (Tensor._explicit)."""

    runs: Runs
    var: np.ndarray  # int32, one per run of ``runs``

    @property
    def shape(self) -> tuple[int, ...]:
        return self.runs.shape

    @property
    def size(self) -> int:
        return self.runs.size

    def elements(self, dtype: np.dtype | type = np.int64) -> tuple[np.ndarray, np.ndarray]:
        """(variable id, element index) of every element, each shaped like the field."""
        var = np.repeat(self.var.astype(np.int32), self.runs.length).reshape(self.shape)
        return var, self.runs.indices(dtype)

    def reshaped(self, rows: int, inner: tuple[int, ...]) -> VarRuns:
        """The same runs as ``rows`` rows of shape ``inner`` (a row's elements kept in order)."""
        width = int(np.prod(inner, dtype=np.int64))
        if rows != self.runs.row_first.size - 1 or width != self.runs.width:
            raise ValueError(f"cannot reshape runs of shape {self.shape} to {(rows, *inner)}")
        r = self.runs
        kept = () if len(inner) == 1 else tuple(int(n) for n in inner)
        return VarRuns(replace(r, inner=kept), self.var)

    def take_ranges(self, first: np.ndarray, length: np.ndarray, row_first: np.ndarray, width: int) -> VarRuns | None:
        """The field whose row v reads, one after another, the ranges ``[row_first[v], row_first[v + 1])``
        of this one's flattened positions, range i ``[first[i], first[i] + length[i])`` (``width``
        positions a row): each range cut where a run ends, each piece a run of the same variable. Per
        range and run, never per element; None for periodic runs."""
        r = self.runs
        if r.period is not None or r.block or r.repeat:
            return None
        first, length = np.asarray(first, dtype=np.int64), np.asarray(length, dtype=np.int64)
        run_pos = np.cumsum(r.length, dtype=np.int64) - r.length  # each run's first flattened position
        sub, pieces = cut_ranges(run_pos, first, length)
        j = np.searchsorted(run_pos, sub, side="right") - 1  # the run each piece lies in
        step = np.asarray(r.step)[j].astype(np.int64)
        start = r.start[j].astype(np.int64) + (sub - run_pos[j]) * step
        piece_first = np.append(0, np.cumsum(pieces))[np.asarray(row_first, dtype=np.int64)]
        runs = Runs(start, piece_lengths(sub, pieces, first, length), step, piece_first.astype(np.int64), int(width))
        return VarRuns(runs, self.var[j])

    def one_row(self) -> VarRuns:
        """The same runs as a single row of this field's shape (a kernel's whole-tensor field)."""
        r = self.runs
        rows = np.array([0, r.start.size], dtype=np.int64)
        return VarRuns(replace(r, row_first=rows, width=r.size, inner=self.shape), self.var)


def inner_run(aff: Affine) -> tuple[int, int]:
    """(positions, step) of the longest run of ``aff``'s trailing dims that reads its variable with
    one step of 0 or 1 (consecutive elements, or one element repeated): (1, 1) when none does."""
    inner, step = 1, None
    for n, st in zip(reversed(aff.shape), reversed(aff.strides), strict=True):
        if n == 1:
            continue
        want = 0 if step == 0 else inner if step == 1 else st
        if step is None and st not in (0, 1):
            break
        if step is not None and st != want:
            break
        step = 0 if st == 0 else 1
        inner *= n
    return inner, 1 if step is None else step


def cut_ranges(breaks: np.ndarray, first: np.ndarray, length: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ranges ``[first[r], first[r] + length[r])`` cut at the positions in ``breaks`` (sorted) that lie
    strictly inside them: (start of each piece, pieces per range), the pieces of each range one after
    another, range by range. Per range and break, never per position."""
    first, length = np.asarray(first, dtype=np.int64), np.asarray(length, dtype=np.int64)
    lo = np.searchsorted(breaks, first, side="right")
    inner = np.searchsorted(breaks, first + length, side="left") - lo  # breaks inside each range
    head = np.cumsum(inner + 1) - (inner + 1)  # each range's first piece
    start = np.empty(int(head[-1] + inner[-1] + 1) if first.size else 0, dtype=np.int64)
    start[head] = first
    of = np.repeat(np.arange(first.size), inner)  # the range of each inner break
    k = np.arange(of.size) - np.repeat(head - np.arange(first.size), inner)  # its rank within the range
    start[head[of] + 1 + k] = breaks[lo[of] + k]
    return start, inner + 1


def piece_lengths(start: np.ndarray, pieces: np.ndarray, first: np.ndarray, length: np.ndarray) -> np.ndarray:
    """Lengths of ``cut_ranges``' pieces: to the next piece of the range, or to the range's end."""
    end = np.append(start[1:], 0)
    end[np.cumsum(pieces) - 1] = np.asarray(first, dtype=np.int64) + length
    return end - start


def memory_order(a: np.ndarray) -> list[int]:
    """``a``'s dims from outermost to innermost in memory (by stride size): allocating a new array
    in this order and copying walks both sides contiguously."""
    return sorted(range(a.ndim), key=lambda d: -abs(a.strides[d]))


def merged_dims(
    shape: tuple[int, ...], strides: tuple[tuple[int, ...], ...]
) -> tuple[tuple[int, ...], tuple[tuple[int, ...], ...]]:
    """``shape`` without unit dims and with neighbouring dims merged where every one of the
    ``strides`` (one tuple per array walked together) lays them out as one: a pair walked
    contiguously by all becomes one long row. Returns the shape and each array's strides."""
    dims = [d for d, n in enumerate(shape) if n != 1] or [len(shape) - 1] if shape else []
    out_shape: list[int] = []
    out_strides: list[list[int]] = [[] for _ in strides]
    for d in dims:
        if out_shape and all(st[-1] == s[d] * shape[d] for st, s in zip(out_strides, strides, strict=True)):
            out_shape[-1] *= shape[d]
            for st, s in zip(out_strides, strides, strict=True):
                st[-1] = s[d]
        else:
            out_shape.append(shape[d])
            for st, s in zip(out_strides, strides, strict=True):
                st.append(s[d])
    return tuple(out_shape), tuple(tuple(st) for st in out_strides)


def strided_layout(idx: np.ndarray) -> tuple[int, tuple[int, ...]] | None:
    """(offset, element strides) when ``idx[i0, i1, ...] == offset + sum(i_d * stride_d)`` with
    non-negative strides (a numpy strided view of the variable: slices, transposes, broadcasts),
    else None. One pass over ``idx`` per dimension; done once, when a step is compiled."""
    if idx.size == 0:
        return None
    offset = int(idx.reshape(-1)[0])
    strides = []
    for d, n in enumerate(idx.shape):
        if n == 1:
            strides.append(0)
            continue
        step = np.diff(idx, axis=d)
        s = int(step.reshape(-1)[0])
        if s < 0 or not (step == s).all():
            return None
        strides.append(s)
    return offset, tuple(strides)
