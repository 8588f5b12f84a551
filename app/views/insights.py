"""The insights view: where memory goes (top tiles, vertices, exchanges), out-of-memory tiles,
and plain-language hints; a hint that a change of run options answers carries it as a what-if
``Proposal`` (app.views.whatif). ``insights(report)`` is the one place they are computed: the
Insights page and ``tilescope whatif`` both list them from it."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd

from app.units import format_bytes, format_count, format_percent, plural
from app.views.capacity import over_capacity
from app.views.efficiency import operation_efficiency
from app.views.execution_trace import trace_steps
from app.views.grouped import sums_and_tiles
from app.views.ipus import ipu_execution
from app.views.liveness import live_variables
from app.views.operations import _map, op_of_context
from app.views.runs import opening_run, overall
from app.views.summary import liveness_summary
from app.views.whatif import Proposal, bigger_batch, compute_split, lower_memory_proportion, more_ipus
from report_format.reader import Report
from report_format.vocabulary import Layer, MemoryCategory

#: A hint fires when exchange code is more than this share of all memory (an [I] threshold).
EXCHANGE_CODE_SHARE = 0.15
#: ... when the fullest tile holds more than this multiple of the mean tile.
MEMORY_IMBALANCE = 2.0
#: ... when the tile balance over all runs (app.views.runs, as Summary shows it) is below this.
LOW_TILE_BALANCE = 0.5
#: ... when stream copies (host I/O) take more than this share of the opening run's cycles.
STREAM_COPY_SHARE = 0.3
#: ... when one variable holds more than this share of the peak's not-always-live bytes, and the
#: peak is more than PEAK_MEMORY_SHARE of all tile memory (a small peak is not worth a sentence).
PEAK_VARIABLE_SHARE = 0.5
PEAK_MEMORY_SHARE = 0.1
#: ... when an IPU computes for less than this share of what the busiest IPU does in the run.
IDLE_IPU_SHARE = 0.05
# a pipeline stage busy this many times the median stage's cycles a micro-batch sets the pipeline's pace
# (every other stage waits for it once a micro-batch)
SLOW_STAGE_RATIO = 1.25
# the IPUs' mean compute share of the run below which a pipeline's idle time is worth a sentence
LOW_PIPELINE_UTILISATION = 0.5
#: ... when an operation takes at least this share of the computing run's cycles (Operations page
#: figures) and reaches less than LOW_EFFICIENCY of its class's reference (app.views.efficiency:
#: the target's peak for AMP classes, else the class's best operation); at most MAX_SLOW_OPERATIONS
#: are named, those with the most cycles first.
SLOW_OPERATION_SHARE = 0.02
LOW_EFFICIENCY = 0.25
MAX_SLOW_OPERATIONS = 3
#: A receive buffer's name ends so (report_format/SPEC.md, variables: ``<compute set>/received``).
RECEIVED_SUFFIX = "/received"


@dataclass(frozen=True)
class Insight:
    """A hint, and the changes of run options that answer it (none when no option does)."""

    text: str
    proposals: tuple[Proposal, ...] = ()


def _insight(text: str, *proposals: Proposal | None) -> Insight:
    return Insight(text, tuple(p for p in proposals if p is not None))


#: The columns of ``top_tiles`` that hold bytes.
TOP_TILES_BYTES = ("bytes", "always_live", "not_always_live")


def top_tiles(report: Report, n: int = 10) -> pd.DataFrame:
    tm = report.tile_memory()
    bpt = report.target_info.bytes_per_tile
    top = tm.nlargest(n, "total_bytes_including_gaps")
    return pd.DataFrame(
        {
            "tile": top["tile"],
            "ipu": top["ipu"],
            "bytes": top["total_bytes_including_gaps"],
            "percent_of_tile": (100 * top["total_bytes_including_gaps"] / bpt).round(1),
            "always_live": top["always_live_bytes"],
            "not_always_live": top["not_always_live_bytes"],
        }
    ).reset_index(drop=True)


def over_memory_tiles(report: Report) -> pd.DataFrame:
    tm = report.tile_memory()
    bpt = report.target_info.bytes_per_tile
    oom = tm[(tm["total_bytes_including_gaps"] > bpt) | (tm["overflowed_bytes"] > 0)]
    return (
        oom[["tile", "ipu", "total_bytes_including_gaps", "overflowed_bytes"]]
        .sort_values("total_bytes_including_gaps", ascending=False)
        .reset_index(drop=True)
    )


@lru_cache(maxsize=8)  # per report: a group-by over every vertex (~0.3 s on ResNet-50); callers only read it
def top_vertices(report: Report, n: int = 10) -> pd.DataFrame:
    """Codelets with the most memory: vertex state summed over tiles plus code on each tile using it."""
    v = report.table("vertices", ["tile", "codelet_id", "count", "state_bytes"]).to_pandas()
    cod = report.codelets().set_index("codelet_id")
    if v.empty:
        return pd.DataFrame(columns=["name", "count", "state_bytes", "code_bytes", "bytes"])
    g = sums_and_tiles(
        v["codelet_id"].to_numpy(),
        v["tile"].to_numpy(),
        sums={"count": v["count"].to_numpy(), "state_bytes": v["state_bytes"].to_numpy()},
        index_name="codelet_id",
    )
    g["code_bytes"] = cod["code_bytes"].reindex(g.index).to_numpy() * g["tiles"]
    g["bytes"] = g["state_bytes"] + g["code_bytes"]
    g.insert(0, "name", cod["name"].reindex(g.index).to_numpy())
    return g.nlargest(n, "bytes").reset_index(drop=True)[["name", "count", "state_bytes", "code_bytes", "bytes"]]


@lru_cache(maxsize=8)  # per report: a group-by over every exchange (~0.5 s on ResNet-50); callers only read it
def top_exchanges(report: Report, n: int = 10) -> pd.DataFrame:
    x = report.table("exchanges", ["program_id", "tile", "bytes_in", "bytes_out", "code_bytes"]).to_pandas()
    if x.empty:
        return pd.DataFrame(columns=["program_id", "type", "name", "code_bytes", "bytes_in", "bytes_out", "tiles"])
    g = sums_and_tiles(
        x["program_id"].to_numpy(),
        x["tile"].to_numpy(),
        sums={c: x[c].to_numpy() for c in ("code_bytes", "bytes_in", "bytes_out")},
        index_name="program_id",
    )
    p = report.programs().set_index("program_id")
    g.insert(0, "name", p["name"].reindex(g.index).to_numpy())
    g.insert(0, "type", p["type"].reindex(g.index).to_numpy())
    return g.nlargest(n, "code_bytes").reset_index()


def hints(report: Report) -> list[str]:
    """Plain sentences, each tied to a number in the report."""
    return [i.text for i in insights(report)]


def proposals(report: Report) -> list[Proposal]:
    """Every insight's proposals in order: ``tilescope whatif REPORT --apply N`` applies the N-th (from 1)."""
    return [p for i in insights(report) for p in i.proposals]


