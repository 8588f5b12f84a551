"""The Dash app: a navbar shell around Dash Pages, one page per PopVision view.

``create_app(report_path, baseline_path=None)`` validates and loads the reports server-side
(app.state), then builds the app. Everything the browser loads (Bootstrap CSS, Plotly, AG Grid)
is served by the app itself, so it works offline.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import dash
import dash_bootstrap_components as dbc
from dash import Dash, dcc, html

from app import guard, ids, state
from app.comparison.pages import shell as compare_shell  # compare mode: baseline picker and banner
from report_format.vocabulary import Layer

#: Page modules, in navbar order.
PAGES = (
    "summary",
    "insights",
    "memory",
    "liveness",
    "program_tree",
    "operations",
    "operations_graph",
    "execution_trace",
)
ASSETS = Path(__file__).parent / "assets"


def create_app(
    report_path: str | Path,
    baseline_path: str | Path | None = None,
    *,
    warm: bool = False,
    sweep_path: str | Path | None = None,
) -> Dash:
    """The viewer app on ``report_path`` (and a baseline for compare mode). With ``warm``, a
    background thread fills the views' caches so the first visit to each page is fast. With
    ``sweep_path`` (``tilescope serve SWEEP_DIR``) the Sweep page lists its points, and opening one
    makes its report the one every page shows."""
    state.configure(report_path, baseline_path, sweep_path)
    app = Dash(
        __name__,
        use_pages=True,
        pages_folder="",
        assets_folder=str(ASSETS),
        serve_locally=True,
        suppress_callback_exceptions=True,
        title="tilescope",
        update_title=None,
    )
    for name in PAGES:  # pages register themselves on import (after the app exists)
        importlib.import_module(f"app.pages.{name}")
    if sweep_path is not None:
        sweep_page = importlib.import_module("app.pages.sweep")
        sweep_page.register_open(app.server)
    from app import grid

    grid.register_callbacks()
    guard.install(app)  # request limits and argument checks for every callback registered above
    # a function, so the navbar names the report of the moment (a sweep's viewer switches it)
    app.layout = shell
    if warm:
        import threading

        threading.Thread(target=warm_caches, name="tilescope-warm", daemon=True).start()
    return app


def warm_caches() -> None:
    """Compute what the pages' first renders need, most visited first (errors surface later, in the page)."""
    from app.views import (
        execution_trace,
        flame,
        insights,
        liveness,
        memory,
        operations,
        operations_graph,
        program_tree,
        runs,
        tables,
    )

    report = state.report()
    steps: list = [
        lambda: memory.tile_memory_breakdown(report, "category", True),
        lambda: report.table("tile_memory_by_category"),
        lambda: liveness.liveness_by_step(report),
        lambda: (insights.hints(report), insights.top_vertices(report), insights.top_exchanges(report)),
        lambda: program_tree.program_tree(report),
        lambda: tables.variables(report),
        lambda: report.table("variable_placements"),
        # the Memory page's per-tile tabs read columns of the vertex and exchange tables: on the
        # POD16 Llama-2-7B-shaped report 5.8 M vertex rows, ~0.7 s to decompress at the first visit
        lambda: (memory.tile_compute_sets(report, None), memory.tile_vertices(report, None)),
        lambda: memory.tile_exchanges(report, None),
        lambda: operations.operations(report, Layer.POPLIBS, None),
        # the Operations Graph opens on the model's own layer when there is one
        lambda: operations_graph.hierarchy(report, operations_graph.first_layer(report)),
    ]
    if report.has_execution_profile:
        # the flame view (a click on the trace page) nests steps under the programs' frames, built once
        # a report (0.35 s of the POD16 decoder's 1.07 s flame of one IPU, bench/viewer.py --warm)
        steps += [
            lambda: execution_trace.flat_spans(report, runs.opening_run(report)),
            lambda: flame.frame_table(report),
        ]
    baseline = state.started_with()["baseline"]
    if baseline:
        steps += _compare_steps(baseline, report)
    for step in steps:
        try:
            step()
        except Exception:  # noqa: BLE001 - a page will show the error when visited
            return


def _compare_steps(key: str, report: Any) -> list:
    """With ``serve --compare``: the comparison each page's compare tab shows first, against the
    baseline it was started with. Without this the session's first compare tab computed the
    baseline's per-report views (operations, program steps, runs, insights...) and their alignment: 2-5 s on
    the real-size pair, a second or less for every tab after it (the pair's Comparison is cached)."""
    from app.comparison.pages import baselines
    from app.views.runs import opening_run

    def c() -> Any:
        return baselines.comparison(key)

    from app.pages.operations import layers
    from app.views.insights import hints

    run = opening_run(report)  # the Operations page's (and its compare tab's) first run and layer
    layer = layers()[0]
    return [
        lambda: (c().parity, c().step_counts(), c().liveness_peaks, c().metrics),  # Summary
        lambda: hints(c().baseline),  # Insights (the active report's hints are warmed above)
        lambda: c().liveness,  # Liveness
        lambda: (c().memory_totals, c().tile_memory, c().source_target),  # Memory
        lambda: baselines.comparison(key, layer=layer, run=run).operations,  # Operations
        lambda: (c().runs, c().executed_steps(run)),  # Execution Trace
    ]


def shell() -> html.Div:
    report = state.report()
    t = report.target_info
    nav = [
        dbc.NavItem(dbc.NavLink(page["name"], href=page["relative_path"], active="exact", className="text-nowrap px-2"))
        for page in sorted(dash.page_registry.values(), key=lambda p: p.get("order", 99))
    ]
    target = f"{t.name} · {t.num_ipus} IPU{'' if t.num_ipus == 1 else 's'} × {t.tiles_per_ipu:,} tiles"
    title = f"{report.path.name} · {target}"
    return html.Div(
        [
            dbc.Navbar(
                dbc.Container(
                    [
                        dbc.NavbarBrand("tilescope", href="/", className="fw-bold"),
                        dbc.Nav(nav, id=ids.NAV, navbar=True, className="me-auto"),
                        compare_shell.picker(),  # which baseline to compare with (off by default)
                        # the report's name over its target, on two short lines, so the bar stays one
                        # row at 1600 px without cutting either (a very long name wraps; full text on hover)
                        html.Span(
                            [html.Span(report.path.name, className="fw-semibold"), html.Br(), target],
                            id=ids.REPORT_TITLE,
                            title=title,
                            className="navbar-text small text-light lh-sm py-0 ms-2",
                            style={"maxWidth": "16rem", "overflowWrap": "anywhere"},
                        ),
                    ],
                    fluid=True,
                ),
                color="dark",
                dark=True,
                className="mb-3",
            ),
            compare_shell.banner(),  # names both reports while compare is on
            dbc.Container(dash.page_container, fluid=True),
            dcc.Location(id=ids.SHELL_LOCATION),
            # plotly.js (~4.6 MB, evaluated in 1-1.6 s on this machine's headless Chromium) is loaded by the
            # first graph drawn. A page with no graph of its own (Operations, a grid) left it to a click: its
            # compare tab took 2.1-2.6 s in a fresh browser (bench/viewer_browser.py --first-graph). A graph
            # in the shell itself made every full load of a grid page pay it (Operations 1.7 -> 3.1 s fresh),
            # so the browser puts a graph in this hidden slot once the page is quiet (assets/plotly_preload.js).
            html.Div(id=ids.PLOTLY_PRELOAD, style={"display": "none"}),
        ]
    )
