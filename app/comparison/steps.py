"""Program steps of one report with what happened at each (liveness, executed cycles, FLOPs, tile
balance), and two such tables joined along the step alignment.

Executed figures come from ``execution_steps`` only (one row per executed step and IPU), never from
the per-tile ``tile_cycles`` table, so a diff stays cheap on a POD-size report.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from app.comparison.align import Alignment, align_sequences
from app.comparison.keys import factorize_pair, step_keys
from report_format.reader import Report

STEP_FIGURES = ("not_always_live_bytes", "executions", "cycles", "flops", "tile_balance")

#: Columns of a per-step cycle-delta table, as the CLI, the HTML export and the viewer show them.
STEP_DELTA_COLUMNS = [
    "baseline_step",
    "active_step",
    "status",
    "type",
    "name",
    "baseline_cycles",
    "active_cycles",
    "delta_cycles",
]


def executed_steps(report: Report, run: int | None = None) -> pd.DataFrame:
    """One row per executed step (all runs, or ``run``): run, step, program_id, cycles (max over IPUs
    of cycles_to - cycles_from: the step lasts until the slowest IPU ends it), flops (sum over IPUs),
    tile_balance (mean over IPUs)."""
    cols = ["run", "step", "program_id", "cycles_from", "cycles_to", "flops", "tile_balance"]
    t = report.table("execution_steps", cols)
    if t.num_rows == 0:
        return pd.DataFrame({c: np.zeros(0, dtype=np.int64) for c in ("run", "step", "program_id", "cycles", "flops")})
    run_ = t["run"].to_numpy()
    step = t["step"].to_numpy()
    if run_.size > 1 and np.any(np.diff(run_.astype(np.int64) * (int(step.max()) + 1) + step) < 0):
        t = t.take(np.lexsort((step, run_)))  # the writer's order is (run, step, ipu); be safe if not
        run_, step = t["run"].to_numpy(), t["step"].to_numpy()
    # rows are ordered by (run, step, ipu): a new executed step starts wherever (run, step) changes
    starts = np.flatnonzero(np.r_[True, (run_[1:] != run_[:-1]) | (step[1:] != step[:-1])])
    dur = t["cycles_to"].to_numpy() - t["cycles_from"].to_numpy()
    counts = np.diff(np.r_[starts, run_.size])
    out = pd.DataFrame(
        {
            "run": run_[starts],
            "step": step[starts],
            "program_id": t["program_id"].to_numpy()[starts],
            "cycles": np.maximum.reduceat(dur, starts),
            "flops": np.add.reduceat(t["flops"].to_numpy(), starts),
            "tile_balance": np.add.reduceat(t["tile_balance"].to_numpy().astype(np.float64), starts) / counts,
        }
    )
    if run is not None:
        out = out[out["run"] == run].reset_index(drop=True)
    return out


def step_table(report: Report, run: int | None = None) -> pd.DataFrame:
    """One row per program step (leaf of the program tree), in step order: step, program_id, type,
    name, key, not_always_live_bytes (liveness summed over IPUs), and from the executed steps of
    ``run`` (all runs if None): executions, cycles and flops summed over executions, tile_balance
    (cycle-weighted mean over executions)."""
    out = step_keys(report)
    lv = report.table("liveness", ["step", "not_always_live_bytes"])
    live = np.bincount(
        lv["step"].to_numpy(), weights=lv["not_always_live_bytes"].to_numpy().astype(np.float64), minlength=len(out)
    )
    out["not_always_live_bytes"] = live[out["step"].to_numpy()].astype(np.int64)
    ex = executed_steps(report, run)
    g = (
        ex.assign(weighted=ex["tile_balance"] * ex["cycles"])
        .groupby("program_id")
        .agg(
            executions=("step", "size"), cycles=("cycles", "sum"), flops=("flops", "sum"), weighted=("weighted", "sum")
        )
        if len(ex)
        else pd.DataFrame(columns=["executions", "cycles", "flops", "weighted"])
    )
    g = g.reindex(out["program_id"].to_numpy())
    out["executions"] = g["executions"].fillna(0).to_numpy(dtype=np.int64)
    out["cycles"] = g["cycles"].fillna(0).to_numpy(dtype=np.int64)
    out["flops"] = g["flops"].fillna(0).to_numpy(dtype=np.int64)
    w = g["weighted"].fillna(0).to_numpy(dtype=np.float64)
    out["tile_balance"] = np.where(out["cycles"] > 0, w / np.maximum(out["cycles"].to_numpy(), 1), np.nan)
    return out


def align_steps(baseline: pd.DataFrame, active: pd.DataFrame) -> Alignment:
    """Align two step tables (``step_table`` or ``keys.step_keys``) on their keys."""
    kb, ka = factorize_pair(baseline["key"].to_numpy(), active["key"].to_numpy())
    return align_sequences(kb, ka)


def step_comparison(baseline: pd.DataFrame, active: pd.DataFrame, alignment: Alignment | None = None) -> pd.DataFrame:
    """Two step tables joined along the alignment: one row per aligned position with
    ``baseline_step``/``active_step`` (-1 where the step exists in one report only), ``status``
    (same, added, removed), type, name, key, and for each figure ``baseline_<f>``, ``active_<f>``,
    ``delta_<f>`` (a missing side counts as 0 for deltas of additive figures; tile balance is NaN)."""
    al = alignment if alignment is not None else align_steps(baseline, active)
    ib, ia = al.baseline, al.active
    has_b, has_a = ib >= 0, ia >= 0
    pick_b = np.maximum(ib, 0)
    pick_a = np.maximum(ia, 0)
    out = pd.DataFrame(
        {
            "baseline_step": np.where(has_b, baseline["step"].to_numpy()[pick_b] if len(baseline) else -1, -1),
            "active_step": np.where(has_a, active["step"].to_numpy()[pick_a] if len(active) else -1, -1),
            "status": np.where(has_b & has_a, "same", np.where(has_b, "removed", "added")),
        }
    )
    for col in ("type", "name", "key"):
        vb = baseline[col].to_numpy(dtype=object)[pick_b] if len(baseline) else np.full(len(al), "", dtype=object)
        va = active[col].to_numpy(dtype=object)[pick_a] if len(active) else np.full(len(al), "", dtype=object)
        out[col] = np.where(has_a, va, vb)
        if col == "name":  # each side's own name too: two models' steps differ (the peak sentence)
            out["baseline_name"] = np.where(has_b, vb, "")
            out["active_name"] = np.where(has_a, va, "")
    for f in STEP_FIGURES:
        if f not in baseline.columns or f not in active.columns:
            continue
        additive = f != "tile_balance"
        fill = 0 if additive else np.nan
        vb = np.where(has_b, baseline[f].to_numpy()[pick_b] if len(baseline) else fill, fill)
        va = np.where(has_a, active[f].to_numpy()[pick_a] if len(active) else fill, fill)
        out[f"baseline_{f}"] = vb
        out[f"active_{f}"] = va
        out[f"delta_{f}"] = va - vb
    return out


def executed_step_comparison(baseline: Report, active: Report, run: int = 0) -> pd.DataFrame:
    """Executed steps of one run in execution order, aligned between the reports: each executed
    step is keyed by the program step it runs, so an inserted step, or a loop running one more
    iteration, shows as added rows and the rest stays paired. Columns: baseline_step / active_step
    (executed step index, -1 where absent), status, type, name, and baseline_/active_/delta_ for
    cycles, flops and cycles_from (when the step started: how far the run has drifted; the delta is
    NaN for a step on one side only), and baseline_/active_program_step (the program step executed,
    -1 where absent)."""
    sides = []
    for report in (baseline, active):
        keys = step_keys(report).set_index("program_id")
        ex = executed_steps(report, run)
        starts = _step_starts(report, run)
        ex = ex.assign(
            cycles_from=starts.reindex(ex["step"].to_numpy()).fillna(0).to_numpy(dtype=np.int64),
            key=keys["key"].reindex(ex["program_id"].to_numpy()).fillna("").to_numpy(dtype=object),
            type=keys["type"].reindex(ex["program_id"].to_numpy()).fillna("").to_numpy(dtype=object),
            name=keys["name"].reindex(ex["program_id"].to_numpy()).fillna("").to_numpy(dtype=object),
            program_step=keys["step"].reindex(ex["program_id"].to_numpy()).fillna(-1).to_numpy(dtype=np.int64),
        )
        sides.append(ex)
    b, a = sides
    kb, ka = factorize_pair(b["key"].to_numpy(), a["key"].to_numpy())
    al = align_sequences(kb, ka)
    has_b, has_a = al.baseline >= 0, al.active >= 0
    out = pd.DataFrame(
        {
            "baseline_step": np.where(has_b, b["step"].to_numpy()[np.maximum(al.baseline, 0)] if len(b) else -1, -1),
            "active_step": np.where(has_a, a["step"].to_numpy()[np.maximum(al.active, 0)] if len(a) else -1, -1),
            "status": np.where(has_b & has_a, "same", np.where(has_b, "removed", "added")),
        }
    )
    for side, df, has, at in (("baseline", b, has_b, al.baseline), ("active", a, has_a, al.active)):
        # the program step it runs: the number the Program Tree, the steps comparison and the CLI show
        steps = df["program_step"].to_numpy()[np.maximum(at, 0)] if len(df) else np.full(len(al), -1)
        out[f"{side}_program_step"] = np.where(has, steps, -1)
    for col in ("type", "name"):
        vb = b[col].to_numpy(dtype=object)[np.maximum(al.baseline, 0)] if len(b) else np.full(len(al), "", object)
        va = a[col].to_numpy(dtype=object)[np.maximum(al.active, 0)] if len(a) else np.full(len(al), "", object)
        out[col] = np.where(has_a, va, vb)
    for f in ("cycles", "flops", "cycles_from"):
        vb = np.where(has_b, b[f].to_numpy()[np.maximum(al.baseline, 0)] if len(b) else 0, 0)
        va = np.where(has_a, a[f].to_numpy()[np.maximum(al.active, 0)] if len(a) else 0, 0)
        out[f"baseline_{f}"] = vb
        out[f"active_{f}"] = va
        out[f"delta_{f}"] = va - vb
    # a step present on one side has no start on the other: its drift is undefined, not -start
    out["delta_cycles_from"] = np.where(has_b & has_a, out["delta_cycles_from"].to_numpy(np.float64), np.nan)
    return out


def _step_starts(report: Report, run: int) -> pd.Series:
    """Start of each executed step of ``run`` (earliest cycles_from over IPUs), by step index."""
    t = report.table("execution_steps", ["run", "step", "cycles_from"]).to_pandas()
    t = t[t["run"] == run]
    return t.groupby("step")["cycles_from"].min()
