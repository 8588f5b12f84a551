"""Planning a compute set's exchange from the pieces its vertices read on other tiles.

Fields whose pieces are long are planned as pieces (interval unions per receiving tile,
``exchange.piece_receives``); fields of single elements or very short runs as packed element keys
deduplicated by one sort (``_ReceiveKeys``, ``exchange.element_receives``). Both end in
``exchange.plan_receives``: the on-IPU exchange and the inter-IPU part, with cycles and code.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from profiler.chip.targets import Target
from profiler.compiler.exchange import Addresses, ExchangePlan, element_receives, piece_receives, plan_receives
from profiler.host import host_memory

# Host bytes per element of short-run fields planned per element (the packed key, its sorted copy
# and the unpacked arrays).
PLAN_BYTES_PER_READ_ELEMENT = 40


_LOG2_ITEMSIZE = {1: 0, 2: 1, 4: 2, 8: 3}


class RemoteReads(NamedTuple):
    """What one vertex field reads from other tiles: pieces of global elements ``[start, start +
    length)`` held by tile ``src``, read on tile ``dst``; their element size; and the pieces the
    holders send (``sent_pieces``: start, length, holding tile)."""

    start: np.ndarray
    length: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    itemsize: int
    sent: tuple[np.ndarray, np.ndarray, np.ndarray]


class _ReceiveKeys:
    """Remote element reads of one compute set packed as int64 bit fields (element, receiving tile,
    sending tile, log2 of the element size), one array per field, so that deduplicating them is one
    plain sort (the compile hot spot for large convolutions) and no per-read arrays of sending
    tiles or sizes are concatenated. ``bits`` is None when the packed key would not fit."""

    def __init__(self, num_tiles: int, num_elements: int) -> None:
        bits = max(int(num_tiles - 1).bit_length(), 1)
        self.bits = bits if max(num_elements, 1) << (2 * bits + 2) < 2**62 else None
        self.keys: list[np.ndarray] = []
        self.log2_sizes: set[int] = set()
        self.unpacked: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []  # fallback

    def add(self, gid: np.ndarray, src: np.ndarray, dst: np.ndarray, itemsize: int) -> None:
        log2 = _LOG2_ITEMSIZE.get(itemsize)
        if self.bits is None or log2 is None:
            self.unpacked.append((gid, src, dst, np.full(gid.size, itemsize, dtype=np.int64)))
            return
        key = gid.astype(np.int64, copy=False)  # a temporary of the caller's: packed in place
        key <<= 2 * self.bits + 2
        key |= dst.astype(np.int64, copy=False) << (self.bits + 2)
        key |= src.astype(np.int64, copy=False) << 2
        key |= log2
        self.keys.append(key)
        self.log2_sizes.add(log2)

    def _unpack(self, key: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | int]:
        bits, mask = self.bits or 0, (1 << (self.bits or 0)) - 1
        # one element size (the usual case): a plain int, so byte counts need no weighted bincounts
        size = 1 << next(iter(self.log2_sizes)) if len(self.log2_sizes) == 1 else np.left_shift(1, key & 3)
        return key >> (2 * bits + 2), (key >> 2) & mask, (key >> (bits + 2)) & mask, size

    def unique(self, num_tiles: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | int] | None:
        """Each remote element once per receiving tile (however many vertices there read it), sorted
        by (element, receiving tile): (element gid, sending tile, receiving tile, bytes); None if none."""
        if not self.unpacked:
            if not self.keys:
                return None
            key = np.concatenate(self.keys) if len(self.keys) > 1 else self.keys[0]
            self.keys = []
            # timsort: the keys come as long ascending runs (vertex fields read consecutive elements),
            # which it merges ~4x faster than the default introsort on a ResNet (values only)
            key.sort(kind="stable")
            keep = np.empty(key.size, dtype=bool)
            keep[:1] = True
            np.not_equal(key[1:], key[:-1], out=keep[1:])
            return self._unpack(key[keep])
        parts = self.unpacked + [self._unpack(k) for k in self.keys]
        parts = [(g, s, d, np.broadcast_to(np.asarray(n, dtype=np.int64), g.shape)) for g, s, d, n in parts]
        gid, src, dst, nbytes = (np.concatenate([p[i] for p in parts]) for i in range(4))
        _, first = np.unique(gid.astype(np.int64) * num_tiles + dst, return_index=True)
        return gid[first], src[first], dst[first], nbytes[first]


def sent_pieces(
    start: np.ndarray, length: np.ndarray, src: np.ndarray, remote: np.ndarray, shared: tuple[np.ndarray, ...] | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What the holding tiles send of a field's remote pieces: (start, length, holding tile) of
    pieces whose union is what each tile sends (multicast: an element goes out once however many
    tiles read it). With blocks shared by rows, each distinct piece some tile reads remotely once,
    instead of one copy per reading row; the padding pieces after them as they are."""
    if shared is None:
        return start[remote], length[remote], src[remote]
    s, n, t, idx = shared
    read = np.zeros(s.size, dtype=bool)
    read[idx[remote[: idx.size]]] = True
    pad = np.flatnonzero(remote[idx.size :]) + idx.size
    return (
        np.concatenate([s[read], start[pad]]),
        np.concatenate([n[read], length[pad]]),
        np.concatenate([t[read], src[pad]]),
    )


