"""Variables of two reports matched by name: the Source / Target / Diff table of PopVision's
comparison (seed 002, "Variable / Source / Target / Diff"), with added and removed variables.

PopVision's percentage is the difference over the larger of the two sizes (so an added or removed
variable shows +/-100%); ``diff_percent`` follows it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from app.comparison.keys import context_paths, disambiguate, outer_join, take
from report_format.reader import Report
from report_format.vocabulary import MemoryCategory

VARIABLE_COLUMNS = ("name", "status", "baseline_bytes", "active_bytes", "delta_bytes", "diff_percent", "always_live")


def variable_table(report: Report) -> pd.DataFrame:
    """One row per variable: name, bytes, always_live, category, tiles, and context (the path of
    the debug context that created it, as ``keys.context_paths``; '' if none)."""
    t = report.table(
        "variables", ["variable_id", "name", "bytes", "always_live", "category", "tiles", "debug_context_id"]
    )
    v = pd.DataFrame({c: t[c].to_numpy() for c in t.column_names})  # numpy columns: fast to index
    paths = context_paths(report.debug_contexts())
    v["context"] = take(
        paths.to_numpy(dtype=object), _positions(paths.index.to_numpy(), v["debug_context_id"].to_numpy()), ""
    )
    return v


def _positions(index: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Row of each id in ``index`` (-1 if absent)."""
    if index.size == 0:
        return np.full(ids.size, -1, dtype=np.int64)
    order = np.argsort(index)
    pos = np.searchsorted(index[order], ids)
    pos = np.minimum(pos, index.size - 1)
    return np.where(index[order][pos] == ids, order[pos], -1)


