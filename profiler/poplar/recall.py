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

from profiler.poplar.layout import Affine, Factored, Runs, VarRuns, Window, WindowBlocks
from profiler.poplar.tensor import Tensor
from profiler.poplar.tile_fields import Batches
from profiler.poplar.variables import VariableStore

T = TypeVar("T")

# Entries a graph keeps, the least recently used going first (a decoder layer asks a few dozen)
KEPT = 512


class Read(NamedTuple):
    """What a call reads: ``key``; ``base``, the first tile of the lowest IPU of the first tensor's
    mapping; ``starts``, that mapping's interval starts (keyed by identity); ``variables``, the
    variables the tensors view in order of first appearance (the key names them by that place)."""

    key: tuple[Hashable, ...]
    base: int
    starts: np.ndarray
    variables: list[int]
    tiles_per_ipu: int
    local: bool  # inside a virtual graph: tile ids are given and read as positions within its IPU

    def kept_tiles(self, tiles: np.ndarray) -> np.ndarray:
        """An answer's tile ids as remembered: counted from ``base``, or, inside a virtual graph
        (where an answer may hold positions or device ids), as positions within the IPU."""
        kept = tiles % self.tiles_per_ipu if self.local else tiles - self.base
        kept.flags.writeable = False
        return kept

    def tiles(self, kept: np.ndarray) -> np.ndarray:
        """``kept_tiles``' ids for this call: as the work gives them, or positions inside a virtual graph."""
        return kept if self.local else kept + self.base

    @property
    def pad_base(self) -> int:
        """Where a tile's element of a one-element-a-tile variable lies relative to the tile's kept id
        (``profiler.ops.core.constant_per_tile``: the element's offset is the tile's id)."""
        return 0 if self.local else self.base


class _Memory:
    """One graph's remembered answers and the digests of its mappings' tiles."""

    def __init__(self) -> None:
        self.entries: OrderedDict[tuple[Hashable, ...], tuple[np.ndarray, Any]] = OrderedDict()
        self.digests: dict[int, tuple[np.ndarray, int, bytes]] = {}  # by the tiles' id: (tiles, tiles_key)

    def read(self, graph: VariableStore, tensors: Sequence[Tensor], what: tuple[Hashable, ...]) -> Read | None:
        """The key of a call about ``tensors`` (the first a view of one variable, the others any view
        ``_described`` names), or None when it reads something else (it is then worked out each time)."""
        first = tensors[0]._var if tensors else None
        if not isinstance(first, int) or first < 0:
            return None
        described = _described(tensors)
        if described is None:
            return None
        views, vids = described
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
        numels = tuple(variables[v].numel for v in vids)  # index types follow them
        dtypes = tuple(t.dtype.str for t in tensors)
        key = (what, views, numels, dtypes, id(mapping.starts), mapping.n, digest)
        local = getattr(graph, "current_ipu", None) is not None
        return Read(key, base, mapping.starts, vids, graph.target.tiles_per_ipu, local)


def _described(tensors: Sequence[Tensor]) -> tuple[tuple[Hashable, ...], list[int]] | None:
    """How ``tensors`` view their variables, each variable named by its place in the returned list
    (first appearance first): affine and grouped views by their layout, runs and index arrays by a
    digest. None for a view held otherwise (a convolution window)."""
    vids: list[int] = []
    places: dict[int, int] = {}
    views: list[Hashable] = []
    for t in tensors:
        lay, var = t._lay, t._var
        if isinstance(lay, VarRuns):
            views.append(("var_runs", _runs_digest(lay.runs), _digest(_places(lay.var, places, vids))))
        elif isinstance(var, np.ndarray) and isinstance(lay, np.ndarray):
            views.append(("elements", lay.shape, _digest(lay), _digest(_places(var, places, vids))))
        elif not isinstance(var, int) or var < 0:
            return None
        elif isinstance(lay, Affine | Factored):
            views.append((lay, _place(var, places, vids)))
        elif isinstance(lay, Runs):
            views.append(("runs", _runs_digest(lay), _place(var, places, vids)))
        elif isinstance(lay, np.ndarray):
            views.append(("index", lay.shape, _digest(lay), _place(var, places, vids)))
        else:
            return None
    return tuple(views), vids


def _place(v: int, places: dict[int, int], vids: list[int]) -> int:
    if v not in places:
        places[v] = len(vids)
        vids.append(v)
    return places[v]


def _places(var: np.ndarray, places: dict[int, int], vids: list[int]) -> np.ndarray:
    """``var`` (variable ids) as places in ``vids``, variables new to it added in order of first appearance."""
    u, first, inverse = np.unique(var, return_index=True, return_inverse=True)
    for j in np.argsort(first, kind="stable"):
        _place(int(u[j]), places, vids)
    return _renamed(u, inverse, var.shape, places)


