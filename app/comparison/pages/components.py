"""Layout pieces shared by the compare sections: each page's compare tab, the section frame, signed
deltas and the headline deltas table (baseline / active / delta / ratio)."""

from __future__ import annotations

import math
from typing import Any

import dash_bootstrap_components as dbc
from dash import ALL, Input, Output, State, clientside_callback, dcc, html

from app import ids
from app.comparison.figures import DOWN, UP
from app.comparison.pages import baselines
from app.grid import short_header  # noqa: F401 - compare tables' headers, re-exported
from app.units import (
    format_delta,
    format_metric,
    with_minus,
)  # one formatting of metric values for the CLI, HTML and app

#: Figures of the compare sections: no logo, same as the pages.
GRAPH_CONFIG = {"displaylogo": False}


def frame(key: str, title: str, *children: Any) -> html.Div:
    """A compare section: a tinted block headed "Compare: <title> (vs <baseline>)"."""
    return html.Div(
        [
            html.H5(
                [
                    html.Span("Compare: ", className="text-info"),
                    title,
                    html.Span(f"  vs baseline {baselines.label(key)}", className="text-muted small"),
                ],
                className="mb-2",
            ),
            *children,
        ],
        className="border border-info rounded p-3 mb-3 bg-light",
    )


def unavailable(key: str | None) -> Any:
    """None when compare is on and the baseline opens; else what to show (nothing when off)."""
    if not key:
        return html.Div()
    if not baselines.is_allowed(key):
        return dbc.Alert(
            "not an allowed baseline (the viewer opens only reports it was started with or beside them)", color="danger"
        )
    error = baselines.load_error(key)
    return dbc.Alert(error, color="danger") if error else None


def signed(name: str, delta: float | None) -> str:
    """A delta with its sign, formatted like the metric (bytes, counts; percentage points for a
    percentage: ``app.units.format_delta``)."""
    return format_delta(name, delta)


def ratio_text(ratio: float | None, delta: float | None) -> str:
    if ratio is None or not math.isfinite(ratio):
        return "-"
    return with_minus(f"×{ratio:.4g}" + (f" ({(ratio - 1) * 100:+.2f}%)" if delta else ""))


def delta_style(delta: float | None, name: str = "") -> dict[str, str]:
    """Red where the change costs more, green where it costs less; a higher balance is better and
    FLOPs are work done, not cost (bold, uncoloured)."""
    if not delta:
        return {}
    if "flops" in name:
        return {"fontWeight": "600"}
    worse = delta < 0 if "balance" in name else delta > 0
    return {"color": UP if worse else DOWN, "fontWeight": "600"}


def delta_table(metrics: dict[str, dict[str, Any]], names: dict[str, str], table_id: str | None = None) -> html.Table:
    """metric / baseline / active / delta / ratio for ``names`` (metric name -> label), in order."""
    head = html.Tr(
        [
            html.Th(h, className="text-end text-nowrap" if i else "")
            for i, h in enumerate(("metric", "baseline", "active", "delta", "ratio"))
        ]
    )
    rows = []
    for name, lab in names.items():
        m = metrics.get(name)
        if m is None:
            continue
        rows.append(
            html.Tr(
                [
                    html.Td(lab, title=name),
                    html.Td(format_metric(name, m["baseline"]), className="text-end text-nowrap"),
                    html.Td(format_metric(name, m["active"]), className="text-end text-nowrap"),
                    html.Td(
                        signed(name, m["delta"]), className="text-end text-nowrap", style=delta_style(m["delta"], name)
                    ),
                    html.Td(ratio_text(m["ratio"], m["delta"]), className="text-end text-nowrap"),
                ]
            )
        )
    kwargs = {"id": table_id} if table_id else {}
    return html.Table([html.Thead(head), html.Tbody(rows)], className="table table-sm w-auto mb-2", **kwargs)


def graph(figure: Any, graph_id: str | None = None) -> dcc.Graph:
    kwargs = {"id": graph_id} if graph_id else {}
    return dcc.Graph(figure=figure, config=GRAPH_CONFIG, **kwargs)


#: The two tabs of a page while compare is on.
REPORT_TAB, COMPARE_TAB = "report", "compare"
HIDDEN = {"display": "none"}


def shown(page: str) -> dict[str, str]:
    """Id of the store holding the baseline ``page``'s compare pane shows: a section's callbacks
    listen to it (not to the shell's baseline), so a comparison is built only once its tab opens."""
    return {"type": ids.COMPARE_SHOWN, "page": page}


