"""Sequence alignment of two key sequences (program steps, executed steps), tolerant of inserted
and removed elements.

Keys are small integers (see ``keys.factorize_pair``): equal keys mean "the same thing in both
reports". The alignment is a longest common subsequence computed in three tiers, so it stays fast
for tens of thousands of steps:

1. common prefix and suffix are matched directly (vectorised);
2. a window of at most DP_CELLS cells is solved exactly by an LCS dynamic programme, vectorised
   per row (``cur = maximum.accumulate(max(prev[j-1] + eq, prev[j]))``);
3. a bigger window is split at anchors, keys unique in both halves (patience diff: the longest
   run of anchors increasing in both), and the pieces are solved again; without unique keys (a
   repeated loop body) the k-th occurrence of a key pairs with its k-th occurrence on the other
   side, again reduced to a run increasing in both; a big window without any anchor is solved
   block-wise along the diagonal, committing half a block at a time.

Windows up to DP_CELLS are aligned optimally; bigger ones get a good, not always longest,
alignment (patience anchors and blocks, as git's patience diff).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

#: Largest window (rows x columns) solved by the exact DP; its pointer matrix is one byte per cell.
DP_CELLS = 4_000_000
#: Rows of a per-block DP when a window is larger than DP_CELLS.
BLOCK_ROWS = 1000


@dataclass(frozen=True)
class Alignment:
    """An edit script in order: entry k pairs ``baseline[k]`` with ``active[k]``; -1 on one side
    means the element exists only in the other report (removed: active is -1; added: baseline is -1)."""

    baseline: np.ndarray
    active: np.ndarray

    def __len__(self) -> int:
        return int(self.baseline.size)

    @property
    def matched(self) -> np.ndarray:
        """Mask of entries present in both."""
        return (self.baseline >= 0) & (self.active >= 0)

    @property
    def removed(self) -> np.ndarray:
        """Baseline indices with no partner in active."""
        return self.baseline[self.active < 0]

    @property
    def added(self) -> np.ndarray:
        """Active indices with no partner in baseline."""
        return self.active[self.baseline < 0]

    def active_for_baseline(self, n_baseline: int) -> np.ndarray:
        """For every baseline index, its active partner or -1."""
        out = np.full(n_baseline, -1, dtype=np.int64)
        m = self.matched
        out[self.baseline[m]] = self.active[m]
        return out


def align_sequences(baseline: np.ndarray, active: np.ndarray) -> Alignment:
    """Align two sequences of integer keys (longest common subsequence; see the module docstring)."""
    a = np.ascontiguousarray(baseline, dtype=np.int64)
    b = np.ascontiguousarray(active, dtype=np.int64)
    if a.size == b.size and np.array_equal(a, b):
        idx = np.arange(a.size, dtype=np.int64)
        return Alignment(idx, idx.copy())
    mi, mj = _matches(a, b)
    return _edit_script(mi, mj, a.size, b.size)


def _matches(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Matched index pairs (strictly increasing in both)."""
    out_i: list[np.ndarray] = []
    out_j: list[np.ndarray] = []
    stack = [(0, a.size, 0, b.size)]
    while stack:
        i0, i1, j0, j1 = stack.pop()
        # tier 1: common prefix and suffix
        n = min(i1 - i0, j1 - j0)
        if n:
            diff = np.flatnonzero(a[i0 : i0 + n] != b[j0 : j0 + n])
            p = int(diff[0]) if diff.size else n
            if p:
                out_i.append(np.arange(i0, i0 + p))
                out_j.append(np.arange(j0, j0 + p))
                i0, j0 = i0 + p, j0 + p
            n = min(i1 - i0, j1 - j0)
            diff = np.flatnonzero(a[i1 - n : i1][::-1] != b[j1 - n : j1][::-1]) if n else np.zeros(0)
            s = int(diff[0]) if diff.size else n
            if s:
                out_i.append(np.arange(i1 - s, i1))
                out_j.append(np.arange(j1 - s, j1))
                i1, j1 = i1 - s, j1 - s
        if i0 >= i1 or j0 >= j1:
            continue
        if (i1 - i0) * (j1 - j0) <= DP_CELLS:  # small enough for the exact programme
            ri, rj = _lcs(a[i0:i1], b[j0:j1])
            out_i.append(ri + i0)
            out_j.append(rj + j0)
            continue
        # tier 2: unique anchors
        ai, bj = _anchors(a[i0:i1], b[j0:j1])
        if ai.size == 0:
            ai, bj = _rank_anchors(a[i0:i1], b[j0:j1])
        if ai.size:
            out_i.append(ai + i0)
            out_j.append(bj + j0)
            edges_i = np.concatenate([[i0], ai + i0 + 1])
            ends_i = np.concatenate([ai + i0, [i1]])
            edges_j = np.concatenate([[j0], bj + j0 + 1])
            ends_j = np.concatenate([bj + j0, [j1]])
            for w in zip(edges_i.tolist(), ends_i.tolist(), edges_j.tolist(), ends_j.tolist(), strict=True):
                if w[0] < w[1] and w[2] < w[3]:
                    stack.append(w)
            continue
        # tier 3: block-wise dynamic programme
        ri, rj = _lcs_blocks(a[i0:i1], b[j0:j1])
        out_i.append(ri + i0)
        out_j.append(rj + j0)
    if not out_i:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    mi = np.concatenate(out_i).astype(np.int64)
    mj = np.concatenate(out_j).astype(np.int64)
    order = np.argsort(mi, kind="stable")
    return mi[order], mj[order]


