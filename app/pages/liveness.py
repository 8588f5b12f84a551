"""Liveness: not-always-live bytes per program step (total or per IPU, always-live toggle, peak
marked). Clicking a step shows its live variables, vertices and cycle estimates; clicking a second
step shows the difference between the two."""

from __future__ import annotations

from typing import Any

import dash
import dash_bootstrap_components as dbc
from dash import Input, Output, State, callback, clientside_callback, dcc, html

from app import grid, ids, state
from app.comparison.pages import liveness as compare  # the page's compare tab
from app.comparison.pages.components import compare_tabs
from app.components import ipu_selector, key_values
from app.figures.liveness import liveness_figure
from app.units import format_bytes
from app.views import ipus, model_names
from app.views import liveness as view

LIVE_KIND = "liveness-live"
ALWAYS_KIND = "liveness-always"
DIFF_KIND = "liveness-difference"


@grid.producer(LIVE_KIND)
def _live_rows(step: int, ipu: int = ipus.ALL_IPUS) -> Any:
    return view.live_variables_on_ipu(state.report(), step, ipu)


@grid.producer(ALWAYS_KIND)
def _always_rows() -> Any:
    return view.always_live_variables(state.report())


@grid.producer(DIFF_KIND)
def _diff_rows(a: int, b: int) -> Any:
    return view.step_difference(state.report(), a, b)


def named(by_step: Any) -> Any:
    """``by_step`` with each step named by the model first (its ONNX node, the PopLibs op in
    brackets: ``s1b0_proj_conv_116 (matmul)``), where the report is of an ONNX model."""
    model = model_names.of_programs(state.report()).reindex(by_step["program_id"].to_numpy()).fillna("")
    return by_step.assign(name=model_names.with_model_name(model.to_numpy(), by_step["name"].to_numpy()))


def headline(by_step: Any, ipu: int) -> str:
    """The page's first line: the peak of not-always-live memory (of the selected IPU), the step's
    name, and always-live memory."""
    if not len(by_step):
        return ""
    on = "" if ipu == ipus.ALL_IPUS else f" on IPU {ipu}"
    peak = view.peak_step(by_step)
    what = f"{by_step.at[peak, 'type']} {by_step.at[peak, 'name']}".strip()
    return (
        f"Peak not-always-live memory{on} {format_bytes(by_step['not_always_live'].max())} at program step "
        f"{peak} ({what}); always-live memory{on} {format_bytes(by_step['always_live'].iat[0])}."
    )


def layout(**_: object) -> html.Div:
    report = state.report()
    return html.Div(
        [
            html.H3("Liveness", className="mb-2"),
            compare_tabs(
                "liveness",
                [
                    html.Div(
                        headline(named(view.liveness_by_step(report)), ipus.ALL_IPUS),
                        id=ids.LIVENESS_HEADLINE,
                        className="mb-2",
                    ),  # fmt: skip
                    html.Div(
                        [
                            ipu_selector(ids.LIVENESS_IPU),
                            dbc.Checklist(
                                id=ids.LIVENESS_ALWAYS_LIVE,
                                switch=True,
                                inline=True,
                                value=[],
                                options=[{"label": "Include always-live", "value": "always"}],
                            ),
                            dbc.Checklist(
                                id=ids.LIVENESS_PER_IPU,
                                switch=True,
                                inline=True,
                                value=[],
                                options=[{"label": "Per IPU", "value": "ipu"}],
                            ),
                        ],
                        className="d-flex gap-3 align-items-center",
                    ),
                    # the zoomed step range ("": the whole; a None store sets itself again on mount)
                    dcc.Store(id=ids.LIVENESS_RANGE, data=""),
                    dcc.Graph(id=ids.LIVENESS_GRAPH, config={"displaylogo": False}),
                    html.Div(
                        "Click a step to see what is live; click a second step to compare the two.",
                        className="small text-muted",
                    ),
                    dcc.Store(id=ids.LIVENESS_SELECTION, data=[]),
                    html.Div(id=ids.LIVENESS_SELECTION_TEXT, className="fw-semibold my-2"),
                    dbc.Tabs(
                        [
                            dbc.Tab(label=lab, tab_id=tid)
                            for lab, tid in (
                                ("Not Always Live Variables", "live"),
                                ("Always Live Variables", "always"),
                                ("Vertices", "vertices"),
                                ("Cycle Estimates", "cycles"),
                                ("Difference", "difference"),
                            )
                        ],
                        id=ids.LIVENESS_TABS,
                        active_tab="live",
                    ),
                    dcc.Loading(html.Div(id=ids.LIVENESS_TAB_BODY, className="pt-2"), type="dot"),
                ],
                compare.section(),
            ),
        ]
    )


@callback(
    Output(ids.LIVENESS_SELECTION, "data"),
    Input(ids.LIVENESS_GRAPH, "clickData"),
    State(ids.LIVENESS_SELECTION, "data"),
    prevent_initial_call=True,
)
def select_step(click: dict | None, selected: list[int]) -> list[int]:
    points = (click or {}).get("points", [])
    if not points:
        return selected
    step = int(round(points[0]["x"]))
    return next_selection(selected, step)