def variable_keys(baseline: pd.DataFrame, active: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Keys matching variables across two ``variable_table`` frames: the name when it is unique in
    both reports, else ``name @ context`` (real graphs repeat names such as "matmul partials" in
    every matmul), with ``#2``, ``#3``… for what still repeats."""
    counts_b = pd.Series(baseline["name"].to_numpy(dtype=object)).value_counts()
    counts_a = pd.Series(active["name"].to_numpy(dtype=object)).value_counts()
    repeated = set(counts_b.index[counts_b.to_numpy() > 1]) | set(counts_a.index[counts_a.to_numpy() > 1])
    out = []
    for frame in (baseline, active):
        n = frame["name"].to_numpy(dtype=object)
        ctx = frame["context"].to_numpy(dtype=object)
        keys = [f"{name} @ {c}" if name in repeated and c else name for name, c in zip(n, ctx, strict=True)]
        out.append(np.asarray(disambiguate(keys), dtype=object))
    return out[0], out[1]


def diff_percent(baseline: np.ndarray, active: np.ndarray) -> np.ndarray:
    """(active - baseline) / max(baseline, active) * 100, 0 where both are 0 (PopVision's Diff %)."""
    b = np.asarray(baseline, dtype=np.float64)
    a = np.asarray(active, dtype=np.float64)
    den = np.maximum(np.abs(a), np.abs(b))
    return np.where(den > 0, (a - b) / np.where(den > 0, den, 1) * 100, 0.0)


def variable_comparison(baseline: Report, active: Report) -> pd.DataFrame:
    """One row per variable name in either report: status (same, changed, added, removed),
    baseline_bytes / active_bytes (0 where absent), delta_bytes, diff_percent, always_live (active's
    if present), sorted by the size of the change, biggest first."""
    return compare_variable_tables(variable_table(baseline), variable_table(active))


def live_variables(report: Report, step: int, always_live: bool) -> pd.DataFrame:
    """``variable_table`` rows live at program ``step``: the always-live variables, or the
    not-always-live ones whose liveness interval holds the step (none for step -1)."""
    v = variable_table(report)
    if always_live:
        return v[v["always_live"].to_numpy()]
    iv = report.table("liveness_intervals", ["variable_id", "first_step", "last_step"])
    first, last = iv["first_step"].to_numpy(), iv["last_step"].to_numpy()
    ids = iv["variable_id"].to_numpy()[(first <= step) & (last >= step)] if step >= 0 else np.zeros(0, np.int32)
    return v[np.isin(v["variable_id"].to_numpy(), ids)]


def step_variable_comparison(
    baseline: Report, active: Report, baseline_step: int, active_step: int, always_live: bool = False
) -> pd.DataFrame:
    """PopVision's Liveness compare tables for a selected step pair (seed 002: "Selected Program
    Step", Always-Live / Not-Always-Live Variables with Source / Target / Diff): the variables live
    at ``baseline_step`` in baseline and ``active_step`` in active, matched by name."""
    return compare_variable_tables(
        live_variables(baseline, baseline_step, always_live), live_variables(active, active_step, always_live)
    )


def compare_variable_tables(b: pd.DataFrame, a: pd.DataFrame) -> pd.DataFrame:
    """Two ``variable_table`` frames (or subsets) matched by ``variable_keys``; see
    ``variable_comparison``. ``name`` is the key."""
    keys, rb, ra = outer_join(*variable_keys(b, a))
    vb = take(b["bytes"].to_numpy(dtype=np.int64), rb, 0).astype(np.int64)
    va = take(a["bytes"].to_numpy(dtype=np.int64), ra, 0).astype(np.int64)
    in_b, in_a = rb >= 0, ra >= 0
    status = np.where(in_b & in_a, np.where(vb == va, "same", "changed"), np.where(in_b, "removed", "added"))
    al = np.where(in_a, take(a["always_live"].to_numpy(), ra, False), take(b["always_live"].to_numpy(), rb, False))
    out = pd.DataFrame(
        {
            "name": keys,
            "status": status.astype(object),
            "baseline_bytes": vb,
            "active_bytes": va,
            "delta_bytes": va - vb,
            "diff_percent": diff_percent(vb, va),
            "always_live": al.astype(bool),
        }
    )
    order = np.lexsort((-np.maximum(vb, va), -np.abs(va - vb)))
    return out.iloc[order].reset_index(drop=True)


def source_target_table(categories: pd.DataFrame, variables: pd.DataFrame, totals: pd.DataFrame) -> pd.DataFrame:
    """PopVision's comparison table for all tiles: a Total row, the non-variable memory categories
    (code, state, stack…; from ``memory.category_comparison``), then the variables, each with
    source (baseline), target (active), diff and diff_percent, ordered by the larger size.

    Total is each report's memory including gaps (``totals``: ``memory.total_comparison``), the
    figure the Summary shows: not-always-live variables share memory, so the rows below add up to
    more than what the tiles hold."""
    cats = categories.drop(
        index=[c for c in (MemoryCategory.VARIABLE, MemoryCategory.CONSTANT, "gaps") if c in categories.index]
    )
    rows = pd.DataFrame(
        {
            "item": list(cats.index) + variables["name"].tolist(),
            "kind": ["category"] * len(cats) + ["variable"] * len(variables),
            "status": ["same" if d == 0 else "changed" for d in cats["delta"]] + variables["status"].tolist(),
            "source": np.r_[cats["baseline"].to_numpy(), variables["baseline_bytes"].to_numpy()].astype(np.int64),
            "target": np.r_[cats["active"].to_numpy(), variables["active_bytes"].to_numpy()].astype(np.int64),
        }
    )
    rows = rows.iloc[np.argsort(-np.maximum(rows["source"], rows["target"]).to_numpy(), kind="stable")]
    incl = totals.loc["total_including_gaps"]
    total = pd.DataFrame(
        {
            "item": ["Total"],
            "kind": ["total"],
            "status": [""],
            "source": [int(incl["baseline"])],
            "target": [int(incl["active"])],
        }
    )
    out = pd.concat([total, rows], ignore_index=True)
    out["diff"] = out["target"] - out["source"]
    out["diff_percent"] = diff_percent(out["source"].to_numpy(), out["target"].to_numpy())
    return out