def compare_tabs(page: str, own_view: list[Any], section: Any) -> html.Div:
    """The page's own view, and its comparison in a second tab: "This report" | "Compare with
    <baseline>". The tab bar shows only while compare is on and the page opens on its own view.
    Both stay in the page (the inactive one hidden), so selections made in one hold in the other."""
    return html.Div(
        [
            html.Div(
                dbc.Tabs(
                    [dbc.Tab(label="This report", tab_id=REPORT_TAB), dbc.Tab(label="Compare", tab_id=COMPARE_TAB)],
                    id={"type": ids.COMPARE_TABS, "page": page},
                    active_tab=REPORT_TAB,
                    className="mb-2",
                ),
                id={"type": ids.COMPARE_TAB_BAR, "page": page},
                style=HIDDEN,
            ),
            # "" (none yet), not None: a memory dcc.Store whose data is None sets it again (to
            # undefined) when it mounts, which runs its listeners, prevent_initial_call or not: the
            # page's compare section was fetched (empty) after every page load (s23's bench)
            dcc.Store(id=shown(page), data=""),
            html.Div(own_view, id={"type": ids.COMPARE_OWN_VIEW, "page": page}),
            html.Div(section, id={"type": ids.COMPARE_PANE, "page": page}, style=HIDDEN),
        ]
    )


# The tab bar, the tabs' labels and which of the page's two views shows, for baseline ``key`` (null:
# compare off), each page's ``active`` tab and the baseline its pane is ``showing``. In the browser: it
# runs on every page load and every tab click, and a server round trip (one more request after the
# page's layout arrives, ~100-200 ms on a busy 2-core machine) bought nothing but these few styles.
# A new baseline (or none) brings the page's own view to the front; the pane's baseline (the
# ``shown`` store its section listens to) is set only when the compare tab opens on a baseline it
# does not show yet, so the comparison is built once, when first looked at. Labels come from the
# baseline names the server listed (``shell.banner``'s store).
clientside_callback(
    """function (key, active, url) {
        const no = window.dash_clientside.no_update;
        const hidden = {display: "none"};
        const changed = (window.dash_clientside.callback_context.triggered || [])
            .some(t => t.prop_id === "__BASELINE__.data");
        const n = active.length;
        const all = v => Array(n).fill(v);
        // an active tab already right is not written again (that would wake the pane's store below)
        const tabTo = want => active.map((a, i) => (want[i] === a ? no : want[i]));
        if (!key) return [all(hidden), all(no), tabTo(all("__REPORT__")), all({}), all(hidden)];
        const name = (url && url.names && url.names[key]) || key.split("/").pop();
        const tab = (label, id) => ({namespace: "dash_bootstrap_components", type: "Tab",
                                     props: {label: label, tab_id: id}});
        const tabs = [tab("This report", "__REPORT__"), tab("Compare with " + name, "__COMPARE__")];
        const open = active.map(a => !changed && a === "__COMPARE__");
        return [
            all({}),
            all(tabs),
            tabTo(open.map(o => (o ? "__COMPARE__" : "__REPORT__"))),
            open.map(o => o ? hidden : {}),
            open.map(o => o ? {} : hidden),
        ];
    }""".replace("__BASELINE__", ids.COMPARE_BASELINE)
    .replace("__REPORT__", REPORT_TAB)
    .replace("__COMPARE__", COMPARE_TAB),
    Output({"type": ids.COMPARE_TAB_BAR, "page": ALL}, "style"),
    Output({"type": ids.COMPARE_TABS, "page": ALL}, "children"),
    Output({"type": ids.COMPARE_TABS, "page": ALL}, "active_tab"),
    Output({"type": ids.COMPARE_OWN_VIEW, "page": ALL}, "style"),
    Output({"type": ids.COMPARE_PANE, "page": ALL}, "style"),
    Input(ids.COMPARE_BASELINE, "data"),
    Input({"type": ids.COMPARE_TABS, "page": ALL}, "active_tab"),
    State(ids.COMPARE_URL, "data"),
)
# The pane's baseline: set when the compare tab opens on a baseline it does not show yet (so its
# section is built once, when first looked at), cleared when compare is off; never on a page's
# first render (the section's request would come back empty).
clientside_callback(
    """function (active, key, showing) {
        const no = window.dash_clientside.no_update;
        return active.map((a, i) => key && a === "__COMPARE__" && showing[i] !== key ? key : (key ? no : null));
    }""".replace("__COMPARE__", COMPARE_TAB),
    Output({"type": ids.COMPARE_SHOWN, "page": ALL}, "data"),
    Input({"type": ids.COMPARE_TABS, "page": ALL}, "active_tab"),
    State(ids.COMPARE_BASELINE, "data"),
    State({"type": ids.COMPARE_SHOWN, "page": ALL}, "data"),
    prevent_initial_call=True,
)
