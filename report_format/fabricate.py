"""The one fabricator of made-up reports: typed specs in, a mutually consistent report out.

A ``ReportSpec`` says what a report holds the way a test or a benchmark thinks of it: the target,
the program tree, the variables and where they live, memory by category, compute sets, vertices,
exchanges, debug contexts and the runs (which program steps each executes and what each costs).
``write_report(path, spec)`` writes it through ``report_format.builder.ReportBuilder`` and derives
every figure that follows from others, so the tables agree by construction:

- ``programs.step``: the leaves (nodes that are not control programs) numbered in pre-order;
- ``variables.bytes``, ``tiles`` and ``category``, and each placement's region: from the placements;
- ``liveness`` and ``liveness_intervals``: from the variables' live steps and placements;
- ``tile_memory``: from the ``tile_memory_by_category`` rows and the gaps;
- ``compute_sets.vertices`` and ``tiles``: from the vertices (unless given);
- ``execution_steps``, ``tile_cycles`` and ``runs``: from each run's executed program steps and
  what one execution of each step costs, either per tile (``TileCycles``: the step costs follow,
  and a step's FLOPs are its compute set's vertices' FLOPs) or per IPU (``StepCosts``: no per-tile
  cycles). Steps run back to back on each IPU; a synchronised step starts on every IPU when the
  slowest is ready.

Vectorised throughout: a step's costs are computed once per program step and gathered for every
execution of it, and so are its per-tile cycles, streamed batch by batch: a POD16-size run (20,000
executed steps x 23,552 tiles) is never in memory, only its program steps' cycles are. Spec builders: ``report_format.synthetic``
(reports of any size) and the tests' hand-made ``tests/app/small_report.py`` and
``tests/compare/compare_builders.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from report_format import schema
from report_format.builder import ReportBuilder
from report_format.vocabulary import ControlType, MemoryCategory, MemoryRegion, Provenance

#: A column: a sequence or a numpy array, one value per row.
Column = npt.ArrayLike
_CONTROL = frozenset(ControlType)


class _Columns:
    """A table given column by column: every dataclass field that is not None is a column, and
    ``ID`` (if any) names the id column numbering the rows."""

    ID: ClassVar[str] = ""

    def columns(self) -> dict[str, Any]:
        cols = {f.name: getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]
        cols = {k: _list_column(v) if k == "shape" else v for k, v in cols.items() if v is not None}
        if self.ID:
            cols[self.ID] = np.arange(len(next(iter(cols.values()))))
        return cols


@dataclass(frozen=True)
class Target:
    """The device (one row of ``target``); GC200-like constants unless told otherwise."""

    num_ipus: int
    tiles_per_ipu: int
    bytes_per_tile: int
    name: str = "IPUModel"
    type: str = "IPUModel"
    architecture: str = "ipu2"
    clock_hz: float = 1.33e9
    num_worker_contexts: int = 6
    exchange_bytes_per_cycle: float = 4.0
    interleaved_memory_start: int | None = None  # None: half way up the tile
    fp16_flops_per_cycle: float = 128.0
    fp32_flops_per_cycle: float = 32.0

    @property
    def num_tiles(self) -> int:
        return self.num_ipus * self.tiles_per_ipu

    def columns(self) -> dict[str, list[Any]]:
        start = self.bytes_per_tile // 2 if self.interleaved_memory_start is None else self.interleaved_memory_start
        derived = {
            "num_tiles": self.num_tiles,
            "bytes_per_ipu": self.bytes_per_tile * self.tiles_per_ipu,
            "total_memory": self.bytes_per_tile * self.num_tiles,
            "num_replicas": 1,
            "ipus_per_replica": self.num_ipus,
            "interleaved_memory_start": start,
        }
        return {f.name: [getattr(self, f.name)] for f in fields(self)} | {k: [v] for k, v in derived.items()}


@dataclass(frozen=True)
class Programs(_Columns):
    """The program tree, one entry per node in pre-order (parent -1: a top-level program). Nodes
    whose type is not a control type are the program steps, numbered in this order."""

    parent_id: Column
    child_index: Column
    type: Column
    name: Column
    compute_set_id: Column | None = None  # None: -1 everywhere
    debug_context_id: Column | None = None  # None: -1 everywhere
    repeat_count: Column | None = None
    code_bytes: Column | None = None
    code_tiles: Column | None = None
    estimated_cycles: Column | None = None

    def step_programs(self) -> np.ndarray:
        """The program id of each program step."""
        return np.flatnonzero([t not in _CONTROL for t in np.asarray(self.type, dtype=object)])

    def table(self) -> dict[str, Any]:
        n = len(np.asarray(self.type, dtype=object))
        step = np.full(n, -1)
        leaves = self.step_programs()
        step[leaves] = np.arange(leaves.size)
        none = np.full(n, -1)
        cols = self.columns()
        cols.setdefault("compute_set_id", none)
        cols.setdefault("debug_context_id", none)
        return {"program_id": np.arange(n), "step": step, **cols}


@dataclass(frozen=True)
class Placements(_Columns):
    """Where variables live: one row per (variable, tile); the region follows from the variable."""

    variable_id: Column
    tile: Column
    bytes: Column
    offset: Column


@dataclass(frozen=True)
class Variables:
    """Variables (ids in order) and their placements. A variable with ``first_step`` -1 is always
    live; the others are live during program steps ``first_step..last_step``."""

    name: Column
    dtype: Column
    shape: Any  # a list of shapes, or a 2-D array when every shape has the same rank
    debug_context_id: Column
    first_step: Column
    last_step: Column
    constant: Column
    interleaved: Column
    placements: Placements


@dataclass(frozen=True)
class TileBytes:
    """Bytes of one memory category, region and liveness on every tile (one value per tile)."""

    bytes: np.ndarray
    category: MemoryCategory
    region: MemoryRegion = MemoryRegion.NON_INTERLEAVED
    always_live: bool = True


@dataclass(frozen=True)
class Memory:
    """The rows of ``tile_memory_by_category`` in order, and the alignment gaps of each tile's
    regions; ``tile_memory`` follows from them."""

    tile: Column
    category: Column
    region: Column
    always_live: Column
    bytes: Column
    gaps_non_interleaved: Column = 0
    gaps_interleaved: Column = 0

    @classmethod
    def from_tiles(cls, parts: Sequence[TileBytes], **gaps: Column) -> Memory:
        """Rows from per-tile figures: the non-zero ones, tile by tile, in the order of ``parts``."""
        nz = [np.flatnonzero(p.bytes) for p in parts]
        tile = np.concatenate(nz)
        order = np.argsort(tile, kind="stable")
        sizes = [n.size for n in nz]

        def each(values: list[Any], dtype: Any) -> np.ndarray:
            return np.repeat(np.array(values, dtype=dtype), sizes)[order]

        return cls(
            tile=tile[order],
            category=each([p.category for p in parts], object),
            region=each([p.region for p in parts], object),
            always_live=each([p.always_live for p in parts], bool),
            bytes=np.concatenate([p.bytes[n] for p, n in zip(parts, nz, strict=True)])[order],
            **gaps,
        )


def variable_tile_bytes(variables: Variables, num_tiles: int) -> list[TileBytes]:
    """Variables' bytes on each tile: the always-live ones by category and region, the others at
    each tile's peak over program steps (what a perfect allocator needs), as non-interleaved."""
    p = variables.placements
    pv, pt = np.asarray(p.variable_id, dtype=np.int64), np.asarray(p.tile, dtype=np.int64)
    pb = np.asarray(p.bytes, dtype=np.int64)
    first, last = np.asarray(variables.first_step)[pv], np.asarray(variables.last_step)[pv]
    constant, interleaved = np.asarray(variables.constant, bool)[pv], np.asarray(variables.interleaved, bool)[pv]
    always = first < 0
    out = []
    for category, sel in ((MemoryCategory.VARIABLE, always & ~constant), (MemoryCategory.CONSTANT, always & constant)):
        for region, where in ((MemoryRegion.INTERLEAVED, interleaved), (MemoryRegion.NON_INTERLEAVED, ~interleaved)):
            m = sel & where
            out.append(TileBytes(sum_by(pt[m], pb[m], num_tiles), category, region))
    nal = ~always
    peak = _peak_per_tile(pt[nal], first[nal], last[nal], pb[nal], num_tiles)
    return [*out, TileBytes(peak, MemoryCategory.VARIABLE, MemoryRegion.NON_INTERLEAVED, always_live=False)]


