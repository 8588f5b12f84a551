"""Summary in compare mode: the parity check (target and engine options), the headline deltas
(baseline / active / delta / ratio), where the liveness peak moved, and every metric of
`tilescope diff --json` in a folded table."""

from __future__ import annotations

from typing import Any

import dash_bootstrap_components as dbc
import pandas as pd
from dash import Input, Output, callback, html

from app import ids
from app.comparison.pages import baselines
from app.comparison.pages.components import delta_table, frame, shown, unavailable
from app.grid import small_grid

#: The headline metrics (names as in `tilescope summary --json`) and how the table labels them.
HEADLINE = {
    "memory.total_bytes_including_gaps": "Total memory (incl. gaps)",
    "memory.total_bytes_excluding_gaps": "Total memory (excl. gaps)",
    "memory.max_tile_bytes": "Fullest tile",
    "memory.out_of_memory_tiles": "Out-of-memory tiles",
    "memory.tile_balance": "Memory tile balance",
    "memory.always_live_bytes": "Always-live memory",
    "liveness.peak_not_always_live_bytes": "Peak not-always-live",
    "execution.headline.cycles": "Cycles of the run that computes",
    "execution.headline.flops": "FLOPs of the run that computes",
    "execution.headline.tile_balance": "Execution tile balance (run that computes)",
    "execution.headline.data_only_cycles": "Weight upload and other data-only runs: cycles",
    "execution.total_cycles": "Total cycles (all runs)",
    "graph.variables": "Variables",
    "graph.vertices": "Vertices",
    "graph.program_steps": "Program steps",
}


def section() -> html.Div:
    """The page's compare section (empty while compare is off)."""
    return html.Div(id=ids.COMPARE_SUMMARY)


@callback(Output(ids.COMPARE_SUMMARY, "children"), Input(shown("summary"), "data"), prevent_initial_call=True)
def render(key: str | None) -> Any:
    blocked = unavailable(key)
    if blocked is not None:
        return blocked
    c = baselines.comparison(key)
    parity = (
        dbc.Alert(
            [html.Strong("The two reports differ in configuration: "), html.Ul([html.Li(p) for p in c.parity])],
            color="warning",
            className="py-2 mb-2",
            id=ids.COMPARE_SUMMARY_PARITY,
        )
        if c.parity
        else html.Div("Same target and engine options.", className="text-success mb-2", id=ids.COMPARE_SUMMARY_PARITY)
    )
    counts = c.step_counts()
    steps = (
        f"Program steps: {counts['same']:,} in both, {counts['added']:,} only in active, {counts['removed']:,} only in baseline. "
        f"{c.peak_sentence().capitalize()}."
    )
    every = pd.DataFrame(
        [{"metric": k, **{f: v.get(f) for f in ("baseline", "active", "delta", "ratio")}} for k, v in c.metrics.items()]
    )
    for col in ("baseline", "active", "delta", "ratio"):  # mixed types (names, versions) read as text
        every[col] = every[col].map(lambda v: "" if v is None else (f"{v:,.6g}" if isinstance(v, float) else v))
    return frame(
        key,
        "headline deltas",
        parity,
        html.Div(steps, className="mb-2"),
        delta_table(c.metrics, HEADLINE, table_id=ids.COMPARE_SUMMARY_TABLE),
        html.Details(
            [html.Summary("Every metric (as in tilescope diff --json)"), small_grid(every.astype(str), height=360)]
        ),
    )
