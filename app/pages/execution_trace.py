"""Execution Trace: per IPU, the BSP timeline of executed steps (flat: a row per IPU; flame: the
program tree over time for one IPU) coloured compute / exchange / sync / stream copy; the tiles x
steps cycles view; a run selector; the run summary. Zooming re-queries the server for the
visible cycle range, so detail becomes finer (down to exact steps) as you zoom in."""

from __future__ import annotations

from typing import Any

import dash
import dash_bootstrap_components as dbc
from dash import Input, Output, State, callback, clientside_callback, dcc, html

from app import ids, state
from app.comparison.pages import execution_trace as compare  # the page's compare tab
from app.comparison.pages.components import compare_tabs
from app.components import ipu_selector, no_execution_profile, provenance_note, stat_card
from app.figures.execution_trace import (
    proportions_figure,
    step_tile_split_figure,
    tile_steps_figure,
    timeline_dict,
)
from app.grid import small_grid
from app.units import format_bytes, format_flops, format_percent, format_rate, format_seconds
from app.views import execution_trace as view
from app.views import flame
from app.views import ipus as ipu_view
from app.views.runs import opening_run, run_figures

#: At most this many spans per timeline row, and in all rows, reach the browser (level of detail):
#: ~1 a pixel column in one row, ~2 a pixel column over all rows of the ~1,450 px plot at 1600 px
#: (each span is an SVG bar: 6,000 over a POD16's 16 rows made a 470 KB answer, 290 KB at 3,000)
MAX_PER_ROW = 1500
MAX_SPANS = 3000
#: The tiles x steps view reads at most this many steps (sampled evenly beyond that).
MAX_TILE_STEPS = 120
#: The tiles x steps panel's item id: the panel's active_item when it is open.
TILES_ITEM = "tiles"


def layout(**_: object) -> html.Div:
    report = state.report()
    if not report.has_execution_profile:
        return html.Div([html.H3("Execution Trace"), no_execution_profile("The execution trace")])
    runs = report.runs()
    how = ", estimated" if report.estimated_runs else ""
    return html.Div(
        [
            html.H3("Execution Trace" + (" (estimated)" if how else ""), className="mb-2"),
            provenance_note(report),
            dbc.Row(
                [
                    dbc.Col(
                        [
                            dbc.Label("Run", className="small"),
                            dbc.Select(
                                id=ids.TRACE_RUN,
                                value=str(opening_run(report)),
                                options=[
                                    {"label": f"run {r}: {n} ({c:,} cycles{how})", "value": str(int(r))}
                                    for r, n, c in zip(runs["run"], runs["name"], runs["cycles"], strict=True)
                                ],
                            ),
                        ],
                        md=4,  # "run 0: WeightsFromHost (207,000 cycles)" whole at 1400 px
                    ),
                    dbc.Col(
                        [
                            dbc.Label("View", className="small"),
                            dbc.RadioItems(
                                id=ids.TRACE_VIEW,
                                inline=True,
                                value="flat",
                                options=[
                                    {"label": "Flat (all IPUs)", "value": "flat"},
                                    {"label": "Flame (one IPU)", "value": "flame"},
                                ],
                            ),
                        ],
                        md=3,
                    ),
                    ipu_selector(ids.TRACE_IPU, class_name="align-self-end"),
                    dbc.Col(
                        dbc.Button(
                            "Reset zoom",
                            id=ids.TRACE_RESET,
                            size="sm",
                            color="secondary",
                            outline=True,
                            className="mt-4",
                        ),
                        md=2,
                    ),
                ],
                className="g-3 mb-2",
            ),
            compare_tabs(
                "execution_trace",
                [
                    # "": the whole run. A None store sets itself again when it mounts, which calls its
                    # listeners (the timeline a second time), prevent_initial_call or not
                    dcc.Store(id=ids.TRACE_RANGE, data=""),
                    html.Div(id=ids.TRACE_SUMMARY),
                    html.Div(id=ids.TRACE_DETAIL, className="small text-muted"),
                    dcc.Loading(
                        dcc.Graph(id=ids.TRACE_TIMELINE, config={"displaylogo": False, "scrollZoom": True}), type="dot"
                    ),
                    html.Div(
                        "Click a step for its figures on every IPU and its per-tile split.",
                        id=ids.TRACE_STEP_DETAILS,
                        className="mb-2 small text-muted",
                    ),
                    html.Div(id=ids.TRACE_IPUS, className="mb-2"),
                    # drawn when opened (one click): the heatmap was a third of the page's drawing time
                    dbc.Accordion(
                        dbc.AccordionItem(
                            dcc.Loading(html.Div(id=ids.TRACE_TILES_BODY), type="dot"),
                            title="Tiles x steps: cycles of each tile in each step (BSP)",
                            item_id=TILES_ITEM,
                        ),
                        id=ids.TRACE_TILES_PANEL,
                        start_collapsed=True,
                        active_item=None,
                        className="mb-3",
                    ),
                ],
                compare.section(),
            ),
        ]
    )