@dataclass(frozen=True)
class ComputeSets:
    """Compute sets (ids in order); vertices and tiles None: counted from the report's vertices."""

    name: Column
    debug_context_id: Column
    vertices: Column | None = None
    tiles: Column | None = None


@dataclass(frozen=True)
class Codelets(_Columns):
    """Codelets (ids in order)."""

    ID = "codelet_id"
    name: Column
    kind: Column
    builtin: Column
    code_bytes: Column


@dataclass(frozen=True)
class Vertices(_Columns):
    """Vertices aggregated by (compute set, tile, codelet)."""

    compute_set_id: Column
    tile: Column
    codelet_id: Column
    count: Column
    state_bytes: Column
    cycles: Column
    flops: Column


@dataclass(frozen=True)
class Exchanges(_Columns):
    """Data each tile moves in each exchange or stream-copy step."""

    program_id: Column
    tile: Column
    bytes_in: Column
    bytes_out: Column
    code_bytes: Column


@dataclass(frozen=True)
class Streams(_Columns):
    """Host streams (ids in order)."""

    ID = "stream_id"
    name: Column
    direction: Column
    dtype: Column
    shape: Any
    bytes: Column


@dataclass(frozen=True)
class ProgramVariables(_Columns):
    """Which variables each program node reads and writes."""

    program_id: Column
    variable_id: Column
    access: Column


