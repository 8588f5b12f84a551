"""Operations Graph: the operations of a layer grouped by the model's structure (repeated blocks,
name scopes, debug contexts: app.views.operations_graph), drawn with Cytoscape at the places of a
layered layout wrapped into rows (app.figures.graph_layout), coloured by cycles, memory, FLOPs or Δ cycles against a baseline on a log scale.

Groups start closed; a click on a group opens it (server-side: only the visible nodes are sent), a
click on an open group's box closes it. Beside the graph, the heaviest nodes of the group opened
last (or of the top level), clickable too: the slowest layer is two clicks away.
"""

from __future__ import annotations

import json
from typing import Any

import dash
import dash_bootstrap_components as dbc
import dash_cytoscape as cyto
import numpy as np
import pandas as pd
from dash import ALL, Input, Output, State, callback, dcc, html
from dash.exceptions import PreventUpdate

from app import ids, state
from app.comparison.pages import baselines
from app.figures.operations_graph import (
    LAYOUT,
    MEASURE_NAMES,
    STYLESHEET,
    elements,
    format_value,
    legend,
    share_text,
)
from app.pages.operations import LAYER_NAMES, layers
from app.units import format_bytes, format_si
from app.views import operations_graph as og
from app.views.runs import opening_run

# The server places the nodes (app.figures.graph_layout; Cytoscape's preset layout): no layout
# library in the browser, so dash-cytoscape's 1.4 MB extra bundle (dagre and others) is not loaded.

#: Items in the "heaviest" list.
HEAVIEST = 10


def graph_layers() -> list[str]:
    """The layers to choose from, the model's own (ONNX) first when the report has it."""
    first = og.first_layer(state.report())
    return sorted(layers(), key=lambda lay: lay != first)


def layout(**_: object) -> html.Div:
    lays = graph_layers()
    return html.Div(
        [
            html.H3("Operations Graph"),
            html.Div(id=ids.OPERATIONS_GRAPH_NOTE, className="small text-muted mb-2"),
            dbc.Row(
                [
                    dbc.Col(
                        dbc.Select(
                            id=ids.OPERATIONS_GRAPH_LAYER,
                            value=lays[0],
                            options=[{"label": LAYER_NAMES[lay], "value": lay} for lay in lays],
                        ),
                        md=3,
                    ),
                    dbc.Col(
                        dbc.RadioItems(
                            id=ids.OPERATIONS_GRAPH_COLOUR,
                            inline=True,
                            value="cycles",
                            options=colour_options(None),
                        ),
                        md=6,
                    ),
                    dbc.Col(
                        dbc.Button(
                            "Close all groups",
                            id=ids.OPERATIONS_GRAPH_CLOSE,
                            size="sm",
                            outline=True,
                            color="secondary",
                        ),
                        md=3,
                        className="text-end",
                    ),
                ],
                className="g-3 mb-2",
            ),
            dcc.Store(id=ids.OPERATIONS_GRAPH_OPEN),
            dcc.Store(id=ids.OPERATIONS_GRAPH_FIT),
            dbc.Row(
                [
                    dbc.Col(
                        cyto.Cytoscape(
                            id=ids.OPERATIONS_GRAPH,
                            elements=[],
                            layout=LAYOUT,
                            stylesheet=STYLESHEET,
                            minZoom=0.05,
                            maxZoom=4,
                            boxSelectionEnabled=False,
                            autoungrabify=True,  # a click opens a group; a drag pans, never moves a node
                            style={"width": "100%", "height": "max(420px, calc(100vh - 230px))"},
                            className="border rounded",
                        ),
                        md=9,
                    ),
                    dbc.Col(
                        [
                            html.Div(id=ids.OPERATIONS_GRAPH_LEGEND),
                            html.Div(id=ids.OPERATIONS_GRAPH_HEAVIEST),
                            html.Div(id=ids.OPERATIONS_GRAPH_DETAILS, className="small mt-2"),
                        ],
                        md=3,
                        style={"minWidth": 0},
                    ),
                ],
                className="g-2",
            ),
        ]
    )


def colour_options(key: str | None) -> list[dict[str, Any]]:
    """The colour choices; Δ cycles only with a baseline to compare with (greyed out otherwise)."""
    return [
        {"label": "cycles", "value": "cycles"},
        {"label": "memory", "value": "memory_bytes"},
        {"label": "FLOPs", "value": "flops"},
        {
            "label": "Δ cycles vs baseline" if key else "Δ cycles vs baseline (pick one in the navbar)",
            "value": "delta_cycles",
            "disabled": not baselines.is_allowed(key),
        },
    ]


@callback(Output(ids.OPERATIONS_GRAPH_COLOUR, "options"), Input(ids.COMPARE_BASELINE, "data"))
def colours(key: str | None) -> list[dict[str, Any]]:
    return colour_options(key)


