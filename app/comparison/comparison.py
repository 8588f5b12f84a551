"""``Comparison``: one baseline and one active report, and every comparison table, computed on
first use and cached. The same per-report view functions run on both reports; their outputs are
then aligned (reference/style.md §10 item 11). Used by ``tilescope diff``, the HTML export and the
viewer's Compare mode.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from app.comparison.align import Alignment
from app.comparison.execution import run_comparison
from app.comparison.liveness import describe_peaks, liveness_comparison, liveness_peaks
from app.comparison.memory import category_bytes, category_comparison, tile_memory_comparison, total_comparison
from app.comparison.metrics import metric_deltas, metric_values
from app.comparison.operations import operation_comparison, operation_table
from app.comparison.parity import parity
from app.comparison.steps import (
    STEP_DELTA_COLUMNS,
    align_steps,
    executed_step_comparison,
    step_comparison,
    step_table,
)
from app.comparison.variables import source_target_table, variable_comparison
from app.views.runs import run_table
from report_format.reader import Report

#: Metrics shown first (text output, HTML headline table).
HEADLINE_METRICS = (
    "memory.total_bytes_including_gaps",
    "memory.max_tile_bytes",
    "memory.out_of_memory_tiles",
    "liveness.peak_not_always_live_bytes",
    # the run that computes first (the figures `tilescope run` and Summary lead with), then the one-off
    # weight upload apart, then every run together
    "execution.headline.cycles",
    "execution.headline.flops",
    "execution.headline.tile_balance",
    "execution.headline.data_only_cycles",
    "execution.total_cycles",
)


class Comparison:
    """Baseline vs active. ``run`` restricts executed figures to one run (all runs if None);
    ``layer`` attributes operations to that debug-context layer (exact contexts if None)."""

    def __init__(self, baseline: Report, active: Report, *, run: int | None = None, layer: str | None = None) -> None:
        self.baseline = baseline
        self.active = active
        self.run = run
        self.layer = layer
        self._executed: dict[int, pd.DataFrame] = {}

    # -- configuration -------------------------------------------------------------------------
    @cached_property
    def parity(self) -> list[str]:
        return parity(self.baseline, self.active)

    # -- per-report tables (the same view on both sides) ---------------------------------------
    @cached_property
    def step_tables(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        return step_table(self.baseline, self.run), step_table(self.active, self.run)

    @cached_property
    def run_tables(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        return run_table(self.baseline), run_table(self.active)

    @cached_property
    def operation_tables(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        return operation_table(self.baseline, self.layer, self.run), operation_table(self.active, self.layer, self.run)

    # -- aligned comparisons -------------------------------------------------------------------
    @cached_property
    def step_alignment(self) -> Alignment:
        return align_steps(*self.step_tables)

    @cached_property
    def steps(self) -> pd.DataFrame:
        """Program steps along the alignment (``steps.step_comparison``)."""
        return step_comparison(*self.step_tables, self.step_alignment)

    @cached_property
    def liveness(self) -> pd.DataFrame:
        return liveness_comparison(self.steps)

    @cached_property
    def liveness_peaks(self) -> dict[str, Any]:
        return liveness_peaks(self.liveness)

    @cached_property
    def memory_totals(self) -> pd.DataFrame:
        return total_comparison(self.baseline, self.active)

    @cached_property
    def memory_categories(self) -> pd.DataFrame:
        return category_comparison(self.baseline, self.active)

    @cached_property
    def tile_memory(self) -> pd.DataFrame:
        return tile_memory_comparison(self.baseline, self.active)

    @cached_property
    def variables(self) -> pd.DataFrame:
        return variable_comparison(self.baseline, self.active)

    @cached_property
    def source_target(self) -> pd.DataFrame:
        return source_target_table(self.memory_categories, self.variables, self.memory_totals)

    @cached_property
    def operations(self) -> pd.DataFrame:
        return operation_comparison(*self.operation_tables)

    @cached_property
    def runs(self) -> pd.DataFrame:
        return run_comparison(*self.run_tables)

    @cached_property
    def metrics(self) -> dict[str, dict[str, Any]]:
        b, a = (metric_values(r, category_bytes(r).to_dict(), self.run) for r in (self.baseline, self.active))
        return metric_deltas(b, a)

    def executed_steps(self, run: int = 0) -> pd.DataFrame:
        """Executed steps of ``run`` aligned in execution order (``steps.executed_step_comparison``)."""
        if run not in self._executed:
            self._executed[run] = executed_step_comparison(self.baseline, self.active, run)
        return self._executed[run]

    # -- summaries -----------------------------------------------------------------------------
    def peak_sentence(self) -> str:
        return describe_peaks(self.liveness_peaks)

    def top_changes(self, n: int = 10) -> dict[str, list[dict[str, Any]]]:
        """The ``n`` biggest changes of each kind (JSON-ready records), unchanged rows left out."""

        def top(df: pd.DataFrame, by: str, cols: list[str]) -> list[dict[str, Any]]:
            if df.empty:
                return []
            d = df[by].to_numpy(dtype=np.float64)
            keep = np.flatnonzero(np.nan_to_num(d) != 0)
            keep = keep[np.argsort(-np.abs(d[keep]), kind="stable")][:n]
            return _records(df.iloc[keep][cols])

        tm = self.tile_memory
        st = self.steps
        steps_changed = st[(st["status"] != "same") | (st["delta_cycles"] != 0)]
        added_removed = st[st["status"] != "same"]
        return {
            "tiles": top(
                tm,
                "delta_total_bytes_including_gaps",
                [
                    "tile",
                    "ipu",
                    "present",
                    "baseline_total_bytes_including_gaps",
                    "active_total_bytes_including_gaps",
                    "delta_total_bytes_including_gaps",
                ],
            ),
            "variables": top(
                self.variables,
                "delta_bytes",
                ["name", "status", "baseline_bytes", "active_bytes", "delta_bytes", "diff_percent"],
            ),
            "operations_by_cycles": top(
                self.operations,
                "delta_cycles",
                ["key", "status", "op_type", "baseline_cycles", "active_cycles", "delta_cycles", "delta_flops"],
            ),
            "operations_by_memory": top(
                self.operations,
                "delta_memory_bytes",
                ["key", "status", "op_type", "baseline_memory_bytes", "active_memory_bytes", "delta_memory_bytes"],
            ),
            "steps_by_cycles": top(
                steps_changed,
                "delta_cycles",
                STEP_DELTA_COLUMNS,
            ),
            "steps_added_removed": _records(
                added_removed[["baseline_step", "active_step", "status", "type", "name"]].head(n)
            ),
            "memory_categories": top(
                self.memory_categories.reset_index(), "delta", ["category", "baseline", "active", "delta"]
            ),
        }

    def step_counts(self) -> dict[str, int]:
        s = self.steps["status"].value_counts()
        return {k: int(s.get(k, 0)) for k in ("same", "added", "removed")}


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    out = []
    for row in df.to_dict(orient="records"):
        out.append({k: _plain(v) for k, v in row.items()})
    return out


def _plain(v: Any) -> Any:
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and np.isnan(v):
        return None
    return v
