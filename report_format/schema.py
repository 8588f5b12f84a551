"""The tilescope report format: every table's schema, the format version, the metadata key.

This module is the contract between capture (profiler) and analysis (app, CLI). Nothing
else in the project defines columns. ``SPEC.md`` is generated from it
(``python -m report_format.spec``) and a test keeps the two in step.

A report is a directory::

    manifest.json        format, version, producer, profiles captured, per-table rows/bytes/sha256
    <table>.arrow        one Arrow IPC *file* per table (zstd-compressed, memory-mappable)

Metadata structure (JSON under the key ``METADATA_KEY``, stored in every Arrow file's schema
metadata and mirrored in the manifest)::

    {"format": "tilescope.report", "format_version": 1, "table": "<name>",
     "producer": {"name": "tilescope", "version": "<package version>"}}

Names follow libpva's nouns in snake_case. Tile ids are global (``ipu * tiles_per_ipu +
tile_in_ipu``); per-tile figures are never summed silently: ``tile`` is a key everywhere.
Program steps (``programs.step``) are the leaves of the program tree in pre-order, each leaf
once even inside a Repeat; liveness refers to them. Executed steps (``execution_steps.step``)
are the steps of one run in execution order, so a Repeat body appears once per iteration.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from report_format.vocabulary import ControlType, Layer, MemoryCategory, MemoryRegion, Provenance, StepType

FORMAT_NAME = "tilescope.report"
#: Bump on any change of a table or column. Readers accept exactly SUPPORTED_VERSIONS.
FORMAT_VERSION = 4
SUPPORTED_VERSIONS: tuple[int, ...] = (1, 2, 3, 4)
# Version history (a table's ``since`` says where it appeared; older reports read it as empty):
#   1  the first format
#   2  adds ``program_variables`` (which variables each program step reads and writes)
#   3  adds ``replicas`` (data-parallel replicas, which one is profiled) and ``pipeline_stages``
#   4  adds ``run_provenance`` (simulated or estimated runs: compile-only profiles) and
#      ``data_dependent_programs`` (program-tree nodes whose cycles depend on values)
#: Arrow custom-metadata key; the ``name:`` prefix follows the Arrow spec's advice on
#: application metadata (``ARROW:`` is reserved for Arrow itself).
METADATA_KEY = "tilescope:report"
MANIFEST_NAME = "manifest.json"
TABLE_SUFFIX = ".arrow"

# Provenance of a figure (SPEC.md says which applies to each column).
SIMULATED = Provenance.SIMULATED
ESTIMATED = Provenance.ESTIMATED
MEASURED = Provenance.MEASURED
STRUCTURAL = Provenance.STRUCTURAL

#: Memory categories: libpva names (reference/popvision.md §3.5), unchanged so PopVision users
#: recognise them (report_format.vocabulary.MemoryCategory, in this order).
MEMORY_CATEGORIES: tuple[str, ...] = tuple(MemoryCategory)
#: Memory regions of a tile (GA memory report): code must sit in non-interleaved memory;
#: overflowed = bytes that did not fit in the tile (out of memory).
MEMORY_REGIONS: tuple[str, ...] = tuple(MemoryRegion)
#: Program (step) types: libpva ``pva.Program.Type`` names plus Poplar control programs.
STEP_TYPES: tuple[str, ...] = tuple(StepType)
CONTROL_TYPES: tuple[str, ...] = tuple(ControlType)
#: Debug-context layers (Operations views choose one).
LAYERS: tuple[str, ...] = tuple(Layer)


@dataclass(frozen=True)
class Column:
    """One column: Arrow type plus what SPEC.md says about it."""

    name: str
    type: pa.DataType
    unit: str
    provenance: str
    doc: str

    def arrow_field(self) -> pa.Field:
        meta = {"unit": self.unit, "provenance": self.provenance}
        return pa.field(self.name, self.type, nullable=False, metadata=meta)


@dataclass(frozen=True)
class TableSpec:
    """One table: its columns, which profile it belongs to and how it is laid out."""

    name: str
    profile: str  # "graph", "execution" or "debug_info": which capture option fills it
    doc: str
    columns: tuple[Column, ...]
    #: Rows per Arrow record batch for large tables, so one step can be read alone.
    batch_rows: int | None = None
    key: tuple[str, ...] = field(default=())
    #: First format version holding this table; readers of an older report see it empty.
    since: int = 1

    @property
    def schema(self) -> pa.Schema:
        return pa.schema([c.arrow_field() for c in self.columns])

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)


def _c(name: str, type_: pa.DataType, unit: str, provenance: str, doc: str) -> Column:
    return Column(name, type_, unit, provenance, doc)


I32, I64, F32, F64, STR, BOOL = pa.int32(), pa.int64(), pa.float32(), pa.float64(), pa.string(), pa.bool_()
NONE = "-"


def _tile(doc: str = "global tile id (ipu * tiles_per_ipu + tile in IPU)") -> Column:
    return _c("tile", I32, "tile id", STRUCTURAL, doc)


_TABLES: tuple[TableSpec, ...] = (
    TableSpec(
        "target",
        "graph",
        "The device the program was compiled for. Exactly one row.",
        (
            _c("name", STR, NONE, STRUCTURAL, "target name, e.g. GC200, Bow, C600, IPUModel"),
            _c("type", STR, NONE, STRUCTURAL, "IPU or IPUModel (libpva Target.Type)"),
            _c("architecture", STR, NONE, STRUCTURAL, "ipu1, ipu2 or ipu21"),
            _c(
                "num_ipus",
                I32,
                "IPUs",
                STRUCTURAL,
                "IPUs in the report: one replica's (all of them when not replicated)",
            ),
            _c("tiles_per_ipu", I32, "tiles", STRUCTURAL, "tiles on each IPU"),
            _c("num_tiles", I32, "tiles", STRUCTURAL, "num_ipus * tiles_per_ipu"),
            _c("bytes_per_tile", I64, "bytes", STRUCTURAL, "memory of one tile"),
            _c("bytes_per_ipu", I64, "bytes", STRUCTURAL, "bytes_per_tile * tiles_per_ipu"),
            _c("total_memory", I64, "bytes", STRUCTURAL, "bytes_per_ipu * num_ipus"),
            _c("clock_hz", F64, "Hz", STRUCTURAL, "tile clock frequency"),
            _c("num_replicas", I32, "replicas", STRUCTURAL, "graph replicas"),
            _c("ipus_per_replica", I32, "IPUs", STRUCTURAL, "IPUs each replica uses"),
            _c("num_worker_contexts", I32, "contexts", STRUCTURAL, "worker threads per tile"),
            _c("exchange_bytes_per_cycle", F64, "bytes/cycle", STRUCTURAL, "on-IPU exchange bandwidth per tile"),
            _c("interleaved_memory_start", I64, "bytes", STRUCTURAL, "tile address where interleaved memory begins"),
            _c("fp16_flops_per_cycle", F64, "FLOPs/cycle", STRUCTURAL, "peak fp16 (AMP) FLOPs per tile per cycle"),
            _c("fp32_flops_per_cycle", F64, "FLOPs/cycle", STRUCTURAL, "peak fp32 FLOPs per tile per cycle"),
        ),
    ),
    TableSpec(
        "engine_options",
        "graph",
        "Engine options in force, after merging defaults, options given in code and POPLAR_ENGINE_OPTIONS.",
        (
            _c("name", STR, NONE, MEASURED, "Poplar option name, e.g. autoReport.all"),
            _c("value", STR, NONE, MEASURED, "value as a string"),
            _c("source", STR, NONE, MEASURED, "default, code or environment (environment wins)"),
        ),
        key=("name",),
    ),
    TableSpec(
        "tile_memory",
        "graph",
        "Memory of each tile after compilation. One row per tile of the device. "
        "Bytes including gaps count every byte up to the end of the last allocation of a region; "
        "excluding gaps counts only allocated bytes.",
        (
            _tile(),
            _c("ipu", I32, "IPU id", STRUCTURAL, "IPU holding the tile"),
            _c("tile_in_ipu", I32, "tile id", STRUCTURAL, "tile id within its IPU"),
            _c("total_bytes_including_gaps", I64, "bytes", ESTIMATED, "all regions, gaps included"),
            _c("total_bytes_excluding_gaps", I64, "bytes", ESTIMATED, "all regions, allocated bytes only"),
            _c("always_live_bytes", I64, "bytes", ESTIMATED, "always-live data (code, state, constants, weights…)"),
            _c(
                "not_always_live_bytes",
                I64,
                "bytes",
                ESTIMATED,
                "bytes occupied by not-always-live variables (shared between variables whose lifetimes do not overlap)",
            ),
            _c("non_interleaved_bytes_including_gaps", I64, "bytes", ESTIMATED, "non-interleaved region"),
            _c("non_interleaved_bytes_excluding_gaps", I64, "bytes", ESTIMATED, "non-interleaved region"),
            _c("interleaved_bytes_including_gaps", I64, "bytes", ESTIMATED, "interleaved region"),
            _c("interleaved_bytes_excluding_gaps", I64, "bytes", ESTIMATED, "interleaved region"),
            _c(
                "overflowed_bytes",
                I64,
                "bytes",
                ESTIMATED,
                "bytes that did not fit in the tile (> 0 means out of memory)",
            ),
        ),
        key=("tile",),
    ),
    TableSpec(
        "tile_memory_by_category",
        "graph",
        "Memory of each tile split by category, region and liveness. Only non-zero rows. "
        "For a tile, bytes summed over all its rows equals tile_memory.total_bytes_excluding_gaps.",
        (
            _tile(),
            _c("category", STR, NONE, STRUCTURAL, "libpva memory category (vertexCode, controlCode, variable, …)"),
            _c("region", STR, NONE, STRUCTURAL, "non_interleaved, interleaved or overflowed"),
            _c("always_live", BOOL, NONE, STRUCTURAL, "true for always-live data"),
            _c("bytes", I64, "bytes", ESTIMATED, "bytes excluding gaps"),
        ),
        key=("tile", "category", "region", "always_live"),
    ),
    TableSpec(
        "variables",
        "graph",
        "Variables and constants of the graph (one row per variable), then the receive buffers: where a "
        "compute set's vertices read data held on other tiles, what each tile receives lands in a temporary "
        "(as PopLibs copies operands to the tiles using them), one `uint8` variable per compute set named "
        "`<compute set>/received`, written by its exchange steps and read by the compute set.",
        (
            _c("variable_id", I32, "id", STRUCTURAL, "variable id"),
            _c("name", STR, NONE, STRUCTURAL, "variable name (debug name)"),
            _c("dtype", STR, NONE, STRUCTURAL, "element type: float32, float16, float8, int32, uint8, bool…"),
            _c("shape", pa.list_(I64), "elements", STRUCTURAL, "shape"),
            _c("bytes", I64, "bytes", STRUCTURAL, "total bytes over all tiles"),
            _c("always_live", BOOL, NONE, STRUCTURAL, "live for the whole program"),
            _c("constant", BOOL, NONE, STRUCTURAL, "a constant (category constant)"),
            _c("category", STR, NONE, STRUCTURAL, "memory category: variable or constant"),
            _c("interleaved", BOOL, NONE, STRUCTURAL, "must sit in interleaved memory"),
            _c("tiles", I32, "tiles", STRUCTURAL, "number of tiles holding part of it"),
            _c("debug_context_id", I32, "id", STRUCTURAL, "debug context that created it (-1: none)"),
        ),
        key=("variable_id",),
    ),
    TableSpec(
        "variable_placements",
        "graph",
        "Where each variable lives: one row per (variable, tile) with its address on that tile.",
        (
            _c("variable_id", I32, "id", STRUCTURAL, "variable id"),
            _tile(),
            _c("offset", I64, "bytes", ESTIMATED, "start address on the tile"),
            _c("bytes", I64, "bytes", STRUCTURAL, "bytes of the variable on this tile"),
            _c("region", STR, NONE, ESTIMATED, "non_interleaved, interleaved or overflowed"),
        ),
        batch_rows=1 << 16,
        key=("variable_id", "tile"),
    ),
    TableSpec(
        "programs",
        "graph",
        "The compiled program tree. Rows in pre-order; parent_id -1 marks a top-level program "
        "(the one Engine.run(i) runs, i = child_index). Leaves are program steps.",
        (
            _c("program_id", I32, "id", STRUCTURAL, "node id"),
            _c("parent_id", I32, "id", STRUCTURAL, "parent node id (-1: top-level program)"),
            _c("child_index", I32, "index", STRUCTURAL, "position among its siblings"),
            _c(
                "type",
                STR,
                NONE,
                STRUCTURAL,
                "OnTileExecute, DoExchange, GlobalExchange, StreamCopyBegin/Mid/End, "
                "Sync, WriteUndef, or a control type: Program, Sequence, Repeat, If, Switch, Call",
            ),
            _c("name", STR, NONE, STRUCTURAL, "name (compute set, stream, or program name)"),
            _c("step", I32, "index", STRUCTURAL, "program step index for leaves (liveness refers to it); -1 otherwise"),
            _c("compute_set_id", I32, "id", STRUCTURAL, "compute set of an OnTileExecute (-1 otherwise)"),
            _c("debug_context_id", I32, "id", STRUCTURAL, "debug context (-1: none)"),
            _c("repeat_count", I64, "iterations", STRUCTURAL, "iterations of a Repeat (0 otherwise)"),
            _c("code_bytes", I64, "bytes", ESTIMATED, "control and exchange code for this node, summed over tiles"),
            _c("code_tiles", I32, "tiles", ESTIMATED, "tiles holding code for this node"),
            _c(
                "estimated_cycles",
                I64,
                "cycles",
                ESTIMATED,
                "compile-time estimate of the step, max over tiles (0 for control nodes)",
            ),
        ),
        key=("program_id",),
    ),
    TableSpec(
        "program_variables",
        "graph",
        "Which variables each program step (or control node, e.g. an If's condition) reads and writes: "
        "the data flow between steps, and so between operations.",
        (
            _c("program_id", I32, "id", STRUCTURAL, "program-tree node"),
            _c("variable_id", I32, "id", STRUCTURAL, "variable it accesses"),
            _c("access", STR, NONE, STRUCTURAL, "read, write or read_write"),
        ),
        key=("program_id", "variable_id"),
        since=2,
    ),
    TableSpec(
        "replicas",
        "graph",
        "Data-parallel replicas of the graph (libpva numReplicas): each runs the same program on its own "
        "IPUs and inputs; the report's per-tile and per-IPU figures are the profiled replica's.",
        (
            _c("replica", I32, "index", STRUCTURAL, "replica"),
            _c("first_ipu", I32, "IPU id", STRUCTURAL, "its first IPU in the system (replica x ipus_per_replica)"),
            _c(
                "profiled",
                BOOL,
                NONE,
                STRUCTURAL,
                "the replica whose execution is captured (profiler.replicaToProfile)",
            ),
        ),
        key=("replica",),
        since=3,
    ),
    TableSpec(
        "pipeline_stages",
        "graph",
        "Stages of each pipelined program (a Repeat over micro-batches whose IPUs overlap; or a training "
        "pipeline, whose stages run forward and backward): one row per stage, in pipeline order. Empty "
        "when nothing is pipelined.",
        (
            _c("program_id", I32, "id", STRUCTURAL, "the pipeline's Repeat node in the program tree"),
            _c("stage", I32, "index", STRUCTURAL, "stage, in the order micro-batches pass through them"),
            _c("ipu", I32, "IPU id", STRUCTURAL, "IPU running the stage"),
            _c("micro_batches", I32, "count", STRUCTURAL, "micro-batches per run (gradient accumulation count)"),
            _c(
                "compute_cycles",
                I64,
                "cycles",
                ESTIMATED,
                "compute (OnTileExecute) cycles of the stage per micro-batch (training: the run's, fill, drain and "
                "weight update included, divided by the micro-batches)",
            ),
            _c(
                "busy_cycles",
                I64,
                "cycles",
                ESTIMATED,
                "all cycles of the stage's IPU per micro-batch (compute, exchange, syncs; training: averaged as "
                "compute_cycles)",
            ),
        ),
        key=("program_id", "stage"),
        since=3,
    ),
    TableSpec(
        "compute_sets",
        "graph",
        "Compute sets of the graph.",
        (
            _c("compute_set_id", I32, "id", STRUCTURAL, "compute set id"),
            _c("name", STR, NONE, STRUCTURAL, "name"),
            _c("debug_context_id", I32, "id", STRUCTURAL, "debug context (-1: none)"),
            _c("vertices", I64, "vertices", STRUCTURAL, "vertices in the compute set"),
            _c("tiles", I32, "tiles", STRUCTURAL, "tiles with at least one vertex"),
        ),
        key=("compute_set_id",),
    ),
    TableSpec(
        "codelets",
        "graph",
        "Vertex types (codelets) used by the graph.",
        (
            _c("codelet_id", I32, "id", STRUCTURAL, "codelet id"),
            _c("name", STR, NONE, STRUCTURAL, "codelet name, e.g. popops::ScaledAdd<half>"),
            _c("kind", STR, NONE, STRUCTURAL, "Vertex, MultiVertex or SupervisorVertex"),
            _c("builtin", BOOL, NONE, STRUCTURAL, "false for user codelets"),
            _c("code_bytes", I64, "bytes", ESTIMATED, "vertex code bytes on each tile that uses it"),
        ),
        key=("codelet_id",),
    ),
    TableSpec(
        "vertices",
        "graph",
        "Vertices aggregated by (compute set, tile, codelet).",
        (
            _c("compute_set_id", I32, "id", STRUCTURAL, "compute set"),
            _tile(),
            _c("codelet_id", I32, "id", STRUCTURAL, "codelet"),
            _c("count", I32, "vertices", STRUCTURAL, "vertices of this codelet on this tile in this compute set"),
            _c(
                "state_bytes",
                I64,
                "bytes",
                ESTIMATED,
                "vertex state of those vertices: their instance state plus their out-of-line field data (memory "
                "categories vertexInstanceState + vertexFieldData)",
            ),  # fmt: skip
            _c("cycles", I64, "cycles", ESTIMATED, "sum of their cycle estimates (PopLibs convention)"),
            _c("flops", I64, "FLOPs", ESTIMATED, "sum of their FLOP estimates"),
        ),
        batch_rows=1 << 16,
        key=("compute_set_id", "tile", "codelet_id"),
    ),
    TableSpec(
        "exchanges",
        "graph",
        "Data moved by each exchange or stream-copy step, per tile taking part. Only non-zero rows.",
        (
            _c("program_id", I32, "id", STRUCTURAL, "the DoExchange / GlobalExchange / StreamCopyMid step"),
            _tile(),
            _c("bytes_in", I64, "bytes", ESTIMATED, "bytes the tile receives"),
            _c("bytes_out", I64, "bytes", ESTIMATED, "bytes the tile sends"),
            _c("code_bytes", I64, "bytes", ESTIMATED, "exchange code for this step on this tile"),
        ),
        batch_rows=1 << 16,
        key=("program_id", "tile"),
    ),
    TableSpec(
        "streams",
        "graph",
        "Host data streams.",
        (
            _c("stream_id", I32, "id", STRUCTURAL, "stream id"),
            _c("name", STR, NONE, STRUCTURAL, "stream name"),
            _c("direction", STR, NONE, STRUCTURAL, "host_to_device or device_to_host"),
            _c("dtype", STR, NONE, STRUCTURAL, "element type"),
            _c("shape", pa.list_(I64), "elements", STRUCTURAL, "shape of one transfer"),
            _c("bytes", I64, "bytes", STRUCTURAL, "bytes of one transfer"),
        ),
        key=("stream_id",),
    ),
    TableSpec(
        "liveness",
        "graph",
        "Not-always-live bytes per program step and IPU (libpva livenessProgramSteps).",
        (
            _c("step", I32, "index", STRUCTURAL, "program step (programs.step)"),
            _c("ipu", I32, "IPU id", STRUCTURAL, "IPU"),
            _c("not_always_live_bytes", I64, "bytes", ESTIMATED, "bytes of variables live during the step on this IPU"),
        ),
        key=("step", "ipu"),
    ),
    TableSpec(
        "liveness_intervals",
        "graph",
        "When each not-always-live variable is live: program steps first_step..last_step inclusive.",
        (
            _c("variable_id", I32, "id", STRUCTURAL, "variable"),
            _c("first_step", I32, "index", ESTIMATED, "first program step it is live in"),
            _c("last_step", I32, "index", ESTIMATED, "last program step it is live in (inclusive)"),
        ),
        key=("variable_id", "first_step"),
    ),
    TableSpec(
        "debug_contexts",
        "debug_info",
        "Debug contexts: who created each variable, compute set and step. Operations views group by them.",
        (
            _c("debug_context_id", I32, "id", STRUCTURAL, "id"),
            _c("parent_id", I32, "id", STRUCTURAL, "enclosing context (-1: none)"),
            _c("layer", STR, NONE, STRUCTURAL, "poplibs, onnx or user"),
            _c("name", STR, NONE, STRUCTURAL, "operation name"),
            _c("op_type", STR, NONE, STRUCTURAL, "operation type, e.g. MatMul, Conv, Add"),
            _c("file", STR, NONE, STRUCTURAL, "source file that created it ('' if unknown)"),
            _c("line", I32, "line", STRUCTURAL, "source line (0 if unknown)"),
            _c("attributes", STR, NONE, STRUCTURAL, "JSON object: op attributes and planner choices"),
        ),
        key=("debug_context_id",),
    ),
    TableSpec(
        "runs",
        "execution",
        "Captured runs (Engine.run calls), in order.",
        (
            _c("run", I32, "index", MEASURED, "run index"),
            _c("program_id", I32, "id", STRUCTURAL, "top-level program that ran"),
            _c("name", STR, NONE, MEASURED, "run label"),
            _c("cycles", I64, "cycles", SIMULATED, "run length: max over IPUs of the last step's cycles_to"),
            _c("flops", I64, "FLOPs", ESTIMATED, "FLOPs of the run"),
            _c("steps", I32, "steps", SIMULATED, "executed steps captured"),
        ),
        key=("run",),
    ),
    TableSpec(
        "execution_steps",
        "execution",
        "Executed steps of each run, per IPU (libpva execution.runs[r].steps[k].ipus[i]).",
        (
            _c("run", I32, "index", MEASURED, "run"),
            _c("step", I32, "index", SIMULATED, "executed step index within the run"),
            _c("program_id", I32, "id", STRUCTURAL, "program-tree leaf that executed"),
            _c("ipu", I32, "IPU id", STRUCTURAL, "IPU"),
            _c("cycles_from", I64, "cycles", SIMULATED, "start, cycles since the run began on this IPU"),
            _c("cycles_to", I64, "cycles", SIMULATED, "end (the slowest tile reached the step's end)"),
            _c("active_tiles", I32, "tiles", SIMULATED, "tiles with non-zero cycles"),
            _c("tile_balance", F32, "ratio", SIMULATED, "mean over all tiles of tile cycles / max tile cycles (0..1)"),
            _c("active_tile_balance", F32, "ratio", SIMULATED, "same over active tiles only (0..1)"),
            _c("data_in_bytes", I64, "bytes", SIMULATED, "bytes received by the IPU's tiles"),
            _c("data_out_bytes", I64, "bytes", SIMULATED, "bytes sent by the IPU's tiles"),
            _c("flops", I64, "FLOPs", ESTIMATED, "FLOPs of the step on this IPU"),
        ),
        batch_rows=1 << 16,
        key=("run", "step", "ipu"),
    ),
    TableSpec(
        "tile_cycles",
        "execution",
        "Cycles of every tile in every executed step: one row per (run, step, ipu); cycles[i] is "
        "tile_in_ipu i. Rows ordered by run, step, ipu in batches of batch_rows rows, so one step "
        "is read alone.",
        (
            _c("run", I32, "index", MEASURED, "run"),
            _c("step", I32, "index", SIMULATED, "executed step index within the run"),
            _c("ipu", I32, "IPU id", STRUCTURAL, "IPU"),
            _c("cycles", pa.list_(I32), "cycles", SIMULATED, "busy cycles of each tile (length tiles_per_ipu)"),
        ),
        batch_rows=1024,
        key=("run", "step", "ipu"),
    ),
    TableSpec(
        "run_provenance",
        "execution",
        "How each captured run's cycles were obtained: simulated (the program ran, values and all) or estimated "
        "(a compile-only profile: the same cost model and program tree, no values; an If or Switch takes its "
        "longest branch). Older reports' runs are simulated.",
        (
            _c("run", I32, "index", MEASURED, "run"),
            _c("provenance", STR, NONE, STRUCTURAL, "simulated or estimated"),
        ),
        key=("run",),
        since=4,
    ),
    TableSpec(
        "data_dependent_programs",
        "graph",
        "Program-tree nodes whose real cycles depend on the values the program computes (dynamic slices and "
        "gathers, If and Switch): their cycles are the cost model's estimate whatever the data.",
        (
            _c("program_id", I32, "id", STRUCTURAL, "program-tree node"),
            _c("reason", STR, NONE, STRUCTURAL, "why its cycles depend on data"),
        ),
        key=("program_id",),
        since=4,
    ),
    TableSpec(
        "truncations",
        "execution",
        "What was not captured, and why (never silent).",
        (
            _c("kind", STR, NONE, MEASURED, "runs or steps"),
            _c("captured", I64, "count", MEASURED, "how many were captured"),
            _c("total", I64, "count", MEASURED, "how many there were"),
            _c("reason", STR, NONE, MEASURED, "why, naming the option that limits it"),
        ),
    ),
)

TABLES: dict[str, TableSpec] = {t.name: t for t in _TABLES}
TABLE_NAMES: tuple[str, ...] = tuple(TABLES)
PROFILES: tuple[str, ...] = ("graph", "execution", "debug_info")


def table_names(version: int) -> tuple[str, ...]:
    """Tables a report of format ``version`` holds."""
    return tuple(t.name for t in _TABLES if t.since <= version)


def table_spec(name: str) -> TableSpec:
    """The spec of table ``name``; KeyError names the known tables."""
    try:
        return TABLES[name]
    except KeyError:
        raise KeyError(f"unknown table {name!r}; tables are: {', '.join(TABLE_NAMES)}") from None


def file_metadata(table: str, producer: dict[str, str]) -> dict[bytes, bytes]:
    """Schema metadata stored in each Arrow file (see the module docstring)."""
    import json

    doc = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, "table": table, "producer": producer}
    return {METADATA_KEY.encode(): json.dumps(doc, sort_keys=True).encode()}


# -- the sweep table ------------------------------------------------------------------------------
# A sweep (``tilescope sweep``) is a directory of reports, one per point of a grid of run options,
# and one table with a row per finished point. It is not a report: it has its own format name and
# version, so a report reader never mistakes one for the other.

SWEEP_FORMAT_NAME = "tilescope.sweep"
#: Bump on any change of the sweep table's columns. Readers accept exactly SWEEP_SUPPORTED_VERSIONS.
SWEEP_FORMAT_VERSION = 1
SWEEP_SUPPORTED_VERSIONS: tuple[int, ...] = (1,)
#: The sweep table's file in a sweep directory.
SWEEP_FILE = "sweep.arrow"

SWEEP = TableSpec(
    "sweep",
    "sweep",
    "One row per finished point of a sweep: the `tilescope run` options of the point, whether it fit and "
    "why not, and its headline figures, read back from the point's report by the same view functions "
    "`tilescope summary` uses. A figure a point does not have (it did not fit, or it failed) is NaN or -1.",
    (
        _c("point", I32, "index", STRUCTURAL, "the point's index in the grid (the order of --help's options)"),
        _c("name", STR, NONE, STRUCTURAL, "the point's label: the options that vary over the grid"),
        _c("args", STR, NONE, STRUCTURAL, "the `tilescope run` options of the point, as one command line"),
        _c("target", STR, NONE, STRUCTURAL, "--target"),
        _c("batch", I32, "samples", STRUCTURAL, "--batch (-1: the model's own)"),
        _c("dtype", STR, NONE, STRUCTURAL, "--dtype"),
        _c("partials", STR, NONE, STRUCTURAL, "--partials"),
        _c("available_memory_proportion", F64, "ratio", STRUCTURAL, "--available-memory-proportion (NaN: default)"),
        _c("ipus", I32, "count", STRUCTURAL, "--ipus (per replica)"),
        _c("replicas", I32, "count", STRUCTURAL, "--replicas"),
        _c("pipeline", BOOL, NONE, STRUCTURAL, "--pipeline"),
        _c(
            "status",
            STR,
            NONE,
            MEASURED,
            "ok, out_of_memory (compiled, not run: the report shows the memory) or failed",
        ),
        _c("fits", BOOL, NONE, ESTIMATED, "the graph fits in tile memory and ran"),
        _c("reason", STR, NONE, MEASURED, "why the point did not fit or failed, one line (empty when ok)"),
        _c("report", STR, NONE, STRUCTURAL, "the point's report, relative to the sweep directory (empty: none)"),
        _c("report_created", STR, NONE, MEASURED, "the report manifest's `created` (which report the row read)"),
        _c("samples_per_second", F64, "samples/s", SIMULATED, "samples per run / the opening run's simulated seconds"),
        _c("cycles", I64, "cycles", SIMULATED, "the opening run's cycles (summary execution.headline.cycles)"),
        _c("max_tile_bytes", I64, "bytes", ESTIMATED, "peak tile memory incl. gaps (summary memory.max_tile_bytes)"),
        _c(
            "total_bytes",
            I64,
            "bytes",
            ESTIMATED,
            "memory over all tiles incl. gaps (memory.total_bytes_including_gaps)",
        ),
        _c("tile_balance", F64, "ratio", SIMULATED, "the opening run's tile balance (execution.headline.tile_balance)"),
        _c(
            "host_seconds",
            F64,
            "s",
            MEASURED,
            "host wall time of the point on its worker (import, compile, run, report)",
        ),
        _c(
            "worker",
            STR,
            NONE,
            MEASURED,
            "host:pid of the Dask worker process that computed the point (kept when a rerun reuses it)",
        ),
    ),
    key=("point",),
)
