"""Liveness in compare mode: not-always-live bytes of both reports overlaid along the step
alignment, the delta at each aligned step, where the peak moved; selecting an aligned step (click
the graph or type it) shows PopVision's Source / Target / Diff of the variables live there."""

from __future__ import annotations

from typing import Any

import dash
import dash_bootstrap_components as dbc
import pandas as pd
from dash import Input, Output, Patch, State, callback, dcc, html

from app import grid, ids
from app.comparison.figures import ACTIVE, liveness_comparison_figure
from app.comparison.pages import baselines
from app.comparison.pages.components import GRAPH_CONFIG, frame, shown, unavailable
from app.comparison.variables import step_variable_comparison
from app.units import format_bytes, signed_bytes

STEP_VARIABLES_KIND = "compare-step-variables"
#: Aligned steps drawn at most (largest change per bin beyond that).
MAX_STEP_POINTS = 2000


@grid.producer(STEP_VARIABLES_KIND)
def step_variable_rows(baseline: str, baseline_step: int, active_step: int, always_live: bool) -> pd.DataFrame:
    c = baselines.comparison(baseline)
    return step_variable_comparison(c.baseline, c.active, baseline_step, active_step, always_live)


def section() -> html.Div:
    return html.Div(
        [
            dcc.Store(id=ids.COMPARE_LIVENESS_STEP, data=None),
            html.Div(id=ids.COMPARE_LIVENESS),
        ]
    )


def default_position(key: str) -> int | None:
    """Where a fresh page selects: the active report's peak (its aligned position)."""
    peaks = baselines.comparison(key).liveness_peaks
    pos = (peaks.get("active") or {}).get("position")
    return None if pos is None else int(pos)


def marker(position: int | None) -> list[dict[str, Any]]:
    """The figure's shapes: a dotted line at the selected aligned step, across both panels."""
    if position is None:
        return []
    return [
        {"type": "line", "xref": "x", "yref": "paper", "x0": position, "x1": position, "y0": 0, "y1": 1,
         "line": {"color": ACTIVE, "dash": "dot", "width": 1}}
    ]  # fmt: skip


def figure(key: str, position: int | None) -> Any:
    fig = liveness_comparison_figure(baselines.comparison(key).liveness, max_points=MAX_STEP_POINTS)
    fig.update_layout(shapes=marker(position))
    return fig


@callback(
    Output(ids.COMPARE_LIVENESS, "children"),
    Output(ids.COMPARE_LIVENESS_STEP, "data"),
    Input(shown("liveness"), "data"),
    prevent_initial_call=True,  # the pane starts empty and hidden: nothing to ask the server on load
)
def render(key: str | None) -> tuple[Any, Any]:
    blocked = unavailable(key)
    if blocked is not None:
        return blocked, None
    c = baselines.comparison(key)
    pos = default_position(key)
    always = c.memory_totals.loc["always_live"] if "always_live" in c.memory_totals.index else None
    sentences = (
        c.peak_sentence().capitalize()
        + "; peak "
        + (
            f"{format_bytes(c.liveness_peaks['baseline']['bytes'])} → {format_bytes(c.liveness_peaks['active']['bytes'])}"
            f" ({signed_bytes(c.liveness_peaks['delta_bytes'])})."
        )
    )
    if always is not None:
        sentences += f" Always-live memory {format_bytes(always['baseline'])} → {format_bytes(always['active'])}."
    body = frame(
        key,
        "liveness",
        html.Div(sentences, className="mb-1", id=ids.COMPARE_LIVENESS_PEAK),
        dcc.Graph(id=ids.COMPARE_LIVENESS_GRAPH, figure=figure(key, pos), config=GRAPH_CONFIG),
        dbc.Row(
            [
                dbc.Col(
                    html.Div(
                        "Click the graph, or type an aligned step, to compare the variables live there.",
                        className="small text-muted",
                    ),
                    width="auto",
                ),
                dbc.Col(
                    dbc.InputGroup(
                        [
                            dbc.InputGroupText("Aligned step"),
                            dbc.Input(
                                id=ids.COMPARE_LIVENESS_STEP_INPUT,
                                type="number",
                                value=pos,
                                min=0,
                                max=max(len(c.liveness) - 1, 0),
                                debounce=True,
                            ),
                        ],
                        size="sm",
                    ),
                    md=3,
                ),
            ],
            className="align-items-center g-2 mb-2",
        ),
        html.Div(id=ids.COMPARE_LIVENESS_STEP_TEXT, className="fw-semibold mb-2"),
        dbc.Tabs(
            [
                dbc.Tab(label="Not Always Live Variables", tab_id="live"),
                dbc.Tab(label="Always Live Variables", tab_id="always"),
            ],
            id=ids.COMPARE_LIVENESS_TABS,
            active_tab="live",
        ),
        dcc.Loading(html.Div(id=ids.COMPARE_LIVENESS_TAB_BODY, className="pt-2"), type="dot"),
    )
    return body, pos


