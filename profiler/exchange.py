"""Exchange planning: which bytes each tile receives and sends for a step, and the code it needs.

Before a compute step each tile receives the vertex inputs that live on other tiles (each
remote element once per receiving tile, however many of its vertices read it). A copy moves each
element from the tile holding the source to the tile holding the destination. All vectorised.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from profiler import cost_model
from profiler.regions import union_length
from profiler.targets import Target

# [INF] ref §3.8 / §8: "exchange code bytes per tile grow with the number of messages". Modelled as
# a fixed prologue (sync + setup, 6 instructions of ref §1 `instructionBytes` 4) plus one send or
# receive instruction pair per message (2 x 4 bytes).
EXCHANGE_CODE_BASE_BYTES = 24
EXCHANGE_CODE_BYTES_PER_MESSAGE = 8
# ref §1 "Tiles sharing an exchange bus": 2 (a supertile; popops ExchangeEstimator.cpp asserts it).
TILES_PER_SUPERTILE = 2
# Up to this many (src, dst) tile pairs (a 2-IPU machine), distinct pairs are found with a count array.
PAIR_BITMAP_LIMIT = 1 << 24


@dataclass
class ExchangePlan:
    """Per-tile figures of one exchange (arrays of length num_tiles)."""

    bytes_in: np.ndarray
    bytes_out: np.ndarray
    messages: np.ndarray  # distinct (peer, direction) pairs per tile
    code_bytes: np.ndarray
    cycles: np.ndarray

    @property
    def active(self) -> bool:
        return bool(self.bytes_in.any() or self.bytes_out.any())


def _code_bytes(messages: np.ndarray) -> np.ndarray:
    return np.where(messages > 0, EXCHANGE_CODE_BASE_BYTES + EXCHANGE_CODE_BYTES_PER_MESSAGE * messages, 0).astype(
        np.int64
    )


def plan_transfers(
    src: np.ndarray,
    dst: np.ndarray,
    nbytes: np.ndarray | int,
    target: Target,
    global_: bool = False,
    gid: np.ndarray | None = None,
    sorted_by_gid: bool = False,
) -> ExchangePlan:
    """Plan moving element i from tile src[i] to tile dst[i] (only src != dst is moved).

    With ``gid`` (a global id per element), an element both tiles of a supertile receive is
    received at twice the rate (ref §1 "Tiles sharing an exchange bus", §3.8): it counts half
    towards their exchange cycles, while bytes_in still reports every byte received.
    ``sorted_by_gid``: the elements are distinct (gid, dst) pairs sorted by gid then dst, so the two
    receivers of a supertile sit next to each other (no sort needed to find them).
    """
    n = target.num_tiles
    remote = src != dst
    all_remote = bool(remote.all())
    if all_remote:  # the compiler passes remote receives only: no copies of large arrays
        s, d = src.astype(np.int64, copy=False), dst.astype(np.int64, copy=False)
        w = np.broadcast_to(np.asarray(nbytes, dtype=np.int64), src.shape)
    else:
        s, d = src[remote].astype(np.int64), dst[remote].astype(np.int64)
        w = np.broadcast_to(np.asarray(nbytes, dtype=np.int64), src.shape)[remote]
    if np.ndim(nbytes) == 0:  # one element size: counts times the size (unweighted bincounts are faster)
        bytes_in = np.bincount(d, minlength=n).astype(np.int64) * int(nbytes)
        bytes_out = np.bincount(s, minlength=n).astype(np.int64) * int(nbytes)
    else:
        bytes_in = np.bincount(d, weights=w, minlength=n).astype(np.int64)
        bytes_out = np.bincount(s, weights=w, minlength=n).astype(np.int64)
    messages = _messages(s, d, n)
    if global_:
        return _finish(bytes_in, bytes_out, messages, bytes_in, target, global_=True)
    else:
        effective_in = bytes_in
        if gid is not None and d.size and sorted_by_gid:
            g, st = (gid if all_remote else gid[remote]), d // TILES_PER_SUPERTILE
            same = (g[1:] == g[:-1]) & (st[1:] == st[:-1])
            shared = np.zeros(d.size, dtype=bool)
            shared[1:] |= same
            shared[:-1] |= same
            if np.ndim(nbytes) == 0:
                saved = np.bincount(d[shared], minlength=n) * int(nbytes) / 2
            else:
                saved = np.bincount(d[shared], weights=w[shared], minlength=n) / 2
            effective_in = bytes_in - np.floor(saved).astype(np.int64)
        elif gid is not None and d.size:
            pair_key = gid[remote].astype(np.int64) * (n // TILES_PER_SUPERTILE + 1) + d // TILES_PER_SUPERTILE
            _, inv, counts = np.unique(pair_key, return_inverse=True, return_counts=True)
            shared = counts[inv] == TILES_PER_SUPERTILE
            saved = np.bincount(d[shared], weights=w[shared], minlength=n) / 2
            effective_in = bytes_in - np.floor(saved).astype(np.int64)
    return _finish(bytes_in, bytes_out, messages, effective_in, target, global_=False)


def _messages(src: np.ndarray, dst: np.ndarray, n: int) -> np.ndarray:
    """Distinct (peer, direction) pairs per tile of transfers src[i] -> dst[i]."""
    if n * n <= PAIR_BITMAP_LIMIT and src.size > n * n // 8:  # distinct (src, dst) pairs by counts: no sort
        pairs = np.flatnonzero(np.bincount(src * n + dst, minlength=n * n))
    else:
        pairs = np.unique(src * n + dst)
    return np.bincount(pairs // n, minlength=n) + np.bincount(pairs % n, minlength=n)


def _finish(
    bytes_in: np.ndarray, bytes_out: np.ndarray, messages: np.ndarray, effective_in: np.ndarray, target: Target,
    global_: bool,
) -> ExchangePlan:  # fmt: skip
    if global_:
        cycles = np.asarray(cost_model.global_exchange_cycles(np.maximum(bytes_in, bytes_out), target), dtype=np.int64)
    else:
        cycles = np.asarray(cost_model.exchange_cycles(effective_in, bytes_out, target), dtype=np.int64)
    return ExchangePlan(bytes_in, bytes_out, messages.astype(np.int64), _code_bytes(messages), cycles)


def plan_receives(
    start: np.ndarray, length: np.ndarray, src: np.ndarray, dst: np.ndarray, itemsize: np.ndarray, target: Target
) -> tuple[ExchangePlan, ExchangePlan | None]:
    """Plan a compute set's receives from region pieces: piece i is global elements ``[start[i],
    start[i] + length[i])``, held by tile src[i] (one mapping interval), read on tile dst[i] != src[i],
    of ``itemsize[i]`` bytes each. Each element is received once per tile however many pieces cover
    it; an element both tiles of a supertile receive counts half towards their cycles (ref §1, §3.8).
    All over pieces, never elements. Returns the on-IPU plan and the inter-IPU plan (None if none)."""
    n, tpi = target.num_tiles, target.tiles_per_ipu
    if start.size == 0:
        empty = np.zeros(0, np.int64)
        return plan_transfers(empty, empty, 0, target), None
    span = int((start + length).max()) + 1
    # the union per receiving tile: pieces sorted by (dst, start), offset by dst so one running max serves
    order = np.lexsort((start, dst))
    s, ln, sr, d, w = start[order], length[order], src[order], dst[order], itemsize[order]
    shifted = s + d * span
    new = union_length(shifted, shifted + ln)
    keep = new > 0
    first = np.maximum(shifted, shifted + ln - new)[keep] - d[keep] * span  # where each piece's new part begins
    ln, sr, d, w = new[keep], sr[keep], d[keep], w[keep]
    nbytes = ln * w
    cross = (sr // tpi) != (d // tpi)
    plans = []
    for part in (~cross, cross):
        if not part.any():
            plans.append(None)
            continue
        ps, pd, pb = sr[part], d[part], nbytes[part]
        bytes_in = np.bincount(pd, weights=pb, minlength=n).astype(np.int64)
        bytes_out = np.bincount(ps, weights=pb, minlength=n).astype(np.int64)
        messages = _messages(ps, pd, n)
        if part is cross:
            plans.append(_finish(bytes_in, bytes_out, messages, bytes_in, target, global_=True))
            continue
        # elements both tiles of a supertile receive: the pieces' total minus their union per supertile
        st = pd // TILES_PER_SUPERTILE
        o2 = np.lexsort((first[part], st))
        sh2 = first[part][o2] + st[o2] * span
        union = union_length(sh2, sh2 + ln[part][o2])
        shared = np.bincount(st[o2], weights=(ln[part][o2] - union) * w[part][o2], minlength=n)
        saved = np.floor(shared[np.arange(n) // TILES_PER_SUPERTILE] / 2).astype(np.int64)
        receives_on_st = np.bincount(pd, minlength=n) > 0
        effective_in = bytes_in - np.where(receives_on_st, saved, 0)
        plans.append(_finish(bytes_in, bytes_out, messages, effective_in, target, global_=False))
    local = plans[0] if plans[0] is not None else plan_transfers(np.zeros(0, np.int64), np.zeros(0, np.int64), 0, target)
    return local, plans[1]


def dedupe_receives(gid: np.ndarray, dst: np.ndarray, num_tiles: int) -> np.ndarray:
    """Mask keeping the first of each (global element id, receiving tile) pair."""
    key = gid.astype(np.int64) * num_tiles + dst
    _, first = np.unique(key, return_index=True)
    mask = np.zeros(key.size, dtype=bool)
    mask[first] = True
    return mask
