"""Compiler: lower programs to the program tree (PopVision step types) and plan every step.

Each leaf (program step) carries what the engine needs to run it functionally and what the
BSP model charges per tile: cycles, bytes in/out, exchange code and FLOPs. Liveness and memory
placement then work on these steps (profiler.compiler.liveness, profiler.compiler.memory).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from profiler.chip import cost_model
from profiler.chip.codelets import Codelet
from profiler.chip.targets import Target
from profiler.compiler.exchange import (
    element_receives,
    piece_receives,
    plan_receives,
    plan_transfers,
)
from profiler.compiler.receive_buffers import ReceiveBuffer, as_variables, record
from profiler.executable import actions
from profiler.executable.access import Access
from profiler.executable.actions import Action
from profiler.executable.plans import BatchPlan, ComputeSetPlan
from profiler.host import host_memory
from profiler.host.allocator import small_pages
from profiler.poplar import programs as P
from profiler.poplar.graph import ComputeSet, Graph, GraphError, VertexBatch
from profiler.poplar.layout import Affine, covers_all
from profiler.poplar.regions import Regions, canonical, field_regions, rows_of_blocks
from profiler.poplar.streams import HOST_TO_DEVICE, DataStream
from profiler.poplar.tensor import Tensor, concat
from profiler.poplar.variables import UNMAPPED, Variable
from report_format.vocabulary import ControlType, MemoryCategory, StepType

# Host bytes per region a compute set's vertex fields read, while its exchange is planned: a piece's
# start, length, source and destination tiles and element size, their sorted copies and the union
# pass (checked with profiler.host.host_memory before planning).
PLAN_BYTES_PER_REGION = 160
# Host bytes per element of short-run fields planned per element (the packed key, its sorted copy
# and the unpacked arrays).
PLAN_BYTES_PER_READ_ELEMENT = 40
# Fields whose pieces hold fewer elements than this on average are planned per element (packed
# keys, one sort): cheaper than the interval union when the runs are that short. Measured per piece
# or element read: ~0.7 us per piece, ~0.15-0.35 us per element (a BERT layer's single elements
# 0.3 s per element vs 1.6 s per piece; a ResNet-50 stride-2 convolution's runs of 8-9, 12 s vs 2.6 s).
SHORT_PIECE_ELEMENTS = 2

# Host bytes per tile of the target that compiling and placing memory hold whatever the model
# (per-tile cycles, bytes and regions of every step, memory by category): measured ~2.7 KB per
# tile for a four-node MLP on 64 and 256 GC200 IPUs (peak RSS slope); rounded up.
HOST_BYTES_PER_TILE = 4096

# [INF] ref §5 copyDescriptor ("special variable-sized fields used by copy vertices"): a region's
# source and destination pointers packed with its length, 8 bytes (two 21-bit addresses + count).
COPY_DESCRIPTOR_BYTES_PER_REGION = 8


class CompileError(ValueError):
    """The program cannot be compiled (message names the variable, compute set or tiles)."""


@dataclass(eq=False)
class Node:
    """A node of the program tree; leaves are program steps."""

    id: int
    parent_id: int
    child_index: int
    type: str
    name: str
    debug_context_id: int = -1
    step: int = -1
    compute_set_id: int = -1
    repeat_count: int = 0
    children: list[Node] = field(default_factory=list)
    # -- steps ----------------------------------------------------------------------------
    tile_cycles: np.ndarray | None = None  # estimated cycles per global tile
    bytes_in: np.ndarray | None = None
    bytes_out: np.ndarray | None = None
    flops: np.ndarray | None = None
    code_bytes: np.ndarray | None = None  # exchange code per tile
    code_category: str = ""
    descriptor_bytes: np.ndarray | None = None  # copy descriptors per tile (on-tile copies)
    external: bool = False  # synchronises all IPUs
    # a step or node of a later call of a function: its code (exchange, control, descriptors) is the
    # first call's, held once (Poplar: a function's body is compiled once and every Call runs it)
    shares_code: bool = False
    reads: set[int] = field(default_factory=set)
    writes: set[int] = field(default_factory=set)
    undefs: set[int] = field(default_factory=set)
    action: Action | None = None
    condition: Access | None = None  # If and Switch nodes
    case_values: list[int] = field(default_factory=list)  # Switch: children[i] runs for case_values[i]; last = default

    @property
    def is_step(self) -> bool:
        return self.step >= 0


_LOG2_ITEMSIZE = {1: 0, 2: 1, 4: 2, 8: 3}


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


def _kernel_reads(cs: ComputeSet) -> set[int]:
    """The variables a compute set's kernel reads."""
    return {v for b in cs.kernel or [] for f in b.codelet.reads for v in _vars(b.fields[f])}


