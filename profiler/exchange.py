"""Exchange planning: which bytes each tile receives and sends for a step, and the code it needs.

Before a compute step each tile receives the vertex inputs that live on other tiles (each
remote element once per receiving tile, however many of its vertices read it). A copy moves each
element from the tile holding the source to the tile holding the destination. All vectorised.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from profiler import cost_model, ipu_links
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
    pairs = _pairs(src, dst, n)
    return np.bincount(pairs // n, minlength=n) + np.bincount(pairs % n, minlength=n)


def _finish(
    bytes_in: np.ndarray, bytes_out: np.ndarray, messages: np.ndarray, effective_in: np.ndarray, target: Target,
    global_: bool,
) -> ExchangePlan:  # fmt: skip
    if global_:
        # the IPU's links are shared by its tiles (profiler.ipu_links), not one link per tile
        cycles = ipu_links.global_exchange_cycles(bytes_in, bytes_out, target)
    else:
        cycles = np.asarray(cost_model.exchange_cycles(effective_in, bytes_out, target), dtype=np.int64)
    return ExchangePlan(bytes_in, bytes_out, messages.astype(np.int64), _code_bytes(messages), cycles)


@dataclass
class _Receives:
    """Per-tile figures of one part of a compute set's receives (on-IPU or inter-IPU), before cycles."""

    bytes_in: np.ndarray
    bytes_out: np.ndarray
    pairs: np.ndarray  # distinct src * num_tiles + dst of the tile pairs that move data
    shared: np.ndarray  # float: bytes a tile receives that its supertile partner also receives, halved


def _pairs(src: np.ndarray, dst: np.ndarray, n: int) -> np.ndarray:
    return _distinct(src * n + dst, n * n)


def _distinct(keys: np.ndarray, space: int) -> np.ndarray:
    """The distinct keys in [0, space), sorted: by counts when the space is small next to the keys
    (no sort), else by a sort (numpy's hash-based unique is several times slower on int64 keys)."""
    if space <= PAIR_BITMAP_LIMIT and keys.size > space // 64:
        return np.flatnonzero(np.bincount(keys, minlength=space))
    k = np.sort(keys)
    keep = np.ones(k.size, dtype=bool)
    np.not_equal(k[1:], k[:-1], out=keep[1:])
    return k[keep]


