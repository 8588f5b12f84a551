"""Where every element of a graph lives: global element ids and the tile-mapping intervals by them.

The compiler numbers every variable's elements consecutively (a *global id*); a vertex field's
regions (``profiler.poplar.regions``) are runs of global ids. This map cuts those runs where the
tile mapping changes, which is what the exchange planner needs (which tile holds each piece and
which tile reads it), and answers the copy planner's "all of one variable into all of another"
geometry. Everything here is intervals, never a per-element table.
"""

from __future__ import annotations

import numpy as np

from profiler.host import sorting
from profiler.host.sorting import stable_order
from profiler.poplar.graph import Graph
from profiler.poplar.layout import Affine, covers_all
from profiler.poplar.regions import Regions, rows_of_blocks
from profiler.poplar.tensor import Tensor
from profiler.poplar.variables import Variable


class ElementMap:
    """Global element ids of ``graph``'s variables and their tile-mapping intervals."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.gid_base = np.cumsum([0] + [v.numel for v in graph.variables], dtype=np.int64)
        # which variables are laid out as clones of their sources (``addresses``)
        self._clone = np.fromiter((v.clone_layout for v in graph.variables), bool, len(graph.variables))
        self._packing: dict[int, np.ndarray] = {}  # a clone's intervals' packed address minus first id
        self._unpacked: set[int] = set()  # clones whose tiles each hold one interval: ids are addresses
        self._ranges: dict[tuple[int, int], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}  # recent ranges

    def _variables(self, lo: int, hi: int) -> tuple[int, int]:
        """The first and last variables holding global elements [lo, hi)."""
        v0, v1 = np.searchsorted(self.gid_base, [lo, hi - 1], side="right") - 1
        return int(v0), int(v1)

    def intervals(self, v0: int, v1: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(start, end, tile) by global element id of the tile-mapping intervals of variables ``v0``
        to ``v1`` (each variable starts a new interval). Made for the variables a field reads (most
        read one), never for the whole graph at once: a decoder of 32 layers at S = 2,048 over a
        POD16 has ~10^8 intervals, 24 bytes each as one table. The last few ranges asked are kept
        (a compute set's fields read the same few variables)."""
        found = self._ranges.get((v0, v1))
        if found is not None:
            return found
        vs = self.graph.variables[v0 : v1 + 1]
        ms = np.concatenate([v.mapping.starts + self.gid_base[v.id] for v in vs])
        mt = np.concatenate([v.mapping.tiles for v in vs]).astype(np.int64)
        me = np.append(ms[1:], self.gid_base[v1 + 1])
        if len(self._ranges) >= 8:
            self._ranges.pop(next(iter(self._ranges)))
        self._ranges[(v0, v1)] = found = (ms, me, mt)
        return found

    def addresses(self, gid: np.ndarray) -> np.ndarray:
        """The tile-memory address of each global element: where it sits on its tile, in the units
        exchange regions are judged in. A variable's tile-mapping intervals are regions of memory
        of their own (PopLibs' tests/popops/ElementWiseUtilTest.cpp: a variable's column mapped to
        one tile is "B contiguous regions per-tile"), so its global ids serve, except for a clone of
        a view over several variables (``Variable.clone_layout``, ``ops.add_like``): Poplar lays out
        a clone's tiles as its source's (poplibs_test ``identicalLayout``: "ordering in memory of
        elements mapped to each tile is identical"), so a concatenation's clone mapped element by
        element (DenseNet's batch norms over concatenated convolution outputs) holds each tile's
        elements as the sources' runs, one allocation per tile as memory placement holds it
        (``profiler.compiler.memory._var_tile_bytes``). Its address = its first global id + the
        element's rank among its elements on that tile."""
        gid = np.asarray(gid, dtype=np.int64)
        if gid.size == 0:
            return gid
        v0, v1 = self._variables(int(gid.min()), int(gid.max()) + 1)
        out = gid
        # only a clone's elements can sit elsewhere: its own intervals are searched, no other's
        for v in (np.flatnonzero(self._clone[v0 : v1 + 1]) + v0).tolist():
            delta = self.packing(v)
            if v in self._unpacked:
                continue
            lo = int(self.gid_base[v])
            inside = np.flatnonzero((gid >= lo) & (gid < int(self.gid_base[v + 1])))
            if inside.size:
                out = out.copy() if out is gid else out
                local = gid[inside] - lo
                out[inside] += delta[np.searchsorted(self.graph.variables[v].mapping.starts, local, side="right") - 1]
        return out

    def packing(self, v: int) -> np.ndarray:
        """Variable ``v``'s tile-mapping intervals' packed address minus first global id
        (``addresses``): the rank of an interval's first element among the variable's elements on
        its tile, less its own index; 0 for a variable that is not a clone laid out as its sources,
        or whose tiles each hold one of its intervals. A function of the variable alone."""
        var = self.graph.variables[v]
        if not var.clone_layout:
            return np.zeros(var.mapping.starts.size, dtype=np.int64)
        found = self._packing.get(v)
        if found is not None:
            return found
        starts, tiles = var.mapping.starts, var.mapping.tiles
        delta = np.zeros(starts.size, dtype=np.int64)
        if starts.size > 1:
            order = np.lexsort((starts, tiles))  # by tile, then position
            t = tiles[order]
            length = np.diff(np.append(starts, var.numel))[order]
            group_start = np.ones(order.size, dtype=bool)
            group_start[1:] = t[1:] != t[:-1]
            if not group_start.all():  # some tile holds two of its intervals
                csum = np.cumsum(length) - length  # exclusive prefix sums
                rank = csum - np.maximum.accumulate(np.where(group_start, csum, 0))
                delta[order] = rank - starts[order]
        self._packing[v] = delta
        if not delta.any():  # its global ids serve
            self._unpacked.add(v)
        return delta

    def pieces(
        self, start: np.ndarray, length: np.ndarray, dst: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Regions cut where the tile mapping changes: (start, length, holding tile, reading tile) per piece."""
        keep = length > 0
        if not keep.all():
            start, length, dst = start[keep], length[keep], dst[keep]
        if start.size == 0:
            return start, length, np.zeros(0, np.int64), dst
        end = start + length
        # a field's regions lie in few variables (most in one), whose intervals alone are searched
        ms, me, mt = self.intervals(*self._variables(int(start.min()), int(end.max())))
        first = np.searchsorted(ms, start, side="right") - 1
        # most regions end in the interval they start in: search only the others' ends
        cut = np.flatnonzero(end > me[first])
        if cut.size == 0:
            return start, length, mt[first], dst
        count = np.ones(start.size, dtype=np.int64)
        count[cut] += np.searchsorted(ms, end[cut] - 1, side="right") - 1 - first[cut]
        rep = np.repeat(np.arange(start.size), count)
        iv = first[rep] + (np.arange(rep.size) - np.repeat(np.cumsum(count) - count, count))
        s = np.maximum(start[rep], ms[iv])
        e = np.minimum(start[rep] + length[rep], me[iv])
        return s, e - s, mt[iv], dst[rep]

    def field_pieces(
        self, regions: Regions, tiles: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, ...] | None]:
        """(start, length, holding tile, reading tile) of every piece a field's vertices (on
        ``tiles``) read, padding reads last; and, when vertices share blocks, (start, length,
        holding tile) of the blocks' distinct pieces and which of those each row's piece is."""
        start, length, src, owner = self.pieces(regions.start, regions.length, regions.owner)
        shared = None
        if regions.block is not None:  # cut once per distinct block, then given to each row reading it
            idx, owner = rows_of_blocks(owner, regions.block)
            shared = (start, length, src, idx)
            start, length, src = start[idx], length[idx], src[idx]
        dst = tiles[owner]
        if regions.pad is not None:  # padding: the pad element on the tile of each nearest input element
            pad = regions.pad
            if regions.block is not None:
                idx, row = rows_of_blocks(pad.owner, regions.block)
                pad = Regions(pad.start[idx], pad.length[idx], row)
            _, _, near, pdst = self.pieces(pad.start, pad.length, tiles[pad.owner])
            pgid = regions.pad_first + near * regions.pad_step
            _, _, psrc, pdst = self.pieces(pgid, np.ones_like(pgid), pdst)
            start, length = np.concatenate([start, pgid]), np.concatenate([length, np.ones_like(pgid)])
            src, dst = np.concatenate([src, psrc]), np.concatenate([dst, pdst])
        return start, length, src, dst, shared

    def element_name(self, gid: int) -> str:
        v = int(np.searchsorted(self.gid_base, gid, side="right") - 1)
        return f"{self.graph.variables[v].name}[{gid - int(self.gid_base[v])}]"

    def gid(self, var_ids: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return self.gid_base[var_ids] + idx

    def fully_written(self, parts: list[tuple[np.ndarray, np.ndarray]], candidates: set[int]) -> frozenset[int]:
        """The ``candidates`` whose every element the regions ``parts`` ((global start, length) each,
        within one variable; they may overlap) cover."""
        if not candidates or not parts:
            return frozenset()
        start, length = (np.concatenate([p[i] for p in parts]).astype(np.int64, copy=False) for i in range(2))
        # fields write their rows in order (the usual case): a linear check spares the sort
        if start.size > 1 and not bool((start[1:] >= start[:-1]).all()):
            order = stable_order(start)
            start, length = start[order], length[order]
        end = start + length
        # each region counts only past the furthest end before it (the union's length, per variable)
        before = np.concatenate(([start[0]], np.maximum.accumulate(end)[:-1])) if start.size else start
        covered = np.maximum(end - np.maximum(start, before), 0)
        # elements covered per candidate: the sum over the sorted regions starting inside it (a
        # region lies in one variable), two binary searches per candidate rather than a variable
        # looked up for every region
        ids = np.fromiter(candidates, np.int64, len(candidates))
        total = np.concatenate(([0], np.cumsum(covered)))
        lo, hi = np.searchsorted(start, self.gid_base[ids]), np.searchsorted(start, self.gid_base[ids + 1])
        per_id = total[hi] - total[lo]
        whole = per_id == self.gid_base[ids + 1] - self.gid_base[ids]
        return frozenset(ids[whole].tolist())

    def whole_variables(self, src: Tensor, dst: Tensor) -> tuple[Variable, Variable] | None:
        """The variables of a copy of all of one into all of another of the same size, element i of
        the one's storage to element i of the other's: both in storage order, or both the same
        one-to-one view (a tensor and its clone, e.g. channel-grouped stores); None for any other copy."""
        vs, vd = src.single_variable(), dst.single_variable()
        if vs is None or vd is None:
            return None
        a, b = self.graph.variables[vs], self.graph.variables[vd]
        if a.numel != b.numel or not (covers_all(src._lay, a.numel) and covers_all(dst._lay, b.numel)):
            return None
        same_view = src._lay == dst._lay
        in_order = all(isinstance(t._lay, Affine) and t._lay == Affine.contiguous(t._lay.shape) for t in (src, dst))
        return (a, b) if same_view or in_order else None

    def whole_pieces(self, src: Tensor, dst: Tensor) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """(source tile, destination tile, elements) of each piece of a copy of all of one variable,
        in storage order, into all of another of the same size: the pieces cut where either mapping
        changes tile. None for any other copy (planned element by element)."""
        whole = self.whole_variables(src, dst)
        if whole is None:
            return None
        a, b = whole
        starts = sorting.union(a.mapping.starts, b.mapping.starts)
        starts = starts[starts < a.numel]
        length = np.diff(np.append(starts, a.numel))
        s_tile = a.mapping.tiles[np.searchsorted(a.mapping.starts, starts, side="right") - 1].astype(np.int64)
        d_tile = b.mapping.tiles[np.searchsorted(b.mapping.starts, starts, side="right") - 1].astype(np.int64)
        keep = length > 0
        return s_tile[keep], d_tile[keep], length[keep]