def _same_elements(a: list[tuple[np.ndarray, np.ndarray]], b: list[tuple[np.ndarray, np.ndarray]]) -> bool:
    """Whether two lists of (start, length) region arrays cover the same elements the same number of
    times: the same total and the same union (so, without overlaps, the same elements)."""

    def cat(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
        if not parts:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    (sa, la), (sb, lb) = cat(a), cat(b)
    if int(la.sum()) != int(lb.sum()):
        return False
    ua, ub = canonical(sa, la), canonical(sb, lb)
    return all(np.array_equal(x, y) for x, y in zip(ua, ub, strict=True))


def _sent_pieces(
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


def _cat(parts: list[np.ndarray]) -> np.ndarray:
    """np.concatenate, without copying a lone array (the pieces of a compute set run to millions)."""
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _vars(t: Tensor) -> set[int]:
    return set(t.variable_ids())


Progress = Callable[[int, int], None]


class Compiler:
    """Lowers programs to the program tree and plans every step; ``compile_programs`` runs it and
    hands back a CompiledGraph."""

    def __init__(self, graph: Graph, programs: list[P.Program], progress: Progress | None = None) -> None:
        self.graph = graph
        self.progress = progress
        self.target = graph.target
        self.programs = programs
        self.nodes: list[Node] = []
        self.steps: list[Node] = []
        self.cs_plans: dict[int, ComputeSetPlan] = {}
        self.codelets: list[tuple[str, Codelet]] = []  # (type name, codelet)
        self.code_bytes: list[int] = []  # each codelet type's code size (Codelet.code_size)
        self._codelet_ids: dict[str, int] = {}
        self._deferred_touched: set[int] = set()  # variables of compute sets deferring to a later kernel
        self.repeat_ranges: list[tuple[int, int]] = []  # step ranges of Repeat bodies
        # (first step, last step, Repeat node id, micro-batches) of pipelined bodies (profiler.multi_ipu.pipeline)
        self.pipeline_ranges: list[tuple[int, int, int, int]] = []
        self.program_ranges: list[tuple[int, int]] = []  # step ranges of top-level programs
        self.receive_buffers: dict[int, ReceiveBuffer] = {}  # by compute set (profiler.compiler.receive_buffers)
        n = self.target.num_tiles
        self._zeros = np.zeros(n, dtype=np.int64)
        self._gid_base = np.cumsum([0] + [v.numel for v in graph.variables], dtype=np.int64)
        self._itemsize = np.array([v.dtype.itemsize for v in graph.variables] + [1], dtype=np.int64)
        self._map_start: np.ndarray | None = None  # every variable's tile-mapping intervals, by global id
        self._called: set[int] = set()  # functions lowered once (their later calls share that code)
        self.call_ranges: list[tuple[int, int, int]] = []  # (function id, first step, last step) per call
        self._sharing = 0  # depth of later calls being lowered

    def _mapping(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(start, end, tile) of every tile-mapping interval of every variable, by global element id
        (each variable starts a new interval), built once when the first compute set is planned."""
        if self._map_start is None:
            vs = self.graph.variables
            starts = [v.mapping.starts + self._gid_base[v.id] for v in vs]
            self._map_start = np.concatenate(starts) if starts else np.zeros(0, np.int64)
            self._map_tile = np.concatenate([v.mapping.tiles for v in vs]).astype(np.int64) if vs else self._map_start
            self._map_end = np.append(self._map_start[1:], self._gid_base[-1])
            self._map_first = np.cumsum([0] + [v.mapping.starts.size for v in vs], dtype=np.int64)
        return self._map_start, self._map_end, self._map_tile

    def _interval_range(self, lo: int, hi: int) -> slice:
        """The tile-mapping intervals of the variables holding global elements [lo, hi): a field's
        regions lie in one variable, whose intervals are searched far faster than all (cache)."""
        v0, v1 = np.searchsorted(self._gid_base, [lo, hi - 1], side="right") - 1
        return slice(int(self._map_first[v0]), int(self._map_first[v1 + 1]))

    def _pieces(
        self, start: np.ndarray, length: np.ndarray, dst: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Regions cut where the tile mapping changes: (start, length, holding tile, reading tile) per piece."""
        ms, me, mt = self._mapping()
        keep = length > 0
        if not keep.all():
            start, length, dst = start[keep], length[keep], dst[keep]
        if start.size == 0:
            return start, length, mt[:0], dst
        end = start + length
        near = self._interval_range(int(start.min()), int(end.max()))
        first = np.searchsorted(ms[near], start, side="right") - 1 + near.start
        # most regions end in the interval they start in: search only the others' ends
        cut = np.flatnonzero(end > me[first])
        if cut.size == 0:
            return start, length, mt[first], dst
        count = np.ones(start.size, dtype=np.int64)
        count[cut] += np.searchsorted(ms[near], end[cut] - 1, side="right") - 1 + near.start - first[cut]
        rep = np.repeat(np.arange(start.size), count)
        iv = first[rep] + (np.arange(rep.size) - np.repeat(np.cumsum(count) - count, count))
        s = np.maximum(start[rep], ms[iv])
        e = np.minimum(start[rep] + length[rep], me[iv])
        return s, e - s, mt[iv], dst[rep]

    def _field_pieces(
        self, regions: Regions, tiles: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, ...] | None]:
        """(start, length, holding tile, reading tile) of every piece a field's vertices (on
        ``tiles``) read, padding reads last; and, when vertices share blocks, (start, length,
        holding tile) of the blocks' distinct pieces and which of those each row's piece is."""
        start, length, src, owner = self._pieces(regions.start, regions.length, regions.owner)
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
            _, _, near, pdst = self._pieces(pad.start, pad.length, tiles[pad.owner])
            pgid = regions.pad_first + near * regions.pad_step
            _, _, psrc, pdst = self._pieces(pgid, np.ones_like(pgid), pdst)
            start, length = np.concatenate([start, pgid]), np.concatenate([length, np.ones_like(pgid)])
            src, dst = np.concatenate([src, psrc]), np.concatenate([dst, pdst])
        return start, length, src, dst, shared

    def _element_name(self, gid: int) -> str:
        v = int(np.searchsorted(self._gid_base, gid, side="right") - 1)
        return f"{self.graph.variables[v].name}[{gid - int(self._gid_base[v])}]"

    # -- entry ---------------------------------------------------------------------------------
    def compile(self) -> None:
        self._check_mapped()
        if self.progress is not None:
            self._cs_total = len(
                set().union(*(P.compute_sets_run(p) for p in self.programs if isinstance(p, P.Program)))
            )
        for i, prog in enumerate(self.programs):
            if not isinstance(prog, P.Program):
                raise CompileError(f"program {i} is {type(prog).__name__}, not a Program")
            first = len(self.steps)
            top = self._node(-1, i, ControlType.PROGRAM, prog.name or f"program{i}")
            self._lower(prog, top)
            self.program_ranges.append((first, len(self.steps) - 1))

    def _check_mapped(self) -> None:
        for v in self.graph.variables:
            if not v.mapping.fully_mapped():
                missing = int((v.mapping.dense() == UNMAPPED).sum())
                raise CompileError(
                    f"variable {v.name!r} (id {v.id}) has {missing} of {v.numel} elements without a tile mapping; "
                    "map it with Graph.set_tile_mapping or Graph.map_linearly"
                )

    # -- tree ----------------------------------------------------------------------------------
    def _node(self, parent_id: int, child_index: int, type_: str, name: str, **kw: Any) -> Node:
        node = Node(len(self.nodes), parent_id, child_index, type_, name, shares_code=self._sharing > 0, **kw)
        self.nodes.append(node)
        if parent_id >= 0:
            self.nodes[parent_id].children.append(node)
        return node

    def _add_step(self, parent: Node, type_: str, name: str, **kw: Any) -> Node:
        node = self._node(parent.id, len(parent.children), type_, name, step=len(self.steps), **kw)
        if node.tile_cycles is None:
            node.tile_cycles = self._zeros
        if node.shares_code:  # the first call's steps hold this code
            node.code_bytes = None if node.code_bytes is None else self._zeros
            node.descriptor_bytes = None
        self.steps.append(node)
        return node

    def _lower(self, prog: P.Program, parent: Node) -> None:
        if isinstance(prog, P.Sequence):
            node = self._node(parent.id, len(parent.children), ControlType.SEQUENCE, prog.name)
            for p in prog.programs:
                self._lower(p, node)
        elif isinstance(prog, P.Execute):
            self._lower_execute(prog, parent)
        elif isinstance(prog, P.Copy):
            self._lower_copy(prog, parent)
        elif isinstance(prog, P.Repeat):
            node = self._node(
                parent.id, len(parent.children), ControlType.REPEAT, prog.name, repeat_count=int(prog.count)
            )
            first = len(self.steps)
            self._lower(prog.body, node)
            if len(self.steps) > first:
                self.repeat_ranges.append((first, len(self.steps) - 1))
                if getattr(prog, "pipelined", False):  # profiler.multi_ipu.pipeline.Pipeline
                    self.pipeline_ranges.append((first, len(self.steps) - 1, node.id, int(prog.micro_batches)))
        elif isinstance(prog, P.If):
            node = self._node(parent.id, len(parent.children), ControlType.IF, prog.name)
            node.condition = Access(prog.condition)
            node.reads = _vars(prog.condition)
            for branch in (prog.then, prog.otherwise):
                seq = branch if isinstance(branch, P.Sequence) else P.Sequence(branch)
                self._lower(seq, node)
        elif isinstance(prog, P.Switch):
            node = self._node(parent.id, len(parent.children), ControlType.SWITCH, prog.name)
            node.condition = Access(prog.control)
            node.reads = _vars(prog.control)
            node.case_values = list(prog.cases)
            for branch in [*prog.cases.values(), prog.default]:
                self._lower(branch if isinstance(branch, P.Sequence) else P.Sequence(branch), node)
        elif isinstance(prog, P.Sync):
            self._sync(parent, prog.kind, prog.name)
        elif isinstance(prog, P.WriteUndef):
            ts = prog.tensor if isinstance(prog.tensor, tuple) else (prog.tensor,)
            self._add_step(parent, StepType.WRITE_UNDEF, prog.name or f"WriteUndef {prog.tensor!r}",
                           undefs=set().union(*(_vars(t) for t in ts)))  # fmt: skip
        elif isinstance(prog, P.Call):
            node = self._node(parent.id, len(parent.children), ControlType.CALL, prog.name or prog.function.name)
            later = id(prog.function) in self._called
            self._called.add(id(prog.function))
            self._sharing += later
            first = len(self.steps)
            try:
                self._lower(prog.function.program, node)
            finally:
                self._sharing -= later
            if len(self.steps) > first:
                self.call_ranges.append((prog.function.id, first, len(self.steps) - 1))
        elif hasattr(prog, "lower"):  # programs that lower themselves (profiler.multi_ipu.replication.AllReduce)
            prog.lower(self, parent)
        elif isinstance(prog, P.PrintTensor):
            self._lower_stream(parent, prog.tensor, None, to_host=True, name=prog.title, print_title=prog.title)
        else:
            raise CompileError(f"unsupported program {type(prog).__name__}")

    def add_cross_replica_step(
        self,
        parent: Node,
        name: str,
        tile_cycles: np.ndarray,
        bytes_per_tile: np.ndarray,
        action: Any,
        tensor: Tensor,
        buffer: Tensor,
    ) -> None:
        """An external sync then a GlobalExchange step moving data between replicas (an all-reduce):
        each tile sends and receives ``bytes_per_tile`` through ``buffer`` (written, live at the step
        only); the engine runs ``action`` across replicas."""
        self._sync(parent, "external")
        vs = _vars(tensor)
        self._add_step(parent, StepType.GLOBAL_EXCHANGE, name, tile_cycles=tile_cycles, bytes_in=bytes_per_tile,
                       bytes_out=bytes_per_tile, code_bytes=_code_bytes_for(bytes_per_tile, self.target),
                       code_category=MemoryCategory.GLOBAL_EXCHANGE_CODE, external=True, reads=vs, writes=vs | _vars(buffer),
                       undefs=_vars(buffer), action=action)  # fmt: skip

    def _sync(self, parent: Node, kind: str, name: str = "") -> Node:
        cycles = int(cost_model.sync_cycles(kind, self.target))
        return self._add_step(
            parent,
            StepType.SYNC,
            name or ("External" if kind == "external" else "Internal"),
            tile_cycles=np.full(self.target.num_tiles, cycles, dtype=np.int64),
            external=kind == "external",
        )

    # -- compute sets --------------------------------------------------------------------------
    def _codelet_id(self, cl: Codelet, dtypes: dict[str, np.dtype]) -> int:
        name = cl.type_name(dtypes)
        if name not in self._codelet_ids:
            self._codelet_ids[name] = len(self.codelets)
            self.codelets.append((name, cl))
            self.code_bytes.append(cl.code_size(dtypes, self.target))
        return self._codelet_ids[name]

    def _lower_execute(self, prog: P.Execute, parent: Node) -> None:
        cs = prog.compute_set
        plan = self.cs_plans.get(cs.id)
        if plan is None:
            plan = self.cs_plans[cs.id] = self._plan_compute_set(cs)
            if self.progress is not None:
                self.progress(len(self.cs_plans), self._cs_total)
        ctx = cs.debug_context_id
        received = []  # (first step, bytes in per tile) of the exchanges bringing the vertices' remote data
        if plan.global_exchange is not None and plan.global_exchange.active:
            self._sync(parent, "external")
            g = plan.global_exchange
            node = self._add_step(parent, StepType.GLOBAL_EXCHANGE, f"{cs.name}/GlobalExchange", debug_context_id=ctx,
                       tile_cycles=g.cycles, bytes_in=g.bytes_in, bytes_out=g.bytes_out, code_bytes=g.code_bytes,
                       code_category=MemoryCategory.GLOBAL_EXCHANGE_CODE, external=True, reads=plan.reads)  # fmt: skip
            received.append((node.step, g.bytes_in))
        if plan.exchange.active:
            self._sync(parent, "internal")
            e = plan.exchange
            node = self._add_step(parent, StepType.DO_EXCHANGE, f"{cs.name}/Exchange", debug_context_id=ctx, tile_cycles=e.cycles,
                       bytes_in=e.bytes_in, bytes_out=e.bytes_out, code_bytes=e.code_bytes,
                       code_category=MemoryCategory.INTERNAL_EXCHANGE_CODE, reads=plan.reads)  # fmt: skip
            received.append((node.step, e.bytes_in))
        node = self._add_step(parent, StepType.ON_TILE_EXECUTE, cs.name, debug_context_id=ctx, compute_set_id=cs.id,
                   tile_cycles=plan.tile_cycles, flops=plan.flops, reads=plan.reads, writes=plan.writes,
                   action=actions.Execute(plan))  # fmt: skip
        if received:
            total = sum((np.asarray(b, dtype=np.int64) for _, b in received), self._zeros)
            record(self.receive_buffers, cs.id, cs.name, ctx, total, received[0][0], node.step)

    def _gid(self, var_ids: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return self._gid_base[var_ids] + idx

    @staticmethod
    def _merged_batches(cs: ComputeSet) -> list[VertexBatch]:
        """Batches of the same codelet, parameters, field shapes and types merged into one, so
        vertices added one at a time are planned and executed as vectorised as add_vertices ones."""
        groups: dict[tuple, list[VertexBatch]] = {}
        for b in cs.batches:
            shapes = tuple((f, t.shape[1:], t.dtype.str) for f, t in sorted(b.fields.items()))
            key = (id(b.codelet), repr(sorted(b.params.items())), shapes, b.debug_context_id)
            groups.setdefault(key, []).append(b)
        merged = []
        for bs in groups.values():
            if len(bs) == 1:
                merged.append(bs[0])
                continue
            fields = {f: concat([b.fields[f] for b in bs], axis=0) for f in bs[0].fields}
            tiles = np.concatenate([b.tiles for b in bs])
            merged.append(VertexBatch(bs[0].codelet, tiles, fields, bs[0].params, bs[0].debug_context_id))
        return merged

    def _plan_compute_set(self, cs: ComputeSet) -> ComputeSetPlan:
        t = self.target
        n = t.num_tiles
        batches: list[BatchPlan] = []
        receives: list[tuple[np.ndarray, ...]] = []  # (start, length, src, dst) pieces read from other tiles
        short_reads: list[tuple[np.ndarray, ...]] = []  # the same, of fields planned per element
        short_vars: set[int] = set()
        piece_vars: set[int] = set()
        vt, vc, vstate, vconst, vfield, vcyc, vflops, vmulti = [], [], [], [], [], [], [], []
        reads: set[int] = set()
        writes: set[int] = set()
        written: list[tuple[np.ndarray, np.ndarray]] = []  # regions the vertices write (checked against a kernel)
        all_written: list[tuple[np.ndarray, np.ndarray]] = []  # every write field's regions (ComputeSetPlan.fills)
        merged = self._merged_batches(cs)
        for b in merged:
            cl = b.codelet
            shapes = {f: b.fields[f].shape[1:] for f in cl.fields}
            dtypes = {f: b.fields[f].dtype for f in cl.fields}
            cid = self._codelet_id(cl, dtypes)
            cyc, fl = cl.estimate(shapes, dtypes, b.params, t)
            count = b.count
            vt.append(b.tiles)
            vc.append(np.full(count, cid, dtype=np.int32))
            vb = cl.vertex_bytes(shapes, dtypes, b.params, t)
            vstate.append(np.full(count, vb.state, dtype=np.int64))
            vconst.append(np.full(count, vb.constant, dtype=np.int64))
            vfield.append(np.full(count, vb.field_data, dtype=np.int64))
            vcyc.append(np.full(count, cyc, dtype=np.int64))
            vflops.append(np.full(count, fl, dtype=np.int64))
            vmulti.append(np.full(count, cl.multi_worker, dtype=bool))
            for f in cl.fields:
                tensor = b.fields[f]
                if f not in cl.writes and f not in cl.reads:
                    continue
                regions = field_regions(tensor, self._gid_base)
                host_memory.ensure(
                    PLAN_BYTES_PER_REGION * regions.count,
                    f"compiling compute set {cs.name!r} ({regions.count:,} regions of field {f!r})",
                )
                if f in cl.writes:
                    regions = regions.per_row()
                start, length, src, dst, shared = self._field_pieces(regions, b.tiles)
                remote = src != dst
                if f in cl.writes:
                    writes |= _vars(tensor)
                    all_written.append((regions.start, regions.length))
                    if cs.kernel:
                        written.append((regions.start, regions.length))
                    if remote.any():
                        i = int(np.flatnonzero(remote)[0])
                        raise CompileError(
                            f"compute set {cs.name!r}: output field {f!r} of {cl.name} on tile {int(dst[i])} "
                            f"writes {self._element_name(int(start[i]))}, which is mapped to tile {int(src[i])}; "
                            "map vertex outputs to the vertex's tile"
                        )
                if f in cl.reads:
                    reads |= _vars(tensor)
                    if remote.any():
                        piece = (start[remote], length[remote], src[remote], dst[remote], tensor.dtype.itemsize,
                                 _sent_pieces(start, length, src, remote, shared))  # fmt: skip
                        short = int(piece[1].sum()) < SHORT_PIECE_ELEMENTS * piece[0].size
                        (short_reads if short else receives).append(piece)
                        (short_vars if short else piece_vars).update(_vars(tensor))
            batches.append(BatchPlan(cl, b.params, {f: b.fields[f] for f in cl.fields}))
        kernel = None
        if cs.kernel is not None:
            # a kernel may read what the compute sets deferring to it read
            self._deferred_touched |= reads | writes
            kernel = self._plan_kernel(cs, written, self._deferred_touched)
            if cs.kernel:
                self._deferred_touched = set()

        def cat(parts: list[np.ndarray], dtype: type) -> np.ndarray:
            return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype)

        tiles, codelet = cat(vt, np.int64), cat(vc, np.int32)
        cycles, flops, state, multi = (
            cat(vcyc, np.int64),
            cat(vflops, np.int64),
            cat(vstate, np.int64),
            cat(vmulti, bool),
        )
        tile_cycles = np.asarray(cost_model.tile_compute_cycles(tiles, cycles, multi, n, t), dtype=np.int64)
        tile_flops = np.bincount(tiles, weights=flops, minlength=n).astype(np.int64)
        # vertices aggregated by (tile, codelet)
        ncl = max(len(self.codelets), 1)
        key = tiles * ncl + codelet
        ukey, inv = np.unique(key, return_inverse=True)
        agg = lambda w: np.bincount(inv, weights=w, minlength=ukey.size).astype(np.int64)  # noqa: E731
        if short_vars & piece_vars:  # an element set may not be split between the two ways
            short_reads, receives = short_reads + receives, []
        exchange, global_exchange = self._plan_receives(receives, short_reads)
        return ComputeSetPlan(
            cs, batches, kernel, exchange, global_exchange, tile_cycles, tile_flops, reads, writes,
            (ukey // ncl).astype(np.int32), (ukey % ncl).astype(np.int32), agg(np.ones(key.size)),
            agg(state), agg(cycles), agg(flops), agg(cat(vconst, np.int64)), agg(cat(vfield, np.int64)),
            self._fully_written(all_written, writes - reads - _kernel_reads(cs)),
        )  # fmt: skip

    def _fully_written(self, parts: list[tuple[np.ndarray, np.ndarray]], candidates: set[int]) -> frozenset[int]:
        """The ``candidates`` whose every element the regions ``parts`` ((global start, length) each,
        within one variable; they may overlap) cover."""
        if not candidates or not parts:
            return frozenset()
        start, length = (np.concatenate([p[i] for p in parts]).astype(np.int64) for i in range(2))
        order = np.argsort(start, kind="stable")
        start, end = start[order], start[order] + length[order]
        # each region counts only past the furthest end before it (the union's length, per variable)
        before = np.concatenate(([start[0]], np.maximum.accumulate(end)[:-1])) if start.size else start
        covered = np.maximum(end - np.maximum(start, before), 0)
        var = np.searchsorted(self._gid_base, start, side="right") - 1
        per_var = np.bincount(var, weights=covered, minlength=self._gid_base.size - 1)
        ids = np.fromiter(candidates, np.int64, len(candidates))
        whole = per_var[ids] == self._gid_base[ids + 1] - self._gid_base[ids]
        return frozenset(ids[whole].tolist())

    def _plan_kernel(
        self, cs: ComputeSet, written: list[tuple[np.ndarray, np.ndarray]], touched: set[int]
    ) -> list[BatchPlan]:
        """The kernel's batches, with field accesses built now (they run every time); a kernel must
        write exactly the elements the vertices write and read only what the vertices touch."""
        plans, kernel_written = [], []
        for b in cs.kernel or []:
            for f in b.codelet.fields:
                t = b.fields[f]
                if not _vars(t) <= touched:
                    raise CompileError(
                        f"compute set {cs.name!r}: its kernel field {f!r} uses variables its vertices do not"
                    )
                if f in b.codelet.writes:
                    r = field_regions(t, self._gid_base)
                    kernel_written.append((r.start, r.length))
            plan = BatchPlan(b.codelet, b.params, {f: b.fields[f] for f in b.codelet.fields})
            plan.fields  # noqa: B018 - build the accesses at compile time
            plans.append(plan)
        if cs.kernel and not _same_elements(written, kernel_written):
            n_want, n_got = (sum(int(x[1].sum()) for x in parts) for parts in (written, kernel_written))
            raise CompileError(
                f"compute set {cs.name!r}: its kernel writes {n_got} elements, its vertices {n_want}"
                + ("" if n_want != n_got else " (different ones)")
            )
        return plans

    def _plan_receives(
        self, pieces: list[tuple[np.ndarray, ...]], short: list[tuple[np.ndarray, ...]]
    ) -> tuple[Any, Any]:
        n, tpi = self.target.num_tiles, self.target.tiles_per_ipu
        parts = []
        if pieces:
            start, length, src, dst = (_cat([r[i] for r in pieces]) for i in range(4))
            sent = tuple(_cat([r[5][i] for r in pieces]) for i in range(3))
            sizes = {r[4] for r in pieces}
            # one element size (the usual case): a plain int, no array of sizes per piece
            if len(sizes) == 1:
                size = sent_size = sizes.pop()
            else:
                size = np.concatenate([np.full(r[0].size, r[4], np.int64) for r in pieces])
                sent_size = np.concatenate([np.full(r[5][0].size, r[4], np.int64) for r in pieces])
            parts.append(piece_receives(start, length, src, dst, size, n, tpi, sent=(*sent, sent_size)))
        if short:
            keys = _ReceiveKeys(n, int(self._gid_base[-1]))
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
                parts.append(element_receives(*unique[:3], unique[3], n, tpi))
        return plan_receives(parts, self.target)

    # -- copies and streams --------------------------------------------------------------------
    def _lower_copy(self, prog: P.Copy, parent: Node) -> None:
        src, dst = prog.src, prog.dst
        if isinstance(src, DataStream):
            if src.direction != HOST_TO_DEVICE:
                raise CompileError(f"Copy from stream {src.name!r}: it is a device-to-host stream")
            self._lower_stream(parent, dst, src, to_host=False, name=prog.name or src.name)  # type: ignore[arg-type]
            return
        if isinstance(dst, DataStream):
            if dst.direction == HOST_TO_DEVICE:
                raise CompileError(f"Copy to stream {dst.name!r}: it is a host-to-device stream")
            self._lower_stream(parent, src, dst, to_host=True, name=prog.name or dst.name)
            return
        if src.dtype != dst.dtype:
            raise CompileError(
                f"Copy {prog.name!r}: source is {src.dtype.name}, destination {dst.dtype.name}; cast first"
            )
        t = self.target
        item = src.dtype.itemsize
        pieces = self._whole_pieces(src, dst)
        if pieces is not None:  # all of one variable into all of another: by the mappings' intervals
            s_tile, d_tile, length = pieces
            nbytes: np.ndarray | int = length * item
        else:  # element by element
            s_tile, d_tile = self.graph.tile_of(src).astype(np.int64), self.graph.tile_of(dst).astype(np.int64)
            length, nbytes = np.ones(s_tile.size, dtype=np.int64), item
        cross = (s_tile // t.tiles_per_ipu) != (d_tile // t.tiles_per_ipu)
        name = prog.name or f"Copy {src!r} -> {dst!r}"
        reads, writes = _vars(src), _vars(dst)
        action = actions.Copy(Access(src), Access(dst))
        if cross.any():
            part = nbytes[cross] if pieces is not None else item
            gplan = plan_transfers(s_tile[cross], d_tile[cross], part, t, global_=True)
            self._sync(parent, "external")
            self._add_step(parent, StepType.GLOBAL_EXCHANGE, name, tile_cycles=gplan.cycles, bytes_in=gplan.bytes_in,
                       bytes_out=gplan.bytes_out, code_bytes=gplan.code_bytes, code_category=MemoryCategory.GLOBAL_EXCHANGE_CODE,
                       external=True, reads=reads, writes=writes, action=None if (~cross).any() else action)  # fmt: skip
            if not (~cross).any():
                return
        if pieces is not None:  # pieces next to each other are contiguous in both variables
            s_gid = d_gid = np.flatnonzero(~cross)
            nbytes = nbytes[~cross]
        else:
            s_gid, d_gid = self._gid(*src.elements())[~cross], self._gid(*dst.elements())[~cross]
        s_tile, d_tile, length = s_tile[~cross], d_tile[~cross], length[~cross]
        plan = plan_transfers(s_tile, d_tile, nbytes, t, run_gids=(s_gid, d_gid))
        # on-tile part: one copy descriptor per contiguous region (ref §5 copyDescriptor)
        loc = s_tile == d_tile
        lt, ls, ld = d_tile[loc], s_gid[loc], d_gid[loc]
        new_region = np.ones(lt.size, dtype=bool)
        new_region[1:] = (lt[1:] != lt[:-1]) | (ls[1:] != ls[:-1] + 1) | (ld[1:] != ld[:-1] + 1)
        regions = np.bincount(lt[new_region], minlength=t.num_tiles).astype(np.int64)
        local_bytes = np.bincount(lt, weights=length[loc], minlength=t.num_tiles).astype(np.int64) * item
        # on-tile part: a memcpy on each tile (ref §3.4)
        copy = np.where(local_bytes > 0, np.asarray(cost_model.copy_cycles(local_bytes, t), dtype=np.int64), 0)
        if plan.active:
            self._sync(parent, "internal")
        self._add_step(parent, StepType.DO_EXCHANGE, name, tile_cycles=plan.cycles + copy, bytes_in=plan.bytes_in,
                   bytes_out=plan.bytes_out, code_bytes=plan.code_bytes, code_category=MemoryCategory.INTERNAL_EXCHANGE_CODE,
                   reads=reads, writes=writes, action=action,
                   descriptor_bytes=regions * COPY_DESCRIPTOR_BYTES_PER_REGION)  # fmt: skip

    def _whole_variables(self, src: Tensor, dst: Tensor) -> tuple[Variable, Variable] | None:
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

    def _whole_pieces(self, src: Tensor, dst: Tensor) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """(source tile, destination tile, elements) of each piece of a copy of all of one variable,
        in storage order, into all of another of the same size: the pieces cut where either mapping
        changes tile. None for any other copy (planned element by element)."""
        whole = self._whole_variables(src, dst)
        if whole is None:
            return None
        a, b = whole
        starts = np.union1d(a.mapping.starts, b.mapping.starts)
        starts = starts[starts < a.numel]
        length = np.diff(np.append(starts, a.numel))
        s_tile = a.mapping.tiles[np.searchsorted(a.mapping.starts, starts, side="right") - 1].astype(np.int64)
        d_tile = b.mapping.tiles[np.searchsorted(b.mapping.starts, starts, side="right") - 1].astype(np.int64)
        keep = length > 0
        return s_tile[keep], d_tile[keep], length[keep]

    def _lower_stream(
        self, parent: Node, tensor: Tensor, stream: DataStream | None, to_host: bool, name: str, print_title: str = ""
    ) -> None:
        t = self.target
        tiles = self.graph.tile_of(tensor).astype(np.int64)
        per_tile = np.bincount(tiles, minlength=t.num_tiles).astype(np.int64) * tensor.dtype.itemsize
        ipu_bytes = per_tile.reshape(t.num_ipus, t.tiles_per_ipu).sum(axis=1)
        cycles = np.zeros(t.num_tiles, dtype=np.int64)
        for ipu, total in enumerate(ipu_bytes):
            if total:
                sl = slice(ipu * t.tiles_per_ipu, (ipu + 1) * t.tiles_per_ipu)
                cycles[sl] = np.where(per_tile[sl] > 0, int(cost_model.stream_copy_cycles(int(total), t)), 0)
        # one host region per tile taking part (hostExchangeCode, cost_model.exchange_code_bytes)
        one = (per_tile > 0).astype(np.int64)
        sent, received = (one, 0 * one) if to_host else (0 * one, one)
        code = np.asarray(cost_model.exchange_code_bytes(sent, received, t), dtype=np.int64)
        ext = int(cost_model.sync_cycles("external", t))
        self._add_step(
            parent,
            StepType.STREAM_COPY_BEGIN,
            name,
            tile_cycles=np.full(t.num_tiles, ext, dtype=np.int64),
            external=True,
        )
        acc = Access(tensor)
        if print_title:
            action: Action = actions.Print(print_title, acc)
        else:
            action = actions.ToHost(stream, acc) if to_host else actions.FromHost(stream, acc)  # type: ignore[arg-type]
        self._add_step(parent, StepType.STREAM_COPY_MID, name, tile_cycles=cycles, bytes_in=self._zeros if to_host else per_tile,
                   bytes_out=per_tile if to_host else self._zeros, code_bytes=code, code_category=MemoryCategory.HOST_EXCHANGE_CODE,
                   reads=_vars(tensor) if to_host else set(), writes=set() if to_host else _vars(tensor),
                   action=action)  # fmt: skip
        self._add_step(parent, StepType.STREAM_COPY_END, name)


@dataclass(eq=False)
class CompiledGraph:
    """What compiling gives the engine, liveness, memory placement and capture: the program tree
    (``nodes``; its leaves are the program ``steps``, in pre-order), each compute set's plan, the
    codelets in use and the step ranges of Repeat bodies and top-level programs."""

    graph: Graph
    nodes: list[Node]
    steps: list[Node]
    cs_plans: dict[int, ComputeSetPlan]
    codelets: list[tuple[str, Codelet]]  # (type name, codelet)
    repeat_ranges: list[tuple[int, int]]
    program_ranges: list[tuple[int, int]]
    pipeline_ranges: list[tuple[int, int, int, int]] = field(default_factory=list)
    code_bytes: list[int] = field(default_factory=list)  # per codelet type, in ``codelets`` order
    receive_buffers: list[ReceiveBuffer] = field(default_factory=list)
    call_ranges: list[tuple[int, int, int]] = field(default_factory=list)  # (function id, first, last step)
    _variables: list[Variable] | None = None

    @property
    def target(self) -> Any:
        return self.graph.target

    @property
    def variables(self) -> list[Variable]:
        """The graph's variables, then one per receive buffer (ids follow on): what liveness, memory
        placement and the report account for."""
        if self._variables is None:
            gv = self.graph.variables
            self._variables = gv + as_variables(self.receive_buffers, len(gv))
        return self._variables


def compile_programs(graph: Graph, programs: list[P.Program], progress: Progress | None = None) -> CompiledGraph:
    """Lower and plan ``programs``; raises CompileError / GraphError with one clear line.
    ``progress(done, total)`` is called as compute sets are planned (the slow part)."""
    tiles = graph.target.num_tiles
    host_memory.ensure(HOST_BYTES_PER_TILE * tiles, f"compiling for {graph.target.num_ipus} IPUs ({tiles:,} tiles)")
    c = Compiler(graph, programs, progress)
    try:
        with small_pages():
            c.compile()
    except GraphError as exc:
        raise CompileError(str(exc)) from None
    return CompiledGraph(graph, c.nodes, c.steps, c.cs_plans, c.codelets, c.repeat_ranges, c.program_ranges,
                         c.pipeline_ranges, c.code_bytes, list(c.receive_buffers.values()),
                         c.call_ranges)  # fmt: skip


def _code_bytes_for(bytes_per_tile: np.ndarray, target: Target) -> np.ndarray:
    """Exchange code of a tile that sends one region and receives one (a ring all-reduce step's
    neighbour transfer), by the exchange model's per-region code (cost_model.exchange_code_bytes)."""
    one = (np.asarray(bytes_per_tile) > 0).astype(np.int64)
    return np.asarray(cost_model.exchange_code_bytes(one, one, target), dtype=np.int64)