def _anchors(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions of keys occurring exactly once in ``a`` and once in ``b``, reduced to the longest
    run increasing in both (patience diff)."""
    ua, ia, ca = np.unique(a, return_index=True, return_counts=True)
    ub, ib, cb = np.unique(b, return_index=True, return_counts=True)
    ua, ia = ua[ca == 1], ia[ca == 1]
    ub, ib = ub[cb == 1], ib[cb == 1]
    _, xa, xb = np.intersect1d(ua, ub, assume_unique=True, return_indices=True)
    if xa.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    pa_, pb = ia[xa], ib[xb]
    order = np.argsort(pa_)
    pa_, pb = pa_[order], pb[order]
    keep = _longest_increasing(pb)
    return pa_[keep].astype(np.int64), pb[keep].astype(np.int64)


def _occurrence(x: np.ndarray) -> np.ndarray:
    """For each element, how many equal elements precede it: [7, 3, 7, 7] -> [0, 0, 1, 2]."""
    order = np.argsort(x, kind="stable")
    sx = x[order]
    starts = np.flatnonzero(np.r_[True, sx[1:] != sx[:-1]])
    rank_sorted = np.arange(x.size) - np.repeat(starts, np.diff(np.r_[starts, x.size]))
    out = np.empty(x.size, dtype=np.int64)
    out[order] = rank_sorted
    return out


def _rank_anchors(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Anchors for windows without unique keys (a repeated loop body): the k-th occurrence of a key
    in ``a`` pairs with its k-th occurrence in ``b``; pairs inconsistent with the order are dropped
    by the longest increasing run, and what lies between anchors is aligned again."""
    ra, rb = _occurrence(a), _occurrence(b)
    width = int(max(ra.max(initial=0), rb.max(initial=0))) + 1
    ka = (a - min(a.min(), b.min())) * width + ra
    kb = (b - min(a.min(), b.min())) * width + rb
    _, xa, xb = np.intersect1d(ka, kb, assume_unique=True, return_indices=True)
    if xa.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    order = np.argsort(xa)
    pa_, pb = xa[order], xb[order]
    keep = _longest_increasing(pb)
    return pa_[keep].astype(np.int64), pb[keep].astype(np.int64)


def _longest_increasing(x: np.ndarray) -> np.ndarray:
    """Indices of a longest strictly increasing subsequence of ``x`` (O(n log n))."""
    tails: list[int] = []  # x value ending the best run of each length
    tail_idx: list[int] = []
    prev = np.full(x.size, -1, dtype=np.int64)
    for k, v in enumerate(x.tolist()):
        pos = bisect.bisect_left(tails, v)
        if pos:
            prev[k] = tail_idx[pos - 1]
        if pos == len(tails):
            tails.append(v)
            tail_idx.append(k)
        else:
            tails[pos] = v
            tail_idx[pos] = k
    out = []
    k = tail_idx[-1] if tail_idx else -1
    while k >= 0:
        out.append(k)
        k = int(prev[k])
    return np.array(out[::-1], dtype=np.int64)


def _lcs(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact LCS by DP, vectorised per row; returns matched (i, j) pairs."""
    n, m = a.size, b.size
    prev = np.zeros(m + 1, dtype=np.int32)
    cur = np.zeros(m + 1, dtype=np.int32)
    ptr = np.empty((n, m), dtype=np.uint8)  # 0 diagonal (match), 1 up (skip a[i]), 2 left (skip b[j])
    for i in range(n):
        eq = b == a[i]
        diag = prev[:-1] + eq
        up = prev[1:]
        np.maximum.accumulate(np.maximum(diag, up), out=cur[1:])
        best = cur[1:]
        ptr[i] = np.where(eq & (diag == best), 0, np.where(up == best, 1, 2))
        prev, cur = cur, prev
    ri: list[int] = []
    rj: list[int] = []
    i, j = n, m
    while i > 0 and j > 0:
        p = ptr[i - 1, j - 1]
        if p == 0:
            ri.append(i - 1)
            rj.append(j - 1)
            i -= 1
            j -= 1
        elif p == 1:
            i -= 1
        else:
            j -= 1
    return np.array(ri[::-1], dtype=np.int64), np.array(rj[::-1], dtype=np.int64)


def _lcs_blocks(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """LCS of a window too big for one DP: exact DP on blocks of BLOCK_ROWS rows against a band of
    columns around the diagonal, committing matches in the first half of each block."""
    n, m = a.size, b.size
    ratio = m / n
    slack = BLOCK_ROWS
    out_i: list[np.ndarray] = []
    out_j: list[np.ndarray] = []
    i0 = j0 = 0
    while i0 < n and j0 < m:
        i1 = min(n, i0 + BLOCK_ROWS)
        j1 = min(m, j0 + int(np.ceil((i1 - i0) * ratio)) + slack)
        ri, rj = _lcs(a[i0:i1], b[j0:j1])
        if i1 < n:  # keep the first half; the rest is redone with the next block
            keep = ri < (i1 - i0) // 2
            ri, rj = ri[keep], rj[keep]
        if ri.size:
            out_i.append(ri + i0)
            out_j.append(rj + j0)
            i0, j0 = i0 + int(ri[-1]) + 1, j0 + int(rj[-1]) + 1
        else:
            i0 += max(1, (i1 - i0) // 2)
        if i1 == n:
            break
    if not out_i:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(out_i), np.concatenate(out_j)


def _edit_script(mi: np.ndarray, mj: np.ndarray, n: int, m: int) -> Alignment:
    """Interleave matches with the unmatched elements: before each match, the removed baseline
    elements then the added active elements of the gap."""
    k = mi.size
    un_a = np.setdiff1d(np.arange(n), mi, assume_unique=True)
    un_b = np.setdiff1d(np.arange(m), mj, assume_unique=True)
    seg = np.concatenate([np.searchsorted(mi, un_a), np.searchsorted(mj, un_b), np.arange(k)])
    kind = np.concatenate([np.zeros(un_a.size), np.ones(un_b.size), np.full(k, 2)])
    pos = np.concatenate([un_a, un_b, np.zeros(k, dtype=np.int64)])
    base = np.concatenate([un_a, np.full(un_b.size, -1), mi]).astype(np.int64)
    act = np.concatenate([np.full(un_a.size, -1), un_b, mj]).astype(np.int64)
    order = np.lexsort((pos, kind, seg))
    return Alignment(base[order], act[order])