def insights(report: Report) -> list[Insight]:
    """The hints, each with the what-if proposals that answer it."""
    return list(_insights(report))


@lru_cache(maxsize=8)  # per report (the tables it reads never change while a report is open)
def _insights(report: Report) -> tuple[Insight, ...]:
    return tuple(_insight_list(report))


def _insight_list(report: Report) -> list[Insight]:
    out: list[Insight] = []
    tm = report.tile_memory()
    bpt = report.target_info.bytes_per_tile
    incl = tm["total_bytes_including_gaps"].to_numpy()
    if incl.size == 0:
        return [Insight("The report holds no tile memory.")]
    oom = over_memory_tiles(report)
    if len(oom):
        worst = oom.iloc[0]
        text = (
            f"{len(oom):,} tiles are out of memory; the worst, tile {int(worst['tile'])}, needs "
            f"{format_bytes(worst['total_bytes_including_gaps'])} of {format_bytes(bpt)}."
        )
        over = over_capacity(int(incl.sum()), bpt, incl.size, report.target_info.tiles_per_ipu)
        if over:  # no memory proportion can make it fit: not proposed
            text += f" {over[0].upper()}{over[1:]}."
            out.append(_insight(text, more_ipus(report, text)))
        else:
            out.append(_insight(text, lower_memory_proportion(report, text), more_ipus(report, text)))
    else:
        bound = _peak_memory_bound(report)
        if bound:
            out.append(_insight(bound, lower_memory_proportion(report, bound), more_ipus(report, bound)))
    cat = report.table("tile_memory_by_category", ["category", "bytes"]).to_pandas()
    total = cat["bytes"].sum()
    if total:
        exch = cat.loc[
            cat["category"].isin(
                [
                    MemoryCategory.INTERNAL_EXCHANGE_CODE,
                    MemoryCategory.GLOBAL_EXCHANGE_CODE,
                    MemoryCategory.HOST_EXCHANGE_CODE,
                ]
            ),
            "bytes",
        ].sum()
        if exch / total > EXCHANGE_CODE_SHARE:
            out.append(
                Insight(
                    f"Exchange code is {100 * exch / total:.0f}% of all memory ({format_bytes(exch)}): consider "
                    "fewer, larger exchanges (e.g. re-mapping tensors so producers and consumers share tiles)."
                )
            )
    mean = incl.mean()
    if mean and incl.max() > MEMORY_IMBALANCE * mean:
        t = int(tm["tile"].to_numpy()[incl.argmax()])
        out.append(
            Insight(
                f"Memory is unbalanced: tile {t} holds {format_bytes(incl.max())}, {incl.max() / mean:.1f}x the "
                f"mean tile ({format_bytes(mean)}); spreading its variables would lower the peak."
            )
        )
    gaps = (tm["total_bytes_including_gaps"] - tm["total_bytes_excluding_gaps"]).to_numpy()
    if incl.sum() and gaps.sum() / incl.sum() > 0.05:
        out.append(Insight(f"Gaps between allocations are {100 * gaps.sum() / incl.sum():.0f}% of memory."))
    bal = overall(report, "tile_balance")  # the figure Summary and Execution Trace show
    if bal is not None and bal < LOW_TILE_BALANCE:
        out.append(
            Insight(
                f"Low tile balance: {format_percent(bal)} over all runs (cycle-weighted, Sync steps left out); "
                "the slowest tile sets each step's length."
            )
        )
    out += execution_insights(report)
    if not out:
        out.append(Insight("No memory or balance problems stand out."))
    return out


