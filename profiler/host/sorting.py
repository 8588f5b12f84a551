"""A stable sorting order of integer keys, faster than ``np.argsort(kind="stable")`` on the
compiler's keys (piece starts, tile-and-start keys), the same order.

numpy sorts int64 *values* with SIMD (x86-simd-sort, numpy >= 2.0) but its stable argsort is a
timsort: 5-12x slower on shuffled keys of 10^4-10^6 (measured here: 1 M random keys, 232 ms
against 32). So each key is packed with its index in the low bits of one int64 and the packed
values are sorted: equal keys keep their index order (stable), and the order is read back from the
low bits. Keys already in order, or in a few long ascending runs (which timsort merges in one
pass), keep the argsort; so do keys too wide to pack beside their index.
"""

from __future__ import annotations

import math

import numpy as np

#: below this, argsort's own cost is a few microseconds: nothing to win
_SMALL = 2048
#: at most one descent per this many keys: long ascending runs, which timsort merges faster
#: (1 M keys in runs of 10^4: timsort 15 ms, packed 22 ms; runs of 10^3: 21 against 20)
_LONG_RUNS = 1000


def stable_order(key: np.ndarray) -> np.ndarray:
    """``np.argsort(key, kind="stable")`` of a 1-D integer array (int64 indices)."""
    n = key.size
    if n < _SMALL or key.dtype.kind not in "iu":
        return np.argsort(key, kind="stable")
    descents = np.count_nonzero(key[1:] < key[:-1])
    if descents == 0:
        return np.arange(n, dtype=np.int64)
    if descents * _LONG_RUNS < n:
        return np.argsort(key, kind="stable")
    bits = (n - 1).bit_length()
    lo = int(key.min())
    if int(key.max()) - lo >= 1 << (63 - bits):
        return np.argsort(key, kind="stable")
    packed = np.subtract(key, lo, dtype=np.int64)
    packed <<= bits
    packed |= np.arange(n, dtype=np.int64)
    packed.sort()
    packed &= (1 << bits) - 1
    return packed


def unique(a: np.ndarray) -> np.ndarray:
    """``np.unique(a)``: the sorted distinct values, flattened. For integers by one sort: numpy
    2.3+'s ``np.unique`` without ``return_*`` takes a hash table, 50x slower on many distinct
    integers (measured here, numpy 2.4: 1 M random int64 1,250 ms against 22 ms sorted, 0..10^6
    1,010 ms; ResNet-50's and a decoder's compiles ask it of every vertex's tile)."""
    a = np.asarray(a)
    if a.dtype.kind not in "iub":
        return np.unique(a)
    out = np.sort(a, axis=None)
    if out.size > 1:
        out = out[np.concatenate(([True], out[1:] != out[:-1]))]
    return out


def union(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``np.union1d(a, b)`` by one sort (``unique``)."""
    return unique(np.concatenate([np.ravel(a), np.ravel(b)]))


def first_appearance(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(codes, distinct values) of a 1-D integer array, the values numbered in the order they first
    appear (``pandas.factorize``'s order): ``distinct[codes]`` is ``a``. By one stable sort, so the
    simulator needs no pandas (its import is ~0.4 s of every ``tilescope run``)."""
    a = np.asarray(a).reshape(-1)
    if a.size == 0:
        return np.zeros(0, dtype=np.int64), a
    order = stable_order(a) if a.dtype.kind in "iu" else np.argsort(a, kind="stable")
    s = a[order]
    head = np.concatenate(([True], s[1:] != s[:-1]))
    group = np.cumsum(head) - 1  # each sorted element's distinct value, in sorted order
    first = order[head]  # where each distinct value first appears (stable: the lowest index)
    rank = np.empty(first.size, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size)
    codes = np.empty(a.size, dtype=np.int64)
    codes[order] = rank[group]
    return codes, a[np.sort(first)]


def unique_rows(a: np.ndarray) -> np.ndarray:
    """``np.unique(a, axis=0)``: the distinct rows of a 2-D array, in lexicographic order. Rows of
    non-negative integers are packed into one mixed-radix int64 key (the first column most
    significant, so the keys sort as the rows do) and sorted once: numpy's ``axis=0`` sorts a
    structured view of the rows (a matmul's vertex shapes, one row per vertex: ~1 s of BERT-large's
    import). Other arrays, or keys too wide for int64, take numpy's way."""
    a = np.asarray(a)
    if a.ndim != 2 or a.dtype.kind not in "iu" or a.size == 0 or int(a.min()) < 0:
        return np.unique(a, axis=0)
    radix = [int(m) + 1 for m in a.max(axis=0)]
    if math.prod(radix) >= 1 << 63:
        return np.unique(a, axis=0)
    key = np.zeros(a.shape[0], dtype=np.int64)
    for j, r in enumerate(radix):
        key *= r
        key += a[:, j]
    u = unique(key)
    cols = []
    for r in reversed(radix):
        cols.append(u % r)
        u //= r
    return np.stack(cols[::-1], axis=1).astype(a.dtype)
