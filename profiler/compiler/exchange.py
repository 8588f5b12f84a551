"""Exchange planning: which bytes each tile receives and sends for a step, and the code it needs.

Before a compute step each tile receives the vertex inputs that live on other tiles (each
remote element once per receiving tile, however many of its vertices read it). An element that
several tiles need is sent once by its owner (multicast: every receiver listens at the same cycles,
ref §3.8 / docs/fidelity.md "Exchange model"), so a tile's bytes sent are the union of what others
read from it, not the sum over receivers. Exchange code follows *regions* (runs contiguous in both
the sending and the receiving memory, from one sending tile): ``cost_model.exchange_code_bytes``.
A copy moves each element from the tile holding the source to the tile holding the destination.
All vectorised over intervals (or elements, for fields of short runs).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeGuard

import numpy as np

from profiler.chip import cost_model, ipu_links
from profiler.chip.targets import Target
from profiler.host import sorting
from profiler.host.sorting import stable_order
from profiler.poplar.regions import union_length

# ref §1 "Tiles sharing an exchange bus": 2 (a supertile; popops ExchangeEstimator.cpp asserts it).
TILES_PER_SUPERTILE = 2
# Global element ids -> their tile-memory addresses (``ElementMap.addresses``): regions are runs there.
Addresses = Callable[[np.ndarray], np.ndarray]
# Up to this many (src, dst) tile pairs (a 2-IPU machine), distinct pairs are found with a count array.
PAIR_BITMAP_LIMIT = 1 << 24


@dataclass
class ExchangePlan:
    """Per-tile figures of one exchange (arrays of length num_tiles)."""

    bytes_in: np.ndarray
    bytes_out: np.ndarray  # a multicast region counted once
    messages: np.ndarray  # distinct (peer, direction) pairs per tile (reported, not charged)
    code_bytes: np.ndarray
    cycles: np.ndarray
    regions_in: np.ndarray | None = None
    regions_out: np.ndarray | None = None

    @property
    def active(self) -> bool:
        return bool(self.bytes_in.any() or self.bytes_out.any())


def _runs(tile: np.ndarray, first: np.ndarray, length: np.ndarray, n: int) -> np.ndarray:
    """Regions per tile of intervals sorted by (tile, first): an interval starts a new region unless
    it continues the previous one of the same tile exactly (contiguous)."""
    if tile.size == 0:
        return np.zeros(n, np.int64)
    new = np.ones(tile.size, dtype=bool)
    new[1:] = (tile[1:] != tile[:-1]) | (first[1:] != first[:-1] + length[:-1])
    return np.bincount(tile[new], minlength=n).astype(np.int64)


def plan_transfers(
    src: np.ndarray,
    dst: np.ndarray,
    nbytes: np.ndarray | int,
    target: Target,
    global_: bool = False,
    gid: np.ndarray | None = None,
    sorted_by_gid: bool = False,
    run_gids: tuple[np.ndarray, np.ndarray] | None = None,
) -> ExchangePlan:
    """Plan moving element i from tile src[i] to tile dst[i] (only src != dst is moved): a copy,
    each element to one destination. ``run_gids``: the source and destination global ids of each
    element, in the copy's order, so that a region is a run consecutive in both (without them, a
    run of the same tile pair).

    With ``gid``, an element both tiles of a supertile receive is received at twice the rate (ref
    §1 "Tiles sharing an exchange bus", §3.8): it counts half towards their exchange cycles, while
    bytes_in still reports every byte received. ``sorted_by_gid``: the elements are distinct (gid,
    dst) pairs sorted by gid then dst, so the two receivers of a supertile sit next to each other.
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
    # regions: runs (in the copy's order) of one tile pair, consecutive in source and destination
    new = np.ones(s.size, dtype=bool)
    new[1:] = (s[1:] != s[:-1]) | (d[1:] != d[:-1])
    if run_gids is not None:
        sg, dg = run_gids if all_remote else (run_gids[0][remote], run_gids[1][remote])
        new[1:] |= (sg[1:] != sg[:-1] + 1) | (dg[1:] != dg[:-1] + 1)
    regions_out = np.bincount(s[new], minlength=n).astype(np.int64)
    regions_in = np.bincount(d[new], minlength=n).astype(np.int64)
    if global_:
        return _finish(bytes_in, bytes_out, messages, bytes_in, regions_in, regions_out, target, global_=True)
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
    return _finish(bytes_in, bytes_out, messages, effective_in, regions_in, regions_out, target, global_=False)


