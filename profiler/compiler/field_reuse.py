"""A vertex field's pieces remembered by what the field reads, for compute sets planned anew.

A compute set is planned anew when anything it reads differs from every earlier one's
(``plan_reuse``): a decoder layer's RMSNorm scale reads its own gamma, which PopART's linear mapper
starts on another tile in every layer (``frontends.onnx.builder._spread``). Its other fields, the
layer's [S, hidden] activations, read as the previous layer's did: the same view of a variable of
the same size, mapped alike a whole number of IPUs on, read by vertices on tiles as far on. Their
regions and pieces (``ElementMap.field_pieces``: which tile holds each run a vertex reads, cut
where the mapping changes) are then the earlier field's, moved to this variable's global ids and
these tiles, and are taken from it instead of being cut again.

Only a field of one variable, without padding, whose pieces are all mapped, is remembered: its
global ids then move with the variable's first id alone.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from profiler.compiler.plan_reuse import Describer, Unknown, VariableFacts
from profiler.poplar.tensor import Tensor

# Fields remembered, the least recently used going first (a decoder layer plans a few dozen anew)
KEPT = 512


class FieldPieces(NamedTuple):
    """A field's regions (global ids: what the compute set writes, ``_fully_written``) and pieces
    (``ElementMap.field_pieces``); ``count``: its regions before the rows' copies of shared blocks;
    ``kept``: whether it may be remembered (one variable, no padding, every piece mapped)."""

    regions_start: np.ndarray
    regions_length: np.ndarray
    count: int
    start: np.ndarray
    length: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    shared: tuple[np.ndarray, ...] | None
    kept: bool


class _Held:
    """A field's pieces relative to its variable's first global id and its base tile."""

    def __init__(self, p: FieldPieces, gid0: int, base: int) -> None:
        self.regions_start = _frozen(p.regions_start - gid0)
        self.regions_length = _frozen(p.regions_length)
        self.count = p.count
        self.start, self.length = _frozen(p.start - gid0), _frozen(p.length)
        self.src, self.dst = _frozen(p.src - base), _frozen(p.dst - base)
        self.dtypes = (p.regions_start.dtype, p.start.dtype, p.src.dtype, p.dst.dtype)
        self.shared = None
        if p.shared is not None:
            s_start, s_length, s_src, s_idx = p.shared
            self.shared = (_frozen(s_start - gid0), _frozen(s_length), _frozen(s_src - base), _frozen(s_idx))
            self.shared_dtypes = (s_start.dtype, s_src.dtype)

    def at(self, gid0: int, base: int) -> FieldPieces:
        rd, sd, srcd, dstd = self.dtypes
        shared = None
        if self.shared is not None:
            s_start, s_length, s_src, s_idx = self.shared
            ssd, ssrcd = self.shared_dtypes
            shared = ((s_start + gid0).astype(ssd), s_length, (s_src + base).astype(ssrcd), s_idx)
        return FieldPieces(
            (self.regions_start + gid0).astype(rd), self.regions_length, self.count, (self.start + gid0).astype(sd),
            self.length, (self.src + base).astype(srcd), (self.dst + base).astype(dstd), shared, True,
        )  # fmt: skip


def _frozen(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


class FieldReuse:
    """The fields of one compile's compute sets planned anew, remembered by what they read."""

    def __init__(self, facts: VariableFacts, gid_base: np.ndarray, tiles_per_ipu: int) -> None:
        self.facts, self.gid_base, self.tiles_per_ipu = facts, gid_base, tiles_per_ipu
        self._held: OrderedDict[bytes, _Held] = OrderedDict()
        self.reused = 0  # fields taken from an earlier one

    def pieces(self, tensor: Tensor, tiles: np.ndarray, write: bool, work: Callable[[], FieldPieces]) -> FieldPieces:
        """``work()``'s pieces of field ``tensor`` read (``write``: written) by vertices on ``tiles``,
        or an earlier field's read alike, moved."""
        key = self._key(tensor, tiles, write)
        if key is None:
            return work()
        digest, gid0, base = key
        held = self._held.get(digest)
        if held is not None:
            self._held.move_to_end(digest)
            self.reused += 1
            return held.at(gid0, base)
        found = work()
        if found.kept and (found.src >= 0).all():
            self._held[digest] = _Held(found, gid0, base)
            if len(self._held) > KEPT:
                self._held.popitem(last=False)
        return found

    def _key(self, tensor: Tensor, tiles: np.ndarray, write: bool) -> tuple[bytes, int, int] | None:
        """(digest, the variable's first global id, base tile) of a field of one mapped variable
        on mapped tiles, else None."""
        v = tensor.single_variable()
        if v is None or tiles.size == 0:
            return None
        low = self.facts.lowest(v)
        first = int(tiles.min())
        if low is None or first < 0:
            return None
        base = min(low, first) // self.tiles_per_ipu * self.tiles_per_ipu
        d = Describer()
        d.text(f"field W{write}")
        try:
            d.tensor(tensor)
        except Unknown:
            return None
        d.array(np.subtract(tiles, base, dtype=np.int64))
        d.h.update(self.facts.digest(v, base))
        return d.h.digest(), int(self.gid_base[v]), base
