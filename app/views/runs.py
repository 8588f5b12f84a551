"""Per-run figures of the execution profile, each defined once: executed steps, cycles, FLOPs,
tile balance and tile utilisation.

The Summary and Execution Trace pages, Compare mode, ``tilescope summary``, ``tilescope diff`` and
the HTML exports all take these figures from here, so a figure reads the same wherever it shows.

Definitions:

- ``steps``: the executed steps of the run, as the report's ``runs`` table records them.
- ``tile_balance``: the mean of the per-IPU ``tile_balance`` of the run's executed steps, each
  weighted by the cycles the step lasted on that IPU. Sync steps are left out (every tile just
  waits there, so they say nothing about how work is spread; PopVision's analyses skip them too),
  and so are zero-length steps (weight 0).
- ``active_tile_balance`` and ``tile_utilisation`` (the fraction of the IPU's tiles active) are
  weighted the same way over the same steps.

The figures over all runs (``overall``) weight every run by its cycles, i.e. they are the same
weighted mean over all runs' steps.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

import numpy as np
import pandas as pd

from report_format.reader import Report
from report_format.vocabulary import StepType

#: Program step types left out of the balance and utilisation figures (see the module docstring).
NOT_BALANCED = (StepType.SYNC,)
#: The weighted per-run figures.
WEIGHTED = ("tile_balance", "active_tile_balance", "tile_utilisation")
RUN_COLUMNS = ("run", "name", "cycles", "flops", "steps", *WEIGHTED)


@lru_cache(maxsize=8)
def run_table(report: Report) -> pd.DataFrame:
    """One row per captured run: run, name, cycles, flops, steps and the WEIGHTED figures (NaN for
    a run without weighted steps), plus ``balance_cycles`` (the weight: cycles of the steps counted)."""
    runs = report.table("runs", ["run", "name", "cycles", "flops", "steps"]).to_pandas()
    es = report.table(
        "execution_steps",
        ["run", "program_id", "cycles_from", "cycles_to", "active_tiles", "tile_balance", "active_tile_balance"],
    )
    # columns as numpy arrays, not a DataFrame: a POD16 run has millions of step rows
    cols = {c: es.column(c).to_numpy() for c in es.column_names}
    w = weighted_figures(report, cols, "run").reindex(runs["run"].to_numpy())
    for f in WEIGHTED:
        runs[f] = w[f].to_numpy()
    runs["balance_cycles"] = w["balance_cycles"].fillna(0).to_numpy().astype(np.int64)
    return runs


def weighted_figures(report: Report, steps: pd.DataFrame | Mapping[str, np.ndarray], by: str) -> pd.DataFrame:
    """The WEIGHTED figures of executed-step rows (``execution_steps`` columns program_id,
    cycles_from, cycles_to, active_tiles, tile_balance, active_tile_balance, as a DataFrame or
    arrays by name) grouped by column ``by`` (run, ipu: small non-negative ids): the one
    computation behind every tile balance the viewer shows. Indexed by ``by``; columns WEIGHTED
    and balance_cycles; NaN where a group has no weighted cycles."""
    key = np.asarray(steps[by]).astype(np.int64)
    if key.size == 0:
        return pd.DataFrame(columns=[*WEIGHTED, "balance_cycles"], dtype=np.float64)
    prog = report.table("programs", ["program_id", "type"]).to_pandas()
    excluded = prog.loc[prog["type"].isin(NOT_BALANCED), "program_id"].to_numpy()
    pid = np.asarray(steps["program_id"]).astype(np.int64)
    lut = np.zeros(int(max(pid.max(), excluded.max(initial=-1))) + 1, dtype=bool)
    lut[excluded] = True  # a lookup table, not np.isin over millions of rows
    w = (np.asarray(steps["cycles_to"]) - np.asarray(steps["cycles_from"])).astype(np.float64)
    w[lut[pid]] = 0.0
    tiles = max(report.target_info.tiles_per_ipu, 1)
    values = {
        "tile_balance": np.asarray(steps["tile_balance"]).astype(np.float64),
        "active_tile_balance": np.asarray(steps["active_tile_balance"]).astype(np.float64),
        "tile_utilisation": np.asarray(steps["active_tiles"]).astype(np.float64) / tiles,
    }
    present = np.flatnonzero(np.bincount(key))  # the groups with rows, ascending as groupby gives them
    weight = np.bincount(key, weights=w)[present]
    out = pd.DataFrame(index=pd.Index(present, name=by))
    for f, v in values.items():
        s = np.bincount(key, weights=v * w)[present]
        out[f] = np.where(weight > 0, s / np.maximum(weight, 1e-300), np.nan)
    out["balance_cycles"] = weight
    return out


def run_figures(report: Report, run: int) -> dict[str, float | int | str]:
    """The figures of one run (a row of ``run_table``)."""
    runs = run_table(report)
    row = runs[runs["run"] == run]
    if row.empty:
        raise KeyError(f"no run {run} in {report.path}")
    r = row.iloc[0]
    return {
        "run": int(r["run"]),
        "name": str(r["name"]),
        "cycles": int(r["cycles"]),
        "flops": int(r["flops"]),
        "steps": int(r["steps"]),
        **{f: float(r[f]) for f in WEIGHTED},
    }


def overall(report: Report, figure: str = "tile_balance") -> float | None:
    """A WEIGHTED figure over all runs (None without an execution profile)."""
    runs = run_table(report)
    w = runs["balance_cycles"].to_numpy(dtype=np.float64)
    v = runs[figure].to_numpy(dtype=np.float64)
    ok = (w > 0) & ~np.isnan(v)
    return float((v[ok] * w[ok]).sum() / w[ok].sum()) if ok.any() else None


def longest_run(report: Report) -> int:
    """The run with the most cycles (the first of equals)."""
    runs = report.table("runs", ["run", "cycles"]).to_pandas()
    if runs.empty:
        return 0
    return int(runs["run"].iat[int(runs["cycles"].to_numpy().argmax())])


#: Program step types whose cycles make a run one that computes (``opening_run``).
COMPUTE_STEPS = (StepType.ON_TILE_EXECUTE,)


@lru_cache(maxsize=8)
def opening_run(report: Report) -> int:
    """The run the viewer and the exports open on: the longest run that computes (spends cycles in
    compute sets). A run that only moves data - the weight upload before an ONNX model's inference,
    a stream of weights back to the host - is passed over, however long, unless no run computes."""
    runs = report.table("runs", ["run", "cycles"]).to_pandas()
    if runs.empty:
        return 0
    computes = runs["run"].isin(computing_runs(report)).to_numpy()
    cycles = np.where(computes, runs["cycles"].to_numpy(), -1) if computes.any() else runs["cycles"].to_numpy()
    return int(runs["run"].iat[int(cycles.argmax())])


@lru_cache(maxsize=8)
def computing_runs(report: Report) -> frozenset[int]:
    """The runs that spend cycles in compute sets; the others only move data (a weight upload).
    Cached as ``opening_run`` is: Summary, Insights and the per-IPU views all ask."""
    es = report.table("execution_steps", ["run", "program_id", "cycles_from", "cycles_to"]).to_pandas()
    prog = report.table("programs", ["program_id", "type"]).to_pandas()
    computing = es["program_id"].isin(prog.loc[prog["type"].isin(COMPUTE_STEPS), "program_id"])
    return frozenset(int(r) for r in es.loc[computing & (es["cycles_to"] > es["cycles_from"]), "run"].unique())