def cat_parts(parts: list[np.ndarray]) -> np.ndarray:
    """np.concatenate, without copying a lone array (the pieces of a compute set run to millions)."""
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _take_column(columns: list[list[np.ndarray]], i: int) -> np.ndarray:
    """Column ``i`` of every field's arrays as one array (``cat_parts``), dropping the fields' own."""
    whole = cat_parts([c[i] for c in columns])
    for c in columns:
        c[i] = whole[:0]
    return whole


def plan_compute_set_receives(
    pieces: list[RemoteReads],
    short: list[RemoteReads],
    num_elements: int,
    target: Target,
    address: Addresses | None = None,
) -> tuple[ExchangePlan, ExchangePlan | None]:
    """The (on-IPU, inter-IPU) exchange plans of a compute set's remote reads: ``pieces`` and
    ``short`` per field of long and of short runs (``pieces`` is emptied: its arrays are taken
    over, so that they are not held twice); ``num_elements``: the graph's global ids;
    ``address``: their tile-memory addresses, in which regions are runs (``ElementMap.addresses``)."""
    n, tpi = target.num_tiles, target.tiles_per_ipu
    parts = []
    if pieces:
        sizes = {r.itemsize for r in pieces}
        # one element size (the usual case): a plain int, no array of sizes per piece
        size: np.ndarray | int
        sent_size: np.ndarray | int
        if len(sizes) == 1:
            size = sent_size = sizes.pop()
        else:
            size = np.concatenate([np.full(r.start.size, r.itemsize, np.int64) for r in pieces])
            sent_size = np.concatenate([np.full(r.sent[0].size, r.itemsize, np.int64) for r in pieces])
        # the fields' arrays taken over column by column, each field's let go once its column is
        # whole, so the compute set's pieces are held once, not per field and concatenated too
        columns = [[r.start, r.length, r.src, r.dst, *r.sent] for r in pieces]
        # the pieces sent are those read where no field shares blocks (compute_sets: the same arrays)
        same = all(c[4] is c[0] and c[5] is c[1] and c[6] is c[2] for c in columns)
        pieces.clear()
        start, length, src, dst = (_take_column(columns, i) for i in range(4))
        s_start, s_length, s_src = (start, length, src) if same else (_take_column(columns, i) for i in range(4, 7))
        del columns  # (when ``same``, its sent columns are the fields' arrays just taken over)
        parts.append(piece_receives(start, length, src, dst, size, n, tpi, sent=(s_start, s_length, s_src, sent_size),
                                    address=address))  # fmt: skip
    if short:
        keys = _ReceiveKeys(n, num_elements)
        for start, length, src, dst, size, _ in short:  # a field's elements share one size
            total = int(length.sum())
            host_memory.ensure(
                PLAN_BYTES_PER_READ_ELEMENT * total, f"planning an exchange of {total:,} short-run elements"
            )
            gid = np.repeat(start - (np.cumsum(length) - length), length)
            gid += np.arange(total)
            keys.add(gid, np.repeat(src, length), np.repeat(dst, length), size)
        unique = keys.unique(n)
        if unique is not None:
            parts.append(element_receives(*unique[:3], unique[3], n, tpi, address))
    return plan_receives(parts, target)
