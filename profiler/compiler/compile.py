"""Compiler: lower programs to the program tree (PopVision step types) and plan every step.

Lowering is here; a compute set's plan is ``compute_sets``', its exchange ``exchange_planning``'s,
both over ``element_map`` (where each element lives).

Each leaf (program step) carries what the engine needs to run it functionally and what the
BSP model charges per tile: cycles, bytes in/out, exchange code and FLOPs. Liveness and memory
placement then work on these steps (profiler.compiler.liveness, profiler.compiler.memory).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, TypeGuard

import numpy as np

from profiler.chip import cost_model
from profiler.chip.codelets import Codelet
from profiler.chip.targets import Target
from profiler.compiler.compute_sets import ComputeSetPlanner, variables_of
from profiler.compiler.element_map import ElementMap
from profiler.compiler.errors import CompileError
from profiler.compiler.exchange import (
    plan_transfers,
)
from profiler.compiler.pace import planning_pace, with_work
from profiler.compiler.receive_buffers import ReceiveBuffer, as_variables, record
from profiler.compiler.tile_span import PerTile, PerTileRequired, TileSpan
from profiler.executable import actions
from profiler.executable.access import Access
from profiler.executable.actions import Action
from profiler.executable.plans import ComputeSetPlan
from profiler.host import host_memory, sorting
from profiler.host.allocator import small_pages
from profiler.poplar import programs as P
from profiler.poplar.graph import Graph, GraphError
from profiler.poplar.streams import HOST_TO_DEVICE, DataStream
from profiler.poplar.tensor import Tensor
from profiler.poplar.variables import UNMAPPED, Variable
from report_format.vocabulary import ControlType, MemoryCategory, StepType

# Host bytes per tile of the target that compiling and placing memory hold whatever the model
# (per-tile cycles, bytes and regions of every step, memory by category): measured ~2.7 KB per
# tile for a four-node MLP on 64 and 256 GC200 IPUs (peak RSS slope); rounded up.
HOST_BYTES_PER_TILE = 4096

# [INF] ref §5 copyDescriptor ("special variable-sized fields used by copy vertices"): a region's
# source and destination pointers packed with its length, 8 bytes (two 21-bit addresses + count).
COPY_DESCRIPTOR_BYTES_PER_REGION = 8


class StepCost:
    """What the BSP model charges a program step, per global tile (None: the step has none of it).

    Each figure is kept over the tiles the step touches (``TileSpan``) and read as the whole per-tile
    array: a step of one IPU of a POD16 holds 1,472 tiles' figures, not 23,552."""

    __slots__ = ("_tile_cycles", "_bytes_in", "_bytes_out", "_flops", "_code_bytes", "_descriptor_bytes",
                 "code_category")  # fmt: skip
    tile_cycles = PerTileRequired()  # estimated cycles
    bytes_in = PerTile()
    bytes_out = PerTile()
    flops = PerTile()
    code_bytes = PerTile()  # the step's exchange code, of ``code_category``
    descriptor_bytes = PerTile()  # copy descriptors (on-tile copies)

    def __init__(
        self,
        tile_cycles: np.ndarray | TileSpan,
        bytes_in: np.ndarray | TileSpan | None = None,
        bytes_out: np.ndarray | TileSpan | None = None,
        flops: np.ndarray | TileSpan | None = None,
        code_bytes: np.ndarray | TileSpan | None = None,
        code_category: MemoryCategory | None = None,
        descriptor_bytes: np.ndarray | TileSpan | None = None,
    ) -> None:
        self.tile_cycles, self.bytes_in, self.bytes_out, self.flops = tile_cycles, bytes_in, bytes_out, flops
        self.code_bytes, self.code_category, self.descriptor_bytes = code_bytes, code_category, descriptor_bytes

    def span(self, name: str) -> TileSpan | None:
        """The figure ``name`` as held (no dense array made)."""
        span: TileSpan | None = getattr(self, "_" + name)
        return span


_COST_FIELDS = frozenset(
    ("tile_cycles", "bytes_in", "bytes_out", "flops", "code_bytes", "code_category", "descriptor_bytes")
)


