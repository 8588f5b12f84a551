"""Reusing a compute set's exchange plan for another that reads the same way a whole number of IPUs
further on: each decoder layer of a model pipelined over a POD16 (two per IPU) plans the same pieces
on its own tiles, over its own variables.

An exchange plan (``exchange_planning.plan_compute_set_receives``) is a function of its remote
reads' relative positions only: it sorts and compares global element ids (and tile-memory
addresses) with each other, never with a fixed value, and every per-tile figure is the tile's own
(or its IPU's, or its supertile's) from the pieces it sends and receives, zero on tiles taking no
part. So two compute sets whose reads are equal once every element id is counted from their lowest
and every tile from the first tile of their lowest IPU have the same plan, moved by the difference
of those tiles. Poplar makes the same use of repetition when it compiles identical code once
(``poplar::Graph`` reuses vertex code for identical vertex types); the exchange code itself still
counts once per tile and step here, as each tile's exchange program is its own.

The reads are recognised by a 128-bit digest of every array they are planned from (XXH3-128: a
chance collision between two of a model's ~10^4 compute sets is ~10^-31; it reads ~9 GB/s here
against SHA-256's 0.3-1.4), so a plan is reused only for reads equal element by element, and
nothing of the reads is held.
"""

from __future__ import annotations

from dataclasses import fields

import numpy as np
import xxhash

from profiler.compiler.exchange import Addresses, ExchangePlan
from profiler.compiler.exchange_planning import RemoteReads

# ExchangePlan's per-tile arrays (regions may be None)
_FIELDS = tuple(f.name for f in fields(ExchangePlan))


class HeldPlan:
    """A plan's per-tile arrays over the tiles from its first non-zero to its last, and the base
    tile (first tile of the lowest IPU read or written) they are relative to."""

    __slots__ = ("base", "lo", "arrays")

    def __init__(self, plan: ExchangePlan, base: int) -> None:
        arrays = {name: getattr(plan, name) for name in _FIELDS}
        nz = np.zeros(plan.bytes_in.size, dtype=bool)
        for a in arrays.values():
            if a is not None:
                nz |= a != 0
        found = np.flatnonzero(nz)
        lo, hi = (int(found[0]), int(found[-1]) + 1) if found.size else (0, 0)
        self.base, self.lo = base, lo
        self.arrays = {k: None if a is None else a[lo:hi].copy() for k, a in arrays.items()}

    def at(self, base: int, n: int) -> ExchangePlan:
        """The plan moved to ``base`` (fresh arrays of length ``n``)."""
        lo = self.lo + base - self.base
        out: dict[str, np.ndarray | None] = {}
        for k, a in self.arrays.items():
            if a is None:
                out[k] = None
                continue
            dense = np.zeros(n, dtype=a.dtype)
            dense[lo : lo + a.size] = a
            out[k] = dense
        return ExchangePlan(**out)  # type: ignore[arg-type]


def _narrow(a: np.ndarray, origin: int = 0) -> np.ndarray:
    """``a`` counted from ``origin`` (non-negative), in the narrowest of int16, int32 and int64 that
    holds it: the same values give the same bytes whatever the array's own type, and the digest
    reads fewer bytes (tiles fit 16 bits; an element id past 2**31 from the lowest is rare)."""
    if a.size == 0:
        return np.zeros(0, np.int16)
    top = int(a.max()) - origin
    dtype = np.int16 if top < 2**15 else np.int32 if top < 2**31 else np.int64
    return np.subtract(a, origin, dtype=np.int64).astype(dtype) if origin else a.astype(dtype)


class ExchangeReuse:
    """Exchange plans by the digest of their reads, each held over the tiles it touches."""

    def __init__(self, tiles_per_ipu: int) -> None:
        self.tiles_per_ipu = tiles_per_ipu
        self._plans: dict[bytes, tuple[HeldPlan, HeldPlan | None]] = {}
        self.reused = 0

    def key(
        self, pieces: list[RemoteReads], short: list[RemoteReads], address: Addresses | None
    ) -> tuple[bytes, int] | None:
        """(digest, base tile) of a compute set's reads; None if it reads nothing remotely."""
        reads = [*pieces, *short]
        if not reads:
            return None
        origin = min(int(a.min()) for r in reads for a in (r.start, r.sent[0]) if a.size)
        lowest = min(int(a.min()) for r in reads for a in (r.src, r.dst, r.sent[2]) if a.size)
        base = lowest // self.tiles_per_ipu * self.tiles_per_ipu
        h = xxhash.xxh3_128()
        h.update(f"{len(pieces)},{len(short)}".encode())
        for r in reads:
            same = r.sent[0] is r.start and r.sent[1] is r.length and r.sent[2] is r.src
            h.update(f"|{r.itemsize},{r.start.size},{r.sent[0].size},{same}".encode())
            arrays = [_narrow(r.start, origin), _narrow(r.length), _narrow(r.src, base), _narrow(r.dst, base)]
            if not same:
                arrays += [_narrow(r.sent[0], origin), _narrow(r.sent[1]), _narrow(r.sent[2], base)]
            for start in (r.start,) if same else (r.start, r.sent[0]):
                # where each piece sits in tile memory, from its global id (constant within a piece):
                # none but the id itself on most graphs (ElementMap.addresses gives the ids back)
                found = start if address is None else address(start)
                arrays.append(np.zeros(0, np.int8) if found is start else np.subtract(found, start, dtype=np.int64))
            for a in arrays:
                h.update(f"{a.dtype.str}{a.size}".encode())
                h.update(np.ascontiguousarray(a).data)
        return h.digest(), base

    def get(self, key: tuple[bytes, int], n: int) -> tuple[ExchangePlan, ExchangePlan | None] | None:
        held = self._plans.get(key[0])
        if held is None:
            return None
        self.reused += 1
        local, cross = held
        return local.at(key[1], n), None if cross is None else cross.at(key[1], n)

    def put(self, key: tuple[bytes, int], plans: tuple[ExchangePlan, ExchangePlan | None]) -> None:
        local, cross = plans
        self._plans[key[0]] = (HeldPlan(local, key[1]), None if cross is None else HeldPlan(cross, key[1]))
