"""Operations Graph: the operations of a layer as a data-flow graph, coloured by cycles, memory or
FLOPs (see app.views.operations.operations_graph for how edges are found)."""

from __future__ import annotations

from typing import Any

import dash
import dash_bootstrap_components as dbc
from dash import Input, Output, callback, dcc, html

from app import ids, state
from app.comparison.pages import baselines
from app.figures.operations import graph_height, operations_graph_figure
from app.pages.operations import LAYER_NAMES, layers
from app.views import operations as view


def layout(**_: object) -> html.Div:
    lays = layers()
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
                        md=5,
                    ),
                ],
                className="g-3 mb-2",
            ),
            dcc.Graph(
                id=ids.OPERATIONS_GRAPH,
                config={"displaylogo": False},
                style={"height": "max(360px, calc(100vh - 200px))"},
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
    Output(ids.OPERATIONS_GRAPH, "figure"),
    Output(ids.OPERATIONS_GRAPH_NOTE, "children"),
    Output(ids.OPERATIONS_GRAPH, "style"),
    Input(ids.OPERATIONS_GRAPH_LAYER, "value"),
    Input(ids.OPERATIONS_GRAPH_COLOUR, "value"),
    Input(ids.COMPARE_BASELINE, "data"),
)
def graph(layer: str, colour: str, key: str | None = None) -> Any:
    nodes, edges = view.operations_graph(state.report(), layer)
    compare_note = ""
    if colour == "delta_cycles":
        if baselines.is_allowed(key) and not baselines.load_error(key):
            nodes = nodes.assign(delta_cycles=cycle_deltas(key, layer, nodes["op_id"]))
            compare_note = f" Colour: cycles active − baseline ({baselines.label(key)}), matched by debug-context path."
        else:
            colour, compare_note = "cycles", " Δ cycles needs a baseline: pick one in the navbar (coloured by cycles)."
    if len(edges) and (edges["kind"] == "order").all():
        note = (
            "This report (format 1) records no data flow between operations: edges join operations in the "
            "order they first executed."
        )
    else:
        note = (
            "Edges are data flow: an operation points to the operations that read a variable it wrote "
            "(hover a node for its figures). Columns are data-flow depth; colour shows the chosen measure."
        )
    if nodes.attrs.get("hidden"):
        note += (
            f" {nodes.attrs['hidden']} operations with no steps of their own (all in nested operations) are not drawn."
        )
    note += compare_note
    # the graph fills the window below the controls, and grows past it for a tall graph
    style = {"height": f"max({graph_height(nodes)}px, calc(100vh - 200px))"}
    return operations_graph_figure(nodes, edges, colour), note, style


def cycle_deltas(key: str, layer: str, op_ids: Any) -> Any:
    """Active − baseline cycles of each active operation (its own cycles where it is new)."""
    c = baselines.comparison(key, layer=layer)
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
