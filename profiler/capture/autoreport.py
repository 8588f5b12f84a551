"""Capture: turn a compiled and run engine into a report (report_format), as its options ask.

Which profiles are written follows the engine options (autoReport.*). Runs beyond
autoReport.executionProfileProgramRunCount and steps beyond the engine's per-run bound are
recorded in the ``truncations`` table. ``tile_cycles`` is streamed in chunks of executed steps.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pyarrow as pa

from profiler.chip.targets import target_row
from profiler.compiler.compile import ControlNode, Step
from profiler.compiler.data_dependence import data_dependent_nodes
from profiler.compiler.memory import control_code_span
from profiler.compiler.tile_span import held_rows, per_ipu_table
from profiler.host import sorting
from report_format.origin import Origin
from report_format.vocabulary import ControlType, MemoryCategory, Provenance, StepType
from report_format.writer import ReportWriter

if TYPE_CHECKING:
    from profiler.capture.options import EngineOptions
    from profiler.compiler.compile import CompiledGraph
    from profiler.compiler.liveness import Liveness
    from profiler.compiler.memory import MemoryLayout
    from profiler.poplar.graph import Graph


class RunRecord:
    """Executed steps of one captured run: the program step of each executed step, IPU clocks at its start."""

    def __init__(self, run: int, program: int, name: str) -> None:
        self.run, self.program, self.name = run, program, name
        self.steps: list[int] = []
        self.starts: list[np.ndarray] = []
        self.total_steps = 0
        self.cycles = 0
        self.estimated = False  # timed from the cost model alone, no values (a compile-only engine)


class Engine(Protocol):
    """What capture reads of the engine it writes the report of (``profiler.engine.engine.Engine``):
    the compiled graph, its memory and liveness, the options and the captured runs."""

    name: str
    graph: Graph
    options: EngineOptions
    compiled: CompiledGraph | None
    memory: MemoryLayout | None
    liveness: Liveness | None
    runs: list[RunRecord]
    total_runs: int
    info: dict[str, float]
    origin: Origin | None  # how the report was made (model or script and run options), when known
    out_of_memory: str
    profiled_replica: int
    computes: np.ndarray  # per program step: an OnTileExecute

    def compile(self) -> None: ...

    def step_durations(self, executed: np.ndarray) -> np.ndarray: ...

    def step_note(self) -> str: ...


def _compiled(engine: Engine) -> tuple[CompiledGraph, MemoryLayout, Liveness]:
    """The engine's compiled graph, memory layout and liveness (``Engine.compile`` sets all three;
    ``write_report`` compiles first)."""
    c, mem, live = engine.compiled, engine.memory, engine.liveness
    if c is None or mem is None or live is None:
        raise RuntimeError("capture: the engine is not compiled")
    return c, mem, live


TILE_CYCLES_CHUNK_STEPS = 1024
_DIRECTORIES: dict[str, list[int]] = {}  # report directory -> ids of engines that wrote there


def report_directory(engine: Engine, directory: str | None = None) -> Path:
    """autoReport.directory, plus a sub-directory named after the engine when it has a name
    (Poplar's rule for several engines in one process). A second unnamed engine of the process
    writes beside the first, into ``<directory>-engine<N>``: inside the first report it would be
    deleted whenever that report is rewritten."""
    base = Path(directory or engine.options.auto_report_directory)
    if engine.name:
        return base / engine.name
    users = _DIRECTORIES.setdefault(str(base.absolute()), [])
    if id(engine) not in users:
        users.append(id(engine))
    k = users.index(id(engine))
    return base if k == 0 else base.with_name(f"{base.name}-engine{k}")


def _step_stats(engine: Engine) -> dict[str, np.ndarray]:
    """Per step and IPU: active tiles, balances, data in/out, FLOPs (static for a step)."""
    c = _compiled(engine)[0]
    t = engine.graph.target
    nl, ni, tpi = len(c.steps), t.num_ipus, t.tiles_per_ipu
    spans = [st.cost.span("tile_cycles") for st in c.steps]
    mx, active, total = (per_ipu_table(spans, tpi, ni, r) for r in ("max", "count", "sum"))
    with np.errstate(divide="ignore", invalid="ignore"):
        balance = np.where(mx > 0, total / tpi / np.maximum(mx, 1), 0.0)
        active_balance = np.where(mx > 0, total / np.maximum(active, 1) / np.maximum(mx, 1), 0.0)

    def per_ipu(attr: str) -> np.ndarray:
        return per_ipu_table([st.cost.span(attr) for st in c.steps], tpi, ni, "sum")

    flops = per_ipu("flops") if engine.options.include_flop_estimates else np.zeros((nl, ni), np.int64)
    return {
        "active": active.astype(np.int32),
        "balance": balance.astype(np.float32),
        "active_balance": active_balance.astype(np.float32),
        "data_in": per_ipu("bytes_in"),
        "data_out": per_ipu("bytes_out"),
        "flops": flops,
    }


ESTIMATED, SIMULATED = Provenance.ESTIMATED, Provenance.SIMULATED


def _graph_tables(engine: Engine, w: ReportWriter) -> None:
    c, mem, live = _compiled(engine)
    dependent = data_dependent_nodes(c)
    w.write("data_dependent_programs", {
        "program_id": np.array(list(dependent), dtype=np.int32), "reason": list(dependent.values()),
    })  # fmt: skip
    g = engine.graph
    t = g.target
    opts = engine.options
    w.write("tile_memory", mem.tile_memory)
    w.write("tile_memory_by_category", mem.by_category)
    variables = c.variables  # the graph's, then the receive buffers (profiler.compiler.receive_buffers)
    w.write("variables", {
        "variable_id": np.arange(len(variables), dtype=np.int32),
        "name": [v.name for v in variables],
        "dtype": [v.dtype.name for v in variables],
        "shape": pa.array([list(v.shape) for v in variables], type=pa.list_(pa.int64())),
        "bytes": mem.var_bytes,
        "always_live": live.always_live,
        "constant": [v.constant for v in variables],
        "category": [MemoryCategory.CONSTANT if v.constant else MemoryCategory.VARIABLE for v in variables],
        "interleaved": [v.interleaved for v in variables],
        "tiles": mem.var_tiles,
        "debug_context_id": [v.debug_context_id for v in variables],
    })  # fmt: skip
    w.write("variable_placements", mem.placements)
    n = t.num_tiles
    code_bytes, code_tiles, est = [], [], []
    for nd in c.nodes:
        ctrl = control_code_span(nd, n)
        code = np.zeros(n, np.int64)
        code[ctrl.lo : ctrl.hi] = ctrl.values
        if isinstance(nd, Step):
            if nd.cost.code_bytes is not None:
                code += nd.cost.code_bytes
            est.append(int(nd.cost.tile_cycles.max()) if opts.include_cycle_estimates and n else 0)
        else:
            est.append(0)
        code_bytes.append(int(code.sum()))
        code_tiles.append(int(np.count_nonzero(code)))  # the tiles holding its control or exchange code
    w.write("programs", {
        "program_id": [nd.id for nd in c.nodes],
        "parent_id": [nd.parent_id for nd in c.nodes],
        "child_index": [nd.child_index for nd in c.nodes],
        "type": [nd.type for nd in c.nodes],
        "name": [nd.name for nd in c.nodes],
        "step": [nd.step if isinstance(nd, Step) else -1 for nd in c.nodes],
        "compute_set_id": [nd.compute_set_id if isinstance(nd, Step) else -1 for nd in c.nodes],
        "debug_context_id": [nd.debug_context_id for nd in c.nodes],
        "repeat_count": [nd.repeat_count if isinstance(nd, ControlNode) else 0 for nd in c.nodes],
        "code_bytes": code_bytes,
        "code_tiles": code_tiles,
        "estimated_cycles": est,
    })  # fmt: skip
    pv_prog, pv_var, pv_access = [], [], []
    # a receive buffer is written by its exchange steps and read by its compute set
    buffer_access: dict[int, list[tuple[int, str]]] = {}
    for k, buf in enumerate(c.receive_buffers):
        for first, last in buf.spans:
            for step in range(first, last):
                if c.steps[step].type in (StepType.DO_EXCHANGE, StepType.GLOBAL_EXCHANGE):
                    buffer_access.setdefault(step, []).append((len(g.variables) + k, "write"))
            buffer_access.setdefault(last, []).append((len(g.variables) + k, "read"))
    for nd in c.nodes:  # per program node (not per element): its variable sets are small
        for v in sorted(nd.reads | nd.writes):
            pv_prog.append(nd.id)
            pv_var.append(v)
            pv_access.append("read_write" if v in nd.reads and v in nd.writes else "read" if v in nd.reads else "write")
        for v, access in buffer_access.get(nd.step, []) if isinstance(nd, Step) else []:
            pv_prog.append(nd.id)
            pv_var.append(v)
            pv_access.append(access)
    w.write("program_variables", {"program_id": pv_prog, "variable_id": pv_var, "access": pv_access})
    _multi_ipu_tables(engine, w)
    css = g.compute_sets
    w.write("compute_sets", {
        "compute_set_id": [cs.id for cs in css],
        "name": [cs.name for cs in css],
        "debug_context_id": [cs.debug_context_id for cs in css],
        "vertices": [cs.num_vertices for cs in css],
        "tiles": [int(sorting.unique(np.concatenate([b.tiles for b in cs.batches])).size) if cs.batches else 0 for cs in css],
    })  # fmt: skip
    w.write("codelets", {
        "codelet_id": list(range(len(c.codelets))),
        "name": [name for name, _ in c.codelets],
        "kind": [cl.kind for _, cl in c.codelets],
        "builtin": [cl.builtin for _, cl in c.codelets],
        "code_bytes": list(c.code_bytes),
    })  # fmt: skip
    plans = sorted(c.cs_plans.values(), key=lambda p: p.compute_set.id)
    if plans:
        cat = lambda f: np.concatenate([f(p) for p in plans])  # noqa: E731
        zeros = lambda a: a if opts.include_cycle_estimates else np.zeros_like(a)  # noqa: E731
        w.write("vertices", {
            "compute_set_id": cat(lambda p: np.full(p.v_tile.size, p.compute_set.id, np.int32)),
            "tile": cat(lambda p: p.v_tile),
            "codelet_id": cat(lambda p: p.v_codelet),
            "count": cat(lambda p: p.v_count).astype(np.int32),
            # vertex state as PopLibs' tests count it: the struct and its out-of-line field data
            # (categories vertexInstanceState + vertexFieldData)
            "state_bytes": cat(lambda p: p.v_state if p.v_field_data is None else p.v_state + p.v_field_data),
            "cycles": zeros(cat(lambda p: p.v_cycles)),
            "flops": cat(lambda p: p.v_flops) if opts.include_flop_estimates else cat(lambda p: p.v_flops) * 0,
        })  # fmt: skip
    for st in c.steps:
        cost = st.cost
        if cost.bytes_in is None or cost.bytes_out is None:
            continue
        code = cost.code_bytes if cost.code_bytes is not None else np.zeros(n, np.int64)
        tiles = np.flatnonzero((cost.bytes_in > 0) | (cost.bytes_out > 0) | (code > 0))
        if tiles.size:
            w.append("exchanges", {
                "program_id": np.full(tiles.size, st.id, np.int32),
                "tile": tiles.astype(np.int32),
                "bytes_in": cost.bytes_in[tiles],
                "bytes_out": cost.bytes_out[tiles],
                "code_bytes": code[tiles],
            })  # fmt: skip
    w.write("streams", {
        "stream_id": [s.id for s in g.streams],
        "name": [s.name for s in g.streams],
        "direction": [s.direction for s in g.streams],
        "dtype": [s.dtype.name for s in g.streams],
        "shape": pa.array([list(s.shape) for s in g.streams], type=pa.list_(pa.int64())),
        "bytes": [s.nbytes for s in g.streams],
    })  # fmt: skip
    steps, ipus = mem.liveness_steps.shape
    w.write("liveness", {
        "step": np.repeat(np.arange(steps, dtype=np.int32), ipus),
        "ipu": np.tile(np.arange(ipus, dtype=np.int32), steps),
        "not_always_live_bytes": mem.liveness_steps.reshape(-1),
    })  # fmt: skip
    iv = sorted(live.intervals)
    w.write("liveness_intervals", {
        "variable_id": [v for v, _, _ in iv],
        "first_step": [a for _, a, _ in iv],
        "last_step": [b for _, _, b in iv],
    })  # fmt: skip


def _execution_tables(engine: Engine, w: ReportWriter) -> None:
    c = _compiled(engine)[0]
    t = engine.graph.target
    ni = t.num_ipus
    stats = _step_stats(engine)
    step_node = np.array([st.id for st in c.steps], dtype=np.int32)
    spans = [st.cost.span("tile_cycles") for st in c.steps]
    top_ids = {nd.child_index: nd.id for nd in c.nodes if nd.parent_id == -1}
    runs: dict[str, list[Any]] = {k: [] for k in ("run", "program_id", "name", "cycles", "flops", "steps")}
    total_steps = 0
    for rec in engine.runs:
        executed = np.asarray(rec.steps, dtype=np.int64)
        k = executed.size
        starts = np.stack(rec.starts) if k else np.zeros((0, ni), np.int64)
        durations = engine.step_durations(executed) if k else np.zeros((0, ni), np.int64)
        runs["run"].append(rec.run)
        runs["program_id"].append(top_ids[rec.program])
        runs["name"].append(rec.name)
        runs["cycles"].append(int((starts + durations).max()) if k else 0)
        runs["flops"].append(int(stats["flops"][executed].sum()) if k else 0)
        runs["steps"].append(k)
        total_steps += k
        if k:
            w.append("execution_steps", {
                "run": np.full(k * ni, rec.run, np.int32),
                "step": np.repeat(np.arange(k, dtype=np.int32), ni),
                "program_id": np.repeat(step_node[executed], ni),
                "ipu": np.tile(np.arange(ni, dtype=np.int32), k),
                "cycles_from": starts.reshape(-1),
                "cycles_to": (starts + durations).reshape(-1),
                "active_tiles": stats["active"][executed].reshape(-1),
                "tile_balance": stats["balance"][executed].reshape(-1),
                "active_tile_balance": stats["active_balance"][executed].reshape(-1),
                "data_in_bytes": stats["data_in"][executed].reshape(-1),
                "data_out_bytes": stats["data_out"][executed].reshape(-1),
                "flops": stats["flops"][executed].reshape(-1),
            })  # fmt: skip
        for a in range(0, k, TILE_CYCLES_CHUNK_STEPS):
            chunk = executed[a : a + TILE_CYCLES_CHUNK_STEPS]
            m = chunk.size
            held = engine.step_durations(chunk) > 0  # a pipelined step costs nothing on IPUs it does not hold
            cyc = held_rows(spans, chunk, held, t.tiles_per_ipu)
            w.append("tile_cycles", {
                "run": np.full(m * ni, rec.run, np.int32),
                "step": np.repeat(np.arange(a, a + m, dtype=np.int32), ni),
                "ipu": np.tile(np.arange(ni, dtype=np.int32), m),
                "cycles": cyc,
            })  # fmt: skip
        if rec.total_steps > k:
            w.append("truncations", {
                "kind": ["steps"], "captured": [k], "total": [rec.total_steps],
                "reason": [f"run {rec.run} executed more steps than the engine captures per run ({k})"],
            })  # fmt: skip
    w.write("runs", runs)
    w.write("run_provenance", {
        "run": np.array([rec.run for rec in engine.runs], dtype=np.int32),
        "provenance": [(ESTIMATED if rec.estimated else SIMULATED).value for rec in engine.runs],
    })  # fmt: skip
    if engine.total_runs > len(engine.runs):
        count = engine.options.execution_profile_program_run_count
        w.append("truncations", {
            "kind": ["runs"], "captured": [len(engine.runs)], "total": [engine.total_runs],
            "reason": [f"autoReport.executionProfileProgramRunCount is {count}"],
        })  # fmt: skip


#: The origin of reports whose engine does not carry its own: ``tilescope run SCRIPT.py`` sets the
#: script's before running it, so every engine the script makes records it.
_process_origin: Origin | None = None


def set_process_origin(origin: Origin | None) -> None:
    """Record ``origin`` in every report written from now on by an engine without its own."""
    global _process_origin
    _process_origin = origin


def write_report(engine: Engine, directory: str | None = None, note: str = "") -> Path:
    """Write ``engine``'s report into its report directory; returns the path."""
    import time

    if engine.compiled is None:
        engine.compile()
    start = time.perf_counter()
    opts = engine.options
    path = report_directory(engine, directory)
    graph_on = opts.output_graph_profile
    exec_on = opts.output_execution_profile and not engine.out_of_memory
    debug_on = opts.output_debug_info
    with ReportWriter(path, engine=engine.name) as w:
        w.write("target", _target(engine))  # always: it says how to read per-tile data
        if graph_on:
            w.write("engine_options", opts.rows())
            _graph_tables(engine, w)
        else:
            w.set_profile("graph", False, "graph profile not captured: autoReport.outputGraphProfile is false")
        if exec_on:
            _execution_tables(engine, w)
        else:
            why = (
                f"execution profile not captured: {engine.out_of_memory}"
                if engine.out_of_memory
                else "execution profile not captured: autoReport.outputExecutionProfile is false"
            )
            w.set_profile("execution", False, note or why)
        if debug_on:
            ctxs = engine.graph.debug_contexts
            w.write("debug_contexts", {
                "debug_context_id": [d.id for d in ctxs], "parent_id": [d.parent_id for d in ctxs],
                "layer": [d.layer for d in ctxs], "name": [d.name for d in ctxs], "op_type": [d.op_type for d in ctxs],
                "file": [d.file for d in ctxs], "line": [d.line for d in ctxs], "attributes": [d.attributes for d in ctxs],
            })  # fmt: skip
        else:
            w.set_profile("debug_info", False, "debug info not captured: autoReport.outputDebugInfo is false")
        if engine.out_of_memory:
            w.notes.append(engine.out_of_memory)
        elif exec_on and engine.runs and (engine.graph.io_tiles or opts.batches_per_step > 1):
            w.notes.append(engine.step_note())  # the trace is one batch's run; the step's figure is here
        w.info.update(engine.info)
        w.origin = engine.origin or _process_origin
        w.info["report_write_seconds_before_commit"] = time.perf_counter() - start
    for message in w.messages:  # files kept, stale temporaries cleaned: the user should know
        print(f"tilescope: {message}", file=sys.stderr)
    return path


def _target(engine: Engine) -> dict[str, list]:
    """The target row: the report holds one replica's IPUs (as PopVision's), and says how many
    replicas ran (``num_replicas``; ``ipus_per_replica`` = the report's ``num_ipus``)."""
    row = target_row(engine.graph.target)
    row["num_replicas"] = [engine.graph.replication_factor]
    row["ipus_per_replica"] = [engine.graph.target.num_ipus]
    return row


def _multi_ipu_tables(engine: Engine, w: ReportWriter) -> None:
    """``replicas`` and ``pipeline_stages`` (profiler.multi_ipu.replication, profiler.multi_ipu.pipeline)."""
    replicas, ipr = engine.graph.replication_factor, engine.graph.target.num_ipus
    w.write("replicas", {
        "replica": np.arange(replicas, dtype=np.int32),
        "first_ipu": np.arange(replicas, dtype=np.int32) * ipr,
        "profiled": np.arange(replicas) == engine.profiled_replica,
    })  # fmt: skip
    c = _compiled(engine)[0]
    cols: dict[str, list[int]] = {k: [] for k in ("program_id", "stage", "ipu", "micro_batches", "compute_cycles",
                                                  "busy_cycles")}  # fmt: skip
    nodes = {nd.id: nd for nd in c.nodes}
    for a, b, node_id, micro_batches in c.pipeline_ranges:
        steps = np.arange(a, b + 1)
        # what each IPU spends per micro-batch (steps x IPUs): a step runs once per micro-batch in an
        # inference pipeline; in a training pipeline (profiler.multi_ipu.pipeline_training) once per pipeline
        # cycle it takes part in (the main phase is a Repeat), so its cycles are averaged over the
        # micro-batches (fill, drain and the weight update included)
        body = nodes[node_id]
        assert isinstance(body, ControlNode)  # a pipeline's body is a Repeat
        runs = _executions(nodes, c.steps[a : b + 1], node_id) * body.repeat_count
        held = engine.step_durations(steps) * runs[:, None] / micro_batches
        compute = (held * engine.computes[steps][:, None]).sum(axis=0)
        busy_steps = held > 0
        used = np.flatnonzero(busy_steps.any(axis=0) & (compute > 0))
        first_busy = np.array([int(np.argmax(busy_steps[:, i] & engine.computes[steps])) for i in used])
        for stage, ipu in enumerate(used[np.argsort(first_busy, kind="stable")].tolist()):
            cols["program_id"].append(node_id)
            cols["stage"].append(stage)
            cols["ipu"].append(ipu)
            cols["micro_batches"].append(micro_batches)
            cols["compute_cycles"].append(int(round(compute[ipu])))
            cols["busy_cycles"].append(int(round(held[:, ipu].sum())))
    w.write("pipeline_stages", cols)


def _executions(nodes: dict[int, Any], steps: list[Any], top: int) -> np.ndarray:
    """Times each of ``steps`` runs per run of node ``top``: the product of the Repeat counts between them."""
    out = np.ones(len(steps), dtype=np.int64)
    for i, st in enumerate(steps):  # steps of one pipeline (tens to thousands), at capture only
        node = nodes[st.parent_id]
        while node.id != top:
            if isinstance(node, ControlNode) and node.type == ControlType.REPEAT:
                out[i] *= node.repeat_count
            node = nodes[node.parent_id]
    return out
