"""The engine: compiles a graph's programs, runs them functionally in numpy and times them with
the BSP model (per tile, per step), and hands what it saw to capture (profiler.capture.autoreport).

Functional execution: a compute set with a kernel (profiler.poplar.graph.ComputeSet.kernel) runs its
kernel's few coarse vertices, else every vertex batch runs its codelet once over all its vertices
(``tilescope.executeVertices`` forces the latter). Timing never depends on which ran.

BSP timing: each IPU keeps a clock. A step on an IPU lasts as long as its slowest tile (the
step's estimated cycles per tile, from the compiler). Steps that synchronise all IPUs (external
syncs, global exchanges, host stream copies) first bring every IPU to the latest clock.

Compile-only (``tilescope.compileOnly``): no tensor value is ever made. A run walks the same program
tree and advances the same clocks (``_time_steps``, the one function that charges a step's cycles,
executed or not) without acting; an If or Switch, whose branch would follow a value, takes its
longest branch. Such runs are recorded as estimated.
"""

from __future__ import annotations

import atexit
import itertools
import time
from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from profiler.capture import autoreport as capture
from profiler.capture.autoreport import RunRecord
from profiler.capture.options import EngineOptions, resolve_options
from profiler.chip import cost_model
from profiler.compiler.compile import CompiledGraph, ControlNode, Node, Progress, Step, compile_programs
from profiler.compiler.liveness import Liveness, analyse
from profiler.compiler.memory import MemoryLayout, place
from profiler.compiler.pace import with_work
from profiler.compiler.tile_span import per_ipu_table
from profiler.engine.batch_run import ReadCache, run_batch, run_product_in_parts
from profiler.engine.step_chains import (
    ChainedSteps,
    ProductThenChain,
    group_steps,
    pair_products,
    run_chain,
    run_chain_span,
    unwritten,
)
from profiler.executable import actions
from profiler.executable.access import Access
from profiler.host import blas, scratch
from profiler.host.value_pool import ValuePool
from profiler.multi_ipu.pipeline import participants, senders_receivers
from profiler.multi_ipu.replication import AllReduceAction
from profiler.poplar.graph import Graph
from profiler.poplar.programs import Program
from profiler.poplar.streams import DataStream
from report_format.origin import Origin
from report_format.vocabulary import ControlType, StepType
from report_format.writer import check_destination, preload

# Executed steps captured per run at most; beyond it a truncation is recorded (never silent).
MAX_CAPTURED_STEPS_PER_RUN = 1_000_000
#: What a compile's progress counts once its compute sets are planned: each tile's distinct layout of
#: not-always-live variables (``memory._allocate_shared``; DenseNet-121: 3 of its 15 s compile)
PLACING = "memory layouts placed"


class EngineError(RuntimeError):
    """The engine cannot do what was asked (one line saying what and where)."""


class OutOfMemoryError(EngineError):
    """Some tile needs more memory than it has."""


@dataclass(frozen=True, eq=False)
class _PipelineSteps:
    """Per program step (bool, steps x IPUs), when the programs hold Pipelines
    (profiler.multi_ipu.pipeline): the IPUs a step holds back, and the IPUs sending and receiving in
    a global exchange."""

    participants: np.ndarray
    senders: np.ndarray
    receivers: np.ndarray


