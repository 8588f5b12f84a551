"""Memory in compare mode: per-tile memory delta and both reports overlaid, memory by category of
both, the totals, and PopVision's Source / Target / Diff variables table (added and removed
variables included) as a server-side grid."""

from __future__ import annotations

from typing import Any

import dash
import dash_bootstrap_components as dbc
import pandas as pd
from dash import Input, Output, State, callback, html

from app import grid, ids
from app.comparison.figures import category_delta_figure, tile_memory_delta_figure, tile_memory_overlay_figure
from app.comparison.pages import baselines
from app.comparison.pages.components import delta_table, frame, graph, shown, unavailable
from app.comparison.variables import compare_variable_tables, variable_table
from app.views.memory import tile_variables

SOURCE_TARGET_KIND = "compare-source-target"
TILES_KIND = "compare-tile-variables"
#: Per-tile figures: at most this many bars / points (largest change kept per bin).
MAX_TILE_POINTS = 1500


@grid.producer(SOURCE_TARGET_KIND)
def source_target_rows(baseline: str) -> Any:
    """Source (baseline) / Target (active) / Diff per category and variable, biggest first."""
    return baselines.comparison(baseline).source_target.rename(
        columns={"item": "name", "source": "source_bytes", "target": "target_bytes", "diff": "diff_bytes"}
    )


@grid.producer(TILES_KIND)
def tile_variable_rows(baseline: str, tiles: list[int]) -> pd.DataFrame:
    """Source / Target / Diff of the variables on the selected ``tiles`` (bytes on those tiles;
    tiles are matched by id), biggest change first."""
    c = baselines.comparison(baseline)
    sides = []
    for report in (c.baseline, c.active):
        on = tile_variables(report, tiles)[["variable_id", "bytes"]]
        vt = variable_table(report)
        vt = vt[vt["variable_id"].isin(on["variable_id"])].drop(columns="bytes")
        sides.append(vt.merge(on, on="variable_id", how="inner"))
    return compare_variable_tables(*sides).drop(columns="always_live")


def section() -> html.Div:
    return html.Div(id=ids.COMPARE_MEMORY)


@callback(
    Output(ids.COMPARE_MEMORY, "children"),
    Input(shown("memory"), "data"),
    State(ids.MEMORY_SELECTION, "data"),  # tiles selected before the tab opened
    prevent_initial_call=True,  # the pane starts empty and hidden: nothing to ask the server on load
)
def render(key: str | None, tiles: list[int] | None = None) -> Any:
    blocked = unavailable(key)
    if blocked is not None:
        return blocked
    c = baselines.comparison(key)
    # "<total>_bytes" so the deltas table formats them as bytes
    totals = {f"{k}_bytes": dict(v) for k, v in c.memory_totals.iterrows()}
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
        html.Div(variables_block(key, tiles), id=ids.COMPARE_MEMORY_VARIABLES),
    )


def variables_block(key: str, tiles: list[int] | None) -> list[Any]:
    """PopVision's Source / Target / Diff table: for all tiles (categories and variables), or for
    the tiles selected on the page (variables on those tiles)."""
    if tiles:
        rows = tile_variable_rows(key, tiles)
        listed = ", ".join(map(str, tiles)) if len(tiles) <= 12 else f"{len(tiles):,} tiles ({tiles[0]}..{tiles[-1]})"
        title = f"Variables on the selected tiles {listed}: Source (baseline) / Target (active) / Diff"
        table = grid.big_grid(TILES_KIND, {"baseline": key, "tiles": tiles}, sample=rows, height=380, short=True)
    else:
        rows = source_target_rows(key)
        title = "Variables: Source (baseline) / Target (active) / Diff, all tiles"
        table = grid.big_grid(SOURCE_TARGET_KIND, {"baseline": key}, sample=rows, height=380, short=True)
    status = rows["status"].value_counts()
    return [
        html.H6(title, className="mt-2"),
        html.Div(
            f"{int(status.get('added', 0)):,} added, {int(status.get('removed', 0)):,} removed, "
            f"{int(status.get('changed', 0)):,} changed, {int(status.get('same', 0)):,} the same. "
            "Type 'added' or 'removed' in the status filter to list them; click a header to sort. "
            "Select tiles on the This report tab (click, drag or type them) to compare only their variables.",
            className="small text-muted mb-1",
            id=ids.COMPARE_MEMORY_COUNTS,
        ),
        table,
    ]


@callback(
    Output(ids.COMPARE_MEMORY_VARIABLES, "children"),
    Input(ids.MEMORY_SELECTION, "data"),
    State(shown("memory"), "data"),
    prevent_initial_call=True,
)
def follow_selection(tiles: list[int] | None, key: str | None) -> Any:
    if not baselines.is_allowed(key):
        return dash.no_update
    return variables_block(key, tiles)
