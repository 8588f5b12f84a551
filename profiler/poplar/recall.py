"""Results of building work remembered by what they read of the graph.

A model's repeated layers ask the same questions of the graph again and again: which runs of its
input each tile holds (an elementwise op's vertex fields, a reduction's pairs of runs). The answer
depends only on the views asked about, which of them share a variable, the variables' sizes and
the first one's tile mapping, so a layer on another IPU (its mapping the first one's moved by a
whole number of IPUs) or again on the same tiles gets the answer worked out for the first.

The key holds the mapping's interval starts by identity (a repeated layer's are one array,
``profiler.poplar.shared_arrays``) and its tiles by a digest counted from the first tile of their
lowest IPU. An entry holds the starts it names, so their id is never another array's while it
lives; answers are kept as the caller's ``keep`` makes them (tiles counted from that base, layouts
that never change) and rebuilt by its ``rebuild`` for the asking call's own variables and tiles.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Any, NamedTuple, TypeVar

import numpy as np
import xxhash

from profiler.poplar.layout import Affine, Factored
from profiler.poplar.tensor import Tensor
from profiler.poplar.variables import VariableStore

T = TypeVar("T")

# Entries a graph keeps, the least recently used going first (a decoder layer asks a few dozen)
KEPT = 512


class _Read(NamedTuple):
    """What a call reads: ``key``; ``base``, the first tile of the lowest IPU of the first tensor's
    mapping; ``starts``, that mapping's interval starts (keyed by identity)."""

    key: tuple[Hashable, ...]
    base: int
    starts: np.ndarray


class _Memory:
    """One graph's remembered answers and the digests of its mappings' tiles."""

    def __init__(self) -> None:
        self.entries: OrderedDict[tuple[Hashable, ...], tuple[np.ndarray, Any]] = OrderedDict()
        self.digests: dict[int, tuple[np.ndarray, int, bytes]] = {}  # by the tiles' id: (tiles, tiles_key)

    def read(self, graph: VariableStore, tensors: Sequence[Tensor], what: tuple[Hashable, ...]) -> _Read | None:
        """The key of a call about ``tensors`` (affine or grouped views of one variable each), or None
        when it reads something else (it is then worked out each time)."""
        lays, vids = [], []
        for t in tensors:
            vid = t.single_variable()
            if not isinstance(t._lay, Affine | Factored) or vid is None:
                return None
            lays.append(t._lay)
            vids.append(vid)
        variables = graph.variables
        mapping = variables[vids[0]].mapping
        tiles = mapping.tiles
        held = self.digests.get(id(tiles))
        if held is None or held[0] is not tiles:
            found = tiles_key(tiles, graph.target.tiles_per_ipu)
            if found is None:
                return None  # partly unmapped: the work reports it
            held = (tiles, *found)
            if len(self.digests) >= KEPT:
                self.digests.clear()
            self.digests[id(tiles)] = held
        _, base, digest = held
        shares = tuple(vids.index(v) for v in vids)  # which tensors view one variable
        numels = tuple(variables[v].numel for v in vids)  # index types follow them
        dtypes = tuple(t.dtype.str for t in tensors)
        key = (what, tuple(lays), shares, numels, dtypes, id(mapping.starts), mapping.n, digest)
        return _Read(key, base, mapping.starts)


def tiles_key(tiles: np.ndarray, tiles_per_ipu: int) -> tuple[int, bytes] | None:
    """A mapping's tiles counted from the first tile of their lowest IPU: (that tile, a digest of
    them), equal for mappings a whole number of IPUs apart; None when an element is unmapped."""
    lowest = int(tiles.min()) if tiles.size else 0
    if lowest < 0:
        return None
    base = lowest - lowest % tiles_per_ipu
    return base, xxhash.xxh3_128_digest(np.ascontiguousarray(tiles - base, dtype=np.int32).data)


_memories: weakref.WeakKeyDictionary[Any, _Memory] = weakref.WeakKeyDictionary()


def remembered(
    graph: VariableStore,
    tensors: Sequence[Tensor],
    what: tuple[Hashable, ...],
    work: Callable[[], T | None],
    keep: Callable[[T, int], Any],
    rebuild: Callable[[Any, int], T],
) -> T | None:
    """``work()``, or the answer an earlier call about tensors read alike (``what``: the question and
    its other arguments) gave, rebuilt: ``keep(answer, base)`` makes what is remembered of an answer,
    ``rebuild(kept, base)`` the answer for this call (``base``: the first tile of the lowest IPU its
    first tensor's mapping uses). A None answer is remembered as None."""
    try:
        memory = _memories.get(graph)
        if memory is None:
            memory = _memories[graph] = _Memory()
    except TypeError:  # a store that cannot be weakly referenced: nothing remembered
        return work()
    read = memory.read(graph, tensors, what)
    if read is None:
        return work()
    entry = memory.entries.get(read.key)
    if entry is not None and entry[0] is read.starts:
        memory.entries.move_to_end(read.key)
        return None if entry[1] is None else rebuild(entry[1], read.base)
    answer = work()
    memory.entries[read.key] = (read.starts, None if answer is None else keep(answer, read.base))
    if len(memory.entries) > KEPT:
        memory.entries.popitem(last=False)
    return answer