def execution_hints(report: Report) -> list[str]:
    """The execution insights' sentences."""
    return [i.text for i in execution_insights(report)]


def execution_insights(report: Report) -> list[Insight]:
    """Hints on the run the report leads with (the opening run: the one that computes), on the
    liveness peak and on the IPUs: host I/O bound steps, one buffer making the peak, an idle IPU."""
    out: list[Insight] = []
    peak = liveness_summary(report)
    t = report.target_info
    if (
        peak["peak_step"] >= 0
        and peak["peak_not_always_live_bytes"] > PEAK_MEMORY_SHARE * t.bytes_per_tile * t.num_tiles
    ):
        live = live_variables(report, peak["peak_step"])
        if len(live) and live["bytes"].iat[0] > PEAK_VARIABLE_SHARE * peak["peak_not_always_live_bytes"]:
            top = live.iloc[0]
            name = str(top["name"])
            node = _onnx_node(report, int(top["variable_id"]))
            of_node = f"ONNX node {node}; " if node else ""
            what = (
                f"{name}, the receive buffer of compute set {name[: -len(RECEIVED_SUFFIX)]} ({of_node}what its "
                "tiles receive from other tiles before it runs),"
                if name.endswith(RECEIVED_SUFFIX)
                else name + (f" (ONNX node {node})" if node else "")
            )
            out.append(
                Insight(
                    f"One variable makes the liveness peak: {what} holds {format_bytes(top['bytes'])} of the "
                    f"{format_bytes(peak['peak_not_always_live_bytes'])} live at step {peak['peak_step']} "
                    f"({top['bytes'] / peak['peak_not_always_live_bytes']:.0%}); the peak falls with it."
                )
            )
    if not report.has_execution_profile or report.num_rows("execution_steps") == 0:
        return out
    run = opening_run(report)
    steps = trace_steps(report, run)
    total = float(steps["cycles"].sum())
    copies = float(steps.loc[steps["type"].astype(str).str.startswith("StreamCopy"), "cycles"].sum())
    if total and copies / total > STREAM_COPY_SHARE:
        text = (
            f"Host I/O bound: stream copies take {copies / total:.0%} of run {run}'s cycles (summed over IPUs); "
            "more samples a run, or I/O overlapped with compute, would spread that cost."
        )
        out.append(_insight(text, bigger_batch(report, text)))
    ex = ipu_execution(report, run)
    if len(ex) > 1 and ex["compute_cycles"].max() > 0:
        busiest = ex["compute_cycles"].max()
        cols = (ex[c].to_numpy() for c in ("ipu", "compute_cycles", "utilisation"))
        for ipu, compute, util in zip(*cols, strict=True):
            if compute < IDLE_IPU_SHARE * busiest:
                text = (
                    f"IPU {ipu} is nearly idle: it computes {format_percent(float(util))} of run {run} "
                    f"(the busiest IPU: {format_percent(ex['utilisation'].max())}); the model's split leaves it "
                    "little to do."
                )
                out.append(_insight(text, compute_split(report, text)))
    out += pipeline_insights(report, run)
    out += slow_operation_insights(report, run)
    return out


