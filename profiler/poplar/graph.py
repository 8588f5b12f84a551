"""The graph: variables and constants with interval tile mappings, compute sets, vertices, streams.

Tile mappings are stored as intervals (sorted interval starts + the tile of each interval), as
Poplar does; vertices are stored columnar, one batch per ``add_vertices`` call (arrays of tiles
plus field views with a leading vertex dimension), never one Python object per element.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import DTypeLike

from profiler.chip.codelets import Codelet, resolve_codelet
from profiler.chip.dtypes import as_dtype
from profiler.chip.targets import Target, replica_view, sharding_view
from profiler.host import host_memory, sorting
from profiler.host.sorting import stable_order
from profiler.poplar import shape_only
from profiler.poplar.bands import band_runs
from profiler.poplar.layout import Affine, Factored, VarRuns, covers_all, cut_ranges, inner_run
from profiler.poplar.shared_arrays import shared
from profiler.poplar.streams import DEVICE_TO_HOST, HOST_TO_DEVICE, DataStream
from profiler.poplar.tensor import RUNS_WORTH_IT, Tensor
from profiler.poplar.variables import TileMapping, Variable
from report_format.vocabulary import Layer

# Variables of at least this many elements are checked against host memory before their element ids
# are allocated (smaller ones cost less than the check's margin).
_CHECK_HOST_MEMORY_FROM = 1 << 20


def _dims(shape: Sequence[int] | int) -> tuple[int, ...]:
    """A shape given as its dims or as one number."""
    return tuple(int(s) for s in shape) if isinstance(shape, Iterable) else (int(shape),)


class GraphError(ValueError):
    """A graph is built or used wrongly (message names the variable, compute set or field)."""


@dataclass(eq=False)
class VertexBatch:
    """Vertices of one codelet added together: vertex i is on tiles[i] and sees row i of each field."""

    codelet: Codelet
    tiles: np.ndarray  # int32, one per vertex
    fields: dict[str, Tensor]  # each with leading dimension = number of vertices
    params: dict[str, Any]
    debug_context_id: int

    @property
    def count(self) -> int:
        return int(self.tiles.size)


@dataclass(eq=False)
class ComputeSet:
    id: int
    name: str
    debug_context_id: int
    batches: list[VertexBatch] = field(default_factory=list)
    # The compute set's kernel: a few coarse vertices over whole tensors that compute what its
    # vertices compute, so the engine can run one numpy call per op instead of gathering every
    # vertex's operands. None: no kernel (the vertices run); []: a later compute set's kernel
    # computes this one's result (a stage of a multi-stage op). Timing, memory and exchange always
    # come from the vertices; the engine option tilescope.executeVertices runs them instead.
    kernel: list[VertexBatch] | None = None

    @property
    def num_vertices(self) -> int:
        return sum(b.count for b in self.batches)

    def __repr__(self) -> str:
        return f"ComputeSet({self.name!r}, {self.num_vertices} vertices)"


@dataclass(frozen=True)
class DebugContext:
    id: int
    parent_id: int
    layer: str
    name: str
    op_type: str
    file: str
    line: int
    attributes: str


@dataclass(eq=False)
class Function:
    """A program body that Call programs run (Poplar ``Graph::addFunction``)."""

    id: int
    name: str
    program: Any


class Graph:
    """A Poplar-style graph for one target."""

    def __init__(self, target: Target, replication_factor: int | None = None) -> None:
        # Replication (Poplar ``Graph(target, replication_factor(R))``): the graph is one replica's,
        # built on target.num_ipus / R IPUs; the engine runs R copies on disjoint IPUs, each with its
        # own data (profiler.multi_ipu.replication). Default: the target's num_replicas.
        replicas = target.num_replicas if replication_factor is None else int(replication_factor)
        if replicas < 1 or target.num_ipus % replicas:
            raise GraphError(
                f"replication factor {replicas}: must divide the target's {target.num_ipus} IPU(s) (and be >= 1)"
            )
        self.replication_factor = replicas
        self.system_target = target  # every replica's IPUs
        target = replica_view(target, replicas)
        self._target = target
        # Virtual graph (Poplar ``createVirtualGraph``, PopART ``virtualGraph``): while open, the graph
        # looks like one IPU of ``target``; see virtual_graph().
        self._ipu: int | None = None
        self._ipu_target: Target | None = None
        # I/O tiles (PopART SessionOptions.numIOTiles): the last ``io_tiles`` tiles of the IPU, set aside for
        # host streams while the model is built on the others (compute_tiles())
        self.io_tiles = 0
        self.variables: list[Variable] = []
        self.compute_sets: list[ComputeSet] = []
        self.streams: list[DataStream] = []
        self.debug_contexts: list[DebugContext] = []
        self.functions: list[Function] = []
        self.host_reads: dict[str, Tensor] = {}
        self.host_writes: dict[str, Tensor] = {}
        self._context_stack: list[int] = []

    @property
    def target(self) -> Target:
        """The device; inside ``virtual_graph(ipu)``, one IPU of it (tiles 0..tiles_per_ipu-1)."""
        return self._target if self._ipu_target is None else self._ipu_target

    @property
    def device_target(self) -> Target:
        """The whole device, also inside a virtual graph."""
        return self._target

    @property
    def current_ipu(self) -> int | None:
        """The IPU of the open virtual graph (None: none is open)."""
        return self._ipu

    @contextlib.contextmanager
    def virtual_graph(self, ipu: int) -> Iterator[int]:
        """Build on one IPU: inside the block the graph's target is that IPU alone, so operations map
        their tensors and vertices onto its tiles (tile ids given and read are that IPU's, 0-based).
        A tensor held on another IPU reads as the same tile positions on this one, so an op that
        lays its output out like an input keeps the layout; reading that input then crosses IPUs,
        which the compiler plans as a global exchange over IPU-Links. Blocks may nest (innermost wins).
        """
        full = self._target
        if not 0 <= ipu < full.num_ipus:
            raise GraphError(f"virtual graph: IPU {ipu} does not exist (target {full.name} has {full.num_ipus} IPUs)")
        saved = self._ipu, self._ipu_target
        self._ipu = ipu
        self._ipu_target = sharding_view(full)
        try:
            yield ipu
        finally:
            self._ipu, self._ipu_target = saved

    @contextlib.contextmanager
    def compute_tiles(self, io_tiles: int) -> Iterator[Target]:
        """Build on the IPU's compute tiles, the first ``tiles_per_ipu - io_tiles``: inside the block the
        graph's target is those tiles alone, so operations map their tensors and vertices onto them (tile
        ids are the device's, unchanged). Poplar's ``Graph::createVirtualGraph(lowerTile, upperTile)`` over a
        tile range, as PopART splits an IPU into compute and I/O tiles for ``SessionOptions.numIOTiles``
        (graphcore/popart docs/user_guide/overlap_io.rst: virtual graphs "within each IPU, to a subset of
        tiles (such as compute and IO tiles)"). PopART picks its I/O tiles spread over the IPU; tilescope
        models no tile distance, so the last tiles stand for them. One IPU per replica; the graph's
        ``io_tiles`` records the split for the engine."""
        full = self._target
        if full.num_ipus != 1 or self._ipu is not None or self._ipu_target is not None:
            raise GraphError("I/O tiles: one IPU per replica, outside any virtual graph")
        if not 0 < io_tiles < full.tiles_per_ipu:
            raise GraphError(f"I/O tiles: {io_tiles} of the IPU's {full.tiles_per_ipu} tiles; give 1 to tiles - 1")
        self.io_tiles = io_tiles
        self._ipu_target = replace(full, tiles_per_ipu=full.tiles_per_ipu - io_tiles)
        try:
            yield self._ipu_target
        finally:
            self._ipu_target = None

    def _to_device_tiles(self, tiles: np.ndarray) -> np.ndarray:
        """Tile ids given inside a virtual graph as device-global ids on its IPU: a tile's position
        within an IPU (0-based, as the virtual graph numbers them; a device-global id read straight
        from a mapping keeps its position) on the open IPU. Unmapped (negative) ids stay."""
        if self._ipu is None:
            return tiles
        tpi = self._target.tiles_per_ipu
        first = self._ipu * tpi
        if tiles.size:  # the usual cases, without a division per id: all on this IPU, or all positions
            lo, hi = int(tiles.min()), int(tiles.max())
            if first <= lo and hi < first + tpi:
                return tiles
            if lo >= 0 and hi < tpi:
                return (tiles + first).astype(tiles.dtype, copy=False)
        return np.where(tiles < 0, tiles, tiles % tpi + first).astype(tiles.dtype, copy=False)

    def _from_device_tiles(self, tiles: np.ndarray) -> np.ndarray:
        """Device-global tile ids as seen inside a virtual graph (position within the IPU); unmapped stays."""
        if self._ipu is None:
            return tiles
        tpi = self._target.tiles_per_ipu
        if tiles.size:  # the usual case, without a division per id: all on one IPU
            lo, hi = int(tiles.min()), int(tiles.max())
            if lo >= 0 and lo // tpi == hi // tpi:
                return (tiles - lo // tpi * tpi).astype(tiles.dtype, copy=False)
        return np.where(tiles < 0, tiles, tiles % tpi).astype(tiles.dtype, copy=False)

    # -- debug contexts ------------------------------------------------------------------------
    @contextlib.contextmanager
    def debug_context(
        self,
        name: str,
        op_type: str = "",
        layer: str = Layer.USER,
        attributes: Mapping[str, Any] | None = None,
        top_level: bool = False,
    ) -> Iterator[int]:
        """Everything created inside the block carries this context (Operations views group by it).
        ``top_level``: an operation of its own even when opened inside another (a weight's upload,
        made while the node that reads it is built, is not part of that node's work)."""
        # the caller of the ``with`` statement (this generator, then contextlib's __enter__)
        try:
            frame = sys._getframe(2)
        except ValueError:
            frame = None
        ctx = DebugContext(
            id=len(self.debug_contexts),
            parent_id=self._context_stack[-1] if self._context_stack and not top_level else -1,
            layer=layer,
            name=name,
            op_type=op_type,
            file=frame.f_code.co_filename if frame else "",
            line=frame.f_lineno if frame else 0,
            attributes=json.dumps(dict(attributes or {}), sort_keys=True, default=str),
        )
        self.debug_contexts.append(ctx)
        self._context_stack.append(ctx.id)
        try:
            yield ctx.id
        finally:
            self._context_stack.pop()

    def current_debug_context(self) -> int:
        """Id of the innermost open debug context (-1: none)."""
        return self._context_stack[-1] if self._context_stack else -1

    _current_context = current_debug_context

    # -- variables -----------------------------------------------------------------------------
    def _add(
        self, dtype: DTypeLike, shape: Sequence[int] | int, name: str, constant: bool, interleaved: bool
    ) -> Tensor:
        dt = as_dtype(dtype)
        shp = _dims(shape)
        if any(s < 0 for s in shp):
            raise GraphError(f"variable {name!r}: negative dimension in shape {shp}")
        n = 1
        for s_ in shp:  # Python ints: a product past int64 must not wrap to a small number
            n *= s_
        if n >= _CHECK_HOST_MEMORY_FROM:
            # its values when it runs (views hold no element ids): a size that cannot fit is one line, at once
            need = n * dt.itemsize
            host_memory.ensure(need, f"variable {name or 'var' + str(len(self.variables))!r} of shape {shp}")
        vid = len(self.variables)
        var = Variable(
            vid, name or f"var{vid}", dt, shp, constant, interleaved, self._current_context(), TileMapping(n)
        )
        self.variables.append(var)
        return Tensor(self, vid, Affine.contiguous(shp), dt)

    def add_variable(
        self, dtype: DTypeLike, shape: Sequence[int] | int, name: str = "", interleaved: bool = False
    ) -> Tensor:
        """A new variable (not initialised). ``interleaved``: must sit in interleaved memory."""
        return self._add(dtype, shape, name, constant=False, interleaved=interleaved)

    def add_constant(self, dtype: DTypeLike, shape: Sequence[int] | int, value: object, name: str = "") -> Tensor:
        """A constant: ``value`` broadcast to ``shape``; always-live, category ``constant``."""
        t = self._add(dtype, shape, name, constant=True, interleaved=False)
        var = self.variable(t)
        if shape_only.is_placeholder(value):  # compile-only: its shape and type, never its data
            var.value = shape_only.placeholder((var.numel,), var.dtype)
            return t
        try:
            var.value = np.broadcast_to(np.asarray(value, dtype=var.dtype), var.shape).reshape(-1).copy()
        except ValueError:
            raise GraphError(f"constant {var.name!r}: value does not fit shape {var.shape}") from None
        return t

    def variable(self, t: Tensor) -> Variable:
        vid = t.single_variable()
        if vid is None:
            raise GraphError(f"{t!r} spans several variables; a single variable is needed here")
        return self.variables[vid]

    # -- tile mapping --------------------------------------------------------------------------
    def _check_device_tile(self, tiles: np.ndarray, what: str) -> None:
        n = self._target.num_tiles
        if tiles.size and (tiles.min() < 0 or tiles.max() >= n):
            bad = int(tiles[(tiles < 0) | (tiles >= n)][0])
            raise GraphError(f"{what}: tile {bad} does not exist (target {self._target.name} has {n} tiles)")

    def _check_tile(self, tiles: np.ndarray, what: str) -> None:
        if self._ipu is not None:  # a virtual graph takes its own tile ids and device-global ones
            return self._check_device_tile(tiles, what)
        if tiles.size and (tiles.min() < 0 or tiles.max() >= self.target.num_tiles):
            bad = int(tiles[(tiles < 0) | (tiles >= self.target.num_tiles)][0])
            raise GraphError(
                f"{what}: tile {bad} does not exist (target {self.target.name} has {self.target.num_tiles} tiles)"
            )

    def set_tile_mapping(self, t: Tensor, tile: int | Sequence[int] | np.ndarray) -> None:
        """Map every element of ``t`` to ``tile`` (or to tile[i] for element i of ``t`` flattened)."""
        tiles = np.asarray(tile, dtype=np.int64)
        self._check_tile(tiles.reshape(-1), f"mapping of {t!r}")
        tiles = self._to_device_tiles(tiles)
        n = t.numel()
        if tiles.ndim and tiles.size != n:
            raise GraphError(f"mapping of {t!r}: {tiles.size} tiles given for {n} elements")
        if n == 0:
            return
        vid = t.single_variable()
        if vid is not None and not t.structured:  # one variable: no variable id per element to split by
            mapping = self.variables[vid].mapping
            whole = self._whole_variable(t) is not None
            flat = t._lay.flat if isinstance(t._lay, Factored) else t._lay  # a factored view: its factors, in order
            if whole and tiles.ndim == 0:
                mapping.fill(int(tiles))
            elif whole:  # all of it in its own order: the tiles are its mapping
                mapping.set_dense(tiles.reshape(-1))
            elif isinstance(flat, Affine) and flat.one_to_one():  # written through a strided view
                mapping.assign_affine(flat, tiles)
            else:
                mapping.assign(t._idx.reshape(-1), int(tiles) if tiles.ndim == 0 else tiles.reshape(-1))
            return
        var_ids, idx = t.elements()
        for vid in sorting.unique(var_ids):
            sel = var_ids == vid
            self.variables[vid].mapping.assign(idx[sel], int(tiles) if tiles.ndim == 0 else tiles.reshape(-1)[sel])

    def map_intervals(self, t: Tensor, starts: np.ndarray, lengths: np.ndarray, tiles: np.ndarray) -> None:
        """Map ``t``'s flattened elements as intervals: [starts[i], starts[i] + lengths[i]) on tiles[i],
        given in any order, together covering ``t`` once (a planner's blocks). When ``t`` is all of one
        variable in its own order the mapping is built from them, never from a tile per element."""
        tiles = np.asarray(tiles, dtype=np.int64).reshape(-1)
        starts = np.asarray(starts, dtype=np.int64).reshape(-1)  # a planner may give a list
        order = stable_order(starts)
        s, ln, tl = starts[order], np.asarray(lengths, dtype=np.int64).reshape(-1)[order], tiles[order]
        n = t.numel()
        if (
            s.size == 0
            or s[0] != 0
            or (ln <= 0).any()
            or not np.array_equal(s[1:], (s + ln)[:-1])
            or s[-1] + ln[-1] != n
        ):
            raise GraphError(f"mapping of {t!r}: the intervals do not cover its {n} elements once")
        var = self._whole_variable(t)
        if var is None:  # a view: by element
            self.set_tile_mapping(t, np.repeat(tl, ln))
            return
        self._check_tile(tl, f"mapping of {t!r}")
        var.mapping.set_intervals(s, self._to_device_tiles(tl))

    def map_linearly(self, t: Tensor, grain_size: int = 1, tiles: Sequence[int] | np.ndarray | None = None) -> None:
        """Spread ``t`` evenly over tiles in grains (poputil::mapTensorLinearly): each tile gets
        ceil(grains / tiles) consecutive grains, the last tiles possibly fewer or none."""
        tile_ids = np.arange(self.target.num_tiles) if tiles is None else np.asarray(tiles, dtype=np.int64)
        n = t.numel()
        grains = -(-n // grain_size)
        per_tile = max(1, -(-grains // len(tile_ids)))
        var = self._whole_variable(t)
        if var is not None and n:  # as intervals: one per tile, no array per element
            self._check_tile(tile_ids, f"mapping of {t!r}")
            starts = np.arange(0, n, per_tile * grain_size, dtype=np.int64)
            var.mapping.set_intervals(starts, self._to_device_tiles(tile_ids[: starts.size]))
            return
        owner = tile_ids[(np.arange(n) // grain_size) // per_tile]
        self.set_tile_mapping(t, owner)

    def tile_runs(self, t: Tensor) -> tuple[np.ndarray, np.ndarray] | None:
        """(start, tile) of the maximal runs of ``t``'s flattened elements on one tile (UNMAPPED
        too) when ``t`` is one contiguous range of one variable in its own order (all of it, or a
        slice along its first dims, as ``x[i]``), else None: ``tile_of(t)`` without a tile per
        element (it is ``np.repeat(tile, np.diff(np.append(start, t.numel())))``)."""
        var = self._whole_variable(t)
        if var is not None:
            if var.numel == 0:
                return None
            starts, tiles = var.mapping.starts, self._from_device_tiles(var.mapping.tiles)
        else:
            found = self._range_runs(t)
            if found is None:
                return None
            starts, tiles = found
        keep = np.ones(tiles.size, dtype=bool)
        keep[1:] = tiles[1:] != tiles[:-1]  # neighbours on one tile are one run (as seen from here)
        return starts[keep], tiles[keep]

    def wholly_on_ipu(self, t: Tensor, ipu: int) -> bool:
        """Every variable ``t`` views is mapped, all of it, on IPU ``ipu``'s tiles: then so is ``t``,
        known from the variables' intervals, never a tile per element (False says nothing)."""
        tpi = self.target.tiles_per_ipu
        for vid in t.variable_ids():
            tiles = self._from_device_tiles(self.variables[vid].mapping.tiles)
            if (tiles < 0).any() or not bool((tiles // tpi == ipu).all()):
                return False
        return True

    def view_runs(self, t: Tensor) -> tuple[np.ndarray, np.ndarray] | None:
        """``tile_runs`` for any affine or factored view of one variable whose inner dims read runs of
        it (a transposed or grouped view: a matmul's result store): each run of the inner dims cut
        where the mapping's intervals end, neighbours on one tile merged. Per inner run and interval,
        never per element; None when the view has no inner run worth it (or is none of these)."""
        found = self.tile_runs(t)
        if found is None and isinstance(t._lay, VarRuns) and t.numel():
            return self._var_runs_tiles(t._lay)
        if found is not None or not t.strided or t.numel() == 0:
            return found
        vid = t.single_variable()
        lay = t._lay.flat if isinstance(t._lay, Factored) else t._lay
        if vid is None or not isinstance(lay, Affine):
            return None
        inner, step = inner_run(lay)
        if step != 1 or inner < 2 or lay.size % inner:
            return None
        m = self.variables[vid].mapping
        # a grouped store's rows: bands of rows even when its groups are short (4 channels)
        banded = band_runs(lay, inner, m.starts, self._from_device_tiles(m.tiles))
        if banded is not None:
            return banded
        if inner < RUNS_WORTH_IT:
            return None
        first_pos = np.arange(0, lay.size, inner, dtype=np.int64)
        coords = np.unravel_index(first_pos, lay.shape)
        elem = lay.offset + sum((c.astype(np.int64) * st for c, st in zip(coords, lay.strides, strict=True)),
                                np.zeros(first_pos.size, np.int64))  # fmt: skip
        sub, pieces = cut_ranges(m.starts, elem, np.full(elem.size, inner, dtype=np.int64))
        pos = np.repeat(first_pos - elem, pieces) + sub  # each piece's first position in the view
        tiles = self._from_device_tiles(m.tiles[np.searchsorted(m.starts, sub, side="right") - 1])
        keep = np.ones(tiles.size, dtype=bool)
        keep[1:] = tiles[1:] != tiles[:-1]
        return pos[keep], tiles[keep]

    def _var_runs_tiles(self, lay: VarRuns) -> tuple[np.ndarray, np.ndarray] | None:
        """``view_runs`` of runs of several variables: each run cut where its variable's mapping
        intervals end (a repeated element is one piece), neighbours on one tile merged. Per run and
        interval, never per element; None for periodic runs."""
        r = lay.runs
        if r.period is not None or r.block or r.repeat:
            return None
        length = r.length.astype(np.int64)
        at = np.cumsum(length) - length  # each run's first position in the view
        step = np.broadcast_to(np.asarray(r.step, dtype=np.int64), length.shape)
        span = np.where(step == 0, 1, length)  # the variable's elements each run reads
        start = r.start.astype(np.int64)
        pos, tiles = [], []
        for vid in sorting.unique(lay.var).tolist():  # a few variables
            sel = np.flatnonzero(lay.var == vid)
            m = self.variables[vid].mapping
            sub, pieces = cut_ranges(m.starts, start[sel], span[sel])
            of = np.repeat(sel, pieces)
            pos.append(at[of] + (sub - start[of]) * step[of])
            tiles.append(m.tiles[np.searchsorted(m.starts, sub, side="right") - 1])
        p, tl = np.concatenate(pos), self._from_device_tiles(np.concatenate(tiles))
        order = stable_order(p)
        p, tl = p[order], tl[order]
        keep = np.ones(tl.size, dtype=bool)
        keep[1:] = tl[1:] != tl[:-1]
        return p[keep], tl[keep]

    def _range_runs(self, t: Tensor) -> tuple[np.ndarray, np.ndarray] | None:
        """(start, tile) of the mapping's intervals cut to ``t``, a contiguous range of one variable
        in row-major order (offsets from the range's first element); None for any other view."""
        lay, vid = t._lay, t.single_variable()
        if vid is None or not isinstance(lay, Affine) or lay.size == 0:
            return None
        row_major = Affine.contiguous(lay.shape).strides  # a dim of one element: any stride (0 here)
        if any(n != 1 and st != want for n, st, want in zip(lay.shape, lay.strides, row_major, strict=True)):
            return None
        var = self.variables[vid]
        lo, hi = lay.offset, lay.offset + lay.size
        if lo < 0 or hi > var.numel:
            return None
        m = var.mapping
        first = int(np.searchsorted(m.starts, lo, side="right")) - 1
        last = int(np.searchsorted(m.starts, hi, side="left"))
        starts = m.starts[first:last] - lo
        starts[0] = 0
        return starts, self._from_device_tiles(m.tiles[first:last])

    def _whole_variable(self, t: Tensor) -> Variable | None:
        """The variable ``t`` is, when ``t`` is all of it in its own order (a contiguous view)."""
        lay, vid = t._lay, t.single_variable()
        if vid is None or not isinstance(lay, Affine) or lay.offset != 0:
            return None
        var = self.variables[vid]
        want = Affine.contiguous(lay.shape).strides
        # a dim of one element steps nowhere: its stride says nothing of the order (a [1, K, N] view)
        if lay.size != var.numel or any(s != c for n, s, c in zip(lay.shape, lay.strides, want, strict=True) if n != 1):
            return None
        return var

    def clone(self, like: Tensor, name: str, dtype: DTypeLike | None = None) -> Tensor | None:
        """A new variable laid out and mapped as the variable ``like`` views (Poplar ``Graph::clone``):
        the same view of a new variable of the same shape, its mapping copied interval by interval.
        None when ``like`` is not a one-to-one view of all of one variable."""
        lay, vid = like._lay, like.single_variable()
        if vid is None:
            return self._clone_parts(like, name, dtype)
        if not covers_all(lay, self.variables[vid].numel):
            return None
        var = self.variables[vid]
        if isinstance(lay, Factored):  # a grouped store: the same store, seen through the same view
            t = self._add(var.dtype if dtype is None else dtype, list(var.shape), name, False, False)
            new = self.variable(t)
            new.mapping.starts, new.mapping.tiles = var.mapping.starts, self._to_device_tiles(var.mapping.tiles)
            new.clone_layout = var.clone_layout  # laid out on its tiles as its source
            return Tensor(self, new.id, lay, t.dtype)
        # the new variable's shape is the view's dims in storage order (a transposed view's clone is
        # stored as the original is, e.g. NHWC under an NCHW view)
        big = [d for d, n in enumerate(lay.shape) if n != 1]
        by_stride = sorted(big, key=lambda d: -lay.strides[d])
        order = (
            list(range(len(lay.shape)))
            if by_stride == big
            else [d for d in range(len(lay.shape)) if d not in big] + by_stride
        )
        t = self._add(var.dtype if dtype is None else dtype, [lay.shape[d] for d in order], name, False, False)
        new = self.variable(t)
        # inside a virtual graph the clone is laid out as ``like`` on the open IPU's tiles
        # shared, not copied: a mapping's arrays are replaced whole, never written in place
        new.mapping.starts, new.mapping.tiles = var.mapping.starts, self._to_device_tiles(var.mapping.tiles)
        new.clone_layout = var.clone_layout  # laid out on its tiles as its source
        return t.transpose(*np.argsort(order)) if order != sorted(order) else t

    def _clone_parts(self, like: Tensor, name: str, dtype: DTypeLike | None) -> Tensor | None:
        """The clone of a view over several whole variables (a concatenation): each variable cloned
        (its mapping shared, interval by interval) and the view rebuilt over the clones, as Poplar's
        ``Graph::clone`` keeps the source's order and aliasing (``TensorCloneMethod::
        PRESERVE_ORDER_UNLESS_ALIASES``, poplar/Graph.hpp). Its mapping stays the sources' intervals;
        one variable mapped element by element (DenseNet's concatenations: 0.6 intervals per element)
        would make host cost follow the elements. None when a variable is viewed in part or twice."""
        if like.structured and not isinstance(like._lay, VarRuns):  # a window; runs of variables: as by element
            return None
        if isinstance(like._lay, VarRuns):  # the sizes' check below, from the runs' variables
            total = sum(self.variables[v].numel for v in like.variable_ids())
            if total != like.numel():
                return None
        var, idx = like.elements()
        ids, first = np.unique(var, return_index=True)
        numel = np.array([self.variables[int(v)].numel for v in ids], dtype=np.int64)
        if int(numel.sum()) != var.size:  # each variable once and whole: the sizes add up and no
            return None  # element repeats (a variable's elements are 0..numel-1)
        base = np.concatenate([[0], np.cumsum(numel)[:-1]])
        slot = np.searchsorted(ids, var)
        seen = np.zeros(var.size, dtype=bool)
        seen[base[slot] + idx] = True
        if not seen.all():
            return None
        new_ids = np.empty(ids.size, dtype=np.int32)
        for k in np.argsort(first, kind="stable"):  # in the view's order: deterministic ids
            src = self.variables[int(ids[k])]
            t = self._add(src.dtype if dtype is None else dtype, list(src.shape), name, False, False)
            new = self.variable(t)
            new.mapping.starts, new.mapping.tiles = src.mapping.starts, self._to_device_tiles(src.mapping.tiles)
            new.clone_layout = src.clone_layout
            new_ids[k] = new.id
        out_dtype = as_dtype(like.dtype if dtype is None else dtype)
        return Tensor(self, new_ids[slot].reshape(like.shape), idx.reshape(like.shape), out_dtype)

    def elements_per_tile(self, t: Tensor) -> np.ndarray:
        """How many elements of ``t`` each tile holds (this graph's tile ids). When ``t`` reaches every
        element of one variable once, in any order, it is counted from the mapping's intervals with
        no tile per element (a stream copy of a 1 GiB weight costs its intervals, not its elements)."""
        n = self.target.num_tiles
        vid, lay = t.single_variable(), t._lay
        lay = lay.flat if isinstance(lay, Factored) else lay
        if vid is not None and isinstance(lay, Affine) and lay.size == self.variables[vid].numel and lay.one_to_one():
            m = self.variables[vid].mapping
            lengths = np.diff(np.append(m.starts, m.n))
            tiles = self._from_device_tiles(m.tiles.astype(np.int64))
            return np.bincount(tiles, weights=lengths, minlength=n).astype(np.int64)
        return np.bincount(self.tile_of(t).astype(np.int64), minlength=n).astype(np.int64)

    def tile_of(self, t: Tensor) -> np.ndarray:
        """Tile of each element of ``t`` (flattened); UNMAPPED (-1) where unmapped."""
        single = t.single_variable()
        if single is not None:
            mapping, lay = self.variables[single].mapping, t._lay
            lay = lay.flat if isinstance(lay, Factored) else lay  # the same elements in the same order
            if (
                isinstance(lay, Affine)
                and mapping.tiles.size > 1
                and min(lay.strides, default=0) >= 0
                and mapping.n <= 2 * lay.size
            ):  # most of the variable: its mapping expanded and read through the view (no index per element)
                dense = mapping.dense()
                view = np.lib.stride_tricks.as_strided(
                    dense[lay.offset :], lay.shape, tuple(s * dense.itemsize for s in lay.strides)
                )
                return self._from_device_tiles(np.ascontiguousarray(view).reshape(-1))
            return self._from_device_tiles(mapping.tile_of(t._idx.reshape(-1)))  # TODO intervals
        var_ids, idx = t.elements()
        out = np.empty(idx.size, dtype=np.int32)
        for vid in sorting.unique(var_ids):
            sel = var_ids == vid
            # not cached: a view of several variables is looked up once (a clone of a concatenation
            # at import), and a tile per element of each kept would follow the elements (issue 38)
            out[sel] = self.variables[vid].mapping.tile_of(idx[sel], cache=False)
        return self._from_device_tiles(out)

    def get_tile_mapping(self, t: Tensor) -> dict[int, list[tuple[int, int]]]:
        """Poplar-style mapping of ``t``: tile -> intervals [begin, end) of t's flattened elements."""
        tiles = self.tile_of(t)
        out: dict[int, list[tuple[int, int]]] = {}
        if tiles.size == 0:
            return out
        starts = np.concatenate(([0], np.flatnonzero(tiles[1:] != tiles[:-1]) + 1))
        ends = np.append(starts[1:], tiles.size)
        for s, e in zip(starts, ends, strict=True):
            out.setdefault(int(tiles[s]), []).append((int(s), int(e)))
        return out

    # -- compute sets and vertices -------------------------------------------------------------
    def add_compute_set(self, name: str = "") -> ComputeSet:
        cs = ComputeSet(len(self.compute_sets), name or f"cs{len(self.compute_sets)}", self._current_context())
        self.compute_sets.append(cs)
        return cs

    def add_vertices(
        self,
        cs: ComputeSet,
        codelet: str | Codelet,
        fields: Mapping[str, Tensor],
        tiles: Sequence[int] | np.ndarray,
        **params: Any,
    ) -> VertexBatch:
        """Add len(tiles) vertices at once: vertex i runs on tiles[i] with row i of every field."""
        cl = resolve_codelet(codelet)
        tile_arr = np.asarray(tiles, dtype=np.int32).reshape(-1)
        self._check_tile(tile_arr, f"compute set {cs.name!r}")
        cl.check_fields(cs.name, {k: v.shape[1:] for k, v in fields.items()}, params)
        self._check_fields(cs, cl, fields, tile_arr.size)
        # a copy (the caller's array stays its own to write), held once for a repeated layer on one IPU
        tile_arr = shared(np.array(self._to_device_tiles(tile_arr), dtype=np.int32))
        batch = VertexBatch(cl, tile_arr, dict(fields), dict(params), self._current_context())
        cs.batches.append(batch)
        return batch

    def _check_fields(self, cs: ComputeSet, cl: Codelet, fields: Mapping[str, Tensor], count: int) -> None:
        for name, t in fields.items():
            if not isinstance(t, Tensor) or t.graph is not self:
                raise GraphError(f"compute set {cs.name!r}: field {name!r} of {cl.name} is not a tensor of this graph")
            if t.rank == 0 or t.shape[0] != count:
                raise GraphError(
                    f"compute set {cs.name!r}: field {name!r} of {cl.name} has shape {t.shape}; "
                    f"expected a leading dimension of {count} (one row per vertex)"
                )

    def add_kernel(self, cs: ComputeSet, codelet: str | Codelet, fields: Mapping[str, Tensor], **params: Any) -> None:
        """Add coarse vertices to ``cs``'s kernel (see ComputeSet.kernel): row i of every field is
        one coarse vertex, usually a whole tensor or one block of an op. The compiler checks that
        the kernel writes exactly the elements the compute set's vertices write."""
        cl = resolve_codelet(codelet)
        count = next(iter(fields.values())).shape[0] if fields else 0
        cl.check_fields(cs.name, {k: v.shape[1:] for k, v in fields.items()}, params)
        self._check_fields(cs, cl, fields, count)
        batch = VertexBatch(cl, np.zeros(count, dtype=np.int32), dict(fields), dict(params), cs.debug_context_id)
        cs.kernel = (cs.kernel or []) + [batch]

    def defer_kernel(self, cs: ComputeSet) -> None:
        """Mark ``cs`` as computed by a later compute set's kernel (its results are op-internal)."""
        if cs.kernel:
            raise GraphError(f"compute set {cs.name!r} already has a kernel")
        cs.kernel = []

    def add_vertex(
        self, cs: ComputeSet, codelet: str | Codelet, fields: Mapping[str, Tensor], tile: int, **params: Any
    ) -> VertexBatch:
        """Add one vertex on ``tile`` (Poplar ``addVertex`` + ``connect`` + ``setTileMapping``)."""
        return self.add_vertices(cs, codelet, {k: v.expand(0) for k, v in fields.items()}, [tile], **params)

    # -- streams and host access ---------------------------------------------------------------
    def _stream(self, name: str, direction: str, dtype: DTypeLike, shape: Sequence[int] | int) -> DataStream:
        shp = _dims(shape)
        if any(s.name == name for s in self.streams):
            raise GraphError(f"a stream named {name!r} already exists")
        s = DataStream(len(self.streams), name, direction, as_dtype(dtype), shp)
        self.streams.append(s)
        return s

    def add_host_to_device_fifo(self, name: str, dtype: DTypeLike, shape: Sequence[int] | int) -> DataStream:
        return self._stream(name, HOST_TO_DEVICE, dtype, shape)

    def add_device_to_host_fifo(self, name: str, dtype: DTypeLike, shape: Sequence[int] | int) -> DataStream:
        return self._stream(name, DEVICE_TO_HOST, dtype, shape)

    def create_host_write(self, handle: str, t: Tensor) -> None:
        """Let the host write ``t`` with Engine.write_tensor(handle, ...) (keeps it always-live)."""
        for vid in t.variable_ids():
            self.variables[vid].host_visible = True
        self.host_writes[handle] = t

    def create_host_read(self, handle: str, t: Tensor) -> None:
        """Let the host read ``t`` with Engine.read_tensor(handle) (keeps it always-live)."""
        for vid in t.variable_ids():
            self.variables[vid].host_visible = True
        self.host_reads[handle] = t

    def add_function(self, program: Any, name: str = "") -> Function:
        f = Function(len(self.functions), name or f"function{len(self.functions)}", program)
        self.functions.append(f)
        return f
