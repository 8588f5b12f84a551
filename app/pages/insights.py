"""Insights: the tiles, vertices and exchanges that use the most memory, out-of-memory tiles, and hints."""

from __future__ import annotations

import dash
import dash_bootstrap_components as dbc
from dash import html

from app import ids, state
from app.comparison.pages import insights as compare  # the page's compare tab
from app.comparison.pages.components import compare_tabs
from app.components import section
from app.grid import small_grid
from app.views import insights as view


def layout(**_: object) -> html.Div:
    report = state.report()
    oom = view.over_memory_tiles(report)
    oom_block = (
        small_grid(oom.head(200)) if len(oom) else html.Div("No tile is over its memory.", className="text-success")
    )
    return html.Div(
        [
            html.H3("Insights", className="mb-2"),
            compare_tabs(
                "insights",
                [
                    html.Div(
                        [
                            dbc.Alert(h, color="danger" if "out of memory" in h else "info", className="py-2 mb-1")
                            for h in view.hints(report)
                        ],
                        id=ids.INSIGHTS_BODY,
                    ),
                    dbc.Row(
                        [
                            dbc.Col(section("Tiles using the most memory", small_grid(view.top_tiles(report))), lg=6),
                            dbc.Col(section(f"Over-memory tiles ({len(oom):,})", oom_block), lg=6),
                        ]
                    ),
                    # codelet names and exchange names are long: each table has the page's width, so
                    # every column shows without scrolling (half the width cut both on the right)
                    section("Vertices (codelets) using the most memory", small_grid(view.top_vertices(report))),
                    section("Exchanges with the most code", small_grid(view.top_exchanges(report))),
                ],
                compare.section(),
            ),
        ]
    )


dash.register_page(__name__, path="/insights", name="Insights", order=1, title="tilescope · Insights", layout=layout)