# Zoom -> the visible cycle range [x0, x1] (null: the whole run), in the browser: plotly reports a
# relayout on every first draw ({"autosize": true}), and a server round trip for it came after the
# page had drawn, answered "no change" (s23's bench). A reset or another run shows the whole run.
clientside_callback(
    """function (relayout, _reset, _run, current) {
        const no = window.dash_clientside.no_update;
        const ids = (window.dash_clientside.callback_context.triggered || []).map(t => t.prop_id.split(".")[0]);
        if (ids.includes("__RESET__") || ids.includes("__RUN__")) return null;
        const r = relayout || {};
        if (r["xaxis.autorange"]) return null;
        let range = null;
        if ("xaxis.range[0]" in r && "xaxis.range[1]" in r) range = [r["xaxis.range[0]"], r["xaxis.range[1]"]];
        else if (Array.isArray(r["xaxis.range"])) range = r["xaxis.range"];
        if (range === null) return no;
        return [Math.trunc(Number(range[0])), Math.trunc(Number(range[1])) + 1];
    }""".replace("__RESET__", ids.TRACE_RESET).replace("__RUN__", ids.TRACE_RUN),
    Output(ids.TRACE_RANGE, "data"),
    Input(ids.TRACE_TIMELINE, "relayoutData"),
    Input(ids.TRACE_RESET, "n_clicks"),
    Input(ids.TRACE_RUN, "value"),
    State(ids.TRACE_RANGE, "data"),
    prevent_initial_call=True,
)


@callback(
    Output(ids.TRACE_TIMELINE, "figure"),
    Output(ids.TRACE_DETAIL, "children"),
    Output(ids.TRACE_IPU, "options"),
    Input(ids.TRACE_RUN, "value"),
    Input(ids.TRACE_VIEW, "value"),
    Input(ids.TRACE_IPU, "value"),
    Input(ids.TRACE_RANGE, "data"),
)
def timeline(run: Any, mode: str, ipu: Any, cycle_range: list[int] | str | None) -> tuple[Any, str, Any]:
    zoom = cycle_range or None  # "": the whole run (the store's first value)
    fig, detail, _ = render_trace(int(run), mode, ipu_view.selected_ipu(ipu), zoom, tiles=False)
    return fig, detail, ipu_options(int(run), mode)


@callback(
    Output(ids.TRACE_TILES_BODY, "children"),
    Input(ids.TRACE_TILES_PANEL, "active_item"),
    Input(ids.TRACE_RUN, "value"),
    Input(ids.TRACE_IPU, "value"),
    Input(ids.TRACE_RANGE, "data"),
    prevent_initial_call=True,  # the panel opens closed
)
def tiles_panel(open_item: Any, run: Any, ipu: Any, cycle_range: list[int] | str | None) -> Any:
    """The tiles x steps heatmap, only while its panel is open (reopening redraws it for the view
    then shown: run, IPU, zoom)."""
    if open_item != TILES_ITEM:
        return dash.no_update
    fig = render_tiles(int(run), ipu_view.selected_ipu(ipu), cycle_range or None)
    return dcc.Graph(id=ids.TRACE_TILES, figure=fig, config={"displaylogo": False})


def ipu_options(run: int, mode: str) -> list[dict[str, str]]:
    """The IPU selector's options, saying what is drawn: the flame shows one IPU, so its "All IPUs"
    choice reads as that IPU, the run's busiest ("IPU 3 (busiest)"); the flat view shows all."""
    report = state.report()
    options = [{"label": o["label"], "value": str(o["value"])} for o in ipu_view.ipu_choices(report)]
    if mode == "flame" and report.target_info.num_ipus > 1:
        options[0]["label"] = f"IPU {view.busiest_ipu(report, run)} (busiest)"
    return options


