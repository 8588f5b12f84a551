"""Per-IPU views: memory and execution of each IPU, replication and pipeline stages.

Figures are the report's (one replica's IPUs, see report_format SPEC ``target.num_ipus``); a tile's
IPU is ``tile // tiles_per_ipu``. Global exchange is the GlobalExchange steps' bytes (inter-IPU
exchange over IPU-Links, including cross-replica all-reduces).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

from report_format.reader import Report
from report_format.vocabulary import StepType

from .runs import opening_run

ALL_IPUS = -1  # the IPU selector's "all IPUs" choice


def ipu_choices(report: Report) -> list[dict[str, Any]]:
    """Options of an IPU selector: all IPUs, then each IPU of the report."""
    n = report.target_info.num_ipus
    return [{"label": "All IPUs", "value": ALL_IPUS}] + [{"label": f"IPU {i}", "value": i} for i in range(n)]


def selected_ipu(value: object) -> int:
    """An IPU selector's value as an IPU id, ALL_IPUS for "All IPUs" (or nothing chosen)."""
    return ALL_IPUS if value in (None, "") else int(value)  # type: ignore[call-overload]


def tiles_of_ipu(df: pd.DataFrame, report: Report, ipu: int | None) -> pd.DataFrame:
    """Rows of a per-tile frame (index: tile id) on ``ipu``; all rows for ALL_IPUS or None."""
    if ipu is None or int(ipu) == ALL_IPUS:
        return df
    return df[df.index.to_numpy() // report.target_info.tiles_per_ipu == int(ipu)]


def ipu_memory(report: Report) -> pd.DataFrame:
    """One row per IPU: total bytes (including and excluding gaps), fullest tile, out-of-memory tiles."""
    t = report.target_info
    tm = report.table("tile_memory", ["tile", "total_bytes_including_gaps", "total_bytes_excluding_gaps",
                                      "overflowed_bytes"]).to_pandas()  # fmt: skip
    if tm.empty:
        return pd.DataFrame(columns=["ipu", "bytes_including_gaps", "bytes_excluding_gaps", "fullest_tile",
                                     "fullest_tile_bytes", "out_of_memory_tiles"])  # fmt: skip
    tm["ipu"] = tm["tile"] // t.tiles_per_ipu
    tm["oom"] = (tm["total_bytes_including_gaps"] > t.bytes_per_tile) | (tm["overflowed_bytes"] > 0)
    rows = []
    for ipu, d in tm.groupby("ipu", sort=True):
        worst = int(d["total_bytes_including_gaps"].to_numpy().argmax())
        rows.append({
            "ipu": int(ipu),
            "bytes_including_gaps": int(d["total_bytes_including_gaps"].sum()),
            "bytes_excluding_gaps": int(d["total_bytes_excluding_gaps"].sum()),
            "fullest_tile": int(d["tile"].to_numpy()[worst]),
            "fullest_tile_bytes": int(d["total_bytes_including_gaps"].to_numpy()[worst]),
            "out_of_memory_tiles": int(d["oom"].sum()),
        })  # fmt: skip
    return pd.DataFrame(rows)


def ipu_execution(report: Report, run: int | None = None) -> pd.DataFrame:
    """One row per IPU over run ``run`` (default: the opening run, the one that computes, as
    ``tilescope run`` measures its utilisation; a one-off weight upload would bury it): cycles in
    compute steps and their share of the run's cycles (utilisation), and bytes the IPU sent and
    received by global exchange."""
    run = opening_run(report) if run is None else run
    return _ipu_execution(report, int(run)).copy()


@lru_cache(maxsize=16)  # Summary, Insights and the trace all ask; a POD16 run has millions of step rows
def _ipu_execution(report: Report, run: int) -> pd.DataFrame:
    n = report.target_info.num_ipus
    cols = ["ipu", "compute_cycles", "utilisation", "global_exchange_bytes_in", "global_exchange_bytes_out"]
    if not report.has_execution_profile or report.num_rows("execution_steps") == 0:
        return pd.DataFrame(columns=cols)
    # numpy straight from Arrow, step types by a lookup table on program id: pandas' reindex of
    # 2.75 M rows (a 32-layer decoder on a POD16) took seconds
    es = report.table("execution_steps", ["run", "program_id", "ipu", "cycles_from", "cycles_to",
                                          "data_in_bytes", "data_out_bytes"])  # fmt: skip
    col = {c: es.column(c).to_numpy() for c in es.column_names}
    mine = col["run"] == run
    pid, ipu = col["program_id"][mine], col["ipu"][mine].astype(np.int64)
    span = (col["cycles_to"][mine] - col["cycles_from"][mine]).astype(np.float64)
    prog = report.table("programs", ["program_id", "type"]).to_pandas()
    ids = prog["program_id"].to_numpy()
    size = int(max(ids.max(initial=-1), pid.max(initial=-1))) + 1
    is_compute, is_glob = np.zeros(size, dtype=bool), np.zeros(size, dtype=bool)
    is_compute[ids] = (prog["type"] == StepType.ON_TILE_EXECUTE).to_numpy()
    is_glob[ids] = (prog["type"] == StepType.GLOBAL_EXCHANGE).to_numpy()
    compute = np.bincount(ipu, weights=np.where(is_compute[pid], span, 0), minlength=n)
    glob = is_glob[pid]
    b_in = np.bincount(ipu, weights=np.where(glob, col["data_in_bytes"][mine], 0), minlength=n)
    b_out = np.bincount(ipu, weights=np.where(glob, col["data_out_bytes"][mine], 0), minlength=n)
    runs = report.table("runs", ["run", "cycles"]).to_pandas()
    total = float(runs.loc[runs["run"] == run, "cycles"].sum())
    return pd.DataFrame({
        "ipu": np.arange(n),
        "compute_cycles": compute.astype(np.int64),
        "utilisation": compute / total if total else np.zeros(n),
        "global_exchange_bytes_in": b_in.astype(np.int64),
        "global_exchange_bytes_out": b_out.astype(np.int64),
    })  # fmt: skip


def multi_ipu_summary(report: Report) -> dict[str, Any]:
    """Replication and pipelining headlines (scalars, for `tilescope summary` and the Summary page)."""
    t = report.target_info
    reps = report.replicas()
    profiled = reps.loc[reps["profiled"], "replica"].tolist() if len(reps) else []
    stages = report.pipeline_stages()
    ex = ipu_execution(report)
    return {
        "num_replicas": t.num_replicas,
        "ipus_per_replica": t.ipus_per_replica,
        "total_ipus": t.num_replicas * t.ipus_per_replica,
        "profiled_replica": int(profiled[0]) if profiled else 0,
        "pipeline_stages": int(stages["stage"].nunique()) if len(stages) else 0,
        "micro_batches": int(stages["micro_batches"].max()) if len(stages) else 0,
        "global_exchange_bytes": int(ex["global_exchange_bytes_out"].sum()) if len(ex) else 0,
    }
