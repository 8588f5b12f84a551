"""Per-tile figures kept over the tiles they touch.

A step's per-tile figures (cycles, bytes, code) are zero outside the tiles taking part; on a
pipelined model over a POD16 a compute set runs on one IPU's 1,472 tiles of 23,552, so dense arrays
held for every step cost 16 times what they say (a 32-layer decoder: ~5 GB of zeros for 1,801
nodes). ``TileSpan`` holds the values from the first non-zero tile to the last and gives the dense
array back when asked: host memory follows the tiles a step touches, not the target's size.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class TileSpan:
    """A per-tile array of length ``n``, zero outside ``[lo, lo + values.size)``."""

    __slots__ = ("lo", "n", "values")

    def __init__(self, lo: int, values: np.ndarray, n: int) -> None:
        self.lo, self.values, self.n = lo, values, n

    @classmethod
    def of(cls, dense: np.ndarray) -> TileSpan:
        """The span of ``dense`` (a 1-D per-tile array) from its first to its last non-zero tile."""
        a = np.asarray(dense)
        nz = np.flatnonzero(a)
        if nz.size == 0:
            return cls(0, a[:0].copy(), a.size)
        lo, hi = int(nz[0]), int(nz[-1]) + 1
        return cls(lo, a[lo:hi].copy(), a.size)

    @property
    def hi(self) -> int:
        return self.lo + self.values.size

    def dense(self) -> np.ndarray:
        """The whole per-tile array (a new array: writing to it changes nothing here)."""
        out = np.zeros(self.n, dtype=self.values.dtype)
        out[self.lo : self.hi] = self.values
        return out

    def per_ipu(self, tiles_per_ipu: int, reduce: str = "max") -> np.ndarray:
        """``reduce`` ("max", "sum" or "count": tiles > 0) over each IPU's tiles, without the dense array."""
        ni = self.n // tiles_per_ipu
        out = np.zeros(ni, dtype=np.int64)
        if self.values.size == 0:
            return out
        first, last = self.lo // tiles_per_ipu, (self.hi - 1) // tiles_per_ipu
        flat = np.zeros((last - first + 1) * tiles_per_ipu, dtype=np.int64)
        off = self.lo - first * tiles_per_ipu
        flat[off : off + self.values.size] = self.values
        block = flat.reshape(-1, tiles_per_ipu)
        if reduce == "max":
            out[first : last + 1] = block.max(axis=1)
        elif reduce == "sum":
            out[first : last + 1] = block.sum(axis=1)
        elif reduce == "count":
            out[first : last + 1] = (block > 0).sum(axis=1)
        else:
            raise ValueError(f"TileSpan.per_ipu: reduce must be max, sum or count, not {reduce!r}")
        return out

    def ipu_block(self, tiles_per_ipu: int, ipu: int) -> np.ndarray:
        """The per-tile values of IPU ``ipu`` (a new array of ``tiles_per_ipu``)."""
        out = np.zeros(tiles_per_ipu, dtype=self.values.dtype)
        a, b = max(self.lo, ipu * tiles_per_ipu), min(self.hi, (ipu + 1) * tiles_per_ipu)
        if a < b:
            out[a - ipu * tiles_per_ipu : b - ipu * tiles_per_ipu] = self.values[a - self.lo : b - self.lo]
        return out

    @property
    def nbytes(self) -> int:
        return int(self.values.nbytes)


def span_or_none(a: np.ndarray | TileSpan | None) -> TileSpan | None:
    """``a`` as a span (None stays None; a span is shared, as it is never written)."""
    if a is None or isinstance(a, TileSpan):
        return a
    return TileSpan.of(a)


class PerTile:
    """A per-tile figure held as a ``TileSpan`` (the tiles the step touches) and read as the
    whole per-tile array; ``None`` when the step has none of it."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = "_" + name

    def __get__(self, obj: Any, objtype: type | None = None) -> np.ndarray | None:
        span = getattr(obj, self.slot)
        return None if span is None else span.dense()

    def __set__(self, obj: Any, value: np.ndarray | TileSpan | None) -> None:
        setattr(obj, self.slot, span_or_none(value))


class PerTileRequired(PerTile):
    def __get__(self, obj: Any, objtype: type | None = None) -> np.ndarray:
        return getattr(obj, self.slot).dense()


def per_ipu_table(spans: list[TileSpan | None], tiles_per_ipu: int, num_ipus: int, reduce: str) -> np.ndarray:
    """[steps, IPUs]: ``reduce`` of each step's span over each IPU's tiles (zeros where None); one
    step at a time, so no [steps, tiles] array is made."""
    out = np.zeros((len(spans), num_ipus), dtype=np.int64)
    for i, s in enumerate(spans):
        if s is not None and s.values.size:
            out[i] = s.per_ipu(tiles_per_ipu, reduce)
    return out


def held_rows(spans: list[TileSpan | None], rows: np.ndarray, held: np.ndarray, tiles_per_ipu: int) -> np.ndarray:
    """[len(rows) x IPUs, tiles_per_ipu] int32: the spans of ``rows`` laid out per (row, IPU), clipped to
    int32, and zero on the IPUs where ``held`` ([len(rows), IPUs]) is False. Only the spans are written
    (one step at a time): the rest is the zeros the array starts as."""
    m, ni = held.shape
    out = np.zeros(m * ni * tiles_per_ipu, dtype=np.int32)
    top = np.iinfo(np.int32).max
    for k, r in enumerate(np.asarray(rows, dtype=np.int64).tolist()):
        s = spans[r]
        if s is None or not s.values.size:
            continue
        base = k * ni * tiles_per_ipu
        out[base + s.lo : base + s.hi] = np.minimum(s.values, top)
        first, last = s.lo // tiles_per_ipu, (s.hi - 1) // tiles_per_ipu
        for ipu in range(first, last + 1):
            if not held[k, ipu]:  # a pipelined step costs nothing on IPUs it does not hold
                a = base + ipu * tiles_per_ipu
                out[a : a + tiles_per_ipu] = 0
    return out.reshape(m * ni, tiles_per_ipu)