@dataclass(frozen=True)
class DebugContexts(_Columns):
    """Debug contexts (ids in order)."""

    ID = "debug_context_id"
    parent_id: Column
    layer: Column
    name: Column
    op_type: Column
    file: Column
    line: Column
    attributes: Column


@dataclass(frozen=True)
class TileCycles:
    """Busy cycles of every tile in one execution of each program step, shape (program steps,
    tiles); a step's data moved is the bytes each of its active tiles receives and sends."""

    cycles: np.ndarray
    bytes_in: Column = 0  # per program step
    bytes_out: Column = 0


@dataclass(frozen=True)
class StepCosts:
    """One execution of each program step on each IPU, given directly: arrays of shape (program
    steps, IPUs). A run costed so has no per-tile cycles (``tile_cycles`` stays empty)."""

    cycles: Column
    active_tiles: Column
    tile_balance: Column
    active_tile_balance: Column
    data_in_bytes: Column
    data_out_bytes: Column
    flops: Column


@dataclass(frozen=True)
class Run:
    """One ``Engine.run``: the program step of each executed step, in order, and their costs."""

    steps: Column
    costs: TileCycles | StepCosts
    name: str
    program_id: int = 0


@dataclass(frozen=True)
class Execution:
    """The captured runs, in order."""

    runs: Sequence[Run]
    synchronised: Column | None = None  # per program step: every IPU starts it together (syncs)
    estimated: bool = False  # the runs' cycles are estimates (a compile-only profile), not simulated


