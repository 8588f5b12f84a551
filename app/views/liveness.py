"""The liveness view: not-always-live bytes per program step, and what is live at a step.

A program step is a leaf of the program tree (``programs.step``), the unit the liveness table
uses. Always-live bytes are the same at every step (code, constants, weights...).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pandas as pd

from app.views import ipus, tables
from report_format.reader import Report


@lru_cache(maxsize=8)
def liveness_by_step(report: Report) -> pd.DataFrame:
    """One row per program step: ``not_always_live`` summed over IPUs, one ``ipu<i>`` column per IPU,
    ``always_live`` (constant), and the step's program type and name."""
    lv = report.liveness()
    n_ipus = report.target_info.num_ipus
    steps = report.programs().query("step >= 0").set_index("step").sort_index()
    n_steps = max(len(steps), int(lv["step"].max()) + 1 if len(lv) else 0)
    per_ipu = np.zeros((n_steps, n_ipus), dtype=np.int64)
    np.add.at(per_ipu, (lv["step"].to_numpy(), lv["ipu"].to_numpy()), lv["not_always_live_bytes"].to_numpy())
    out = pd.DataFrame({f"ipu{i}": per_ipu[:, i] for i in range(n_ipus)}, index=pd.RangeIndex(n_steps, name="step"))
    out.insert(0, "not_always_live", per_ipu.sum(axis=1))
    out["always_live"] = int(report.table("tile_memory", ["always_live_bytes"])["always_live_bytes"].to_numpy().sum())
    out["type"] = steps["type"].reindex(out.index).fillna("").to_numpy()
    out["name"] = steps["name"].reindex(out.index).fillna("").to_numpy()
    out["program_id"] = steps["program_id"].reindex(out.index).fillna(-1).astype(np.int64).to_numpy()
    return out


def liveness_on_ipu(report: Report, ipu: int) -> pd.DataFrame:
    """``liveness_by_step`` of one IPU: ``not_always_live`` and ``always_live`` of that IPU's tiles
    only (the whole report for ipus.ALL_IPUS)."""
    by_step = liveness_by_step(report)
    if ipu == ipus.ALL_IPUS:
        return by_step
    t = report.target_info
    always = report.table("tile_memory", ["tile", "always_live_bytes"]).to_pandas()
    on_ipu = always["tile"].to_numpy() // t.tiles_per_ipu == ipu
    return by_step.assign(
        not_always_live=by_step[f"ipu{ipu}"], always_live=int(always["always_live_bytes"].to_numpy()[on_ipu].sum())
    )


def live_variables_on_ipu(report: Report, step: int, ipu: int) -> pd.DataFrame:
    """``live_variables`` holding bytes on ``ipu`` (all of them for ipus.ALL_IPUS)."""
    live = live_variables(report, step)
    if ipu == ipus.ALL_IPUS or live.empty:
        return live
    return live[live["variable_id"].isin(variables_on_ipu(report, ipu))].reset_index(drop=True)


@lru_cache(maxsize=8)
def variables_on_ipu(report: Report, ipu: int) -> frozenset[int]:
    """Ids of the variables with bytes on ``ipu``'s tiles (from variable_placements)."""
    tpi = report.target_info.tiles_per_ipu
    places = report.table("variable_placements", ["variable_id", "tile"])
    tiles = places["tile"].to_numpy()
    on = (tiles >= ipu * tpi) & (tiles < (ipu + 1) * tpi)
    return frozenset(np.unique(places["variable_id"].to_numpy()[on]).tolist())


def peak_step(by_step: pd.DataFrame) -> int:
    return int(by_step["not_always_live"].to_numpy().argmax()) if len(by_step) else -1


def live_variables(report: Report, step: int) -> pd.DataFrame:
    """Not-always-live variables live during ``step`` (their interval contains it), biggest first."""
    iv = report.liveness_intervals()
    ids = iv.loc[(iv["first_step"] <= step) & (iv["last_step"] >= step), "variable_id"].unique()
    return _variables(report, ids)


def always_live_variables(report: Report) -> pd.DataFrame:
    var = tables.variables(report)
    return _variables(report, var.loc[var["always_live"], "variable_id"].to_numpy())


def _variables(report: Report, ids: np.ndarray) -> pd.DataFrame:
    var = tables.variables(report)
    out = var.loc[
        np.asarray(ids, dtype=np.int64), ["variable_id", "name", "bytes", "tiles", "category", "dtype", "shape"]
    ]
    return out.sort_values("bytes", ascending=False, kind="stable").reset_index(drop=True)


def step_difference(report: Report, a: int, b: int) -> pd.DataFrame:
    """Variables live in exactly one of steps ``a`` and ``b``: column ``live_in`` says which."""
    va, vb = live_variables(report, a), live_variables(report, b)
    only_a = va[~va["variable_id"].isin(vb["variable_id"])].assign(live_in=f"step {a} only")
    only_b = vb[~vb["variable_id"].isin(va["variable_id"])].assign(live_in=f"step {b} only")
    return pd.concat([only_a, only_b], ignore_index=True)


def step_vertices(report: Report, step: int) -> pd.DataFrame:
    """Vertices of the compute set a step executes, per codelet (empty for non-compute steps)."""
    cs = _step_compute_set(report, step)
    v = report.vertices()
    v = v[v["compute_set_id"] == cs]
    if v.empty:
        return pd.DataFrame(columns=["codelet_id", "name", "count", "tiles", "state_bytes", "cycles", "flops"])
    g = v.groupby("codelet_id").agg(
        count=("count", "sum"),
        tiles=("tile", "nunique"),
        state_bytes=("state_bytes", "sum"),
        cycles=("cycles", "sum"),
        flops=("flops", "sum"),
    )
    g.insert(0, "name", report.codelets().set_index("codelet_id")["name"].reindex(g.index).to_numpy())
    return g.reset_index()


def step_cycle_estimates(report: Report, step: int) -> dict[str, float | int | str]:
    """Cycle estimate of a step: the compile-time estimate (max over tiles) and, for compute steps,
    the per-tile spread of the vertices' estimates."""
    p = report.programs()
    row = p[p["step"] == step]
    if row.empty:
        raise ValueError(f"no program step {step}")
    r = row.iloc[0]
    out: dict[str, float | int | str] = {
        "step": step,
        "type": r["type"],
        "name": r["name"],
        "estimated_cycles": int(r["estimated_cycles"]),
    }
    cs = int(r["compute_set_id"])
    if cs >= 0:
        v = report.vertices()
        per_tile = v[v["compute_set_id"] == cs].groupby("tile")["cycles"].sum()
        if len(per_tile):
            out.update(
                tiles=len(per_tile),
                max_tile_cycles=int(per_tile.max()),
                mean_tile_cycles=float(per_tile.mean()),
                min_tile_cycles=int(per_tile.min()),
                busiest_tile=int(per_tile.idxmax()),
            )
    return out


def _step_compute_set(report: Report, step: int) -> int:
    p = report.programs()
    row = p[p["step"] == step]
    return int(row["compute_set_id"].iloc[0]) if len(row) else -1
