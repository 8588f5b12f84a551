"""Operations in compare mode: every operation of the chosen layer matched by debug-context path,
with baseline / active / delta cycles, FLOPs and memory in a sortable, filterable server-side
grid (added and removed operations included), and the biggest cycle and memory changes."""

from __future__ import annotations

from typing import Any

import dash_bootstrap_components as dbc
import pandas as pd
from dash import ALL, Input, Output, State, callback, html

from app import grid, ids
from app.comparison.figures import top_delta_figure
from app.comparison.keys import disambiguate
from app.comparison.operations import NO_CONTEXT
from app.comparison.pages import baselines
from app.comparison.pages.components import delta_table, frame, graph, shown, unavailable
from app.views.operations import count_sentence
from report_format.vocabulary import Layer

OPERATIONS_KIND = "compare-operations"
#: The grid's columns: the operation as the Operations page names it (the model's name first), then
#: the deltas; its debug-context path ("key", what matches the two reports) is the row's id, hidden.
COLUMNS = [
    "name",
    "status",
    "op_type",
    "baseline_cycles",
    "active_cycles",
    "delta_cycles",
    "delta_flops",
    "baseline_memory_bytes",
    "active_memory_bytes",
    "delta_memory_bytes",
    "delta_variables",
    "delta_steps",
    "key",
]
TOP = 15


def _run(run: Any) -> int | None:
    return None if run in (None, -1, "-1", "") else int(run)


@grid.producer(OPERATIONS_KIND)
def operation_rows(baseline: str, layer: str, run: int | None) -> pd.DataFrame:
    """The operations comparison, biggest cycle change first; ``name`` is the operation's label
    ('s3b0_b_conv_365 (conv)', a repeat given '#2'), ``key`` its debug-context path (unique)."""
    ops = baselines.comparison(baseline, layer=layer, run=run).operations
    order = ops["delta_cycles"].abs().sort_values(ascending=False, kind="stable").index
    out = ops.loc[order, COLUMNS].reset_index(drop=True)
    return out.assign(name=disambiguate(out["name"].astype(str).tolist()))


def section() -> html.Div:
    return html.Div(id=ids.COMPARE_OPERATIONS)


@callback(
    Output(ids.COMPARE_OPERATIONS, "children"),
    Input(shown("operations"), "data"),
    Input(ids.OPERATIONS_LAYER, "value"),
    Input(ids.OPERATIONS_RUN, "value"),
    prevent_initial_call=True,  # the pane starts empty and hidden: nothing to ask the server on load
)
def render(key: str | None, layer: str | None, run: Any) -> Any:
    blocked = unavailable(key)
    if blocked is not None:
        return blocked
    args = {"baseline": key, "layer": layer or Layer.POPLIBS, "run": _run(run)}
    ops = grid.frame(OPERATIONS_KIND, grid.json.dumps(args, sort_keys=True))
    status = ops["status"].value_counts()
    is_op = (ops["key"] != NO_CONTEXT).to_numpy()
    in_active = (ops["status"] != "removed").to_numpy()
    out_rows = ops.loc[~is_op & in_active, "active_cycles"]
    outside = int(out_rows.iat[0]) if len(out_rows) else None
    counted = count_sentence(int((is_op & in_active).sum()), outside, int(ops["active_cycles"].sum()))
    cycles_of = "all runs" if args["run"] is None else f"run {args['run']}"
    return frame(
        key,
        f"operations ({args['layer']} layer, cycles of {cycles_of})",
        html.Div(
            f"Active: {counted}. Against the baseline: {int(status.get('added', 0)):,} added, "
            f"{int(status.get('removed', 0)):,} "
            f"removed, {int(status.get('changed', 0)):,} changed, {int(status.get('same', 0)):,} the same. "
            "Sorted by the size of the cycle change; filter under the headers, click a header to sort.",
            className="small text-muted mb-1",
            id=ids.COMPARE_OPERATIONS_COUNTS,
        ),
        grid.big_grid(OPERATIONS_KIND, args, sample=ops, height=380, row_id="key", hidden=("key",), short=True),
        html.Div(id=ids.COMPARE_OPERATIONS_DETAILS, className="mt-2"),
        dbc.Row(
            [
                dbc.Col(
                    graph(top_delta_figure(ops, "name", "delta_cycles", "Biggest cycle changes", TOP, "cycles")),
                    lg=6,
                ),
                dbc.Col(
                    graph(top_delta_figure(ops, "name", "delta_memory_bytes", "Biggest memory changes", TOP, "B")),
                    lg=6,
                ),
            ],
            className="mt-2",
        ),
    )


#: The details card of one operation: what each side has (metric name -> label).
DETAILS = {
    "cycles": "cycles",
    "flops": "FLOPs",
    "memory_bytes": "memory",
    "variables": "variables",
    "steps": "program steps",
}


def operation_details(key: str, layer: str, run: int | None, name: str) -> Any:
    """Baseline / active / delta / ratio of one operation (``name`` is its debug-context path)."""
    ops = operation_rows(key, layer, run).set_index("key")
    full = baselines.comparison(key, layer=layer, run=run).operations.set_index("key")
    if name not in full.index:
        return None
    row = full.loc[name]
    metrics = {}
    for field in DETAILS:
        b, a = float(row[f"baseline_{field}"]), float(row[f"active_{field}"])
        metrics[field] = {"baseline": int(b), "active": int(a), "delta": int(a - b), "ratio": a / b if b else None}
    return html.Div(
        [
            html.Div([html.Strong(str(row["name"])), f" ({row['op_type'] or 'no type'}, {ops.at[name, 'status']})"]),
            html.Div(name, className="small text-muted mb-1"),
            delta_table(metrics, DETAILS),
        ],
        id=ids.COMPARE_OPERATIONS_CARD,
    )


@callback(
    Output(ids.COMPARE_OPERATIONS_DETAILS, "children"),
    Input({"type": grid.GRID_TYPE, "kind": OPERATIONS_KIND, "args": ALL}, "cellClicked"),
    State(shown("operations"), "data"),
    State(ids.OPERATIONS_LAYER, "value"),
    State(ids.OPERATIONS_RUN, "value"),
    prevent_initial_call=True,
)
def details(cells: list[dict | None], key: str | None, layer: str | None, run: Any) -> Any:
    cell = (cells or [None])[0]
    if not cell or cell.get("rowId") is None or not baselines.is_allowed(key):
        return None
    return operation_details(key, layer or Layer.POPLIBS, _run(run), str(cell["rowId"]))
