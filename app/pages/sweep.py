"""Sweep: the points of the sweep this viewer was started on (``tilescope serve SWEEP_DIR``): their
table, the Pareto plot of samples/s against peak tile memory coloured by an option, a click on a point
to open its report, and two ticked rows to compare (compare mode's ``?compare=`` URL)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import dash
import dash_ag_grid as dag
import dash_bootstrap_components as dbc
import flask
from dash import Input, Output, callback, dcc, html

from app import ids, state
from app.figures.sweep import sweep_figure
from app.grid import column_defs, to_records
from app.units import format_bytes
from app.views import sweep as view

#: The table's columns, in order (the options that vary are added after ``name``).
FIGURES = ("status", "samples_per_second", "cycles", "max_tile_bytes", "total_bytes", "tile_balance",
           "host_seconds", "pareto", "reason")  # fmt: skip
#: Where a point is opened (the server switches its report, then shows the Summary).
OPEN_PATH = "/sweep/open"


def varying(df: Any) -> list[str]:
    """The grid options that take more than one value in this sweep (all of them if none does)."""
    vary = [c for c in view.OPTIONS if df[c].astype(str).nunique() > 1]
    return vary or list(view.OPTIONS[:3])


def layout(**_: object) -> html.Div:
    sweep = state.sweep()
    if sweep is None:
        return html.Div([html.H3("Sweep"), dbc.Alert("This viewer was not started on a sweep: run "
                                                      "`tilescope serve SWEEP_DIR`.", color="info")])  # fmt: skip
    df = view.sweep_points(sweep)
    vary = varying(df)
    fit = int(df["fits"].sum())
    best = view.best_within(df, int(df["max_tile_bytes"].max())) if fit else None
    headline = f"{len(df)} points in {sweep.path}, {fit} fit in tile memory."
    if best is not None:
        headline += (f" Fastest: {best['name']}, {best['samples_per_second']:,.1f} samples/s at a peak tile of "
                     f"{format_bytes(best['max_tile_bytes'])}.")  # fmt: skip
    table = df[["point", "name", *vary, *FIGURES]]
    return html.Div(
        [
            html.H3("Sweep", className="mb-2"),
            html.P(headline, className="mb-2"),
            dbc.Row(
                [
                    dbc.Col(html.Label("colour by", className="me-2 small"), width="auto"),
                    dbc.Col(
                        dbc.Select(
                            id=ids.SWEEP_COLOUR,
                            options=[{"label": c, "value": c} for c in view.OPTIONS],
                            value=vary[0],
                            size="sm",
                            style={"width": "16rem"},
                        ),
                        width="auto",
                    ),  # fmt: skip
                    dbc.Col(
                        html.Span(
                            "Click a point to open its report; tick two rows to compare them.",
                            className="small text-muted",
                        ),
                        width="auto",
                    ),  # fmt: skip
                ],
                className="align-items-center mb-1",
            ),
            dcc.Graph(id=ids.SWEEP_GRAPH, figure=sweep_figure(df, vary[0]), config={"displaylogo": False}),
            html.Div(id=ids.SWEEP_ACTIONS, className="my-2"),
            dag.AgGrid(
                id=ids.SWEEP_GRID,
                columnDefs=column_defs(table, filters=False),
                rowData=to_records(table),
                getRowId='"" + params.data.point',
                dashGridOptions={
                    # a checkbox per row; a click elsewhere in the row does not tick it
                    "rowSelection": {
                        "mode": "multiRow",
                        "checkboxes": True,
                        "headerCheckbox": False,
                        "enableClickSelection": False,
                    },
                    "tooltipShowDelay": 300,
                },  # fmt: skip
                style={"height": f"{min(80 + 42 * len(table), 560)}px", "width": "100%"},
                className="ag-theme-alpine",
                columnSize="responsiveSizeToFit",  # every column in the page's width, reason included
            ),
            dcc.Location(id=ids.SWEEP_LOCATION, refresh=True),
        ]
    )


@callback(Output(ids.SWEEP_GRAPH, "figure"), Input(ids.SWEEP_COLOUR, "value"), prevent_initial_call=True)
def recolour(colour_by: str) -> Any:
    sweep = state.sweep()
    if sweep is None or colour_by not in view.OPTIONS:
        return dash.no_update
    return sweep_figure(view.sweep_points(sweep), colour_by)


@callback(Output(ids.SWEEP_LOCATION, "href"), Input(ids.SWEEP_GRAPH, "clickData"), prevent_initial_call=True)
def open_clicked(click: dict[str, Any] | None) -> Any:
    points = (click or {}).get("points") or []
    if not points or "customdata" not in points[0]:
        return dash.no_update
    return open_href(int(points[0]["customdata"]))


def open_href(point: int, compare: int | None = None) -> str:
    query = {"point": point} | ({"compare": compare} if compare is not None else {})
    return f"{OPEN_PATH}?{urlencode(query)}"


@callback(Output(ids.SWEEP_ACTIONS, "children"), Input(ids.SWEEP_GRID, "selectedRows"))
def actions(rows: list[dict[str, Any]] | None) -> Any:
    rows = [r for r in rows or [] if r.get("status") != "failed"]
    if not rows:
        return html.Span("No point ticked.", className="small text-muted")
    first = dbc.Button(f"Open {rows[0]['name']}", href=open_href(int(rows[0]["point"])), external_link=True,
                       size="sm", color="primary", className="me-2")  # fmt: skip
    if len(rows) < 2:
        return first
    a, b = rows[-2], rows[-1]  # the last two ticked
    compare = dbc.Button(f"Compare {a['name']} (active) with {b['name']} (baseline)", external_link=True,
                         href=open_href(int(a["point"]), int(b["point"])), size="sm", color="secondary")  # fmt: skip
    return [first, compare]


def open_point(point: int, compare: int | None) -> str:
    """Switch the viewer to ``point``'s report; the URL to go to (the Summary, with compare mode's
    ``?compare=`` naming ``compare``'s report). ValueError for a point without a report."""
    from app.comparison.pages import baselines

    sweep = state.sweep()
    if sweep is None:
        raise ValueError("this viewer was not started on a sweep")
    reports = dict(zip(sweep.sweep()["point"].tolist(), sweep.sweep()["report"].tolist(), strict=True))
    path = sweep.report_path(reports.get(point, ""))
    if path is None:
        raise ValueError(f"point {point} has no report")
    other = sweep.report_path(reports.get(compare, "")) if compare is not None else None
    if compare is not None and other is None:  # refused before anything changes
        raise ValueError(f"point {compare} has no report to compare with")
    state.select(path)
    if other is None:
        return "/"
    if not baselines.is_allowed(str(other)):  # the points' reports are siblings: compare mode lists them
        raise ValueError(f"point {compare}'s report is not one compare mode can open")
    return "/?" + urlencode({"compare": baselines.label(str(other))})


def register_open(server: flask.Flask) -> None:
    """``GET /sweep/open?point=N[&compare=M]``: the server switches to the point's report and redirects."""

    @server.route(OPEN_PATH)
    def _open() -> Any:
        try:
            point = int(flask.request.args.get("point", ""))
            raw = flask.request.args.get("compare")
            url = open_point(point, int(raw) if raw is not None else None)
        except ValueError as exc:
            return flask.Response(f"cannot open: {exc}", status=400, mimetype="text/plain")
        return flask.redirect(url)


dash.register_page(__name__, path="/sweep", name="Sweep", order=-1, title="tilescope · Sweep", layout=layout)
