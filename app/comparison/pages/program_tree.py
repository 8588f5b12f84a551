"""Program Tree in compare mode: every program step of both reports along the step alignment (the
program tree is the key, so an inserted step shows as added and the rest stay paired), with
baseline / active / delta executed cycles and not-always-live bytes, in a sortable, filterable
server-side grid."""

from __future__ import annotations

from typing import Any

import pandas as pd
from dash import Input, Output, callback, html

from app import grid, ids
from app.comparison.pages import baselines
from app.comparison.pages.components import frame, shown, unavailable
from app.comparison.steps import STEP_DELTA_COLUMNS

STEPS_KIND = "compare-program-steps"
COLUMNS = [*STEP_DELTA_COLUMNS, "delta_executions", "delta_not_always_live_bytes"]


@grid.producer(STEPS_KIND)
def step_rows(baseline: str) -> pd.DataFrame:
    """The aligned program steps, in program order."""
    return baselines.comparison(baseline).steps[COLUMNS].reset_index(drop=True)


def section() -> html.Div:
    return html.Div(id=ids.COMPARE_PROGRAM_TREE)


@callback(Output(ids.COMPARE_PROGRAM_TREE, "children"), Input(shown("program_tree"), "data"), prevent_initial_call=True)
def render(key: str | None) -> Any:
    blocked = unavailable(key)
    if blocked is not None:
        return blocked
    rows = step_rows(key)
    counts = baselines.comparison(key).step_counts()
    changed = int((rows["delta_cycles"] != 0).sum())
    return frame(
        key,
        "program steps (aligned on the program tree, cycles of all runs)",
        html.Div(
            f"{counts['same']:,} program steps in both, {counts['added']:,} only in active, "
            f"{counts['removed']:,} only in baseline; {changed:,} changed their executed cycles. "
            "Type 'added' or 'removed' in the status filter to list them; click a header to sort.",
            className="small text-muted mb-1",
            id=ids.COMPARE_PROGRAM_TREE_COUNTS,
        ),
        grid.big_grid(STEPS_KIND, {"baseline": key}, sample=rows, height=420, short=True),
    )
