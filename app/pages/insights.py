"""Insights: the tiles, vertices and exchanges that use the most memory, out-of-memory tiles, and
hints; a hint a change of run options answers shows the change, its predicted effect and, when the
viewer was started with ``--allow-resimulate`` and can reach the model, a "re-simulate" button
(app.resimulate runs ``tilescope whatif`` as a child process; the page polls it)."""

from __future__ import annotations

from typing import Any

import dash
import dash_bootstrap_components as dbc
import pandas as pd
from dash import ALL, Input, Output, ctx, dcc, html
from dash.exceptions import PreventUpdate

from app import ids, resimulate, state
from app.comparison.pages import insights as compare  # the page's compare tab
from app.comparison.pages.components import compare_tabs
from app.components import section
from app.grid import plain_table, small_grid
from app.views import insights as view
from app.views import whatif

#: How often the page asks how a re-simulation is going.
POLL_MS = 1000


def _proposal(number: int, p: whatif.Proposal, can_run: str) -> html.Div:
    """One proposal: the change as the command line takes it, the prediction, and the button."""
    pred = whatif.predicted_line(p)
    action: Any = (
        dbc.Button("re-simulate", id={"type": ids.INSIGHTS_WHATIF_RUN, "index": number}, size="sm", className="ms-2")
        if not can_run
        else html.Span(can_run, className="text-muted ms-2 small")
    )
    return html.Div(
        [
            html.Span(f"What if {number}: "),
            html.Code(whatif.change_text(p.change)),
            action,
            html.Div(f"predicted: {pred or 'no figure'} ({p.basis})", className="small text-muted"),
        ],
        className="whatif-proposal ms-3 mb-2",
    )


def _why_not(report: Any) -> str:
    """Empty when this viewer can re-simulate the report's proposals, else why not (shown instead of the button)."""
    o = whatif.origin(report)
    if o is None:
        return ""  # no proposals either
    if not resimulate.allowed():
        return "(re-simulate: start the viewer with tilescope serve --allow-resimulate)"
    problem = o.source_problem()
    return f"(cannot re-simulate: {problem})" if problem else ""


def _insights(report: Any) -> list[Any]:
    out: list[Any] = []
    number, why_not = 0, _why_not(report)
    for insight in view.insights(report):
        color = "danger" if "out of memory" in insight.text else "info"
        out.append(dbc.Alert(insight.text, color=color, className="py-2 mb-1"))
        for p in insight.proposals:
            number += 1
            out.append(_proposal(number, p, why_not))
    return out


def result_view(status: dict[str, Any]) -> Any:
    """What the status line shows: progress while running, the side-by-side table after."""
    state_ = status["state"]
    if state_ == "idle":
        return ""
    if state_ == "running":
        return dbc.Alert(
            [dbc.Spinner(size="sm", spinner_class_name="me-2"),
             f"re-simulating what-if {status['proposal']} ({status['seconds']:.0f} s): {status['progress']}"],
            color="secondary", className="py-2",
        )  # fmt: skip
    if state_ == "failed":
        return dbc.Alert(f"what-if {status['proposal']} failed: {status['error']}", color="danger", className="py-2")
    doc = status["result"]
    return html.Div(
        [
            html.H5(f"What if {doc['proposal']}: {whatif.change_text(doc['change'])}: predicted against re-simulated"),
            dbc.Table.from_dataframe(pd.DataFrame(whatif.result_rows(doc)), size="sm", bordered=True, striped=True),
            html.Div(f"new report: {doc['whatif_report']}", className="small text-muted"),
        ],
        id="whatif-result",
    )


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
                    html.Div(_insights(report), id=ids.INSIGHTS_BODY),
                    # filled as the page loads (the layout itself is cached: app.response_cache);
                    # the poll starts only while a re-simulation runs (a poll armed at load would
                    # fire a second after it and keep the page busy that long)
                    html.Div(id=ids.INSIGHTS_WHATIF_STATUS),
                    dcc.Interval(id=ids.INSIGHTS_WHATIF_POLL, interval=POLL_MS, disabled=True),
                    dbc.Row(
                        [
                            dbc.Col(
                                section(
                                    "Tiles using the most memory",
                                    plain_table(view.top_tiles(report), view.TOP_TILES_BYTES),
                                ),
                                lg=6,
                            ),
                            dbc.Col(section(f"Over-memory tiles ({len(oom):,})", oom_block), lg=6),
                        ]
                    ),
                    # codelet names and exchange names are long: each table has the page's width, so
                    # every column shows without scrolling (half the width cut both on the right); top-N
                    # lists are plain tables (no AG Grid to set up as the page loads)
                    section(
                        "Vertices (codelets) using the most memory",
                        plain_table(view.top_vertices(report), ("state_bytes", "code_bytes", "bytes")),
                    ),
                    section(
                        "Exchanges with the most code",
                        plain_table(view.top_exchanges(report), ("code_bytes", "bytes_in", "bytes_out")),
                    ),
                ],
                compare.section(),
            ),
        ]
    )


@dash.callback(
    Output(ids.INSIGHTS_WHATIF_STATUS, "children"),
    Output(ids.INSIGHTS_WHATIF_POLL, "disabled"),
    Input({"type": ids.INSIGHTS_WHATIF_RUN, "index": ALL}, "n_clicks"),
    Input(ids.INSIGHTS_WHATIF_POLL, "n_intervals"),
)
def _resimulate(clicks: list[int | None], _ticks: int | None) -> tuple[Any, bool]:
    """On load, the re-simulation's status; a click starts the proposal's re-simulation (one at a
    time; refused unless allowed); the interval then shows its progress until it ends."""
    trigger = ctx.triggered_id
    if isinstance(trigger, dict):  # a button: dash also fires this when buttons appear, unclicked
        if not any(clicks):
            raise PreventUpdate
        refused = resimulate.start(state.started_with()["active"] or "", int(trigger["index"]))
        if refused:
            return dbc.Alert(refused, color="warning", className="py-2"), resimulate.status()["state"] != "running"
    status = resimulate.status()
    return result_view(status), status["state"] != "running"


dash.register_page(__name__, path="/insights", name="Insights", order=1, title="tilescope · Insights", layout=layout)
