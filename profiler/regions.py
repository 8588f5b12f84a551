"""Regions: a vertex field as runs of consecutive elements of variables, as Poplar connects edges.

A field of ``V`` vertices (a tensor with a leading vertex dimension) becomes columnar arrays over
its regions: the global element id of each region's first element (``profiler.compile`` numbers
every variable's elements consecutively), its length and the vertex (row) that reads it. An
affine or blocked view gives its regions without touching elements: the cost follows the number
of regions, which is what Poplar's exchange code and vertex state follow too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from profiler.layout import Affine, Blocks
from profiler.tensor import Tensor


@dataclass
class Regions:
    """Region r covers global elements ``[start[r], start[r] + length[r])``, read or written by row ``owner[r]``."""

    start: np.ndarray  # int64
    length: np.ndarray  # int64
    owner: np.ndarray  # int64: the vertex (row of the field's leading dimension)

    @property
    def count(self) -> int:
        return int(self.start.size)

    def elements(self) -> int:
        return int(self.length.sum())


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


def field_regions(t: Tensor, base: int | np.ndarray) -> Regions:
    """Regions of field ``t`` (leading dimension = vertices); ``base`` maps a variable's element to
    its global id: an int (one variable) or the per-variable base array."""
    lay = t._lay
    if isinstance(lay, Affine | Blocks):
        if isinstance(lay, Affine):
            offsets = lay.offset + np.arange(lay.shape[0], dtype=np.int64) * lay.strides[0]
            inner_shape, inner_strides = lay.shape[1:], lay.strides[1:]
        else:
            offsets, inner_shape, inner_strides = lay.offsets, lay.inner.shape, lay.inner.strides
        k, run = _runs(inner_shape, inner_strides)
        v = offsets.size
        if v == 0 or run == 0 or 0 in inner_shape:
            return Regions(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
        starts = _grid(offsets, inner_shape[:k], inner_strides[:k])
        per = starts.shape[1]
        start = starts.reshape(-1) + int(base if np.ndim(base) == 0 else base[t._var])
        owner = np.repeat(np.arange(v, dtype=np.int64), per)
        return Regions(start, np.full(start.size, run, dtype=np.int64), owner)
    # explicit indices: runs of consecutive elements within a row
    v = t.shape[0] if t.rank else 0
    var_ids, idx = t.elements()
    gid = (np.asarray(base)[var_ids] if np.ndim(base) else int(base)) + idx.astype(np.int64)
    if gid.size == 0:
        return Regions(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
    per = gid.size // max(v, 1)
    brk = np.ones(gid.size, dtype=bool)
    brk[1:] = gid[1:] != gid[:-1] + 1
    brk[::per] = True
    first = np.flatnonzero(brk)
    length = np.diff(np.append(first, gid.size))
    return Regions(gid[first], length.astype(np.int64), first // per)


def union_length(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """For intervals sorted by start: how many elements each adds to the union of those before it."""
    if start.size == 0:
        return np.zeros(0, np.int64)
    covered = np.maximum.accumulate(end)
    prev = np.empty_like(covered)
    prev[0] = start[0]
    prev[1:] = covered[:-1]
    return np.maximum(0, end - np.maximum(start, prev))


def canonical(start: np.ndarray, length: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals as sorted, disjoint, non-touching (start, end) pairs."""
    if start.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    order = np.argsort(start, kind="stable")
    s, e = start[order], start[order] + length[order]
    covered = np.maximum.accumulate(e)
    new = np.ones(s.size, dtype=bool)
    new[1:] = s[1:] > covered[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:], s.size) - 1
    return s[first], covered[last]