def per_row(rows: int) -> int:
    return max(200, min(MAX_PER_ROW, MAX_SPANS // max(rows, 1)))


#: Said where a one-IPU view stands in for "All IPUs".
BUSIEST = " (the busiest; choose an IPU above for another)"


def one_ipu(report: Any, run: int, chosen: int) -> int:
    """The IPU the one-IPU views (flame, tiles x steps) show: the chosen one, else the run's busiest."""
    return chosen if chosen != ipu_view.ALL_IPUS else view.busiest_ipu(report, run)


def _cycles(report: Any, run: int, cycle_range: list[int] | None) -> tuple[int, int]:
    """The visible cycles [x0, x1]: the whole run, or the zoom clipped to it."""
    length = view.run_length(report, run)
    return (0, max(length, 1)) if cycle_range is None else (max(0, cycle_range[0]), min(length, cycle_range[1]))


def render_tiles(run: int, chosen: int, cycle_range: list[int] | None) -> Any:
    """The tiles x steps heatmap of the one-IPU view's IPU over the visible cycles."""
    report = state.report()
    ipu = one_ipu(report, run, chosen)
    first, last = view.steps_in_cycle_range(report, run, ipu, *_cycles(report, run, cycle_range))
    cyc, steps, tile_starts, width = view.tile_step_cycles(report, run, ipu, first, last, MAX_TILE_STEPS)
    return tile_steps_figure(cyc, steps, tile_starts, width)


def render_trace(
    run: int, mode: str, chosen: int, cycle_range: list[int] | None, tiles: bool = True
) -> tuple[Any, str, Any]:
    """The timeline figure, its level-of-detail sentence and (``tiles``, else None) the tiles x steps
    figure, of every IPU or the chosen one (the IPU selector): the flat view shows the chosen IPU's
    row; the flame and tiles x steps views show one IPU, the chosen one (the busiest for "All
    IPUs")."""
    report = state.report()
    ipu = one_ipu(report, run, chosen)
    x0, x1 = _cycles(report, run, cycle_range)
    if mode == "flame":
        spans = view.flame_spans(report, run, ipu)
        rows = sorted(spans["row"].unique().tolist())
        lod = view.level_of_detail(spans, x0, x1, per_row(len(rows)))
        fig = timeline_dict(
            flame.with_hover(lod.table),
            row_label="depth",
            rows=rows,
            x_range=(x0, x1),
            row_names=flame.row_names(spans),
        )
    else:
        rows = list(range(report.target_info.num_ipus)) if chosen == ipu_view.ALL_IPUS else [chosen]
        spans = view.flat_spans(report, run)
        if chosen != ipu_view.ALL_IPUS:
            spans = spans[spans["row"].to_numpy() == chosen]
        lod = view.level_of_detail(spans, x0, x1, per_row(len(rows)))
        fig = timeline_dict(lod.table, row_label="IPU", rows=rows, x_range=(x0, x1))
    first, last = view.steps_in_cycle_range(report, run, ipu, x0, x1)
    # as many steps as tile_step_cycles reads: all, or MAX_TILE_STEPS evenly spaced (> 1 apart, so distinct)
    shown = min(last - first, MAX_TILE_STEPS)
    detail = (
        f"Run {run}: {run_figures(report, run)['steps']:,} executed steps. "
        + lod.detail
        + (f". Flame: IPU {ipu}" + BUSIEST if mode == "flame" and chosen == ipu_view.ALL_IPUS else "")
        + f". Tiles x steps: IPU {ipu}"
        + (BUSIEST if chosen == ipu_view.ALL_IPUS and report.target_info.num_ipus > 1 else "")
        + f", steps {first:,}..{max(last - 1, first):,}"
        + (f" ({shown} sampled of {last - first:,}; zoom in for every step)." if last - first > shown else ".")
    )
    return fig, detail, (render_tiles(run, chosen, cycle_range) if tiles else None)


@callback(
    Output(ids.TRACE_STEP_DETAILS, "children"),
    Input(ids.TRACE_TIMELINE, "clickData"),
    State(ids.TRACE_RUN, "value"),
    State(ids.TRACE_VIEW, "value"),
    State(ids.TRACE_IPU, "value"),
    prevent_initial_call=True,
)
def step_clicked(click: dict | None, run: Any, mode: str, ipu: Any) -> Any:
    points = (click or {}).get("points", [])
    span = points[0].get("customdata") if points else None
    if not isinstance(span, list) or len(span) != 3:
        return dash.no_update
    return span_panel(int(run), mode, ipu_view.selected_ipu(ipu), [int(v) for v in span])


def clicked_step(run: int, mode: str, chosen: int, span: list[int]) -> tuple[int, int]:
    """(executed step, IPU) of a clicked span, from the span's own customdata [row, step, cycle]
    (``timeline_dict``): an exact step is itself; a bin or a flame's frame (step -1) gives the step
    running at the middle of its visible part. The flat view's rows are IPUs; the flame shows the
    chosen IPU (the busiest for "All IPUs")."""
    row, step, cycle = span
    ipu = row if mode == "flat" else one_ipu(state.report(), run, chosen)
    return (step if step >= 0 else view.step_at(state.report(), run, ipu, cycle)), ipu


def span_panel(run: int, mode: str, chosen: int, span: list[int]) -> Any:
    step, ipu = clicked_step(run, mode, chosen, span)
    d = view.step_details(state.report(), run, step)
    if d.empty:
        return dash.no_update
    return step_panel(run, step, ipu, d)


def step_panel(run: int, step: int, ipu: int, d: Any) -> html.Div:
    """A clicked step: its figures on every IPU, and on the clicked IPU how long each tile was busy
    and how long it waited for the sync (PopVision's BSP split of one step)."""
    title = f"Executed step {step:,}: {d['name'].iat[0]} ({d['type'].iat[0]}), run {run}"
    split = view.step_tile_split(state.report(), run, step, ipu)
    fig = step_tile_split_figure(split, f"Step {step:,} on IPU {ipu}, per tile: busy, then waiting for the sync")
    return html.Div(
        [
            html.H6(title, className="mt-2"),
            small_grid(
                d.drop(columns=["type", "name"]).assign(
                    tile_balance=d["tile_balance"].map(format_percent),
                    active_tile_balance=d["active_tile_balance"].map(format_percent),
                ),
                grid_id=ids.TRACE_STEP_GRID,
            ),
            dcc.Graph(id=ids.TRACE_STEP_TILES, figure=fig, config={"displaylogo": False}),
        ]
    )


@callback(Output(ids.TRACE_IPUS, "children"), Input(ids.TRACE_RUN, "value"))
def ipus(run: Any) -> Any:
    """Per IPU: cycles by step kind, FLOPs, data, tile balance (as every page defines it)."""
    t = view.ipu_table(state.report(), int(run))
    for col in ("tile_balance", "tile_utilisation"):
        t[col] = t[col].map(format_percent)
    return html.Div([html.H6(f"Per IPU, run {int(run)}", className="mt-2"), small_grid(t, grid_id=ids.TRACE_IPU_TABLE)])


@callback(Output(ids.TRACE_SUMMARY, "children"), Input(ids.TRACE_RUN, "value"))
def summary(run: Any) -> Any:
    s = view.trace_summary(state.report(), int(run))
    clock = state.report().target_info.clock_hz
    cards = dbc.Row(
        [
            stat_card("Total cycles", f"{s['cycles']:,}", format_seconds(s["cycles"] / clock)),
            stat_card("FLOPs", format_flops(s["flops"]), f"{format_rate(s['flops_per_cycle'])} FLOPs/cycle"),
            stat_card("Executed steps", f"{s['steps']:,}", f"run {s['run']}"),
            stat_card(
                "Tile balance",
                format_percent(s["tile_balance"]),
                f"active tiles: {format_percent(s['active_tile_balance'])} (cycle-weighted, Sync left out)",
            ),
            stat_card("Tile utilisation", format_percent(s["tile_utilisation"]), "tiles active (cycle-weighted)"),
            stat_card(
                "Stream copy in / out",
                f"{format_bytes(s['stream_copy_bytes_in'])} / {format_bytes(s['stream_copy_bytes_out'])}",
                f"global exchange {format_bytes(s['global_exchange_bytes_in'])} / "
                f"{format_bytes(s['global_exchange_bytes_out'])}",
            ),
        ],
        className="g-2",
    )
    return dbc.Row(
        [dbc.Col(cards, lg=8), dbc.Col(dcc.Graph(figure=proportions_figure(s), config={"displayModeBar": False}), lg=4)]
    )


dash.register_page(
    __name__,
    path="/execution-trace",
    name="Execution Trace",
    order=7,
    title="tilescope · Execution Trace",
    layout=layout,
)