@dataclass(frozen=True)
class ReportSpec:
    """Everything a fabricated report holds; tables left None are written empty."""

    target: Target
    programs: Programs
    variables: Variables
    memory: Memory
    engine: str = ""
    options: Sequence[tuple[str, str, str]] = ()  # engine options: name, value, source
    compute_sets: ComputeSets | None = None
    codelets: Codelets | None = None
    vertices: Vertices | None = None
    exchanges: Exchanges | None = None
    streams: Streams | None = None
    program_variables: ProgramVariables | None = None
    replicas: int = 0  # rows of ``replicas`` (the first one profiled)
    debug_contexts: DebugContexts | None = None  # None: the debug_info profile was not captured
    execution: Execution | None = None  # None: the execution profile was not captured
    notes: Mapping[str, str] = field(default_factory=dict)  # why a profile was not captured, by profile
    info: Mapping[str, Any] = field(default_factory=dict)  # the manifest's info
    data_dependent: Mapping[int, str] = field(default_factory=dict)  # program id -> why its cycles follow data


def write_report(path: str | Path, spec: ReportSpec) -> Path:
    """Write ``spec`` as a report directory at ``path`` and return the path."""
    t = spec.target
    step_programs = spec.programs.step_programs()
    w = ReportBuilder(path, engine=spec.engine)
    with w:
        w.info.update(spec.info)
        w.write("target", t.columns())
        w.write("engine_options", {k: [o[i] for o in spec.options] for i, k in enumerate(("name", "value", "source"))})
        _write_memory(w, spec.memory, t)
        _write_variables(w, spec.variables, t, step_programs.size)
        w.write("programs", spec.programs.table())
        for name, table in (
            ("program_variables", spec.program_variables),
            ("codelets", spec.codelets),
            ("vertices", spec.vertices),
            ("exchanges", spec.exchanges),
            ("streams", spec.streams),
        ):
            if table is not None:
                w.write(name, table.columns())
        if spec.data_dependent:
            w.write("data_dependent_programs", {
                "program_id": np.array(list(spec.data_dependent), np.int32), "reason": list(spec.data_dependent.values()),
            })  # fmt: skip
        if spec.replicas:
            r = np.arange(spec.replicas)
            w.write("replicas", {"replica": r, "first_ipu": r * t.num_ipus, "profiled": r == 0})
        if spec.compute_sets is not None:
            w.write("compute_sets", _compute_sets(spec.compute_sets, spec.vertices, t.num_tiles))
        if spec.debug_contexts is None:
            w.set_profile("debug_info", False, note=spec.notes.get("debug_info", ""))
        else:
            w.write("debug_contexts", spec.debug_contexts.columns())
        if spec.execution is None:
            w.set_profile("execution", False, note=spec.notes.get("execution", ""))
        else:
            _write_execution(w, spec, step_programs)
    return Path(path)


def _list_column(values: Any) -> Any:
    """A list-of-integers column: a 2-D array as it is (the writer's fast path), else an Arrow list array."""
    if isinstance(values, pa.Array) or (isinstance(values, np.ndarray) and values.ndim == 2):
        return values
    return pa.array(list(values), pa.list_(pa.int64()))


def sum_by(keys: np.ndarray, values: npt.ArrayLike, n: int) -> np.ndarray:
    """``values`` summed by key (a tile, a variable...): ``n`` int64s."""
    return np.bincount(keys, weights=values, minlength=n).astype(np.int64)