class HeldExchange:
    """An exchange plan's per-tile figures (``ExchangePlan``) held as spans once the compute set is
    planned; read as whole per-tile arrays."""

    __slots__ = ("_bytes_in", "_bytes_out", "_messages", "_code_bytes", "_cycles", "_regions_in", "_regions_out")
    bytes_in = PerTileRequired()
    bytes_out = PerTileRequired()
    messages = PerTileRequired()
    code_bytes = PerTileRequired()
    cycles = PerTileRequired()
    regions_in = PerTile()
    regions_out = PerTile()

    def __init__(self, e: Any) -> None:
        self.bytes_in, self.bytes_out, self.messages, self.code_bytes = (
            e.bytes_in,
            e.bytes_out,
            e.messages,
            e.code_bytes,
        )
        self.cycles, self.regions_in, self.regions_out = e.cycles, e.regions_in, e.regions_out

    @property
    def active(self) -> bool:
        return bool(self.span("bytes_in").values.size or self.span("bytes_out").values.size)

    def span(self, name: str) -> TileSpan:
        span: TileSpan = getattr(self, "_" + name)
        return span


@dataclass(frozen=True)
class _PlanCosts:
    """The step figures of a planned compute set, as spans."""

    tile_cycles: TileSpan
    flops: TileSpan


def _held_costs(plan: ComputeSetPlan) -> _PlanCosts:
    """``plan``'s per-tile figures as spans: its exchanges become ``HeldExchange``s and its compute
    figures move to the compiler (every later execution of the compute set reads the spans), so host
    memory follows the tiles the compute set touches, not the target's."""
    assert plan.tile_cycles is not None and plan.flops is not None, "a compute set's figures are held once"
    costs = _PlanCosts(TileSpan.of(plan.tile_cycles), TileSpan.of(plan.flops))
    plan.exchange = HeldExchange(plan.exchange)
    plan.global_exchange = None if plan.global_exchange is None else HeldExchange(plan.global_exchange)
    plan.tile_cycles = plan.flops = None
    return costs


@dataclass(eq=False, kw_only=True)
class Node:
    """A node of the program tree: a control program (``ControlNode``) or a program step (``Step``)."""

    id: int
    parent_id: int
    child_index: int
    type: ControlType | StepType
    name: str
    debug_context_id: int = -1
    # a node of a later call of a function: its code (exchange, control, descriptors) is the first
    # call's, held once (Poplar: a function's body is compiled once and every Call runs it)
    shares_code: bool = False
    reads: set[int] = field(default_factory=set)
    writes: set[int] = field(default_factory=set)
    is_step: ClassVar[bool] = False


@dataclass(eq=False, kw_only=True)
class ControlNode(Node):
    """Sequence, Repeat, If, Switch, Call or a top-level Program: runs its children."""

    type: ControlType
    children: list[Node] = field(default_factory=list)
    repeat_count: int = 0  # Repeat
    condition: Access | None = None  # If and Switch: what they read (also in ``reads``)
    case_values: list[int] = field(default_factory=list)  # Switch: children[i] runs for case_values[i]; last = default


@dataclass(eq=False, kw_only=True)
class Step(Node):
    """A program step (a leaf of the tree): what the engine does (``action``) and what it costs."""

    type: StepType
    step: int  # its index in program order
    cost: StepCost
    compute_set_id: int = -1
    external: bool = False  # synchronises all IPUs
    undefs: set[int] = field(default_factory=set)
    action: Action | None = None
    is_step: ClassVar[bool] = True


class Progress(Protocol):
    """``progress(done, total, work)``: compute sets planned of those the programs run, and the
    fraction of the planning work done (``pace.planning_pace``), which paces the time left; a later
    stage of the compile (memory placement, ``Engine.compile``) names what it counts in ``what``."""

    def __call__(self, done: int, total: int, work: float | None = None, what: str | None = None) -> None: ...


class _PipelinedRepeat(Protocol):
    """A Repeat whose body's stages overlap across IPUs: profiler.multi_ipu.pipeline.Pipeline, which
    the compiler may not import (docs/architecture.md)."""

    pipelined: bool
    micro_batches: int  # per run


