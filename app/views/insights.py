"""The insights view: where memory goes (top tiles, vertices, exchanges), out-of-memory tiles,
and plain-language hints."""

from __future__ import annotations

from functools import lru_cache

import pandas as pd

from app.units import format_bytes, format_percent
from app.views.execution_trace import trace_steps
from app.views.ipus import ipu_execution
from app.views.liveness import live_variables
from app.views.runs import opening_run, overall
from app.views.summary import liveness_summary
from report_format.reader import Report
from report_format.vocabulary import MemoryCategory

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
    g = v.groupby("codelet_id").agg(
        count=("count", "sum"), state_bytes=("state_bytes", "sum"), tiles=("tile", "nunique")
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
    g = x.groupby("program_id").agg(
        code_bytes=("code_bytes", "sum"),
        bytes_in=("bytes_in", "sum"),
        bytes_out=("bytes_out", "sum"),
        tiles=("tile", "nunique"),
    )
    p = report.programs().set_index("program_id")
    g.insert(0, "name", p["name"].reindex(g.index).to_numpy())
    g.insert(0, "type", p["type"].reindex(g.index).to_numpy())
    return g.nlargest(n, "code_bytes").reset_index()


def hints(report: Report) -> list[str]:
    """Plain sentences, each tied to a number in the report."""
    return list(_hints(report))


@lru_cache(maxsize=8)  # per report (the tables it reads never change while a report is open)
def _hints(report: Report) -> tuple[str, ...]:
    return tuple(_hint_list(report))


def _hint_list(report: Report) -> list[str]:
    out: list[str] = []
    tm = report.tile_memory()
    bpt = report.target_info.bytes_per_tile
    incl = tm["total_bytes_including_gaps"].to_numpy()
    if incl.size == 0:
        return ["The report holds no tile memory."]
    oom = over_memory_tiles(report)
    if len(oom):
        worst = oom.iloc[0]
        out.append(
            f"{len(oom):,} tiles are out of memory; the worst, tile {int(worst['tile'])}, needs "
            f"{format_bytes(worst['total_bytes_including_gaps'])} of {format_bytes(bpt)}."
        )
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
                f"Exchange code is {100 * exch / total:.0f}% of all memory ({format_bytes(exch)}): consider "
                "fewer, larger exchanges (e.g. re-mapping tensors so producers and consumers share tiles)."
            )
    mean = incl.mean()
    if mean and incl.max() > MEMORY_IMBALANCE * mean:
        t = int(tm["tile"].to_numpy()[incl.argmax()])
        out.append(
            f"Memory is unbalanced: tile {t} holds {format_bytes(incl.max())}, {incl.max() / mean:.1f}x the "
            f"mean tile ({format_bytes(mean)}); spreading its variables would lower the peak."
        )
    gaps = (tm["total_bytes_including_gaps"] - tm["total_bytes_excluding_gaps"]).to_numpy()
    if incl.sum() and gaps.sum() / incl.sum() > 0.05:
        out.append(f"Gaps between allocations are {100 * gaps.sum() / incl.sum():.0f}% of memory.")
    bal = overall(report, "tile_balance")  # the figure Summary and Execution Trace show
    if bal is not None and bal < LOW_TILE_BALANCE:
        out.append(
            f"Low tile balance: {format_percent(bal)} over all runs (cycle-weighted, Sync steps left out); "
            "the slowest tile sets each step's length."
        )
    out += execution_hints(report)
    if not out:
        out.append("No memory or balance problems stand out.")
    return out


def execution_hints(report: Report) -> list[str]:
    """Hints on the run the report leads with (the opening run: the one that computes), on the
    liveness peak and on the IPUs: host I/O bound steps, one buffer making the peak, an idle IPU."""
    out: list[str] = []
    peak = liveness_summary(report)
    t = report.target_info
    if (
        peak["peak_step"] >= 0
        and peak["peak_not_always_live_bytes"] > PEAK_MEMORY_SHARE * t.bytes_per_tile * t.num_tiles
    ):
        live = live_variables(report, peak["peak_step"])
        if len(live) and live["bytes"].iat[0] > PEAK_VARIABLE_SHARE * peak["peak_not_always_live_bytes"]:
            top = live.iloc[0]
            out.append(
                f"One variable makes the liveness peak: {top['name']} holds {format_bytes(top['bytes'])} of the "
                f"{format_bytes(peak['peak_not_always_live_bytes'])} live at step {peak['peak_step']} "
                f"({top['bytes'] / peak['peak_not_always_live_bytes']:.0%}); the peak falls with it."
            )
    if not report.has_execution_profile or report.num_rows("execution_steps") == 0:
        return out
    run = opening_run(report)
    steps = trace_steps(report, run)
    total = float(steps["cycles"].sum())
    copies = float(steps.loc[steps["type"].astype(str).str.startswith("StreamCopy"), "cycles"].sum())
    if total and copies / total > STREAM_COPY_SHARE:
        out.append(
            f"Host I/O bound: stream copies take {copies / total:.0%} of run {run}'s cycles (summed over IPUs); "
            "more samples a run, or I/O overlapped with compute, would spread that cost."
        )
    ex = ipu_execution(report, run)
    if len(ex) > 1 and ex["compute_cycles"].max() > 0:
        busiest = ex["compute_cycles"].max()
        for r in ex.itertuples():
            if r.compute_cycles < IDLE_IPU_SHARE * busiest:
                out.append(
                    f"IPU {r.ipu} is nearly idle: it computes {format_percent(r.utilisation)} of run {run} "
                    f"(the busiest IPU: {format_percent(ex['utilisation'].max())}); the model's split leaves it "
                    "little to do."
                )
    return out
