"""Liveness of two reports: not-always-live bytes per program step for both, the delta at aligned
steps, and where the peak moved."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

LIVENESS_COLUMNS = (
    "baseline_step",
    "active_step",
    "status",
    "type",
    "name",
    "baseline_name",
    "active_name",
    "baseline_not_always_live_bytes",
    "active_not_always_live_bytes",
    "delta_not_always_live_bytes",
)


def liveness_comparison(steps: pd.DataFrame) -> pd.DataFrame:
    """Liveness along the step alignment (``steps.step_comparison``): one row per aligned position.
    A step present in one report only has 0 bytes on the other side, so its delta is its own bytes."""
    return steps.loc[:, list(LIVENESS_COLUMNS)].rename(
        columns={
            "baseline_not_always_live_bytes": "baseline_bytes",
            "active_not_always_live_bytes": "active_bytes",
            "delta_not_always_live_bytes": "delta_bytes",
        }
    )


def liveness_peaks(liveness: pd.DataFrame) -> dict[str, Any]:
    """Peak of each side and where it moved: step index, bytes and name of both peaks, the
    active step aligned with the baseline peak step, and whether the peak is at the same aligned
    step in both (``moved`` false)."""
    out: dict[str, Any] = {}
    for side in ("baseline", "active"):
        present = liveness[f"{side}_step"].to_numpy() >= 0
        if not present.any():
            out[side] = {"step": -1, "bytes": 0, "name": "", "position": -1}
            continue
        vals = np.where(present, liveness[f"{side}_bytes"].to_numpy(), -1)
        pos = int(np.argmax(vals))  # first position of the maximum = lowest step index (steps are in order)
        out[side] = {
            "step": int(liveness[f"{side}_step"].iat[pos]),
            "bytes": int(vals[pos]),
            # this side's own step name (the aligned row's name is the active's where it has one)
            "name": str(liveness[f"{side}_name"].iat[pos] if f"{side}_name" in liveness else liveness["name"].iat[pos]),
            "position": pos,
        }
    b, a = out["baseline"], out["active"]
    out["delta_bytes"] = a["bytes"] - b["bytes"]
    out["moved"] = b["position"] != a["position"]
    out["active_step_at_baseline_peak"] = int(liveness["active_step"].iat[b["position"]]) if b["position"] >= 0 else -1
    return out


def describe_peaks(peaks: dict[str, Any]) -> str:
    """One sentence: 'peak liveness moved from step 12 (x) to step 15 (y)' or 'stayed at ...'."""
    b, a = peaks["baseline"], peaks["active"]
    if not peaks["moved"]:
        return f"peak liveness stayed at step {b['step']} ({b['name']}) in baseline = step {a['step']} in active"
    return f"peak liveness moved from step {b['step']} ({b['name']}) to step {a['step']} ({a['name']})"