@callback(
    Output(ids.OPERATIONS_GRAPH_OPEN, "data"),
    Output(ids.OPERATIONS_GRAPH, "elements"),
    Output(ids.OPERATIONS_GRAPH_LEGEND, "children"),
    Output(ids.OPERATIONS_GRAPH_HEAVIEST, "children"),
    Output(ids.OPERATIONS_GRAPH_NOTE, "children"),
    Output(ids.OPERATIONS_GRAPH_DETAILS, "children"),
    Input(ids.OPERATIONS_GRAPH_LAYER, "value"),
    Input(ids.OPERATIONS_GRAPH_COLOUR, "value"),
    Input(ids.COMPARE_BASELINE, "data"),
    Input(ids.OPERATIONS_GRAPH, "tapNodeData"),
    Input({"type": ids.OPERATIONS_GRAPH_PICK, "node": ALL}, "n_clicks"),
    Input(ids.OPERATIONS_GRAPH_CLOSE, "n_clicks"),
    State(ids.OPERATIONS_GRAPH_OPEN, "data"),
)
def graph(
    layer: str,
    colour: str,
    key: str | None = None,
    tapped: dict[str, Any] | None = None,
    picks: list[int | None] | None = None,
    close: int | None = None,
    stored: dict[str, Any] | None = None,
) -> tuple[Any, ...]:
    """The callback: which node was clicked (on the graph or in the list), then ``update``."""
    trigger, value = _trigger()
    node = None
    if isinstance(trigger, dict) and trigger.get("type") == ids.OPERATIONS_GRAPH_PICK:
        if not value:
            raise PreventUpdate  # the list was drawn again, nothing was clicked
        node = str(trigger.get("node", ""))
    elif trigger == ids.OPERATIONS_GRAPH and tapped:
        node = str(tapped.get("id", ""))
    return update(layer, colour, key, None if trigger == ids.OPERATIONS_GRAPH_CLOSE else stored, node)


def _trigger() -> tuple[Any, Any]:
    """The id and value that fired the callback (None, None outside one, as in tests)."""
    try:
        triggered = dash.ctx.triggered
        return dash.ctx.triggered_id, triggered[0].get("value") if triggered else None
    except dash.exceptions.MissingCallbackContextException:
        return None, None


def update(
    layer: str, colour: str, key: str | None, stored: dict[str, Any] | None, node: str | None = None
) -> tuple[Any, ...]:
    """Open or close the group ``node`` ('g<group>'), show an operation's figures ('op<id>'), or
    draw again for a new layer or colour. ``stored``: the layer, its open groups and the group
    opened last (None: start afresh, the top level closed). Returns store, elements, legend,
    heaviest list, note and details."""
    h = og.hierarchy(state.report(), layer)
    fresh = not stored or stored.get("layer") != layer
    opened = og.default_expanded(h) if fresh or stored is None else frozenset(stored.get("open", []))
    focus = "" if fresh or stored is None else str(stored.get("focus", ""))
    details: Any = ""
    if node is not None and not fresh:
        details = node_details(h, node)
        if not node.startswith("g"):  # an operation: its figures, the graph as it is
            return dash.no_update, dash.no_update, dash.no_update, dash.no_update, dash.no_update, details
        before = opened
        opened = og.toggle(h, opened, node)
        group = node[1:]
        if group in h.groups.index:
            focus = group if group in opened - before else str(h.groups.at[group, "parent"])
    return (*draw(h, layer, colour, key, opened, focus), details)


def draw(h: og.Hierarchy, layer: str, colour: str, key: str | None, opened: frozenset[str], focus: str) -> tuple:
    """Store, elements, legend, heaviest list and note for ``opened`` groups."""
    nodes, edges = og.frontier(h, opened)
    note = (
        f"{len(h.ops):,} operations in {len(h.groups):,} groups found in the model's structure (repeated "
        "blocks, name scopes, enclosing layers). Click a group (▸) to open it, its box (▾) to close it; "
        "scroll to zoom, drag to pan. Edges are data flow."
        if len(h.groups)
        else f"{len(h.ops):,} operations. Scroll to zoom, drag to pan. Edges are data flow."
    )
    report = state.report()
    if report.has_execution_profile:
        run = opening_run(report)
        name = str(report.runs().set_index("run").at[run, "name"]) if run in set(report.runs()["run"]) else ""
        note += f" Cycles and FLOPs of run {run}{f' ({name})' if name else ''}, the run that computes."
    if len(h.edges) and (h.edges["kind"] == "order").all():
        note += " This report (format 1) records no data flow: edges join operations in the order they first ran."
    if h.ops.attrs.get("hidden"):
        hidden = int(h.ops.attrs["hidden"])
        note += (
            f" {hidden:,} operations with no steps of their own are not drawn."
            if hidden > 1
            else " 1 operation with no steps of its own is not drawn."
        )
    measure, per_op = colour, None
    if colour == "delta_cycles":
        if baselines.is_allowed(key) and not baselines.load_error(key):
            per_op = pd.Series(cycle_deltas(str(key), layer, h.ops["op_id"]), index=h.ops["op_id"].to_numpy())
            note += f" Colour: cycles active − baseline ({baselines.label(key)}), matched by debug-context path."
        else:
            measure = "cycles"
            note += " Δ cycles needs a baseline: pick one in the navbar (coloured by cycles)."
    if per_op is None:
        values = nodes[measure].to_numpy(dtype=np.float64)
        scale = og.colour_scale(h, measure)
        total = float(h.ops[measure].sum())
    else:
        values = og.node_values(h, nodes, per_op)
        scale = og.colour_scale(h, measure, per_op)
        total = 0.0
    els = elements(nodes, edges, values, measure, scale, total)
    store = {"layer": layer, "open": sorted(opened), "focus": focus}
    if nodes.empty:
        return store, els, "", "", "No operations in this layer."
    return store, els, legend(scale, measure), heaviest(h, nodes, values, measure, focus, total), note


