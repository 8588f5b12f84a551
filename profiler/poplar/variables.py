"""A graph's variables and their tile mappings, held as intervals (Poplar's ``Graph::setTileMapping``).

Separate from ``graph`` so that tensor views (``tensor``) can name what they view without the
graph that builds them: a view needs only its graph's variables and target (``VariableStore``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from profiler.chip.targets import Target
from profiler.poplar.layout import Affine
from profiler.poplar.shared_arrays import shared

UNMAPPED = -1


# Variables up to this many elements keep a tile per element for lookups (a gather); larger ones
# binary-search their intervals, so the host holds nothing per element of a large activation.
LOOKUP_MAX_ELEMENTS = 1 << 22
# ...nor for a lookup of fewer than 1/FEW_ELEMENTS of its elements (a probe of a few): they are searched
FEW_ELEMENTS = 64


class TileMapping:
    """Which tile holds each element of one variable: intervals [starts[i], starts[i+1])."""

    __slots__ = ("n", "starts", "tiles", "_lookup")

    def __init__(self, n: int) -> None:
        self.n = n
        self.starts = np.zeros(1, dtype=np.int64)
        self.tiles = np.full(1, UNMAPPED, dtype=np.int32)
        self._lookup: np.ndarray | None = None  # tile per element, built on first tile_of; reset on change

    def dense(self) -> np.ndarray:
        lengths = np.diff(np.append(self.starts, self.n))
        return np.repeat(self.tiles, lengths)

    def set_dense(self, per_element: np.ndarray) -> None:
        if per_element.size == 0:
            return
        change = np.flatnonzero(per_element[1:] != per_element[:-1]) + 1
        starts = np.concatenate(([0], change)).astype(np.int64)
        self.starts, self.tiles = shared(starts), shared(per_element[starts].astype(np.int32))
        self._lookup = None

    def set_intervals(self, starts: np.ndarray, tiles: np.ndarray) -> None:
        """Intervals [starts[i], starts[i+1]) on tiles[i] (starts[0] == 0, increasing); neighbours on
        one tile merge, so the mapping is the same however it was given."""
        keep = np.ones(starts.size, dtype=bool)
        keep[1:] = tiles[1:] != tiles[:-1]
        # a repeated layer's mapping equals the first one's (its tiles too, on the same IPU): held once
        self.starts, self.tiles = shared(starts[keep].astype(np.int64)), shared(tiles[keep].astype(np.int32))
        self._lookup = None

    def fill(self, tile: int) -> None:
        """Every element on ``tile``."""
        self.starts, self.tiles = np.zeros(1, np.int64), np.array([tile], np.int32)
        self._lookup = None

    def assign(self, idx: np.ndarray, tiles: np.ndarray | int) -> None:
        # by element even when idx has n entries: a view with repeated elements does not cover them all
        dense = self.dense()
        dense[idx] = tiles
        self.set_dense(dense)

    def assign_affine(self, lay: Affine, tiles: np.ndarray) -> None:
        """Map the elements of a one-to-one affine view (``tiles``: one per view element, or one for
        all) through a strided view of the per-element tiles: no index array is built."""
        if tiles.ndim == 0 and lay.size == self.n:
            self.fill(int(tiles))
            return
        dense = self.dense()
        view = np.lib.stride_tricks.as_strided(
            dense[lay.offset :], lay.shape, tuple(s * dense.itemsize for s in lay.strides)
        )
        view[...] = tiles.reshape(lay.shape) if tiles.ndim else tiles
        self.set_dense(dense)

    def tile_of(self, idx: np.ndarray, cache: bool = True) -> np.ndarray:
        """Tile of each given element: a gather from a cached per-element tile array (compile looks up
        hundreds of millions of elements; a gather is several times faster than a binary search).
        ``cache=False``: no array is kept when there is none yet (a one-off lookup)."""
        if self.tiles.size == 1:
            return np.full(np.shape(idx), self.tiles[0], dtype=np.int32)
        few = np.size(idx) * FEW_ELEMENTS <= self.n
        if self._lookup is None and (not cache or self.n > LOOKUP_MAX_ELEMENTS or few):
            # no 4 B per element kept, or not worth building for a few: search the intervals
            return self.tiles[np.searchsorted(self.starts, idx, side="right") - 1]
        if self._lookup is None:
            self._lookup = self.dense().astype(np.int32, copy=False)
        return self._lookup[idx]

    def intervals(self) -> list[tuple[int, int, int]]:
        ends = np.append(self.starts[1:], self.n)
        return [(int(s), int(e), int(t)) for s, e, t in zip(self.starts, ends, self.tiles, strict=True)]

    def fully_mapped(self) -> bool:
        return bool((self.tiles != UNMAPPED).all()) or self.n == 0


@dataclass(eq=False)
class Variable:
    id: int
    name: str
    dtype: np.dtype
    shape: tuple[int, ...]
    constant: bool
    interleaved: bool
    debug_context_id: int
    mapping: TileMapping
    value: np.ndarray | None = None  # constants only (flat)
    host_visible: bool = False  # read or written by the host through create_host_read/write
    # laid out as Poplar's Graph::clone of a view over other variables lays out its result: each tile's
    # elements in memory as the source's are, so the source's contiguous regions stay contiguous however
    # far apart their element indices (profiler.compiler.element_map.ElementMap.addresses)
    clone_layout: bool = False

    @property
    def numel(self) -> int:
        return self.mapping.n

    @property
    def nbytes(self) -> int:
        return self.numel * self.dtype.itemsize


class VariableStore(Protocol):
    """What a tensor view (and a copy of it) needs of the graph holding its variables
    (``profiler.poplar.graph.Graph``)."""

    @property
    def variables(self) -> list[Variable]: ...

    @property
    def target(self) -> Target: ...

    def current_debug_context(self) -> int: ...