def _parts(src: np.ndarray, dst: np.ndarray, tpi: int) -> tuple[np.ndarray, np.ndarray]:
    cross = (src // tpi) != (dst // tpi)
    return ~cross, cross


def piece_receives(
    start: np.ndarray, length: np.ndarray, src: np.ndarray, dst: np.ndarray, itemsize: np.ndarray, n: int, tpi: int
) -> tuple[_Receives | None, _Receives | None]:
    """Receives from region pieces: piece i is global elements ``[start[i], start[i] + length[i])``,
    held by tile src[i] (inside one mapping interval), read on tile dst[i] != src[i], ``itemsize[i]``
    bytes each. Each element counts once per receiving tile however many pieces cover it (the union
    per tile), all over pieces, never elements. (on-IPU, inter-IPU) parts, None where empty."""
    if start.size == 0:
        return None, None
    span = int((start + length).max()) + 1
    shifted = start + dst * span  # one sort key: (receiving tile, start)
    order = np.argsort(shifted, kind="stable")  # timsort: pieces arrive as ascending runs
    shifted = shifted[order]
    ln, sr, d, w = length[order], src[order], dst[order], itemsize[order]
    new = union_length(shifted, shifted + ln)
    keep = new > 0
    first = (shifted + ln - new)[keep] - d[keep] * span  # where each piece's new part begins
    ln, sr, d, w = new[keep], sr[keep], d[keep], w[keep]
    nbytes = ln * w
    out: list[_Receives | None] = []
    parts = _parts(sr, d, tpi)
    for part in parts:
        if not part.any():
            out.append(None)
            continue
        ps, pd, pb = sr[part], d[part], nbytes[part]
        shared = np.zeros(n)
        if part is parts[0]:
            # elements both tiles of a supertile receive: the pieces' total minus their union per supertile
            st = pd // TILES_PER_SUPERTILE
            sh2 = first[part] + st * span
            o2 = np.argsort(sh2, kind="stable")
            sh2 = sh2[o2]
            union = union_length(sh2, sh2 + ln[part][o2])
            both = np.bincount(st[o2], weights=(ln[part][o2] - union) * w[part][o2], minlength=n)
            shared = both[np.arange(n) // TILES_PER_SUPERTILE] / 2
        out.append(_Receives(np.bincount(pd, weights=pb, minlength=n).astype(np.int64),
                             np.bincount(ps, weights=pb, minlength=n).astype(np.int64), _pairs(ps, pd, n), shared))  # fmt: skip
    return out[0], out[1]


def element_receives(
    gid: np.ndarray, src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray | int, n: int, tpi: int
) -> tuple[_Receives | None, _Receives | None]:
    """Receives from distinct (element, receiving tile) pairs sorted by element then tile (fields
    whose runs are too short for pieces to pay): the same figures as ``piece_receives``."""
    out: list[_Receives | None] = []
    local, cross = _parts(src, dst, tpi)
    for part in (local, cross):
        if not part.any():
            out.append(None)
            continue
        if part.all():  # the usual case (one IPU): no copies of the large arrays
            g, s, d, w = gid, src, dst, nbytes
        else:
            g, s, d = gid[part], src[part], dst[part]
            w = nbytes if np.ndim(nbytes) == 0 else nbytes[part]
        if np.ndim(w) == 0:  # one element size: counts times the size (unweighted bincounts are faster)
            b_in = np.bincount(d, minlength=n).astype(np.int64) * int(w)
            b_out = np.bincount(s, minlength=n).astype(np.int64) * int(w)
        else:
            b_in = np.bincount(d, weights=w, minlength=n).astype(np.int64)
            b_out = np.bincount(s, weights=w, minlength=n).astype(np.int64)
        shared = np.zeros(n)
        if part is local:
            # the two receivers of a supertile sit next to each other (sorted by element, then tile)
            st = d // TILES_PER_SUPERTILE
            same = (g[1:] == g[:-1]) & (st[1:] == st[:-1])
            both = np.zeros(d.size, dtype=bool)
            both[1:] |= same
            both[:-1] |= same
            if np.ndim(w) == 0:
                shared = np.bincount(d[both], minlength=n) * int(w) / 2
            else:
                shared = np.bincount(d[both], weights=w[both], minlength=n) / 2
        out.append(_Receives(b_in, b_out, _pairs(s, d, n), shared))
    return out[0], out[1]


def plan_receives(
    parts: list[tuple[_Receives | None, _Receives | None]], target: Target
) -> tuple[ExchangePlan, ExchangePlan | None]:
    """The on-IPU and inter-IPU exchange plans (None: no inter-IPU part) from receive figures of
    disjoint element sets. An element both tiles of a supertile receive counts half towards their
    cycles (ref §1 "Tiles sharing an exchange bus", §3.8); bytes_in still reports every byte."""
    n = target.num_tiles
    plans: list[ExchangePlan | None] = []
    for k in (0, 1):
        found = [p[k] for p in parts if p[k] is not None]
        if not found:
            plans.append(None)
            continue
        b_in = sum(r.bytes_in for r in found)
        b_out = sum(r.bytes_out for r in found)
        pairs = _distinct(np.concatenate([r.pairs for r in found]), n * n)
        messages = np.bincount(pairs // n, minlength=n) + np.bincount(pairs % n, minlength=n)
        effective = b_in - np.floor(sum(r.shared for r in found)).astype(np.int64)
        plans.append(_finish(b_in, b_out, messages, effective, target, global_=k == 1))  # type: ignore[arg-type]
    local = plans[0] or plan_transfers(np.zeros(0, np.int64), np.zeros(0, np.int64), 0, target)
    return local, plans[1]