def _write_memory(w: ReportBuilder, m: Memory, t: Target) -> None:
    n = t.num_tiles
    tile = np.asarray(m.tile, dtype=np.int64)
    nbytes = np.asarray(m.bytes, dtype=np.int64)
    region = np.asarray(m.region, dtype=object)
    always = np.asarray(m.always_live, dtype=bool)

    def total(sel: np.ndarray | None = None) -> np.ndarray:
        return sum_by(tile, nbytes, n) if sel is None else sum_by(tile[sel], nbytes[sel], n)

    excl, ni, il = total(), total(region == MemoryRegion.NON_INTERLEAVED), total(region == MemoryRegion.INTERLEAVED)
    ni_gap = np.broadcast_to(np.asarray(m.gaps_non_interleaved, dtype=np.int64), n)
    il_gap = np.broadcast_to(np.asarray(m.gaps_interleaved, dtype=np.int64), n)
    tiles = np.arange(n)
    w.write(
        "tile_memory",
        {
            "tile": tiles,
            "ipu": tiles // t.tiles_per_ipu,
            "tile_in_ipu": tiles % t.tiles_per_ipu,
            "total_bytes_including_gaps": excl + ni_gap + il_gap,
            "total_bytes_excluding_gaps": excl,
            "always_live_bytes": total(always),
            "not_always_live_bytes": total(~always),
            "non_interleaved_bytes_including_gaps": ni + ni_gap,
            "non_interleaved_bytes_excluding_gaps": ni,
            "interleaved_bytes_including_gaps": il + il_gap,
            "interleaved_bytes_excluding_gaps": il,
            "overflowed_bytes": total(region == MemoryRegion.OVERFLOWED),
        },
    )
    w.write(
        "tile_memory_by_category",
        {"tile": tile, "category": m.category, "region": region, "always_live": always, "bytes": nbytes},
    )


def _write_variables(w: ReportBuilder, v: Variables, t: Target, steps: int) -> None:
    p = v.placements
    n = len(np.asarray(v.name, dtype=object))
    pv, pt = np.asarray(p.variable_id, dtype=np.int64), np.asarray(p.tile, dtype=np.int64)
    pb = np.asarray(p.bytes, dtype=np.int64)
    first, last = np.asarray(v.first_step, dtype=np.int64), np.asarray(v.last_step, dtype=np.int64)
    constant, interleaved = np.asarray(v.constant, dtype=bool), np.asarray(v.interleaved, dtype=bool)
    always = first < 0
    w.write(
        "variables",
        {
            "variable_id": np.arange(n),
            "name": v.name,
            "dtype": v.dtype,
            "shape": _list_column(v.shape),
            "bytes": sum_by(pv, pb, n),  # summed by variable
            "always_live": always,
            "constant": constant,
            "category": np.where(constant, MemoryCategory.CONSTANT, MemoryCategory.VARIABLE).astype(object),
            "interleaved": interleaved,
            "tiles": np.bincount(pv, minlength=n),
            "debug_context_id": v.debug_context_id,
        },
    )
    region = np.where(interleaved[pv], MemoryRegion.INTERLEAVED, MemoryRegion.NON_INTERLEAVED).astype(object)
    w.write("variable_placements", {**p.columns(), "region": region})
    # not-always-live bytes per (program step, IPU): +bytes at the first step, -bytes after the last
    nal = ~always[pv]
    ipu, vf, vl = pt[nal] // t.tiles_per_ipu, first[pv[nal]], last[pv[nal]]
    depth = max(steps, int(vl.max(initial=-1)) + 1) + 1
    ipus = t.num_ipus

    def at(step: np.ndarray) -> np.ndarray:
        return np.bincount(step * ipus + ipu, weights=pb[nal], minlength=depth * ipus).astype(np.int64)

    live = np.cumsum((at(vf) - at(vl + 1)).reshape(depth, ipus), axis=0)[:steps]
    w.write(
        "liveness",
        {
            "step": np.repeat(np.arange(steps), ipus),
            "ipu": np.tile(np.arange(ipus), steps),
            "not_always_live_bytes": live.reshape(-1),
        },
    )
    ids = np.flatnonzero(~always)
    w.write("liveness_intervals", {"variable_id": ids, "first_step": first[ids], "last_step": last[ids]})


