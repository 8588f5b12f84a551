"""First-fit placement of allocations with lifetimes, as a compiled loop.

Liveness shares a tile's not-always-live bytes between allocations whose lifetimes do not overlap:
each allocation, in order of its first step (then largest first, then index), takes the lowest
aligned offset where it overlaps no live allocation. The loop is sequential by nature and runs once
per distinct tile layout (about a thousand for BERT-base: a compute set's receive buffer differs
from tile to tile), so it is compiled (numba, cached on disk like ``profiler.host.half_kernels``) rather
than run per allocation in Python. Imported on first use (numba takes ~0.5 s to import).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(nogil=True, cache=True)
def _place(order: np.ndarray, sizes: np.ndarray, firsts: np.ndarray, lasts: np.ndarray, align: int) -> np.ndarray:
    n = order.size
    offsets = np.zeros(n, dtype=np.int64)
    # live allocations sorted by (start, end, last step), as bisect.insort keeps tuples
    act_s = np.empty(n, dtype=np.int64)
    act_e = np.empty(n, dtype=np.int64)
    act_l = np.empty(n, dtype=np.int64)
    k = 0
    for idx in range(n):
        i = order[idx]
        f, size = firsts[i], sizes[i]
        kept = 0
        for j in range(k):  # drop the ones that died before this one's first step, keeping the order
            if act_l[j] >= f:
                act_s[kept], act_e[kept], act_l[kept] = act_s[j], act_e[j], act_l[j]
                kept += 1
        k = kept
        pos = 0
        for j in range(k):
            if pos + size <= act_s[j]:
                break
            end = (act_e[j] + align - 1) // align * align
            if end > pos:
                pos = end
        offsets[i] = pos
        s, e, last = pos, pos + size, lasts[i]
        at = k  # insertion point after every tuple <= (s, e, last)
        for j in range(k):
            if (act_s[j], act_e[j], act_l[j]) > (s, e, last):
                at = j
                break
        for j in range(k, at, -1):
            act_s[j], act_e[j], act_l[j] = act_s[j - 1], act_e[j - 1], act_l[j - 1]
        act_s[at], act_e[at], act_l[at] = s, e, last
        k += 1
    return offsets


def first_fit(sizes: np.ndarray, firsts: np.ndarray, lasts: np.ndarray, align: int) -> np.ndarray:
    """Offsets for allocations of ``sizes`` live over [first, last] steps: ones whose lifetimes overlap
    never share bytes; each is placed at the lowest ``align``-aligned offset free over its lifetime,
    in order of first step, then largest first, then index."""
    sizes = np.asarray(sizes, dtype=np.int64)
    firsts, lasts = np.asarray(firsts, dtype=np.int64), np.asarray(lasts, dtype=np.int64)
    order = np.lexsort((np.arange(sizes.size), -sizes, firsts)).astype(np.int64)  # last key is the primary
    return _place(order, sizes, firsts, lasts, int(align))
