"""The summary view: headline figures of one report.

Shared by ``tilescope summary``, the viewer's Summary page and ``tilescope diff``; the keys of
``summary()`` (flattened with dots) are a public contract other tools and CI rely on.
Reads only small tables (target, tile_memory, liveness, runs, counts from the manifest), so it
is fast on any report size.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import numpy as np
import pandas as pd

from app.views.ipus import multi_ipu_summary
from app.views.runs import computing_runs, longest_run, opening_run, overall, run_table
from report_format.errors import ReportError
from report_format.reader import Report

#: Keys `tilescope summary --json` always has (flattened), promised in the foundation issue.
REQUIRED_KEYS: tuple[str, ...] = (
    "format_version",
    "target.name",
    "target.num_ipus",
    "target.tiles_per_ipu",
    "target.bytes_per_tile",
    "target.clock_hz",
    "memory.total_bytes_including_gaps",
    "memory.total_bytes_excluding_gaps",
    "memory.max_tile_bytes",
    "memory.out_of_memory_tiles",
    "liveness.peak_not_always_live_bytes",
    "liveness.peak_step",
    "execution.total_cycles",
    "execution.total_flops",
    "execution.runs",
)


def memory_summary(report: Report) -> dict[str, Any]:
    """Totals over tiles; max_tile_bytes and out-of-memory use bytes *including* gaps (what a tile needs)."""
    tm = report.table(
        "tile_memory",
        [
            "tile",
            "total_bytes_including_gaps",
            "total_bytes_excluding_gaps",
            "always_live_bytes",
            "not_always_live_bytes",
            "overflowed_bytes",
        ],
    )
    bytes_per_tile = report.target_info.bytes_per_tile
    incl = tm["total_bytes_including_gaps"].to_numpy()
    if incl.size == 0:
        return {
            "total_bytes_including_gaps": 0,
            "total_bytes_excluding_gaps": 0,
            "always_live_bytes": 0,
            "not_always_live_bytes": 0,
            "max_tile_bytes": 0,
            "max_tile": -1,
            "tile_balance": 0.0,
            "out_of_memory_tiles": 0,
            "bytes_per_tile": bytes_per_tile,
        }
    worst = int(np.argmax(incl))
    peak = int(incl[worst])
    oom = (incl > bytes_per_tile) | (tm["overflowed_bytes"].to_numpy() > 0)
    return {
        "total_bytes_including_gaps": int(incl.sum()),
        "total_bytes_excluding_gaps": int(tm["total_bytes_excluding_gaps"].to_numpy().sum()),
        "always_live_bytes": int(tm["always_live_bytes"].to_numpy().sum()),
        "not_always_live_bytes": int(tm["not_always_live_bytes"].to_numpy().sum()),
        "max_tile_bytes": peak,
        # how evenly memory is spread: mean over max of the tiles' bytes including gaps
        "tile_balance": float(incl.mean() / peak) if peak > 0 else 0.0,
        "max_tile": int(tm["tile"].to_numpy()[worst]),
        "out_of_memory_tiles": int(oom.sum()),
        "bytes_per_tile": bytes_per_tile,
    }


def liveness_summary(report: Report) -> dict[str, Any]:
    """Peak of not-always-live bytes summed over IPUs, and the program step where it happens."""
    lv = report.table("liveness")
    if lv.num_rows == 0:
        return {"peak_not_always_live_bytes": 0, "peak_step": -1, "program_steps": 0}
    steps = lv["step"].to_numpy()
    per_step = np.bincount(steps, weights=lv["not_always_live_bytes"].to_numpy().astype(np.float64))
    peak = int(np.argmax(per_step))
    return {
        "peak_not_always_live_bytes": int(per_step[peak]),
        "peak_step": peak,
        "program_steps": int(per_step.size),
    }


def execution_summary(report: Report, run: int | None = None) -> dict[str, Any]:
    """Totals over captured runs (``total_cycles`` sums the runs' cycles), or over run ``run``
    alone (``only_run``); the per-run figures and tile balance as ``app.views.runs`` defines them
    (None without an execution profile). A ``run`` the report does not have is a ReportError."""
    runs = run_table(report)
    captured = report.has_execution_profile
    clock = report.target_info.clock_hz
    counted = runs
    if run is not None:
        counted = runs[runs["run"] == run]
        if counted.empty:
            raise ReportError(report.path, f"no run {run} in this report (runs: {runs['run'].tolist()})")
    total_cycles = int(counted["cycles"].sum())

    def maybe(values: Any) -> list[float | None]:
        return [None if np.isnan(v) else float(v) for v in values]

    def weighted(figure: str) -> float | None:
        return overall(report, figure) if run is None else maybe(counted[figure])[0]

    return {
        "captured": captured,
        # the runs' cycles are a compile-only profile's estimates, not simulated (app.views.provenance)
        "estimated": bool(captured and report.estimated_runs),
        "runs": len(runs),
        "only_run": run,
        "total_cycles": total_cycles,
        "total_flops": int(counted["flops"].sum()),
        "cycles_per_run": [int(c) for c in runs["cycles"]],
        "flops_per_run": [int(f) for f in runs["flops"]],
        "steps_per_run": [int(s) for s in runs["steps"]],
        "tile_balance": weighted("tile_balance"),
        "tile_balance_per_run": maybe(runs["tile_balance"]),
        "tile_utilisation": weighted("tile_utilisation"),
        "longest_run": longest_run(report),
        "opening_run": opening_run(report),
        "total_seconds": total_cycles / clock if clock else 0.0,
        "headline": headline(report, runs) if captured and len(runs) else None,
    }


def headline(report: Report, runs: pd.DataFrame | None = None) -> dict[str, Any]:
    """The figures a report leads with: those of its opening run (the longest that computes, as
    ``tilescope run`` measures a model's), and apart from it the runs that only move data (an ONNX
    model's one-off weight upload), which would otherwise bury the inference in the totals."""
    runs = run_table(report) if runs is None else runs
    run = opening_run(report)
    row = runs[runs["run"] == run].iloc[0]
    others = runs[~runs["run"].isin(computing_runs(report)) & (runs["run"] != run)]
    clock = report.target_info.clock_hz
    tb = float(row["tile_balance"])
    return {
        "run": run,
        "name": str(row["name"]),
        "cycles": int(row["cycles"]),
        "flops": int(row["flops"]),
        "seconds": int(row["cycles"]) / clock if clock else 0.0,
        "tile_balance": None if np.isnan(tb) else tb,
        "data_only_runs": [int(r) for r in others["run"]],
        "data_only_cycles": int(others["cycles"].sum()),
    }


def graph_summary(report: Report) -> dict[str, Any]:
    # compute_sets.vertices sums to vertices.count and is a few rows, not millions
    vertices = report.table("compute_sets", ["vertices"])["vertices"].to_numpy()
    programs = report.table("programs", ["step"])["step"].to_numpy()
    return {
        "variables": report.num_rows("variables"),
        "compute_sets": report.num_rows("compute_sets"),
        "vertices": int(vertices.sum()),
        "codelets": report.num_rows("codelets"),
        "program_steps": int((programs >= 0).sum()),
        "programs": int(programs.size),
    }


# Notes compared pair by pair for containment at most: a manifest with thousands of notes (10,000
# took 41 s) only loses its exact repeats.
MAX_COMPARED_NOTES = 256


def distinct_notes(notes: list[str]) -> list[str]:
    """The report's notes without repeats: a note another note already contains says nothing new
    (an out-of-memory report notes the error, and again why the execution profile is missing)."""
    unique = list(dict.fromkeys(n.strip() for n in notes))  # exact repeats, in order
    if len(unique) > MAX_COMPARED_NOTES:
        return unique
    return [text for i, text in enumerate(unique) if not any(text in o for j, o in enumerate(unique) if j != i)]


def summary(report: Report, run: int | None = None) -> dict[str, Any]:
    """Every headline figure of a report as a nested dict (JSON-ready); with ``run``, the execution
    totals (cycles, FLOPs, tile balance and utilisation, seconds) are of that run alone."""
    target = asdict(report.target_info)
    truncs = report.table("truncations").to_pylist()
    return {
        "format_version": report.format_version,
        "report": str(report.path),
        "engine": report.manifest.engine,
        "producer": report.manifest.producer,
        "created": report.manifest.created,
        "profiles": report.profiles,
        "notes": distinct_notes(report.notes),
        "target": target,
        "graph": graph_summary(report),
        "memory": memory_summary(report),
        "liveness": liveness_summary(report),
        "execution": execution_summary(report, run),
        "multi_ipu": multi_ipu_summary(report),
        "truncations": truncs,
    }


def flatten(doc: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``; lists stay values."""
    out: dict[str, Any] = {}
    for k, v in doc.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out
