"""Execution of two reports: runs matched by index (cycles, FLOPs, steps, tile balance)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from app.views.compare.steps import executed_steps
from report_format.reader import Report

RUN_FIGURES = ("cycles", "flops", "steps", "tile_balance")


def run_table(report: Report) -> pd.DataFrame:
    """One row per captured run: run, name, cycles, flops, steps, and tile_balance (mean over its
    executed steps of the step's tile balance, weighted by the step's cycles: how evenly the tiles
    were busy while the run lasted)."""
    runs = report.table("runs", ["run", "name", "cycles", "flops", "steps"]).to_pandas()
    ex = executed_steps(report)
    if len(ex):
        w = (ex["tile_balance"] * ex["cycles"]).groupby(ex["run"]).sum()
        c = ex.groupby("run")["cycles"].sum()
        bal = (w / c.where(c > 0)).reindex(runs["run"]).to_numpy()
    else:
        bal = np.full(len(runs), np.nan)
    runs["tile_balance"] = bal
    return runs


def run_comparison(baseline: pd.DataFrame, active: pd.DataFrame) -> pd.DataFrame:
    """Runs matched by index: status (both, baseline, active), and ``baseline_<f>``, ``active_<f>``,
    ``delta_<f>`` for each of RUN_FIGURES (a run missing on one side has NaN there)."""
    b = baseline.set_index("run")
    a = active.set_index("run")
    idx = b.index.union(a.index)
    out = pd.DataFrame(index=idx)
    out["status"] = np.where(
        idx.isin(b.index) & idx.isin(a.index), "both", np.where(idx.isin(b.index), "baseline", "active")
    )
    for f in RUN_FIGURES:
        vb = b[f].reindex(idx).astype(np.float64)
        va = a[f].reindex(idx).astype(np.float64)
        out[f"baseline_{f}"] = vb
        out[f"active_{f}"] = va
        out[f"delta_{f}"] = va - vb
    out.index.name = "run"
    return out.reset_index()


def overall_tile_balance(runs: pd.DataFrame) -> float:
    """Cycle-weighted tile balance over all runs of a ``run_table`` (NaN without execution)."""
    c = runs["cycles"].to_numpy(dtype=np.float64)
    bal = runs["tile_balance"].to_numpy(dtype=np.float64)
    ok = ~np.isnan(bal) & (c > 0)
    return float((bal[ok] * c[ok]).sum() / c[ok].sum()) if ok.any() else float("nan")