class Engine:
    """Poplar-style engine: ``Engine(graph, programs, options)``, then compile(), load(), run(i)."""

    def __init__(
        self, graph: Graph, programs: Program | list[Program], options: Mapping[str, Any] | None = None, name: str = ""
    ) -> None:
        self.graph = graph
        self.programs = programs if isinstance(programs, list) else [programs]
        if not name.isprintable() or "/" in name or "\\" in name or name in (".", ".."):
            # the name is a report's sub-directory and is printed: no control characters, no paths
            raise EngineError(f"engine name {name!r}: use printable characters and no path separators")
        self.name = name
        self.options: EngineOptions = resolve_options(options)
        self.compiled: CompiledGraph | None = None
        self.liveness: Liveness | None = None
        self.memory: MemoryLayout | None = None
        self.loaded = False
        self.runs: list[RunRecord] = []
        self.total_runs = 0
        self.last_run_cycles = 0  # simulated cycles of the latest run (captured or not)
        self.info: dict[str, float] = {}
        #: How the report is made (report_format.origin): set by whoever runs the engine for a user's
        #: file (profile_model); None leaves capture's process-wide one (a script's), if any.
        self.origin: Origin | None = None
        self._state: list[np.ndarray] = []
        self._streams: dict[int, Any] = {}
        self.out_of_memory = ""  # after compile: why the graph does not fit ("" when it does)
        self._report_written = False
        self._step_ipu_cycles = np.zeros((0, graph.target.num_ipus), dtype=np.int64)  # steps x IPUs
        self._pipelined = np.zeros(0, dtype=bool)
        self._pipeline: _PipelineSteps | None = None  # None: no step is in a Pipeline
        self.computes = np.zeros(0, dtype=bool)
        self._external = np.zeros(0, dtype=bool)  # per step: it synchronises all IPUs
        # per control node (by id): its children with runs of consecutive steps as one block (_blocks)
        self._blocks: dict[int, list[Node | _StepBlock]] = {}
        self.compute_cycles = np.zeros(0, dtype=np.int64)
        self.report_path: Path | None = None
        self._needs: dict[int, list[int]] = {}  # step -> variables it touches (see _plan_host_values)
        self._release: dict[int, list[int]] = {}  # step -> variables whose values are dropped after it
        self._values = ValuePool()  # dropped values, handed to the next variable of their type and size
        # by block: its steps, chains grouped, a product and the chain over its result paired
        self._chains: dict[int, list[Step | ChainedSteps | ProductThenChain]] = {}
        # arrays chains write results into, by type and size
        self._spares: dict[tuple[np.dtype, int], list[np.ndarray]] = {}
        self._dropped: set[int] = set()
        # replication (profiler.multi_ipu.replication): one state per replica, run in lockstep
        self.replicas = graph.replication_factor
        self.compile_only = self.options.compile_only  # no values: runs are estimated (module docstring)
        self.profiled_replica = self.options.replica_to_profile
        if not 0 <= self.profiled_replica < self.replicas:
            raise EngineError(
                f"profiler.replicaToProfile is {self.profiled_replica}; the graph has {self.replicas} replica(s)"
            )
        # I/O tiles and batches per step (tilescope.numIOTiles, tilescope.batchesPerStep): the graph's split
        # into compute and I/O tiles is made when it is built, so the option must say the same
        if self.options.num_io_tiles != graph.io_tiles:
            raise EngineError(
                f"tilescope.numIOTiles is {self.options.num_io_tiles}; the graph was built with {graph.io_tiles} "
                "I/O tiles (Graph.compute_tiles, import_model's io_tiles)"
            )
        if int(self.options.values["tilescope.batchesPerStep"]) < 1:
            raise EngineError("tilescope.batchesPerStep must be at least 1")
        self._host_dir = np.zeros(0, dtype=np.int8)  # per step: 1 a host-to-device copy's, -1 device-to-host's
        self._host_run = [0, 0]
        self.last_run_host_cycles = (0, 0)  # the latest run's host copies (to the device, to the host)
        self._states: list[list[np.ndarray]] = []
        self._replica = 0
        self._read_caches: list[ReadCache] = []  # per replica: converted reads of unwritten values
        self._volatile: dict[int, set[int]] = {}  # program -> variables a run of it writes or drops

    # -- compile / load ------------------------------------------------------------------------
    def compile(self, progress: Progress | None = None) -> None:
        """Compile, place memory and (with capture on) arrange the report; ``progress(done, total,
        work)`` follows the compute sets being planned, then (``what=PLACING``) the memory layouts placed."""
        if self.options.capture_enabled:
            # A report that cannot be written (a path under a file, a project directory) is
            # refused now, in one line, rather than after a long compile and run.
            check_destination(capture.report_directory(self))
        start = time.perf_counter()
        progress = with_work(progress)
        c = compile_programs(self.graph, self.programs, progress, values=not self.compile_only)
        self.liveness = analyse(c)
        opts = self.options
        report = progress  # the placement's count, after the planning's, named: a Counter gives it a line of its own
        placing = None if report is None else (lambda done, total: report(done, total, None, what=PLACING))
        self.memory = place(
            c, self.liveness, opts.instrument, opts.compute_instrumentation_level,
            (opts.worker_stack_bytes, opts.supervisor_stack_bytes), placing,
        )  # fmt: skip
        self.compiled = c
        if not self.compile_only:  # which values the host makes and drops when: none without values
            self._plan_host_values(c, self.liveness)
        t = self.graph.target
        spans = [st.cost.span("tile_cycles") for st in c.steps]
        self._step_ipu_cycles = per_ipu_table(spans, t.tiles_per_ipu, t.num_ipus, "max")
        # inside a Pipeline a step holds back only the IPUs taking part (profiler.multi_ipu.pipeline)
        self._pipelined = np.zeros(len(c.steps), dtype=bool)
        for a, b, _, _ in c.pipeline_ranges:
            self._pipelined[a : b + 1] = True
        self._pipeline = (
            _PipelineSteps(
                participants([st.type for st in c.steps], self._step_ipu_cycles), *senders_receivers(c.steps, t)
            )
            if c.pipeline_ranges
            else None
        )
        self.computes = np.array([st.type == StepType.ON_TILE_EXECUTE for st in c.steps], dtype=bool)
        self._external = np.array([st.external for st in c.steps], dtype=bool)
        self._blocks = {}
        self._host_dir = _host_directions(c.steps)
        self.info["compile_seconds"] = time.perf_counter() - start
        oom = self.memory.out_of_memory_tiles()
        if oom.size:
            self.out_of_memory = self._describe_oom(self.memory, oom)
            if not opts.allow_out_of_memory:
                if opts.capture_enabled:
                    self.write_report(note=f"not executed: {self.out_of_memory} (debug.allowOutOfMemory is false)")
                raise OutOfMemoryError(f"{self.out_of_memory}; compilation stopped (debug.allowOutOfMemory is false)")
            if opts.capture_enabled:
                # Nothing can run, so the graph report is final: write it now rather than at exit,
                # so callers that catch the error at run() find it on disk.
                self.write_report()
                return
        if opts.capture_enabled:
            _register(self)

    def step_durations(self, executed: np.ndarray) -> np.ndarray:
        """Cycles each IPU spends in each of the ``executed`` program steps (executed steps x IPUs):
        inside a Pipeline an IPU not taking part in a step spends none in it."""
        cycles = self._step_ipu_cycles[executed]
        if self._pipeline is None:
            return cycles
        held = self._pipeline.participants[executed] | ~self._pipelined[executed][:, None]
        return np.where(held, cycles, 0)

    def _plan_host_values(self, c: CompiledGraph, live: Liveness) -> None:
        """Which variables' values the host holds when: a value that is not always-live is made at
        the first step that touches it and dropped after the last, so host memory follows the live
        values (as the device's does), not every tensor of the model. Inside a Repeat body (a
        pipeline's micro-batches) a value is dropped after its last step of an iteration and made
        again in the next unless the liveness says it is carried from one iteration to the next or
        across the body's boundary; condition variables are kept."""
        needs: dict[int, set[int]] = {}
        last: dict[int, int] = {}
        for node in c.steps:
            action = node.action
            if (
                isinstance(action, actions.Execute)
                and action.plan.kernel is not None
                and not self.options.execute_vertices
            ):
                # what the kernel touches: a stage deferring to a later kernel (kernel []) touches
                # nothing, and a value only such stages write is never made
                vars_ = {v for b in action.plan.kernel for t in b.tensors.values() for v in t.variable_ids()}
            else:
                vars_ = set(node.reads) | set(node.writes) | set(node.undefs)
            if vars_:
                needs[node.step] = vars_
                for v in vars_:
                    last[v] = max(last.get(v, -1), node.step)
        in_repeat = np.zeros(len(c.steps) + 1, dtype=bool)
        for a, b in c.repeat_ranges:
            in_repeat[a : b + 1] = True
        kept = {
            v for node in c.nodes if isinstance(node, ControlNode) and node.condition is not None for v in node.reads
        }
        release: dict[int, list[int]] = {}
        for v, step in last.items():
            var = self.graph.variables[v]
            if live.always_live[v] or var.value is not None or v in kept or (in_repeat[step] and v in live.carried):
                continue
            release.setdefault(step, []).append(v)
        # values made at a step that writes every element before reading any need no zeros: those
        # of a compute set's fills (profiler.compiler.compile.ComputeSetPlan), when the step writes them at
        # run time (its kernel or its vertices; a stage deferring to a later kernel writes nothing)
        self._unzeroed = {
            node.step: needs[node.step] & node.action.plan.fills
            for node in c.steps
            if node.step in needs and isinstance(node.action, actions.Execute)
            and (node.action.plan.kernel is None or node.action.plan.kernel or self.options.execute_vertices)
        }  # fmt: skip
        self._needs = {k: sorted(v) for k, v in needs.items()}
        self._release = release
        # each variable's element count and its values' empty stand-in (one per type) once dropped:
        # looked up at every step of a run (a Variable's numel is a property, np.zeros a call)
        self._numel = [var.numel for var in self.graph.variables]
        empty = {dt: np.zeros(0, dt) for dt in {var.dtype for var in self.graph.variables}}
        self._empty = [empty[var.dtype] for var in self.graph.variables]
        self._dropped = {v for vs in release.values() for v in vs}  # made on first use
        # nor is a value no running step touches (e.g. partials only stages deferring to a kernel write)
        self._dropped |= {
            var.id for var in self.graph.variables
            if var.id not in last and not live.always_live[var.id] and var.value is None and var.id not in kept
        }  # fmt: skip
        self._volatile = {}

    def _describe_oom(self, memory: MemoryLayout, tiles: np.ndarray) -> str:
        mem = memory.tile_memory
        need = mem["total_bytes_including_gaps"][tiles]
        worst = tiles[np.argsort(-need, kind="stable")][:5]
        bpt = self.graph.target.bytes_per_tile
        parts = ", ".join(f"tile {int(t)} needs {int(mem['total_bytes_including_gaps'][t]):,} bytes" for t in worst)
        return f"out of memory on {tiles.size} tile(s) of {bpt:,} bytes: {parts}"

    def load(self) -> None:
        if self.compiled is None:
            self.compile()
        if self.compile_only:  # nothing to hold: a compile-only engine never makes a value
            self.loaded = True
            return
        g = self.graph
        self._states = [
            [
                v.value.copy()
                if v.value is not None
                else np.zeros(0 if v.id in self._dropped else v.numel, dtype=v.dtype)
                for v in g.variables
            ]  # fmt: skip
            for _ in range(self.replicas)
        ]
        self._state = self._states[self.profiled_replica]
        self._read_caches = [ReadCache() for _ in range(self.replicas)]
        self.loaded = True

    def _ready(self) -> CompiledGraph:
        if self.compiled is None:
            self.compile()
        if self.out_of_memory:
            raise OutOfMemoryError(f"cannot run: {self.out_of_memory}")
        if not self.loaded:
            self.load()
        assert self.compiled is not None  # compile() sets it (or raises)
        return self.compiled

    # -- host I/O ------------------------------------------------------------------------------
    def _stream(self, stream: DataStream | str) -> DataStream:
        if isinstance(stream, DataStream):
            return stream
        for s in self.graph.streams:
            if s.name == stream:
                return s
        raise EngineError(f"no stream named {stream!r}; streams: {[s.name for s in self.graph.streams]}")

    def connect_stream(self, stream: DataStream | str, buffer: np.ndarray | Callable[..., Any]) -> None:
        """Connect a host buffer (read each transfer / written in place) or a callback to a stream."""
        s = self._stream(stream)
        if isinstance(buffer, np.ndarray) and buffer.size not in (s.numel, s.numel * self.replicas):
            per = f" (or {s.numel * self.replicas}: one transfer per replica)" if self.replicas > 1 else ""
            raise EngineError(f"stream {s.name!r}: buffer has {buffer.size} elements, a transfer has {s.numel}{per}")
        self._streams[s.id] = buffer

    def _values_needed(self, what: str) -> None:
        if self.compile_only:
            raise EngineError(f"{what}: the engine is compile-only (tilescope.compileOnly), so it holds no values")

    def write_tensor(self, handle: str, data: Any) -> None:
        self._values_needed(f"write_tensor {handle!r}")
        self._ready()
        if handle not in self.graph.host_writes:
            raise EngineError(f"no host write named {handle!r}; create it with Graph.create_host_write")
        t = self.graph.host_writes[handle]
        arr = np.asarray(data, dtype=t.dtype)
        for cache in self._read_caches:
            cache.clear()
        if arr.size == t.numel():  # the same value on every replica
            for state in self._states:
                Access(t).scatter(state, arr)
            return
        if arr.size != t.numel() * self.replicas:
            raise EngineError(f"write_tensor {handle!r}: {arr.size} values for a tensor of {t.numel()} elements")
        for state, part in zip(self._states, np.split(arr.reshape(-1), self.replicas), strict=True):
            Access(t).scatter(state, part)

    def read_tensor(self, handle: str, replica: int | None = None) -> np.ndarray:
        """The tensor's values on ``replica`` (default: the profiled one, profiler.replicaToProfile)."""
        self._values_needed(f"read_tensor {handle!r}")
        self._ready()
        if handle not in self.graph.host_reads:
            raise EngineError(f"no host read named {handle!r}; create it with Graph.create_host_read")
        r = self.profiled_replica if replica is None else replica
        if not 0 <= r < self.replicas:
            raise EngineError(f"read_tensor {handle!r}: replica {r} does not exist ({self.replicas} replica(s))")
        return Access(self.graph.host_reads[handle]).gather(self._states[r]).copy()

    # -- run ---------------------------------------------------------------------------------------
    def run(self, program: int = 0, name: str = "") -> None:
        c = self._ready()
        if not 0 <= program < len(self.programs):
            raise EngineError(f"run({program}): the engine has {len(self.programs)} program(s)")
        start = time.perf_counter()
        capture_run = (
            self.options.output_execution_profile and len(self.runs) < self.options.execution_profile_program_run_count
        )
        record = RunRecord(self.total_runs, program, name or f"run{self.total_runs}")
        record.estimated = self.compile_only
        self._record = record if capture_run else None
        self._clock = np.zeros(self.graph.target.num_ipus, dtype=np.int64)
        self.compute_cycles = np.zeros(self.graph.target.num_ipus, dtype=np.int64)  # per IPU, this run
        self._host_run = [0, 0]
        top = next(n for n in c.nodes if n.parent_id == -1 and n.child_index == program)
        volatile = self._volatile.get(program)
        if volatile is None and not self.compile_only:  # what this program writes, values made and dropped
            first, last = c.program_ranges[program]
            volatile = self._volatile[program] = self._dropped | set().union(
                *(n.writes for n in c.steps[first : last + 1])
            )
        for cache in self._read_caches:
            cache.volatile = volatile or set()
        # the run's reused temporaries (profiler.host.scratch) and dropped values (ValuePool) are kept for
        # the next run, as onnxruntime keeps its arena: a run repeated needs no fresh memory (~10 % of
        # a ResNet-50 batch-1 run); close() frees them. BLAS is held to one thread (its spinning
        # workers fight the run's own threads for the cores: profiler.host.blas)
        if capture_run:  # the report's writer's imports, beside the run (report_format.writer.preload)
            preload()
        with blas.one_thread():
            self._exec(top)
        record.cycles = int(self._clock.max())
        self.last_run_cycles = record.cycles
        self.last_run_host_cycles = (self._host_run[0], self._host_run[1])
        if capture_run:
            self.runs.append(record)
        self.total_runs += 1
        self.info["run_seconds"] = self.info.get("run_seconds", 0.0) + time.perf_counter() - start
        self._report_written = False

    def _exec(self, node: Node) -> None:
        if isinstance(node, Step):
            self._step(node)
            return
        assert isinstance(node, ControlNode)
        if node.type in (ControlType.IF, ControlType.SWITCH):
            self._exec(self._longest(node.children) if self.compile_only else self._branch(node))
            return
        children = self._blocks.get(id(node))
        if children is None:
            children = self._blocks[id(node)] = _blocks(node.children)
        for _ in range(node.repeat_count if node.type == ControlType.REPEAT else 1):
            for ch in children:
                if isinstance(ch, _StepBlock):
                    self._block(ch)
                else:
                    self._exec(ch)

    def _block(self, block: _StepBlock) -> None:
        """Consecutive steps: each one's effect in order, then their cycles at once (the cycles never
        depend on the values, nor the values on the clocks)."""
        if not self.compile_only:
            for item in self._chained(block):
                if isinstance(item, ProductThenChain):
                    self._act_product_chain(item)
                elif isinstance(item, ChainedSteps):
                    self._act_chain_or_steps(item)
                else:
                    self._act_step(item)
        self._time_steps(block.steps)

    def _chained(self, block: _StepBlock) -> list[Step | ChainedSteps | ProductThenChain]:
        """The block's acting steps with its chains of elementwise steps grouped, and each product
        followed by a chain over its result paired with it (worked out once; one replica only:
        replicas' states would each need the bookkeeping)."""
        items = self._chains.get(id(block))
        if items is None:
            items = list(block.acting)
            if self.replicas == 1 and not self.options.execute_vertices:
                items = pair_products(group_steps(block.acting, self._release, self._unzeroed))
            self._chains[id(block)] = items
        return items

    def _act_chain_or_steps(self, item: ChainedSteps) -> None:
        if not self._act_chain(item):  # a NaN: the steps one by one, for numpy's NaN bits
            for node in item.nodes:
                self._act_step(node)

    def _act_chain(self, item: ChainedSteps) -> bool:
        """Run a chain's steps in one pass (``profiler.engine.step_chains``), each step's values made,
        cached reads invalidated and values dropped in the steps' order; False (nothing changed) at a
        NaN."""
        buffers, spares = self._chain_buffers(item)
        if not run_chain(item, buffers):
            self._chain_undone(item, spares)
            return False
        self._chain_done(item, spares)
        return True

    def _act_product_chain(self, item: ProductThenChain) -> None:
        """A product and the chain over its result (``step_chains.ProductThenChain``): each part of
        the product, once its rows (or channel groups) are written, runs the chain over them on its
        thread; rows of the chain's walk that straddle two parts' rows run after. Where the product
        does not run in parts or a value is NaN, the chain runs after the product as on its own."""
        node, chained, r = item.product, item.chained, item.rows_per_chain_row
        assert isinstance(node.action, actions.Execute), "a paired product is an Execute step"
        state = self._states[0]
        self._make_values(state, self._needs.get(node.step, ()), self._unzeroed.get(node.step, ()))
        buffers, spares = self._chain_buffers(chained)
        rows, n1 = chained.chain.rows, int(chained.chain.shape[1])
        done: list[tuple[bool, int, int]] = []  # per part: no NaN, and the walk's second-dim span it ran

        def rows_done(first: int, end: int) -> None:  # the walk's rows wholly within the part's
            lo, hi = -(-first // r), end // r
            done.append((lo >= hi or run_chain_span(chained, buffers, 0, rows, lo, hi), lo, max(lo, hi)))

        def groups_done(first: int, end: int) -> None:  # every walk row of the part's groups
            done.append((run_chain_span(chained, buffers, first * n1, end * n1, 0, n1), 0, n1))

        plan = node.action.plan
        (b,) = plan.batches if plan.kernel is None else plan.kernel
        self._state, self._replica = state, 0
        if not run_product_in_parts(b, state, self._read_caches[0], rows_done, groups_done):
            run_batch(b, state, self._read_caches[0])
        self._after_step(node)
        ok = bool(done) and all(d[0] for d in done)
        at = 0
        for _, lo, hi in sorted(done, key=lambda d: d[1]):  # the rows between the parts' spans
            if ok and lo > at:
                ok = run_chain_span(chained, buffers, 0, rows, at, lo)
            at = max(at, hi)
        if ok and at < n1:
            ok = run_chain_span(chained, buffers, 0, rows, at, n1)
        if ok:
            self._chain_done(chained, spares)
        else:
            self._chain_undone(chained, spares)
            self._act_chain_or_steps(chained)

    def _chain_buffers(self, item: ChainedSteps) -> tuple[tuple[np.ndarray, ...], list[np.ndarray]]:
        """A chain's pass's buffers (its reads, made at their first use as _act_step makes them,
        then a result buffer per step) and the spare arrays its written results go into."""
        state, chain = self._states[0], item.chain
        self._make_values(state, chain.reads)  # the chain's operands, made at their first use
        spares = [
            self._spare(self._numel[v], chain.dtype) if kept else unwritten(chain.dtype)
            for v, kept in zip(chain.results, item.stored, strict=True)
        ]
        cache = self._read_caches[0]
        bits = np.uint16 if chain.dtype == np.float16 else np.float32  # a half chain's buffers as half bits
        reads = chain.buffers(
            [state[v].view(bits) for v in chain.reads],
            lambda x, make: cache.kept(chain.reads[x], ("repeated", id(chain), x), make),
        )
        return tuple(reads) + tuple(s.view(bits) for s in spares), spares

    def _chain_undone(self, item: ChainedSteps, spares: list[np.ndarray]) -> None:
        """A chain's spare arrays kept for the next (its pass stopped at a NaN or did not run)."""
        for s, kept in zip(spares, item.stored, strict=True):
            if kept:
                self._spares.setdefault((s.dtype, s.size), []).append(s)

    def _chain_done(self, item: ChainedSteps, spares: list[np.ndarray]) -> None:
        """A chain's pass done: each step's written result (its spare) becomes its variable's value,
        and each step's bookkeeping in order."""
        state, variables, chain = self._states[0], self.graph.variables, item.chain
        for k, node in enumerate(item.nodes):
            v = chain.results[k]
            if item.stored[k]:  # the spare becomes the value; the array it replaces, the next spare
                n = self._numel[v]
                old = state[v] if state[v].size == n else self._values.zeros(n, variables[v].dtype, False)
                state[v] = spares[k]
                self._spares.setdefault((old.dtype, old.size), []).append(old)
            self._after_step(node)

    def _spare(self, n: int, dtype: np.dtype) -> np.ndarray:
        """An array of ``n`` of ``dtype`` a chain writes a result into (``_act_chain``)."""
        kept = self._spares.get((dtype, n))
        return kept.pop() if kept else np.empty(n, dtype)

    def _branch(self, node: ControlNode) -> Node:
        """The child an If or a Switch runs, from its condition's value."""
        assert node.condition is not None  # the compiler gives every If and Switch its condition
        if node.type == ControlType.IF:
            cond = node.condition.gather(self._state).reshape(-1)[0]
            return node.children[0 if cond else 1]
        value = int(node.condition.gather(self._state).reshape(-1)[0])
        cases = node.case_values
        return node.children[cases.index(value) if value in cases else len(cases)]

    def _longest(self, branches: list[Node]) -> Node:
        """Without values, the branch whose run would end latest (the first of equals): each is timed
        from the current clocks, unrecorded, and the clocks put back."""
        clock, compute, record = self._clock.copy(), self.compute_cycles.copy(), self._record
        self._record = None
        ends = []
        for b in branches:
            self._exec(b)
            ends.append(int(self._clock.max()))
            self._clock[:], self.compute_cycles[:] = clock, compute
        self._record = record
        return branches[ends.index(max(ends))]

    def _step(self, node: Step) -> None:
        if node.action is not None and not self.compile_only:
            self._act_step(node)
        self._time_steps(np.array([node.step]))

    def _act_step(self, node: Step) -> None:
        """The step's effect on the values of every replica (never its cycles: ``_time_steps``)."""
        assert node.action is not None
        self._fetched: dict[int, Any] = {}
        unzeroed = self._unzeroed.get(node.step, ())
        needs = self._needs.get(node.step, ())
        for r, state in enumerate(self._states):  # replicas in lockstep (one state each)
            self._make_values(state, needs, unzeroed)
            if isinstance(node.action, AllReduceAction):
                continue
            self._state, self._replica = state, r
            self._act(node.action)
        if isinstance(node.action, AllReduceAction):  # across replicas: once, over every state
            node.action.run(self._states)
        self._after_step(node)
        self._state, self._replica = self._states[self.profiled_replica], self.profiled_replica

    def _after_step(self, node: Step) -> None:
        """A step's values done: the reads cached of what it wrote dropped, and the values no later
        step reads handed back (``ValuePool``)."""
        if node.writes:
            for cache in self._read_caches:
                cache.written(node.writes)
        released = self._release.get(node.step)
        if released:
            for cache in self._read_caches:  # their memory may come back as another value's
                cache.written(released)
            empty = self._empty
            for state in self._states:
                for v in released:
                    self._values.drop(state[v])
                    state[v] = empty[v]

    def _make_values(self, state: list[np.ndarray], variables: Iterable[int], unzeroed: Container[int] = ()) -> None:
        """The values of ``variables`` not yet made in ``state``, made (zeros, as at load; any
        values for those in ``unzeroed``, which the step writes whole before reading)."""
        numel, dtypes = self._numel, self.graph.variables
        for v in variables:
            if state[v].size != numel[v]:
                state[v] = self._values.zeros(numel[v], dtypes[v].dtype, v not in unzeroed)

    def _time_steps(self, steps: np.ndarray) -> None:
        """Advance the IPUs' clocks over consecutive program steps (``steps``, their indices in the
        order they run) and record them: the cycles an executed and a compile-only run both charge
        (one function, so the two cannot differ). Outside a Pipeline a run of steps is timed at once:
        between two steps that synchronise every IPU (external) each IPU's clock is its cumulative
        sum; ResNet-50's 748 steps a run cost ~10 us each one at a time."""
        pipeline = self._pipeline  # not None when a step is pipelined
        if pipeline is not None and self._pipelined[steps].any():
            for s in steps.tolist():
                self._time_pipelined(s, pipeline)
            return
        cycles = self._step_ipu_cycles[steps]  # steps x IPUs
        starts = np.empty_like(cycles)
        clock = self._clock
        cuts = [0, *np.flatnonzero(self._external[steps]).tolist(), len(steps)]
        for a, b in itertools.pairwise(cuts):
            if a == b:
                continue
            if self._external[steps[a]]:
                clock[:] = clock.max()
            part = cycles[a:b]
            summed = np.cumsum(part, axis=0)
            starts[a:b] = clock + summed - part
            clock += summed[-1]
        self._record_steps(steps, starts)
        self.compute_cycles += cycles[self.computes[steps]].sum(axis=0)
        direction = self._host_dir[steps]
        if direction.any():
            longest = cycles.max(axis=1)
            self._host_run[0] += int(longest[direction > 0].sum())
            self._host_run[1] += int(longest[direction < 0].sum())

    def _time_pipelined(self, step: int, pipeline: _PipelineSteps) -> None:
        """``_time_steps`` of one step that may be in a Pipeline: dataflow, an IPU waits only for
        data it receives (its stage's inputs, buffered on arrival), never for a receiver to be
        ready; IPUs not taking part spend nothing."""
        cycles = self._step_ipu_cycles[step]
        if self._pipelined[step]:
            recv = pipeline.receivers[step]
            if recv.any():
                sent = pipeline.senders[step]
                ready = int(self._clock[sent].max()) if sent.any() else 0
                self._clock[recv] = np.maximum(self._clock[recv], ready)
            cycles = np.where(pipeline.participants[step], cycles, 0)
        elif self._external[step]:
            self._clock[:] = self._clock.max()
        self._record_steps(np.array([step]), self._clock[None, :].copy())
        self._clock += cycles
        if self.computes[step]:
            self.compute_cycles += cycles
        direction = self._host_dir[step]
        if direction:
            self._host_run[0 if direction > 0 else 1] += int(cycles.max())

    def _record_steps(self, steps: np.ndarray, starts: np.ndarray) -> None:
        """Record steps that ran and each one's start per IPU in the captured run, if any (up to
        MAX_CAPTURED_STEPS_PER_RUN of them; the total counts every one)."""
        rec = self._record
        if rec is None:
            return
        rec.total_steps += len(steps)
        room = MAX_CAPTURED_STEPS_PER_RUN - len(rec.steps)
        if room > 0:
            rec.steps.extend(steps[:room].tolist())
            rec.starts.extend(starts[:room])

    def step_cycles(self) -> int:
        """Cycles of one step of ``tilescope.batchesPerStep`` batches, each batch as the latest run. With I/O
        tiles, the host copies run on them beside the compute (cost_model.overlapped_io_step_cycles: fill,
        max(compute, host I/O) a batch, drain); without, a step is its runs in series (PopART: "By default,
        PopART will stream data to and from the IPUs serially to computation", overlap_io.rst)."""
        k = self.options.batches_per_step
        if not self.graph.io_tiles:
            return k * self.last_run_cycles
        h_in, h_out = self.last_run_host_cycles
        return cost_model.overlapped_io_step_cycles(self.last_run_cycles - h_in - h_out, h_in, h_out, k)

    def step_note(self) -> str:
        """One sentence for the report: how a step of several batches, or with I/O tiles, is timed."""
        k, n = self.options.batches_per_step, self.graph.io_tiles
        h_in, h_out = self.last_run_host_cycles
        how = (
            f"{n} I/O tiles per IPU hold the host streams and their copies overlap the compute (PopART's "
            "OverlapInnerLoop: the first load and the last store alone)"
            if n
            else "no I/O tiles: the batches' host copies run in series with the compute"
        )
        return (
            f"{k} batch(es) per step: {how}; a step takes {self.step_cycles():,} cycles, "
            f"{self.step_cycles() / k:,.0f} a batch. The trace is one batch's run ({self.last_run_cycles:,} cycles, "
            f"host copies {h_in:,} in and {h_out:,} out, in series as a step of one batch runs them)"
        )

    def _act(self, action: actions.Action) -> None:
        state = self._state
        if isinstance(action, actions.Execute):
            kernel = action.plan.kernel
            for b in action.plan.batches if kernel is None or self.options.execute_vertices else kernel:
                run_batch(b, state, self._read_caches[self._replica])
        elif isinstance(action, actions.Copy):
            action.dst.scatter(state, action.src.gather(state))
        elif isinstance(action, actions.FromHost):
            src = self._streams.get(action.stream.id)
            if src is None:
                raise EngineError(f"stream {action.stream.name!r} is not connected; call Engine.connect_stream first")
            if self.replicas > 1:  # one host transfer per step, split over the replicas
                if action.stream.id not in self._fetched:
                    self._fetched[action.stream.id] = src() if callable(src) else src
                data = np.asarray(self._fetched[action.stream.id], dtype=action.stream.dtype).reshape(-1)
            else:
                data = np.asarray(src() if callable(src) else src, dtype=action.stream.dtype).reshape(-1)
            if data.size == action.stream.numel * self.replicas and self.replicas > 1:  # this replica's slice
                data = np.split(data, self.replicas)[self._replica]
            action.dst.scatter(state, data)
        elif isinstance(action, actions.ToHost):
            dst = self._streams.get(action.stream.id)
            if dst is None:
                raise EngineError(f"stream {action.stream.name!r} is not connected; call Engine.connect_stream first")
            values = action.src.gather(state)
            if callable(dst):
                dst(values.copy())
            elif dst.size == values.size * self.replicas and self.replicas > 1:  # this replica's slice
                np.split(dst.reshape(-1), self.replicas)[self._replica][:] = values.reshape(-1)
            else:
                dst.reshape(-1)[:] = values.reshape(-1)
        elif isinstance(action, actions.Print):
            print(f"{action.title}: {np.array2string(action.src.gather(state))}")

    # -- reports -------------------------------------------------------------------------------
    def write_report(self, directory: str | None = None, note: str = "") -> Path:
        """Write the report now (also done automatically at exit when capture is on)."""
        path = capture.write_report(self, directory, note)
        self._report_written = True
        self.report_path = path
        if path not in REPORTS_WRITTEN:
            REPORTS_WRITTEN.append(path)
        return path

    def close(self) -> None:
        """Write the report if it is due and free what runs keep for the next run."""
        if self.options.capture_enabled and self.compiled is not None and not self._report_written:
            self.write_report()
        scratch.release()
        self._values.clear()
        self._spares.clear()
        if self in _LIVE:  # nothing left to write at exit: let the engine be freed
            _LIVE.remove(self)

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# Engines whose reports are written at exit if the script did not close them (as Poplar writes
# auto-reports when the engine goes away); strong references so a report is never lost to GC.
_LIVE: list[Engine] = []
#: Report directories this process wrote, in order (``tilescope run SCRIPT.py`` lists them).
REPORTS_WRITTEN: list[Path] = []


def _host_directions(steps: list[Step]) -> np.ndarray:
    """Per step: 1 for a host-to-device stream copy's Begin, Mid and End, -1 for device-to-host (and a
    PrintTensor), 0 for any other step. A copy's three steps are consecutive (compile._lower_stream); its
    Mid holds the action that says the direction."""
    out = np.zeros(len(steps), dtype=np.int8)
    for i, st in enumerate(steps):
        if st.type == StepType.STREAM_COPY_MID:
            d = 1 if isinstance(st.action, actions.FromHost) else -1
            out[max(i - 1, 0) : i + 2] = d
    return out


def _register(engine: Engine) -> None:
    if engine not in _LIVE:
        _LIVE.append(engine)


@atexit.register
def _write_pending_reports() -> None:
    for e in _LIVE:
        if not e._report_written:
            try:
                e.close()
            except Exception as exc:  # report the problem in one line; never a traceback at exit
                print(f"tilescope: could not write the report of engine {e.name!r}: {exc}")


@dataclass(frozen=True, eq=False)
class _StepBlock:
    """Consecutive steps of a control node's children: their indices (timed at once) and those
    with an action (run one after the other)."""

    steps: np.ndarray
    acting: tuple[Step, ...]


def _blocks(children: list[Node]) -> list[Node | _StepBlock]:
    """``children`` with each run of consecutive steps as one block, control nodes as they are."""
    out: list[Node | _StepBlock] = []
    run: list[Step] = []
    for ch in [*children, None]:
        if isinstance(ch, Step):
            run.append(ch)
            continue
        if run:
            steps = np.array([st.step for st in run], dtype=np.int64)
            out.append(_StepBlock(steps, tuple(st for st in run if st.action is not None)))
            run = []
        if ch is not None:
            out.append(ch)
    return out
