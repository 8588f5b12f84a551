"""Exchange planning: which bytes each tile receives and sends for a step, and the code it needs.

Before a compute step each tile receives the vertex inputs that live on other tiles (each
remote element once per receiving tile, however many of its vertices read it). A copy moves each
element from the tile holding the source to the tile holding the destination. All vectorised.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from profiler import cost_model
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
    if n * n <= PAIR_BITMAP_LIMIT and s.size > n * n // 8:  # distinct (src, dst) pairs by counts: no sort
        pairs = np.flatnonzero(np.bincount(s * n + d, minlength=n * n))
    else:
        pairs = np.unique(s * n + d)
    messages = np.bincount(pairs // n, minlength=n) + np.bincount(pairs % n, minlength=n)
    if global_:
        cycles = np.asarray(cost_model.global_exchange_cycles(np.maximum(bytes_in, bytes_out), target), dtype=np.int64)
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
        cycles = np.asarray(cost_model.exchange_cycles(effective_in, bytes_out, target), dtype=np.int64)
    return ExchangePlan(bytes_in, bytes_out, messages.astype(np.int64), _code_bytes(messages), cycles)


def dedupe_receives(gid: np.ndarray, dst: np.ndarray, num_tiles: int) -> np.ndarray:
    """Mask keeping the first of each (global element id, receiving tile) pair."""
    key = gid.astype(np.int64) * num_tiles + dst
    _, first = np.unique(key, return_index=True)
    mask = np.zeros(key.size, dtype=bool)
    mask[first] = True
    return mask