def _compute_sets(cs: ComputeSets, vertices: Vertices | None, num_tiles: int) -> dict[str, Any]:
    n = len(np.asarray(cs.name, dtype=object))
    counts, tiles = cs.vertices, cs.tiles
    if counts is None or tiles is None:
        assert vertices is not None, "compute sets without vertices need their vertex and tile counts"
        v_cs, v_tile = np.asarray(vertices.compute_set_id, dtype=np.int64), np.asarray(vertices.tile)
        counts = sum_by(v_cs, np.asarray(vertices.count), n) if counts is None else counts
        pairs = np.unique(v_cs * num_tiles + v_tile)
        tiles = np.bincount(pairs // num_tiles, minlength=n) if tiles is None else tiles
    return {
        "compute_set_id": np.arange(n),
        "name": cs.name,
        "debug_context_id": cs.debug_context_id,
        "vertices": counts,
        "tiles": tiles,
    }


def _step_flops(spec: ReportSpec, step_programs: np.ndarray) -> np.ndarray:
    """FLOPs of one execution of each program step on each IPU: its compute set's vertices' FLOPs
    on that IPU's tiles. Shape (program steps, IPUs)."""
    t, v = spec.target, spec.vertices
    out = np.zeros((step_programs.size, t.num_ipus), dtype=np.int64)
    if v is None or spec.programs.compute_set_id is None:
        return out
    cs = np.asarray(spec.programs.compute_set_id, dtype=np.int64)[step_programs]
    v_cs = np.asarray(v.compute_set_id, dtype=np.int64)
    n_cs = max(int(v_cs.max(initial=-1)), int(cs.max(initial=-1))) + 1
    key = v_cs * t.num_ipus + np.asarray(v.tile) // t.tiles_per_ipu
    by_cs = sum_by(key, np.asarray(v.flops), n_cs * t.num_ipus).reshape(n_cs, t.num_ipus)
    out[cs >= 0] = by_cs[cs[cs >= 0]]
    return out


def _step_costs(tc: TileCycles, t: Target, flops: np.ndarray) -> StepCosts:
    """What one execution of each program step costs on each IPU, from its tiles' cycles."""
    c = np.asarray(tc.cycles).reshape(-1, t.num_ipus, t.tiles_per_ipu)
    dur = c.max(axis=2, initial=0).astype(np.int64)
    active = (c > 0).sum(axis=2)
    busy = c.sum(axis=2, dtype=np.int64)
    longest = np.maximum(dur, 1)
    return StepCosts(
        cycles=dur,
        active_tiles=active,
        tile_balance=np.where(dur > 0, busy / t.tiles_per_ipu / longest, 0),
        active_tile_balance=np.where(dur > 0, busy / np.maximum(active, 1) / longest, 0),
        data_in_bytes=np.asarray(tc.bytes_in, dtype=np.int64).reshape(-1, 1) * active,
        data_out_bytes=np.asarray(tc.bytes_out, dtype=np.int64).reshape(-1, 1) * active,
        flops=flops,
    )


def _clocks(dur: np.ndarray, synchronised: np.ndarray) -> np.ndarray:
    """Start cycle of each executed step (rows) on each IPU (columns): back to back on every IPU,
    except that a synchronised step starts on every IPU when the slowest is ready."""
    if dur.shape[0] == 0:
        return dur.copy()
    new = synchronised.copy()
    new[0] = True
    starts = np.flatnonzero(new)  # segments: every IPU starts one at the same cycle
    seg = np.cumsum(new) - 1
    before = np.cumsum(dur, axis=0) - dur  # per IPU, since the run began
    seg_start = np.concatenate([[0], np.cumsum(np.add.reduceat(dur, starts, axis=0).max(axis=1))[:-1]])
    return seg_start[seg, None] + before - before[starts][seg]


def _write_execution(w: ReportBuilder, spec: ReportSpec, step_programs: np.ndarray) -> None:
    assert spec.execution is not None
    t, ex, ipus = spec.target, spec.execution, spec.target.num_ipus
    sync = np.zeros(step_programs.size, bool) if ex.synchronised is None else np.asarray(ex.synchronised, bool)
    flops = _step_flops(spec, step_programs)
    derived: dict[int, tuple[StepCosts, np.ndarray | None]] = {}  # per costs object (runs may share one)
    batch = schema.table_spec("tile_cycles").batch_rows or 1024
    runs: dict[str, list[Any]] = {k: [] for k in ("run", "program_id", "name", "cycles", "flops", "steps")}
    for r, run in enumerate(ex.runs):
        c = run.costs
        if id(c) not in derived:
            if isinstance(c, TileCycles):
                derived[id(c)] = (_step_costs(c, t, flops), np.asarray(c.cycles, dtype=np.int32))
            else:
                derived[id(c)] = (c, None)
        costs, tile_cycles = derived[id(c)]
        steps = np.asarray(run.steps, dtype=np.int64)
        k = steps.size
        dur = np.asarray(costs.cycles, dtype=np.int64)[steps]
        frm = _clocks(dur, sync[steps])
        step_flops = np.asarray(costs.flops, dtype=np.int64)[steps]
        if k:
            w.append(
                "execution_steps",
                {
                    "run": np.full(k * ipus, r),
                    "step": np.repeat(np.arange(k), ipus),
                    "program_id": np.repeat(step_programs[steps], ipus),
                    "ipu": np.tile(np.arange(ipus), k),
                    "cycles_from": frm.reshape(-1),
                    "cycles_to": (frm + dur).reshape(-1),
                    **{
                        name: np.asarray(getattr(costs, name))[steps].reshape(-1)
                        for name in (
                            "active_tiles",
                            "tile_balance",
                            "active_tile_balance",
                            "data_in_bytes",
                            "data_out_bytes",
                        )
                    },
                    "flops": step_flops.reshape(-1),
                },
            )
        if tile_cycles is not None:  # streamed in the table's batches: one batch of rows in memory
            chunk = max(1, batch // ipus)
            for e0 in range(0, k, chunk):
                s = steps[e0 : e0 + chunk]
                w.append(
                    "tile_cycles",
                    {
                        "run": np.full(s.size * ipus, r),
                        "step": np.repeat(np.arange(e0, e0 + s.size), ipus),
                        "ipu": np.tile(np.arange(ipus), s.size),
                        "cycles": tile_cycles[s].reshape(s.size * ipus, t.tiles_per_ipu),
                    },
                )
        for key, value in zip(
            runs, (r, run.program_id, run.name, int((frm + dur).max(initial=0)), int(step_flops.sum()), k), strict=True
        ):
            runs[key].append(value)
    w.write("runs", runs)
    how = Provenance.ESTIMATED if ex.estimated else Provenance.SIMULATED
    w.write(
        "run_provenance", {"run": np.arange(len(ex.runs), dtype=np.int32), "provenance": [how.value] * len(ex.runs)}
    )


def _peak_per_tile(
    tile: np.ndarray, first: np.ndarray, last: np.ndarray, nbytes: np.ndarray, n_tiles: int
) -> np.ndarray:
    """Max over program steps of live bytes per tile (what a perfect allocator needs)."""
    if tile.size == 0:
        return np.zeros(n_tiles, dtype=np.int64)
    ev_tile = np.concatenate([tile, tile])
    ev_step = np.concatenate([first, last + 1])
    ev_delta = np.concatenate([nbytes, -nbytes])
    order = np.lexsort((ev_delta, ev_step, ev_tile))  # frees before allocations at the same step
    t, d = ev_tile[order], ev_delta[order]
    csum = np.cumsum(d)
    starts = np.flatnonzero(np.r_[True, t[1:] != t[:-1]])
    base = np.repeat(csum[starts] - d[starts], np.diff(np.r_[starts, t.size]))
    peaks = np.maximum.reduceat(csum - base, starts)
    out = np.zeros(n_tiles, dtype=np.int64)
    out[t[starts]] = peaks
    return out


def ranges(lengths: np.ndarray) -> np.ndarray:
    """[3, 2] -> [0, 1, 2, 0, 1]."""
    ends = np.cumsum(lengths)
    return np.arange(ends[-1] if lengths.size else 0) - np.repeat(ends - lengths, lengths)