def _digest(a: np.ndarray) -> tuple[str, tuple[int, ...], bytes]:
    """An array by its type, shape and bytes (a broadcast run step, one value repeated: by that value)."""
    if a.ndim == 1 and a.size and a.strides[0] == 0:
        return (a.dtype.str, a.shape, a[:1].tobytes())
    return (a.dtype.str, a.shape, xxhash.xxh3_128_digest(np.ascontiguousarray(a).data))


def _runs_digest(r: Runs) -> Hashable:
    arrays = tuple(
        None if a is None else _digest(np.asarray(a)) for a in (r.start, r.length, r.step, r.row_first, r.period)
    )
    return (arrays, r.width, r.inner, r.block, r.stride, r.repeat)


def unbound(t: Tensor, variables: Sequence[int]) -> tuple[Any, Any, np.dtype] | None:
    """A field as remembered: its variables named by their place in ``variables`` (a call's, ``Read``),
    index arrays made read-only (now read by every call that recalls it); None when it views a
    variable not among them or is held otherwise (it is then not remembered)."""
    places = {v: i for i, v in enumerate(variables)}
    lay, var = t._lay, t._var
    if isinstance(lay, VarRuns):
        named = _named(lay.var, places)
        return None if named is None else (-1, VarRuns(lay.runs, named), t.dtype)
    if isinstance(lay, Window | WindowBlocks):
        return None
    if isinstance(var, np.ndarray):
        named = _named(var, places)
        if named is None:
            return None
        var_kept: Any = named
    elif var in places:
        var_kept = places[var]
    else:
        return None
    if isinstance(lay, np.ndarray):
        lay.flags.writeable = False
    return var_kept, lay, t.dtype


def _named(var: np.ndarray, places: dict[int, int]) -> np.ndarray | None:
    """``var`` (variable ids) as their ``places`` (read-only); None when one has none."""
    u, inverse = np.unique(var, return_inverse=True)
    if any(int(v) not in places for v in u):
        return None
    return _renamed(u, inverse, var.shape, places)


def _renamed(u: np.ndarray, inverse: np.ndarray, shape: tuple[int, ...], places: dict[int, int]) -> np.ndarray:
    """The places of ids ``u[inverse]`` (``np.unique``'s), shaped ``shape``, read-only."""
    named = np.array([places[int(v)] for v in u], dtype=np.int32)[inverse.reshape(shape)]
    named.flags.writeable = False
    return named


def bound(graph: VariableStore, kept: tuple[Any, Any, np.dtype], variables: Sequence[int]) -> Tensor:
    """``unbound``'s field on a call's own ``variables``."""
    var, lay, dtype = kept
    ids = np.asarray(variables, dtype=np.int32)
    if isinstance(lay, VarRuns):
        return Tensor(graph, -1, VarRuns(lay.runs, ids[lay.var]), dtype)
    return Tensor(graph, ids[var] if isinstance(var, np.ndarray) else int(ids[var]), lay, dtype)


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
    keep: Callable[[T, Read], Any],
    rebuild: Callable[[Any, Read], T],
) -> T | None:
    """``work()``, or the answer an earlier call about tensors read alike (``what``: the question and
    its other arguments) gave, rebuilt: ``keep(answer, read)`` makes what is remembered of an answer
    (None: not to be remembered), ``rebuild(kept, read)`` the answer for this call (``read.base``:
    the first tile of the lowest IPU its first tensor's mapping uses; ``read.variables``: the
    variables its tensors view, ``unbound`` and ``bound`` move fields between calls'). A None answer
    is remembered as None."""
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
        return None if entry[1] is None else rebuild(entry[1], read)
    answer = work()
    kept = None if answer is None else keep(answer, read)
    if answer is not None and kept is None:
        return answer  # not to be remembered (keep said so)
    memory.entries[read.key] = (read.starts, kept)
    if len(memory.entries) > KEPT:
        memory.entries.popitem(last=False)
    return answer


def kept_batches(batches: Batches, read: Read) -> list[tuple[np.ndarray, list[Any]]] | None:
    """Vertex batches (tiles, fields) as remembered: tiles by ``read.kept_tiles``, fields by
    ``unbound``; None when a field cannot be (a window)."""
    kept = []
    for tiles, fields in batches:
        unbound_fields = [unbound(f, read.variables) for f in fields]
        if any(u is None for u in unbound_fields):
            return None
        kept.append((read.kept_tiles(tiles), unbound_fields))
    return kept


def rebuilt_batches(graph: VariableStore, kept: list[tuple[np.ndarray, list[Any]]], read: Read) -> Batches:
    """``kept_batches``' batches on a call's own tiles and variables."""
    return [(read.tiles(tiles), [bound(graph, f, read.variables) for f in fields]) for tiles, fields in kept]


def remembered_batches(
    graph: VariableStore, tensors: Sequence[Tensor], what: tuple[Hashable, ...], work: Callable[[], Batches]
) -> Batches:
    """``remembered`` for vertex batches whose fields view ``tensors``."""
    found = remembered(graph, tensors, what, work, kept_batches, lambda kept, read: rebuilt_batches(graph, kept, read))
    assert found is not None
    return found
