"""Execution of two reports: runs matched by index (cycles, FLOPs, steps, tile balance; each
report's run figures from ``app.views.runs.run_table``)."""

from __future__ import annotations

import numpy as np
import pandas as pd

RUN_FIGURES = ("cycles", "flops", "steps", "tile_balance")


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