def _messages(src: np.ndarray, dst: np.ndarray, n: int) -> np.ndarray:
    """Distinct (peer, direction) pairs per tile of transfers src[i] -> dst[i]."""
    pairs = _pairs(src, dst, n)
    return np.bincount(pairs // n, minlength=n) + np.bincount(pairs % n, minlength=n)


def _finish(
    bytes_in: np.ndarray, bytes_out: np.ndarray, messages: np.ndarray, effective_in: np.ndarray,
    regions_in: np.ndarray, regions_out: np.ndarray, target: Target, global_: bool,
) -> ExchangePlan:  # fmt: skip
    if global_:
        # the IPU's links are shared by its tiles (profiler.chip.ipu_links), not one link per tile
        cycles = ipu_links.global_exchange_cycles(bytes_in, bytes_out, target)
    else:
        cycles = np.asarray(cost_model.exchange_cycles(effective_in, bytes_out, target), dtype=np.int64)
    code = np.asarray(cost_model.exchange_code_bytes(regions_out, regions_in, target), dtype=np.int64)
    return ExchangePlan(bytes_in, bytes_out, messages.astype(np.int64), code, cycles, regions_in, regions_out)


@dataclass
class _Receives:
    """Per-tile figures of one part of a compute set's receives (on-IPU or inter-IPU), before cycles."""

    bytes_in: np.ndarray
    bytes_out: np.ndarray  # multicast: what other tiles read from a tile, counted once
    pairs: np.ndarray  # distinct src * num_tiles + dst of the tile pairs that move data
    shared: np.ndarray  # float: bytes a tile receives that its supertile partner also receives, halved
    regions_in: np.ndarray
    regions_out: np.ndarray


def _pairs(src: np.ndarray, dst: np.ndarray, n: int) -> np.ndarray:
    return _distinct(src * n + dst, n * n)


def _distinct(keys: np.ndarray, space: int) -> np.ndarray:
    """The distinct keys in [0, space), sorted: by counts when the space is small next to the keys
    (no sort), else by a sort (numpy's hash-based unique is several times slower on int64 keys)."""
    if space <= PAIR_BITMAP_LIMIT and keys.size > space // 64:
        seen = np.zeros(space, dtype=bool)  # a byte per key, not bincount's 8: fewer fresh pages to fault
        seen[keys] = True
        return np.flatnonzero(seen)
    k = np.sort(keys)
    keep = np.ones(k.size, dtype=bool)
    np.not_equal(k[1:], k[:-1], out=keep[1:])
    return k[keep]


def _parts(src: np.ndarray, dst: np.ndarray, tpi: int) -> tuple[np.ndarray, np.ndarray]:
    cross = (src // tpi) != (dst // tpi)
    return ~cross, cross


def _per_piece(itemsize: np.ndarray | int) -> TypeGuard[np.ndarray]:
    """Whether ``itemsize`` gives a size per piece (an array), not one size for all."""
    return np.ndim(itemsize) != 0


def _weighted(count: np.ndarray, itemsize: np.ndarray | int, part: np.ndarray | slice) -> np.ndarray:
    """Elements times their size (one size: a plain product, no per-piece array of sizes)."""
    return count * itemsize[part] if _per_piece(itemsize) else count * itemsize


def _sent(
    src: np.ndarray,
    first: np.ndarray,
    length: np.ndarray,
    itemsize: np.ndarray | int,
    n: int,
    span: int,
    shift: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(bytes, regions) each tile sends when every interval [first, first + length) it holds goes
    out once however many tiles read it (multicast): the union of its intervals, and that union's
    runs in the tile's memory (touching intervals make one run). ``shift``: each interval's tile
    address minus its global id (``ElementMap.addresses``; None: the same), which keeps a tile's
    order and so only decides where runs touch.

    Sending tiles are independent, so the intervals are planned a chunk of tiles at a time (about
    PIECE_CHUNK intervals): the sorted temporaries follow the chunk, not the compute set (an
    attention's rearranging copy sends ~10^6 intervals of 16 elements)."""
    sent, regions = np.zeros(n, np.int64), np.zeros(n, np.int64)
    if src.size <= PIECE_CHUNK:
        _sent_chunk(src, first, length, itemsize, span, shift, sent, regions)
        return sent, regions
    # by sending tile (a stable radix sort of 16-bit tiles), cut at tile boundaries
    by_tile = np.argsort(src.astype(np.int16 if n <= 1 << 15 else np.int32), kind="stable")
    tile_first = np.concatenate(([0], np.cumsum(np.bincount(src, minlength=n))))
    cuts = sorting.unique(tile_first[np.searchsorted(tile_first, np.arange(0, src.size, PIECE_CHUNK))])
    bounds = [*(int(c) for c in cuts if 0 < c < src.size), src.size]
    a = 0
    for b in bounds:
        o = by_tile[a:b]
        w = itemsize[o] if _per_piece(itemsize) else itemsize
        _sent_chunk(src[o], first[o], length[o], w, span, None if shift is None else shift[o], sent, regions)
        a = b
    return sent, regions


def _sent_chunk(
    src: np.ndarray,
    first: np.ndarray,
    length: np.ndarray,
    itemsize: np.ndarray | int,
    span: int,
    shift: np.ndarray | None,
    sent: np.ndarray,
    regions: np.ndarray,
) -> None:
    """``_sent`` of the intervals of some sending tiles (all of each), added to ``sent`` and ``regions``."""
    n = sent.size
    key = src * span + first
    order = stable_order(key)
    key, ln, s = key[order], length[order], src[order]
    end = key + ln
    new = union_length(key, end)
    if shift is not None:  # runs judged by address: within a tile, address order is global-id order
        addr = first[order] + shift[order]
        key = s * (int((addr + ln).max()) + 1) + addr
        end = key + ln
    covered = np.maximum.accumulate(end)
    starts = np.ones(key.size, dtype=bool)
    np.greater(key[1:], covered[:-1], out=starts[1:])  # a gap before it: a new run
    sent += np.bincount(s, weights=_weighted(new, itemsize, order), minlength=n).astype(np.int64)
    regions += np.bincount(s[starts], minlength=n).astype(np.int64)


def _bytes_per_tile(tile: np.ndarray, count: np.ndarray, itemsize: np.ndarray | int, n: int) -> np.ndarray:
    """Bytes per tile of ``count[i]`` elements of ``itemsize`` bytes on ``tile[i]``."""
    if np.ndim(itemsize) == 0:  # one size: the counts' sums times it, no product per piece
        return np.bincount(tile, weights=count, minlength=n).astype(np.int64) * int(itemsize)
    return np.bincount(tile, weights=count * itemsize, minlength=n).astype(np.int64)


def piece_receives(
    start: np.ndarray,
    length: np.ndarray,
    src: np.ndarray,
    dst: np.ndarray,
    itemsize: np.ndarray | int,
    n: int,
    tpi: int,
    sent: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | int] | None = None,
    address: Addresses | None = None,
) -> tuple[_Receives | None, _Receives | None]:
    """Receives from region pieces: piece i is global elements ``[start[i], start[i] + length[i])``,
    held by tile src[i] (inside one mapping interval), read on tile dst[i] != src[i], ``itemsize[i]``
    bytes each (or ``itemsize`` for all). Each element counts once per receiving tile however many
    pieces cover it (the union per tile), and once per sending tile however many tiles receive it
    (multicast); a tile's received regions are the runs of its new parts from one sender. All over
    pieces, never elements. (on-IPU, inter-IPU) parts, None where empty.

    ``sent``: (start, length, holding tile, itemsize) of pieces whose union per holding tile is the
    union of the pieces above (fewer: each distinct piece once, however many tiles read it); on one
    IPU the bytes and regions sent are found from them.

    ``address``: the tile-memory address of global elements (``ElementMap.addresses``), in which
    regions are runs (None: global ids). Bytes and unions are of elements, whatever the address."""
    if start.size == 0:
        return None, None
    span = int((start + length).max()) + 1
    shift = _shift(address, start)  # constant within a piece (one interval)
    # tile * span passes int32 on graphs of 2^31+ elements (in place: these arrays run to millions)
    key = dst.astype(np.int64)
    key *= span
    key += start  # one sort key: (receiving tile, start)
    order = stable_order(key)  # pieces often arrive as ascending runs: stable_order then keeps timsort
    del key  # each chunk's keys are made again from its pieces: no sorted copy of all of them is held
    # pieces that all stay on their IPU (a pipeline stage's compute set) are planned as on one IPU:
    # the inter-IPU part is empty, and the sent figures come from the distinct pieces
    one_ipu = tpi >= n or not bool(np.any(src // tpi != dst // tpi))
    parts = [_PartSums(n), _PartSums(n)]  # on-IPU, inter-IPU
    # receiving tiles are independent (but for supertile partners): planned a chunk of them at a
    # time, so the temporaries stay small enough for the allocator to reuse (profiler.host.allocator)
    bounds = _chunk_bounds(dst, n)
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        o = order[a:b]
        w = itemsize[o] if _per_piece(itemsize) else itemsize
        sh = None if shift is None else shift[o]
        key = dst[o].astype(np.int64)
        key *= span
        key += start[o]
        first, ln, sr, d, w, sh = _new_parts(key, length[o], src[o].astype(np.int64, copy=False), w, span, sh)
        split = (slice(None), None) if one_ipu else _parts(sr, d, tpi)
        for sums, part in zip(parts, split, strict=True):
            if part is None or (not isinstance(part, slice) and not part.any()):
                continue
            pw = w[part] if _per_piece(w) else w
            sums.add(
                sr[part],
                d[part],
                first[part],
                ln[part],
                pw,
                span,
                None if sh is None else sh[part],
                local=sums is parts[0],
                keep=not one_ipu or sent is None,
            )
    # the last chunk's temporaries and the order: not needed for the sent figures, which sort their own chunks
    del order, o, key, first, ln, sr, d, sh
    out: list[_Receives | None] = []
    for sums in parts:
        if not sums.any:
            out.append(None)
            continue
        if sent is not None and one_ipu:
            s_start, s_len, s_src, s_w = sent
            s_shift = _shift(address, s_start)
            sent_bytes, regions_out = _sent(s_src.astype(np.int64, copy=False), s_start, s_len, s_w, n, span, s_shift)
        else:
            h_src, h_first, h_len, h_w, h_shift = sums.held()
            sent_bytes, regions_out = _sent(h_src, h_first, h_len, h_w, n, span, h_shift)
        out.append(_Receives(sums.b_in, sent_bytes, _distinct(np.concatenate(sums.pairs), n * n), sums.shared,
                             sums.regions_in, regions_out))  # fmt: skip
    return out[0], out[1]


def _shift(address: Addresses | None, start: np.ndarray) -> np.ndarray | None:
    """Each piece's tile address minus its global id; None where they are the same (no address, or
    a graph without packed clones: ``ElementMap.addresses`` gives the ids back), which plans the same
    regions (a sender's parts that touch in memory are then neighbours in global-id order too)
    without an array of zeros and a sort by sender per chunk."""
    if address is None:
        return None
    found = address(start)
    return None if found is start else found - start


# Pieces planned per chunk of receiving (or sending) tiles, about: 2^18 pieces keep each temporary
# at 2 MiB, below glibc's mmap threshold as profiler.host.allocator sets it, so freed ones are reused
# rather than faulted in afresh (ResNet-50 at batch 32 plans compute sets of 14 M pieces), and the
# ~10 temporaries of a chunk (~20 MiB) stay small next to the pieces themselves (an attention's
# rearranging copy at sequence 1,024: 0.6 M pieces, whose chunk of 2^20 made the compile's peak).
PIECE_CHUNK = 1 << 18


def _chunk_bounds(dst: np.ndarray, n: int) -> list[int]:
    """Cuts of pieces sorted by (receiving tile ``dst``, start) into chunks of about PIECE_CHUNK, each
    starting at a supertile's first tile (the two receivers of a supertile are planned together):
    found from the pieces each supertile receives, so no sorted copy of the pieces is needed."""
    if dst.size <= PIECE_CHUNK:
        return [0, dst.size]
    supertiles = -(-n // TILES_PER_SUPERTILE)  # counted per tile, then per supertile: no quotient per piece
    per_tile = np.bincount(dst, minlength=supertiles * TILES_PER_SUPERTILE)
    per_supertile = per_tile.reshape(-1, TILES_PER_SUPERTILE).sum(axis=1)
    supertile_first = np.concatenate(([0], np.cumsum(per_supertile)))
    near = np.searchsorted(supertile_first, np.arange(PIECE_CHUNK, dst.size, PIECE_CHUNK))
    cuts = sorting.unique(supertile_first[np.minimum(near, supertile_first.size - 1)])
    return [0, *(int(c) for c in cuts if 0 < c < dst.size), dst.size]


def _new_parts(
    key: np.ndarray,
    length: np.ndarray,
    src: np.ndarray,
    itemsize: np.ndarray | int,
    span: int,
    shift: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray | int, np.ndarray | None]:
    """Of pieces sorted by key (receiving tile * span + start): the part of each that no earlier
    piece of its tile covers, (first, length, holding tile, receiving tile, itemsize, shift); pieces
    wholly inside earlier ones are dropped."""
    end = key + length
    new = union_length(key, end)
    first = end
    first -= new  # where each piece's new part begins, in key space
    d = key // span
    first -= d * span
    keep = new > 0
    if keep.all():
        return first, new, src, d, itemsize, shift
    w = itemsize[keep] if _per_piece(itemsize) else itemsize
    return first[keep], new[keep], src[keep], d[keep], w, None if shift is None else shift[keep]


class _PartSums:
    """Per-tile figures of one part (on-IPU or inter-IPU) summed over chunks of receiving tiles."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.any = False
        self.b_in = np.zeros(n, np.int64)
        self.shared = np.zeros(n)
        self.regions_in = np.zeros(n, np.int64)
        self.pairs: list[np.ndarray] = []
        self.kept: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | int, np.ndarray | None]] = []

    def add(
        self, ps: np.ndarray, pd: np.ndarray, pf: np.ndarray, pl: np.ndarray, pw: np.ndarray | int, span: int,
        shift: np.ndarray | None, local: bool, keep: bool,
    ) -> None:  # fmt: skip
        """New parts (sending tile, receiving tile, first, length, itemsize, address shift) sorted
        by (receiving tile, first); ``keep``: hold them for the sent figures (no distinct pieces were
        given)."""
        n = self.n
        self.any = True
        if local:
            # elements both tiles of a supertile receive: the parts' total minus their union per supertile
            st = pd // TILES_PER_SUPERTILE
            sh2 = pf + st * span
            o2 = stable_order(sh2)  # two sorted runs per supertile: a merge
            sh2, pl2 = sh2[o2], pl[o2]
            twice = pl2 - union_length(sh2, sh2 + pl2)
            both = np.bincount(st[o2], weights=_weighted(twice, pw, o2), minlength=n)
            self.shared += both[np.arange(n) // TILES_PER_SUPERTILE] / 2
        self.regions_in += _received_regions(ps, pd, pf, pl, shift, n)
        self.b_in += _bytes_per_tile(pd, pl, pw, n)
        self.pairs.append(_pairs(ps, pd, n))
        if keep:
            self.kept.append((ps, pf, pl, pw, shift))

    def held(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | int, np.ndarray | None]:
        """(sending tile, first, length, itemsize, address shift) of every new part kept."""
        ws = [k[3] for k in self.kept]
        if all(np.ndim(w) == 0 for w in ws) and len({int(w) for w in ws}) == 1:
            w: np.ndarray | int = ws[0]
        else:
            w = np.concatenate(
                [np.broadcast_to(np.asarray(w, np.int64), k[0].shape) for w, k in zip(ws, self.kept, strict=True)]
            )
        tiles = np.concatenate([k[0] for k in self.kept])
        first = np.concatenate([k[1] for k in self.kept])
        length = np.concatenate([k[2] for k in self.kept])
        shifts = [k[4] for k in self.kept]
        shift: np.ndarray | None = None
        if all(x is not None for x in shifts):
            shift = np.concatenate([x for x in shifts if x is not None])
        return tiles, first, length, w, shift


def _received_regions(
    ps: np.ndarray, pd: np.ndarray, pf: np.ndarray, pl: np.ndarray, shift: np.ndarray | None, n: int
) -> np.ndarray:
    """Regions per receiving tile of new parts sorted by (receiving tile, first): a run continues
    only from the same sender, contiguously in the sender's memory (the receive buffer takes each
    sender's data as it comes, so the destination side is contiguous). Without ``shift`` memory
    order is global-id order; with it, a sender's parts are contiguous when their addresses touch,
    even with other senders' elements between them by global id, so they are compared sender by
    sender (a stable sort by sender keeps each sender's parts in address order)."""
    new_region = np.ones(pd.size, dtype=bool)
    if shift is None:
        np.not_equal(pf[1:], pf[:-1] + pl[:-1], out=new_region[1:])
        new_region[1:] |= pd[1:] != pd[:-1]
        new_region[1:] |= ps[1:] != ps[:-1]
        return np.bincount(pd[new_region], minlength=n)
    # by sender (radix sort of 16-bit tiles), each sender's parts still by (receiving tile, first)
    o = np.argsort(ps.astype(np.int16 if n <= 1 << 15 else np.int32), kind="stable")
    s, d, a, ln = ps[o], pd[o], pf[o] + shift[o], pl[o]
    np.not_equal(a[1:], a[:-1] + ln[:-1], out=new_region[1:])
    new_region[1:] |= d[1:] != d[:-1]
    new_region[1:] |= s[1:] != s[:-1]
    return np.bincount(d[new_region], minlength=n)


def element_receives(
    gid: np.ndarray,
    src: np.ndarray,
    dst: np.ndarray,
    nbytes: np.ndarray | int,
    n: int,
    tpi: int,
    address: Addresses | None = None,
) -> tuple[_Receives | None, _Receives | None]:
    """Receives from distinct (element, receiving tile) pairs sorted by element then tile (fields
    whose runs are too short for pieces to pay): the same figures as ``piece_receives`` (regions as
    runs of ``address``, the tile-memory address of each element; None: global ids)."""
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
            w = nbytes[part] if _per_piece(nbytes) else nbytes
        g = g.astype(np.int64, copy=False)
        wa = np.broadcast_to(np.asarray(w, dtype=np.int64), g.shape)
        # sent once per element (multicast): the first of each element's receivers
        first_of = np.ones(g.size, dtype=bool)
        first_of[1:] = g[1:] != g[:-1]
        ug, us = g[first_of], s[first_of]
        a = None if address is None else address(g)
        if a is None or np.array_equal(a, g):
            run = np.ones(ug.size, dtype=bool)
            run[1:] = (ug[1:] != ug[:-1] + 1) | (us[1:] != us[:-1])
            regions_out = np.bincount(us[run], minlength=n).astype(np.int64)
            a = None
        else:  # runs of each sender's addresses, sender by sender (within one, address order is gid order)
            regions_out = _element_runs(us, a[first_of], np.zeros(us.size, np.int64), n, by=us)
        if np.ndim(w) == 0:  # one element size: counts times the size (unweighted bincounts are faster)
            b_in = np.bincount(d, minlength=n).astype(np.int64) * int(w)
            b_out = np.bincount(us, minlength=n).astype(np.int64) * int(w)
        else:
            b_in = np.bincount(d, weights=wa, minlength=n).astype(np.int64)
            b_out = np.bincount(us, weights=wa[first_of], minlength=n).astype(np.int64)
        # received regions: an element starts one unless the same tile also receives the element
        # before it from the same sender; the (element, tile) keys are sorted, so that is a binary
        # search of each key minus one element (no sort by tile)
        if a is None:
            key = g * n + d
            prev = key - n
            pos = np.minimum(np.searchsorted(key, prev), key.size - 1)
            continues = (key[pos] == prev) & (s[pos] == s)
            regions_in = np.bincount(d[~continues], minlength=n).astype(np.int64)
        else:  # a run: one sender's consecutive addresses received by one tile
            regions_in = _element_runs(d, a, s, n, by=s.astype(np.int64) * n + d)
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
                shared = np.bincount(d[both], weights=wa[both], minlength=n) / 2
        out.append(_Receives(b_in, b_out, _pairs(s, d, n), shared, regions_in, regions_out))
    return out[0], out[1]


def _element_runs(tile: np.ndarray, addr: np.ndarray, other: np.ndarray, n: int, by: np.ndarray) -> np.ndarray:
    """Runs per ``tile`` of elements given in address order within each group of ``by`` (a stable
    sort by ``by`` keeps that order): a run continues while the group and ``other`` stay the same
    and the address steps by one."""
    o = stable_order(by)
    b, a, t = by[o], addr[o], tile[o]
    new = np.ones(o.size, dtype=bool)
    np.not_equal(a[1:], a[:-1] + 1, out=new[1:])
    new[1:] |= b[1:] != b[:-1]
    new[1:] |= other[o][1:] != other[o][:-1]
    return np.bincount(t[new], minlength=n).astype(np.int64)


def plan_receives(
    parts: list[tuple[_Receives | None, _Receives | None]], target: Target
) -> tuple[ExchangePlan, ExchangePlan | None]:
    """The on-IPU and inter-IPU exchange plans (None: no inter-IPU part) from receive figures of
    disjoint element sets. An element both tiles of a supertile receive counts half towards their
    cycles (ref §1 "Tiles sharing an exchange bus", §3.8); bytes_in still reports every byte."""
    n = target.num_tiles
    plans: list[ExchangePlan | None] = []
    for k in (0, 1):
        found = [r for p in parts if (r := p[k]) is not None]
        if not found:
            plans.append(None)
            continue
        zeros = np.zeros(n, np.int64)  # the sums' start (as 0 is sum's): the figures are int64, shared float64
        b_in = sum((r.bytes_in for r in found), zeros)
        b_out = sum((r.bytes_out for r in found), zeros)
        pairs = _distinct(np.concatenate([r.pairs for r in found]), n * n)
        messages = np.bincount(pairs // n, minlength=n) + np.bincount(pairs % n, minlength=n)
        effective = b_in - np.floor(sum((r.shared for r in found), zeros)).astype(np.int64)
        r_in, r_out = sum((r.regions_in for r in found), zeros), sum((r.regions_out for r in found), zeros)
        plans.append(_finish(b_in, b_out, messages, effective, r_in, r_out, target, global_=k == 1))
    local = plans[0] or plan_transfers(np.zeros(0, np.int64), np.zeros(0, np.int64), 0, target)
    return local, plans[1]