@callback(
    Output(ids.COMPARE_LIVENESS_STEP, "data", allow_duplicate=True),
    Input(ids.COMPARE_LIVENESS_GRAPH, "clickData"),
    Input(ids.COMPARE_LIVENESS_STEP_INPUT, "value"),
    State(shown("liveness"), "data"),
    prevent_initial_call=True,
)
def select_step(click: dict | None, typed: Any, key: str | None) -> Any:
    if not key:
        return dash.no_update
    n = len(baselines.comparison(key).liveness)
    pos = step_of_event(dash.ctx.triggered_id == ids.COMPARE_LIVENESS_STEP_INPUT, click, typed, n)
    return dash.no_update if pos is None else pos


def step_of_event(typed_it: bool, click: dict | None, typed: Any, n: int) -> int | None:
    """The aligned step a click (its x) or the typed number selects; None if neither is in 0..n-1."""
    if typed_it:
        pos = typed
    else:
        points = (click or {}).get("points", [])
        pos = points[0].get("x") if points else None
    if pos is None:
        return None
    pos = int(round(float(pos)))
    return pos if 0 <= pos < n else None


def step_pair(key: str, position: int) -> dict[str, Any]:
    """The aligned row at ``position``: baseline / active step (-1 where absent), type, name, bytes."""
    row = baselines.comparison(key).liveness.iloc[position]
    return {
        "baseline_step": int(row["baseline_step"]),
        "active_step": int(row["active_step"]),
        "status": str(row["status"]),
        "label": f"{row['type']} {row['name']}",
        "baseline_bytes": int(row["baseline_bytes"]),
        "active_bytes": int(row["active_bytes"]),
        "delta_bytes": int(row["delta_bytes"]),
    }


def step_text(key: str, position: int) -> str:
    p = step_pair(key, position)
    side = {
        "added": " (only in active)",
        "removed": " (only in baseline)",
    }.get(p["status"], "")
    b = f"baseline step {p['baseline_step']}" if p["baseline_step"] >= 0 else "no baseline step"
    a = f"active step {p['active_step']}" if p["active_step"] >= 0 else "no active step"
    return (
        f"Aligned step {position}{side}: {p['label']} — {b} {format_bytes(p['baseline_bytes'])}, "
        f"{a} {format_bytes(p['active_bytes'])} (delta {signed_bytes(p['delta_bytes'])})"
    )


def moved_marker(position: int) -> Patch:
    """Only the figure's marker moves (a patch of its shapes): the figure itself was sent once, with
    the pane (sending it again would double what the browser draws when the tab opens)."""
    patch = Patch()
    patch["layout"]["shapes"] = marker(position)
    return patch


@callback(
    Output(ids.COMPARE_LIVENESS_TAB_BODY, "children"),
    Output(ids.COMPARE_LIVENESS_STEP_TEXT, "children"),
    Output(ids.COMPARE_LIVENESS_GRAPH, "figure"),
    Input(ids.COMPARE_LIVENESS_STEP, "data"),
    Input(ids.COMPARE_LIVENESS_TABS, "active_tab"),
    State(shown("liveness"), "data"),
    prevent_initial_call=True,
)
def step_body(position: int | None, tab: str, key: str | None) -> tuple[Any, Any, Any]:
    if not key or position is None:
        return html.Div("Select an aligned step in the graph.", className="text-muted"), "", dash.no_update
    p = step_pair(key, position)
    args = {
        "baseline": key,
        "baseline_step": p["baseline_step"],
        "active_step": p["active_step"],
        "always_live": tab == "always",
    }
    rows = grid.frame(STEP_VARIABLES_KIND, grid.json.dumps(args, sort_keys=True))
    return (
        grid.big_grid(STEP_VARIABLES_KIND, args, sample=rows, height=360, hidden=("always_live",), short=True),
        step_text(key, position),
        moved_marker(position),
    )