def pipeline_insights(report: Report, run: int) -> list[Insight]:
    """Each pipeline whose slowest stage sets its pace or whose IPUs mostly wait: the stage, its busy
    cycles a micro-batch against the median stage's, and the part of the wait that filling and draining
    S stages over M micro-batches explains, (S - 1) / (M + S - 1) of the run."""
    stages = report.pipeline_stages()
    if not len(stages):
        return []
    ex = ipu_execution(report, run)
    util = ex.set_index("ipu")["utilisation"] if len(ex) else None
    out = []
    for _, pipe in stages.groupby("program_id", sort=True):
        busy = pipe["busy_cycles"].to_numpy(dtype=np.float64)
        ipus = pipe["ipu"].to_numpy()
        slowest, median = int(np.argmax(busy)), float(np.median(busy))
        mean_util = float(util.reindex(np.unique(ipus)).fillna(0).mean()) if util is not None else 1.0
        slow = median > 0 and busy[slowest] > SLOW_STAGE_RATIO * median
        if not (slow or mean_util < LOW_PIPELINE_UTILISATION):
            continue
        s, m = len(pipe), int(pipe["micro_batches"].iat[0])
        text = (
            f"The pipeline's {s} IPUs compute {format_percent(mean_util)} of run {run} on average. "
            f"Filling and draining {plural(s, 'stage')} over {plural(m, 'micro-batch', 'micro-batches')} explains at most "
            f"{format_percent((s - 1) / (m + s - 1))} of idle time ((S - 1) / (M + S - 1)); more micro-batches a run "
            "shrink that part."
        )
        if slow:
            text += (
                f" Stage {int(pipe['stage'].iat[slowest])} (IPU {int(ipus[slowest])}) sets the pace: busy "
                f"{format_count(busy[slowest])} cycles a micro-batch, {busy[slowest] / median:.1f}x the median stage's "
                f"{format_count(median)}, so the other stages wait for it; moving work off it balances the pipeline."
            )
        out.append(Insight(text))
    return out


def slow_operation_insights(report: Report, run: int) -> list[Insight]:
    """Operations that take a meaningful share of the run yet run far below their class's reference."""
    eff = operation_efficiency(report, run)
    slow = eff[(eff["share"] >= SLOW_OPERATION_SHARE) & (eff["efficiency"] < LOW_EFFICIENCY)]
    out = []
    for r in slow.head(MAX_SLOW_OPERATIONS).to_dict("records"):
        kind, ref, op_type = str(r["reference_kind"]), float(r["reference"]), str(r["op_type"])
        name = f"{r['model_name']} ({r['name']}, {op_type})" if r["model_name"] else f"{r['name']} ({op_type})"
        against = (
            f"the {report.target_info.name}'s {kind} of {ref:,.0f} FLOP/cycle"
            if kind.endswith("peak")
            else f"the best {op_type} operation's {ref:,.1f} FLOP/cycle"
        )
        out.append(
            Insight(
                f"Operation far below its class: {name} takes {float(r['share']):.1%} of run {run}'s cycles "
                f"({int(r['cycles']):,}) at {float(r['flops_per_cycle']):,.1f} FLOP/cycle on "
                f"{plural(int(r['tiles']), 'tile')}, {_share(float(r['efficiency']))} of {against}."
            )
        )
    return out


def _onnx_node(report: Report, variable_id: int) -> str:
    """The name of the ONNX node whose debug context encloses the variable's, or ''."""
    var = report.variables()
    ctx = var.loc[var["variable_id"] == variable_id, "debug_context_id"].to_numpy()
    if not len(ctx) or ctx[0] < 0 or not len(report.debug_contexts()):
        return ""
    node = int(_map(ctx, op_of_context(report, Layer.ONNX))[0])
    dc = report.debug_contexts().set_index("debug_context_id")
    return str(dc["name"].get(node, "")) if node >= 0 else ""


def _share(x: float) -> str:
    """A fraction as a percentage, with a decimal below 10 % (so 0.3 % does not read as 0 %)."""
    return f"{x:.1%}" if x < 0.1 else f"{x:.0%}"


def _peak_memory_bound(report: Report) -> str:
    """A sentence when the fullest tile could not hold a second batch: its always-live bytes plus
    twice its not-always-live bytes (the variables that grow with the batch) exceed the tile.
    "" otherwise."""
    tm = report.tile_memory()
    bpt = report.target_info.bytes_per_tile
    i = int(tm["total_bytes_including_gaps"].to_numpy().argmax())
    tile, total = int(tm["tile"].to_numpy()[i]), int(tm["total_bytes_including_gaps"].to_numpy()[i])
    always, varying = int(tm["always_live_bytes"].to_numpy()[i]), int(tm["not_always_live_bytes"].to_numpy()[i])
    if not varying or always + 2 * varying <= bpt:
        return ""
    return (
        f"Peak-memory bound: the fullest tile, {tile}, holds {format_bytes(total)} "
        f"of {format_bytes(bpt)} ({format_bytes(varying)} of it not always live); twice that would not fit, so a "
        "bigger batch needs the memory back first."
    )
