"""Memory in compare mode: per-tile memory delta and both reports overlaid, memory by category of
both, the totals, and PopVision's Source / Target / Diff variables table (added and removed
variables included) as a server-side grid."""

from __future__ import annotations

from typing import Any

import dash_bootstrap_components as dbc
from dash import Input, Output, callback, html

from app import grid, ids
from app.compare import baselines
from app.compare.components import delta_table, frame, graph, unavailable
from app.figures.compare import category_delta_figure, tile_memory_delta_figure, tile_memory_overlay_figure

SOURCE_TARGET_KIND = "compare-source-target"
#: Per-tile figures: at most this many bars / points (largest change kept per bin).
MAX_TILE_POINTS = 1500


@grid.producer(SOURCE_TARGET_KIND)
def source_target_rows(baseline: str) -> Any:
    """Source (baseline) / Target (active) / Diff per category and variable, biggest first."""
    return baselines.comparison(baseline).source_target.rename(
        columns={"item": "name", "source": "source_bytes", "target": "target_bytes", "diff": "diff_bytes"}
    )


def section() -> html.Div:
    return html.Div(id=ids.COMPARE_MEMORY)


@callback(Output(ids.COMPARE_MEMORY, "children"), Input(ids.COMPARE_BASELINE, "data"))
def render(key: str | None) -> Any:
    blocked = unavailable(key)
    if blocked is not None:
        return blocked
    c = baselines.comparison(key)
    # "<total>_bytes" so the deltas table formats them as bytes
    totals = {f"{k}_bytes": dict(v) for k, v in c.memory_totals.iterrows()}
    st = source_target_rows(key)
    status = st["status"].value_counts()
    return frame(
        key,
        "memory",
        dbc.Row(
            [
                dbc.Col(graph(tile_memory_delta_figure(c.tile_memory, max_points=MAX_TILE_POINTS)), lg=6),
                dbc.Col(graph(tile_memory_overlay_figure(c.tile_memory, max_points=MAX_TILE_POINTS)), lg=6),
            ]
        ),
        dbc.Row(
            [
                dbc.Col(graph(category_delta_figure(c.memory_categories)), lg=6),
                dbc.Col(
                    [
                        html.H6("Totals (all tiles)", className="mt-2"),
                        delta_table(totals, {k: k[: -len("_bytes")].replace("_", " ") for k in totals}),
                    ],
                    lg=6,
                ),
            ]
        ),
        html.H6("Variables: Source (baseline) / Target (active) / Diff, all tiles", className="mt-2"),
        html.Div(
            f"{int(status.get('added', 0)):,} added, {int(status.get('removed', 0)):,} removed, "
            f"{int(status.get('changed', 0)):,} changed, {int(status.get('same', 0)):,} the same. "
            "Type 'added' or 'removed' in the status filter to list them; click a header to sort.",
            className="small text-muted mb-1",
            id=ids.COMPARE_MEMORY_COUNTS,
        ),
        grid.big_grid(SOURCE_TARGET_KIND, {"baseline": key}, sample=st, height=380),
    )