def heaviest(h: og.Hierarchy, nodes: pd.DataFrame, values: np.ndarray, measure: str, focus: str, total: float) -> Any:
    """The shown nodes inside ``focus`` (the top level if '') with most of the measure, as buttons
    that do what a click on the graph does."""
    parent = f"g{focus}" if focus and focus in h.groups.index else ""
    inside = nodes.assign(value=values)[(~nodes["expanded"]) & (nodes["parent"] == parent)]
    if measure == "delta_cycles":
        inside = inside.reindex(inside["value"].abs().sort_values(ascending=False, kind="stable").index)
    else:
        inside = inside.sort_values("value", ascending=False, kind="stable")
    where = h.groups.at[focus, "label"] if parent else "the top level"
    items = [
        dbc.ListGroupItem(
            [
                html.Span(
                    ("▸ " if row.is_group else "") + str(row.label), title=row.title, className="text-truncate me-2"
                ),
                html.Span(
                    format_value(measure, row.value)
                    + (f" · {share_text(row.value, total)}" if total > 0 and row.value > 0 else ""),
                    className="text-nowrap",
                ),
            ],
            id={"type": ids.OPERATIONS_GRAPH_PICK, "node": row.id},
            action=True,
            className="d-flex justify-content-between py-1 px-2 small",
        )
        for row in inside.head(HEAVIEST).itertuples(index=False)
    ]
    head = "largest Δ" if measure == "delta_cycles" else f"most {MEASURE_NAMES[measure]}"
    return html.Div([html.Div(f"In {where}, {head}:", className="small fw-bold mb-1"), dbc.ListGroup(items)])


def node_details(h: og.Hierarchy, node: str) -> Any:
    """A clicked node's figures: an operation's own, a group's summed over its operations."""
    if node.startswith("op") and node[2:].isdigit():
        rows = h.ops[h.ops["op_id"] == int(node[2:])]
        if rows.empty:
            return ""
        r = rows.iloc[0]
        head, title = f"{r['name']} ({r['op_type']})", ""
    elif node.startswith("g") and node[1:] in h.groups.index:
        r = h.groups.loc[node[1:]]
        head, title = str(r["label"]), str(r["title"])
    else:
        return ""
    figures = [
        f"cycles {format_si(r['cycles'])}",
        f"FLOPs {format_si(r['flops'])}",
        f"memory {format_bytes(r['memory_bytes'])}",
    ]
    return html.Div([html.Div(head, className="fw-bold text-break"), html.Div(title), html.Div(" · ".join(figures))])


# After a group opens, zoom to it (else to the whole graph), no closer than 1.5x: the layout fits the
# whole graph, where a group of a long model is small. Cytoscape keeps its instance on its container;
# it caches where its container is, which the note drawn above it moves, so it is told to look again.
dash.clientside_callback(
    """
    function(store) {
        const host = document.getElementById(__GRAPH__);
        if (!host) { return null; }
        const box = [host, ...host.querySelectorAll('div')].find(e => e._cyreg && e._cyreg.cy);
        if (!box) { return null; }
        const cy = box._cyreg.cy;
        const focus = store && store.focus ? 'g' + store.focus : null;
        const fit = () => {
            cy.resize();  // the note above may have moved the graph: Cytoscape caches where it is
            const target = focus ? cy.getElementById(focus) : cy.elements();
            if (target.empty()) { return; }
            cy.fit(target, 24);
            if (cy.zoom() > 1.5) { cy.zoom(1.5); cy.center(target); }
        };
        cy.one('layoutstop', fit);
        setTimeout(fit, 60);
        return focus;
    }
    """.replace("__GRAPH__", json.dumps(ids.OPERATIONS_GRAPH)),
    Output(ids.OPERATIONS_GRAPH_FIT, "data"),
    Input(ids.OPERATIONS_GRAPH_OPEN, "data"),
)


def cycle_deltas(key: str, layer: str, op_ids: Any) -> Any:
    """Active − baseline cycles of each active operation (its own cycles where it is new), in the
    run that computes, as the graph's own cycles (the Operations compare tab's default run too)."""
    report = state.report()
    c = baselines.comparison(key, layer=layer, run=opening_run(report) if report.has_execution_profile else None)
    key_of = c.operation_tables[1].set_index("debug_context_id")["key"]
    delta = c.operations.set_index("key")["delta_cycles"]
    return delta.reindex(key_of.reindex(op_ids).to_numpy()).fillna(0).to_numpy()


dash.register_page(
    __name__,
    path="/operations-graph",
    name="Operations Graph",
    order=6,
    title="tilescope · Operations Graph",
    layout=layout,
)