def next_selection(selected: list[int], step: int) -> list[int]:
    """Keep at most the two most recent steps (the second click compares)."""
    return [s for s in selected if s != step][-1:] + [step]


# Zoom or pan -> the visible step range [x0, x1] (null: the whole line, after a double-click), in
# the browser: plotly reports a relayout on every first draw ({"autosize": true}) and on y-only
# changes, which need no new points (the Execution Trace's zoom does the same).
clientside_callback(
    """function (relayout) {
        const r = relayout || {};
        if (r["xaxis.autorange"]) return null;
        let range = null;
        if ("xaxis.range[0]" in r && "xaxis.range[1]" in r) range = [r["xaxis.range[0]"], r["xaxis.range[1]"]];
        else if (Array.isArray(r["xaxis.range"])) range = r["xaxis.range"];
        if (range === null) return window.dash_clientside.no_update;
        return [Number(range[0]), Number(range[1])];
    }""",
    Output(ids.LIVENESS_RANGE, "data"),
    Input(ids.LIVENESS_GRAPH, "relayoutData"),
    prevent_initial_call=True,
)


@callback(
    Output(ids.LIVENESS_GRAPH, "figure"),
    Output(ids.LIVENESS_HEADLINE, "children"),
    Input(ids.LIVENESS_ALWAYS_LIVE, "value"),
    Input(ids.LIVENESS_PER_IPU, "value"),
    Input(ids.LIVENESS_SELECTION, "data"),
    Input(ids.LIVENESS_IPU, "value"),
    Input(ids.LIVENESS_RANGE, "data"),
)
def figure(
    always: list[str],
    per_ipu: list[str],
    selected: list[int],
    ipu: str | None = None,
    step_range: list[float] | str | None = None,
) -> tuple[Any, str]:
    """The liveness graph and headline of all IPUs or the selected one ("Per IPU" draws a line per
    IPU); zoomed (``step_range``), the visible steps re-decimated, so a narrow zoom shows every step."""
    chosen = ipus.selected_ipu(ipu)
    by_step = named(view.liveness_on_ipu(state.report(), chosen))
    fig = liveness_figure(
        by_step,
        include_always_live=bool(always),
        per_ipu=bool(per_ipu) and chosen == ipus.ALL_IPUS,
        selected=selected,
        y_title=None if chosen == ipus.ALL_IPUS else f"bytes (IPU {chosen})",
        x_range=_zoom(step_range),
    )
    return fig, headline(by_step, chosen)


def _zoom(step_range: list[float] | str | None) -> tuple[float, float] | None:
    """The zoom store's [x0, x1] as an ascending pair; None (the whole line) for "" or null."""
    if not isinstance(step_range, list):
        return None
    lo, hi = sorted(float(x) for x in step_range)
    return lo, hi


@callback(
    Output(ids.LIVENESS_TAB_BODY, "children"),
    Output(ids.LIVENESS_SELECTION_TEXT, "children"),
    Input(ids.LIVENESS_TABS, "active_tab"),
    Input(ids.LIVENESS_SELECTION, "data"),
    Input(ids.LIVENESS_IPU, "value"),
)
def tab_body(tab: str, selected: list[int], ipu: str | None = None) -> tuple[Any, Any]:
    report = state.report()
    chosen = ipus.selected_ipu(ipu)
    by_step = named(view.liveness_on_ipu(report, chosen))
    if not selected:
        if tab == "always":
            return grid.big_grid(ALWAYS_KIND, {}, row_id="variable_id"), "No step selected"
        return html.Div("Select a program step in the graph.", className="text-muted"), "No step selected"
    step = selected[-1]
    row = by_step.loc[step]
    on = "" if chosen == ipus.ALL_IPUS else f" on IPU {chosen}"
    text = f"Step {step}: {row['type']} {row['name']} — not-always-live{on} {format_bytes(row['not_always_live'])}"
    if len(selected) == 2:
        a, b = selected
        text += (
            f"; step {a}: {format_bytes(by_step.at[a, 'not_always_live'])} "
            f"(difference {format_bytes(row['not_always_live'] - by_step.at[a, 'not_always_live'])})"
        )
    if tab == "live":
        return grid.big_grid(LIVE_KIND, {"step": step, "ipu": chosen}, row_id="variable_id"), text
    if tab == "always":
        return grid.big_grid(ALWAYS_KIND, {}, row_id="variable_id"), text
    if tab == "vertices":
        v = view.step_vertices(report, step)
        body = (
            grid.small_grid(v, height=360)
            if len(v)
            else html.Div(f"Step {step} is a {row['type']} step: it runs no vertices.", className="text-muted")
        )
        return body, text
    if tab == "cycles":
        return key_values(view.step_cycle_estimates(report, step)), text
    if len(selected) < 2:
        return html.Div(
            "Click a second step to see the variables live in only one of the two.", className="text-muted"
        ), text
    return grid.big_grid(DIFF_KIND, {"a": selected[0], "b": selected[1]}, row_id="variable_id"), text


dash.register_page(__name__, path="/liveness", name="Liveness", order=3, title="tilescope · Liveness", layout=layout)
