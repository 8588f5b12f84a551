"""The execution trace as Chrome trace events (JSON), for Perfetto or chrome://tracing.

One process per IPU; thread 0 is the BSP step timeline of that IPU (one complete "X" event per
executed step, coloured by step type), and optionally one thread per chosen tile with that tile's
busy time in each step. Timestamps are microseconds at the target clock (Perfetto's unit), so a
step of ``c`` cycles lasts ``c / clock_hz * 1e6`` µs; the cycles themselves are in ``args``.
Built with vectorised pandas/numpy; the per-tile threads read only the tiles asked for.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from report_format.reader import Report
from report_format.vocabulary import StepType

#: Chrome trace-viewer reserved colour names, by step type (compute / exchange / sync / stream copy).
_COLOURS = {
    StepType.ON_TILE_EXECUTE: "thread_state_running",
    StepType.DO_EXCHANGE: "thread_state_iowait",
    StepType.GLOBAL_EXCHANGE: "terrible",
    StepType.SYNC: "grey",
    StepType.STREAM_COPY_BEGIN: "rail_load",
    StepType.STREAM_COPY_MID: "rail_load",
    StepType.STREAM_COPY_END: "rail_load",
}


def report_to_trace_events(report: Report, run: int = 0, tiles: list[int] | None = None) -> dict[str, Any]:
    """Trace-event JSON object for one run (``{"traceEvents": [...], "displayTimeUnit": "ns"}``)."""
    target = report.target_info
    runs = report.runs()
    if run not in set(runs["run"].tolist()):
        from report_format.errors import ReportError

        raise ReportError(report.path, f"no run {run} in this report (runs: {runs['run'].tolist()})")
    us_per_cycle = 1e6 / target.clock_hz
    steps = report.execution_steps(run)
    programs = report.programs().set_index("program_id")[["type", "name"]]
    steps = steps.join(programs, on="program_id")
    events: list[dict[str, Any]] = []
    for ipu in range(target.num_ipus):
        events.append({"ph": "M", "name": "process_name", "pid": ipu, "args": {"name": f"IPU {ipu}"}})
        events.append({"ph": "M", "name": "thread_name", "pid": ipu, "tid": 0, "args": {"name": "steps (BSP)"}})
    if len(steps):
        ts = steps["cycles_from"].to_numpy() * us_per_cycle
        dur = (steps["cycles_to"] - steps["cycles_from"]).to_numpy() * us_per_cycle
        frame = pd.DataFrame(
            {
                "ph": "X",
                "name": steps["name"].where(steps["name"] != "", steps["type"]),
                "cat": steps["type"],
                "pid": steps["ipu"],
                "tid": 0,
                "ts": ts,
                "dur": dur,
                "cname": steps["type"].map(_COLOURS).fillna("generic_work"),
            }
        )
        args = steps[["step", "cycles_from", "cycles_to", "active_tiles", "tile_balance", "flops"]]
        records = frame.to_dict("records")
        for rec, a in zip(records, args.to_dict("records"), strict=True):
            rec["args"] = a
        events.extend(records)
    if tiles:
        events.extend(_tile_events(report, run, steps, sorted(set(tiles)), us_per_cycle))
    return {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {"report": str(report.path), "run": run, "target": target.name, "clock_hz": target.clock_hz},
    }


def _tile_events(report: Report, run: int, steps: pd.DataFrame, tiles: list[int], us_per_cycle: float) -> list[dict]:
    target = report.target_info
    bad = [t for t in tiles if not 0 <= t < target.num_tiles]
    if bad:
        from report_format.errors import ReportError

        raise ReportError(report.path, f"tiles {bad} do not exist (the target has {target.num_tiles})")
    n_steps = int(steps["step"].max()) + 1 if len(steps) else 0
    cycles = report.tile_cycles_range(run, 0, n_steps)  # (steps, ipus, tiles_per_ipu)
    tiles_arr = np.array(tiles)
    ipu, local = tiles_arr // target.tiles_per_ipu, tiles_arr % target.tiles_per_ipu
    busy = cycles[:, ipu, local]  # (steps, chosen tiles)
    start = steps.pivot_table(index="step", columns="ipu", values="cycles_from").to_numpy()[:, ipu]
    names = steps.drop_duplicates("step").set_index("step")["name"].reindex(range(n_steps)).fillna("").to_numpy()
    out: list[dict] = []
    for j, tile in enumerate(tiles):
        out.append(
            {"ph": "M", "name": "thread_name", "pid": int(ipu[j]), "tid": 1 + tile, "args": {"name": f"tile {tile}"}}
        )
        nz = np.flatnonzero(busy[:, j])
        out.extend(
            {
                "ph": "X",
                "name": str(names[s]),
                "pid": int(ipu[j]),
                "tid": 1 + tile,
                "ts": float(start[s, j] * us_per_cycle),
                "dur": float(busy[s, j] * us_per_cycle),
                "args": {"step": int(s), "cycles": int(busy[s, j])},
            }
            for s in nz
        )
    return out