def _pipelined(prog: P.Repeat) -> TypeGuard[_PipelinedRepeat]:
    return bool(getattr(prog, "pipelined", False))


class Compiler:
    """Lowers programs to the program tree and plans every step; ``compile_programs`` runs it and
    hands back a CompiledGraph."""

    def __init__(
        self, graph: Graph, programs: list[P.Program], progress: Progress | None = None, values: bool = True
    ) -> None:
        self.graph = graph
        # False for a compile-only engine: no step acts on values, so no Access (an element index for
        # any view numpy strides cannot describe) is built for copies, streams or kernels
        self.values = values
        self.progress = with_work(progress)
        self.target = graph.target
        self.programs = programs
        self.nodes: list[Node] = []
        self.steps: list[Step] = []
        self.cs_plans: dict[int, ComputeSetPlan] = {}
        self._cs_costs: dict[int, _PlanCosts] = {}  # each plan's step figures, as spans (_held_costs)
        self.elements = ElementMap(graph)
        self.compute_sets = ComputeSetPlanner(self.elements, self.target, values)
        self.repeat_ranges: list[tuple[int, int]] = []  # step ranges of Repeat bodies
        # (first step, last step, Repeat node id, micro-batches) of pipelined bodies (profiler.multi_ipu.pipeline)
        self.pipeline_ranges: list[tuple[int, int, int, int]] = []
        self.program_ranges: list[tuple[int, int]] = []  # step ranges of top-level programs
        self.receive_buffers: dict[int, ReceiveBuffer] = {}  # by compute set (profiler.compiler.receive_buffers)
        n = self.target.num_tiles
        self._zeros = np.zeros(n, dtype=np.int64)
        self._called: set[int] = set()  # functions lowered once (their later calls share that code)
        self.call_ranges: list[tuple[int, int, int]] = []  # (function id, first step, last step) per call
        self._sharing = 0  # depth of later calls being lowered

    # -- entry ---------------------------------------------------------------------------------
    def compile(self) -> None:
        self._check_mapped()
        if self.progress is not None:
            run = set().union(*(P.compute_sets_run(p) for p in self.programs if isinstance(p, P.Program)))
            self._cs_total = len(run)
            self._pace = planning_pace(self.graph.compute_sets[i] for i in sorted(run))
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
    def _attach(self, node: Node, parent_id: int) -> None:
        self.nodes.append(node)
        if parent_id >= 0:
            parent = self.nodes[parent_id]
            assert isinstance(parent, ControlNode)
            parent.children.append(node)

    def _node(self, parent_id: int, child_index: int, type_: ControlType, name: str, **kw: Any) -> ControlNode:
        node = ControlNode(id=len(self.nodes), parent_id=parent_id, child_index=child_index, type=type_, name=name,
                           shares_code=self._sharing > 0, **kw)  # fmt: skip
        self._attach(node, parent_id)
        return node

    def _add_step(self, parent: ControlNode, type_: StepType, name: str, **kw: Any) -> Step:
        cost = StepCost(**{"tile_cycles": self._zeros} | {k: kw.pop(k) for k in list(kw) if k in _COST_FIELDS})
        node = Step(id=len(self.nodes), parent_id=parent.id, child_index=len(parent.children), type=type_, name=name,
                    step=len(self.steps), cost=cost, shares_code=self._sharing > 0, **kw)  # fmt: skip
        if node.shares_code:  # the first call's steps hold this code
            cost.code_bytes = None if cost.code_bytes is None else self._zeros
            cost.descriptor_bytes = None
        self._attach(node, parent.id)
        self.steps.append(node)
        return node

    def _lower(self, prog: P.Program, parent: ControlNode) -> None:
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
                if _pipelined(prog):
                    self.pipeline_ranges.append((first, len(self.steps) - 1, node.id, int(prog.micro_batches)))
        elif isinstance(prog, P.If):
            node = self._node(parent.id, len(parent.children), ControlType.IF, prog.name)
            node.condition = Access(prog.condition)
            node.reads = variables_of(prog.condition)
            for branch in (prog.then, prog.otherwise):
                seq = branch if isinstance(branch, P.Sequence) else P.Sequence(branch)
                self._lower(seq, node)
        elif isinstance(prog, P.Switch):
            node = self._node(parent.id, len(parent.children), ControlType.SWITCH, prog.name)
            node.condition = Access(prog.control)
            node.reads = variables_of(prog.control)
            node.case_values = list(prog.cases)
            for branch in [*prog.cases.values(), prog.default]:
                self._lower(branch if isinstance(branch, P.Sequence) else P.Sequence(branch), node)
        elif isinstance(prog, P.Sync):
            self._sync(parent, prog.kind, prog.name)
        elif isinstance(prog, P.WriteUndef):
            ts = prog.tensor if isinstance(prog.tensor, tuple) else (prog.tensor,)
            self._add_step(parent, StepType.WRITE_UNDEF, prog.name or f"WriteUndef {prog.tensor!r}",
                           undefs=set().union(*(variables_of(t) for t in ts)))  # fmt: skip
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
        parent: ControlNode,
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
        vs = variables_of(tensor)
        self._add_step(parent, StepType.GLOBAL_EXCHANGE, name, tile_cycles=tile_cycles, bytes_in=bytes_per_tile,
                       bytes_out=bytes_per_tile, code_bytes=_code_bytes_for(bytes_per_tile, self.target),
                       code_category=MemoryCategory.GLOBAL_EXCHANGE_CODE, external=True, reads=vs, writes=vs | variables_of(buffer),
                       undefs=variables_of(buffer), action=action)  # fmt: skip

    def _sync(self, parent: ControlNode, kind: str, name: str = "") -> Step:
        cycles = int(cost_model.sync_cycles(kind, self.target))
        return self._add_step(
            parent,
            StepType.SYNC,
            name or ("External" if kind == "external" else "Internal"),
            tile_cycles=np.full(self.target.num_tiles, cycles, dtype=np.int64),
            external=kind == "external",
        )

    def _lower_execute(self, prog: P.Execute, parent: ControlNode) -> None:
        cs = prog.compute_set
        plan = self.cs_plans.get(cs.id)
        if plan is None:
            plan = self.cs_plans[cs.id] = self.compute_sets.plan(cs)
            self._cs_costs[cs.id] = _held_costs(plan)
            if self.progress is not None:
                self.progress(len(self.cs_plans), self._cs_total, self._pace.done(cs.id))
        costs = self._cs_costs[cs.id]
        ctx = cs.debug_context_id
        received = []  # (first step, bytes in per tile) of the exchanges bringing the vertices' remote data
        g, e = plan.global_exchange, plan.exchange
        if g is not None and g.active:
            self._sync(parent, "external")
            node = self._add_step(parent, StepType.GLOBAL_EXCHANGE, f"{cs.name}/GlobalExchange", debug_context_id=ctx,
                       tile_cycles=g.span("cycles"), bytes_in=g.span("bytes_in"), bytes_out=g.span("bytes_out"),
                       code_bytes=g.span("code_bytes"), code_category=MemoryCategory.GLOBAL_EXCHANGE_CODE, external=True,
                       reads=plan.reads)  # fmt: skip
            received.append((node.step, g.span("bytes_in")))
        if e.active:
            self._sync(parent, "internal")
            node = self._add_step(parent, StepType.DO_EXCHANGE, f"{cs.name}/Exchange", debug_context_id=ctx,
                       tile_cycles=e.span("cycles"), bytes_in=e.span("bytes_in"), bytes_out=e.span("bytes_out"),
                       code_bytes=e.span("code_bytes"), code_category=MemoryCategory.INTERNAL_EXCHANGE_CODE,
                       reads=plan.reads)  # fmt: skip
            received.append((node.step, e.span("bytes_in")))
        node = self._add_step(parent, StepType.ON_TILE_EXECUTE, cs.name, debug_context_id=ctx, compute_set_id=cs.id,
                   tile_cycles=costs.tile_cycles, flops=costs.flops, reads=plan.reads, writes=plan.writes,
                   action=actions.Execute(plan))  # fmt: skip
        if received:
            total = sum((b.dense().astype(np.int64, copy=False) for _, b in received), self._zeros)
            record(self.receive_buffers, cs.id, cs.name, ctx, total, received[0][0], node.step)

    # -- copies and streams --------------------------------------------------------------------
    def _lower_copy(self, prog: P.Copy, parent: ControlNode) -> None:
        src, dst = prog.src, prog.dst
        ctx = -1 if prog.debug_context_id is None else prog.debug_context_id
        if isinstance(src, DataStream):
            if src.direction != HOST_TO_DEVICE:
                raise CompileError(f"Copy from stream {src.name!r}: it is a device-to-host stream")
            assert isinstance(dst, Tensor)  # Copy refuses a stream to a stream
            self._lower_stream(parent, dst, src, to_host=False, name=prog.name or src.name, ctx=ctx)
            return
        if isinstance(dst, DataStream):
            if dst.direction == HOST_TO_DEVICE:
                raise CompileError(f"Copy to stream {dst.name!r}: it is a host-to-device stream")
            self._lower_stream(parent, src, dst, to_host=True, name=prog.name or dst.name, ctx=ctx)
            return
        if src.dtype != dst.dtype:
            raise CompileError(
                f"Copy {prog.name!r}: source is {src.dtype.name}, destination {dst.dtype.name}; cast first"
            )
        t = self.target
        item = src.dtype.itemsize
        pieces = self.elements.whole_pieces(src, dst)
        if pieces is None:
            pieces = self._cross_ipu_pieces(src, dst)
        piece_bytes: np.ndarray | None = None
        if pieces is not None:  # all of one variable into all of another: by the mappings' intervals
            s_tile, d_tile, length = pieces
            piece_bytes = length * item
        else:  # element by element
            s_tile, d_tile = self.graph.tile_of(src).astype(np.int64), self.graph.tile_of(dst).astype(np.int64)
            length = np.ones(s_tile.size, dtype=np.int64)
        cross = (s_tile // t.tiles_per_ipu) != (d_tile // t.tiles_per_ipu)
        name = prog.name or f"Copy {src!r} -> {dst!r}"
        reads, writes = variables_of(src), variables_of(dst)
        action = actions.Copy(Access(src), Access(dst)) if self.values else None
        if cross.any():
            part = piece_bytes[cross] if piece_bytes is not None else item
            gplan = plan_transfers(s_tile[cross], d_tile[cross], part, t, global_=True)
            self._sync(parent, "external")
            self._add_step(parent, StepType.GLOBAL_EXCHANGE, name, tile_cycles=gplan.cycles, bytes_in=gplan.bytes_in,
                       bytes_out=gplan.bytes_out, code_bytes=gplan.code_bytes, code_category=MemoryCategory.GLOBAL_EXCHANGE_CODE,
                       external=True, reads=reads, writes=writes, action=None if (~cross).any() else action,
                       debug_context_id=ctx)  # fmt: skip
            if not (~cross).any():
                return
        nbytes: np.ndarray | int = item
        if piece_bytes is not None:  # pieces next to each other are contiguous in both variables
            s_gid = d_gid = np.flatnonzero(~cross)
            nbytes = piece_bytes[~cross]
        else:
            s_gid, d_gid = self.elements.gid(*src.elements())[~cross], self.elements.gid(*dst.elements())[~cross]
            # runs are judged in tile memory, where a variable's part on a tile is one allocation
            # (ElementMap.addresses; docs/fidelity.md "Exchange model" item 1)
            s_gid, d_gid = self.elements.addresses(s_gid), self.elements.addresses(d_gid)
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
                   reads=reads, writes=writes, action=action, debug_context_id=ctx,
                   descriptor_bytes=regions * COPY_DESCRIPTOR_BYTES_PER_REGION)  # fmt: skip

    def _cross_ipu_pieces(self, src: Tensor, dst: Tensor) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """(source tile, destination tile, elements) of the pieces of a copy between views that
        ``Graph.view_runs`` reads as runs (a pipeline stage's activations, held in a matmul result's
        column groups, copied to the next IPU), cut where either side's tile changes; None unless
        every piece crosses IPUs. An inter-IPU copy's plan counts bytes and messages per tile pair
        and regions as runs of one pair in the copy's order (``plan_transfers``, global), so its
        pieces plan as its elements do; a copy within an IPU also judges runs by tile-memory
        address, and is planned element by element."""
        a, b = self.graph.view_runs(src), self.graph.view_runs(dst)
        if a is None or b is None:
            return None
        starts = sorting.union(a[0], b[0])
        s_tile = a[1][np.searchsorted(a[0], starts, side="right") - 1].astype(np.int64)
        d_tile = b[1][np.searchsorted(b[0], starts, side="right") - 1].astype(np.int64)
        tpi = self.target.tiles_per_ipu
        if (s_tile < 0).any() or (d_tile < 0).any() or ((s_tile // tpi) == (d_tile // tpi)).any():
            return None
        return s_tile, d_tile, np.diff(np.append(starts, src.numel()))

    def _lower_stream(
        self,
        parent: ControlNode,
        tensor: Tensor,
        stream: DataStream | None,
        to_host: bool,
        name: str,
        print_title: str = "",
        ctx: int = -1,
    ) -> None:
        t = self.target
        per_tile = self.graph.elements_per_tile(tensor) * tensor.dtype.itemsize
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
            debug_context_id=ctx,
        )
        action: Action | None = None
        if self.values:
            acc = Access(tensor)
            if stream is None:  # PrintTensor
                action = actions.Print(print_title, acc)
            else:
                action = actions.ToHost(stream, acc) if to_host else actions.FromHost(stream, acc)
        self._add_step(parent, StepType.STREAM_COPY_MID, name, tile_cycles=cycles, bytes_in=self._zeros if to_host else per_tile,
                   bytes_out=per_tile if to_host else self._zeros, code_bytes=code, code_category=MemoryCategory.HOST_EXCHANGE_CODE,
                   reads=variables_of(tensor) if to_host else set(), writes=set() if to_host else variables_of(tensor),
                   action=action, debug_context_id=ctx)  # fmt: skip
        self._add_step(parent, StepType.STREAM_COPY_END, name, debug_context_id=ctx)


@dataclass(eq=False)
class CompiledGraph:
    """What compiling gives the engine, liveness, memory placement and capture: the program tree
    (``nodes``; its leaves are the program ``steps``, in pre-order), each compute set's plan, the
    codelets in use and the step ranges of Repeat bodies and top-level programs."""

    graph: Graph
    nodes: list[Node]
    steps: list[Step]
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


def compile_programs(
    graph: Graph, programs: list[P.Program], progress: Progress | None = None, values: bool = True
) -> CompiledGraph:
    """Lower and plan ``programs``; raises CompileError / GraphError with one clear line.
    ``progress(done, total)`` is called as compute sets are planned (the slow part). ``values``
    False (compile-only): the steps get no value accessors (nothing will run them)."""
    tiles = graph.target.num_tiles
    host_memory.ensure(HOST_BYTES_PER_TILE * tiles, f"compiling for {graph.target.num_ipus} IPUs ({tiles:,} tiles)")
    c = Compiler(graph, programs, progress, values)
    try:
        with small_pages():
            c.compile()
    except GraphError as exc:
        raise CompileError(str(exc)) from None
    return CompiledGraph(graph, c.nodes, c.steps, c.cs_plans, c.compute_sets.codelets, c.repeat_ranges,
                         c.program_ranges, c.pipeline_ranges, c.compute_sets.code_bytes, list(c.receive_buffers.values()),
                         c.call_ranges)  # fmt: skip


def _code_bytes_for(bytes_per_tile: np.ndarray, target: Target) -> np.ndarray:
    """Exchange code of a tile that sends one region and receives one (a ring all-reduce step's
    neighbour transfer), by the exchange model's per-region code (cost_model.exchange_code_bytes)."""
    one = (np.asarray(bytes_per_tile) > 0).astype(np.int64)
    return np.asarray(cost_model.exchange_code_bytes(one, one, target), dtype=np.int64)
