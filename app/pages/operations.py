"""Operations: the operations table of a layer (poplibs / onnx / user) with cycles, FLOPs,
FLOPs per cycle, memory, code bytes and tiles; sort, filter and choose columns. Clicking an
operation shows its program steps, its variables and its cycles by tile."""

from __future__ import annotations

from typing import Any

import dash
import dash_bootstrap_components as dbc
from dash import ALL, Input, Output, callback, dcc, html

from app import grid, ids, state
from app.comparison.pages import operations as compare  # the page's compare tab
from app.comparison.pages.components import compare_tabs
from app.components import key_values
from app.figures.operations import operation_tile_cycles_figure
from app.views import operations as view
from app.views.runs import opening_run
from report_format.vocabulary import Layer

KIND = "operations"
# The model's own layer first: an ONNX report opens on its nodes' names (s3b0_b_conv_365), not on
# the PopLibs operations they lower to ("conv matmul"), as the Operations Graph does. A program's
# user layer covers only what its script wraps (the MLP demo: 61 % of cycles outside), so PopLibs'
# operations come before it.
LAYER_NAMES = {Layer.ONNX: "ONNX", Layer.POPLIBS: "Poplar and PopLibs", Layer.USER: "User (application)"}
DEFAULT_COLUMNS = ["cycles", "flops", "flops_per_cycle", "memory_bytes", "code_bytes", "tiles"]


@grid.producer(KIND)
def _rows(layer: str, run: int | None) -> Any:
    return view.operations(state.report(), layer, run)


def layers() -> list[str]:
    dc = state.report().debug_contexts()
    present = set(dc["layer"]) if len(dc) else set()
    return [lay for lay in LAYER_NAMES if lay in present] or [Layer.POPLIBS]


def layout(**_: object) -> html.Div:
    report = state.report()
    lays = layers()
    run_opts = [{"label": "all runs", "value": "-1"}]
    first_run = "-1"
    if report.has_execution_profile:
        run_opts += [
            {"label": f"run {r}: {n}", "value": str(int(r))}
            for r, n in zip(report.runs()["run"], report.runs()["name"], strict=True)
        ]
        # the run that computes, as Summary leads with it: "all runs" would put a one-off weight
        # upload's stream copies first
        first_run = str(opening_run(report))
    return html.Div(
        [
            html.H3("Operations", className="mb-2"),
            dbc.Row(
                [
                    dbc.Col(
                        [
                            dbc.Label("Layer", className="small"),
                            dbc.Select(
                                id=ids.OPERATIONS_LAYER,
                                value=lays[0],
                                options=[{"label": LAYER_NAMES[lay], "value": lay} for lay in lays],
                            ),
                        ],
                        md=3,
                    ),
                    dbc.Col(
                        [
                            dbc.Label("Cycles of", className="small"),
                            dbc.Select(id=ids.OPERATIONS_RUN, value=first_run, options=run_opts),
                        ],
                        md=2,
                    ),
                ],
                className="g-3 mb-2",
            ),
            compare_tabs(
                "operations",
                [
                    html.Div(  # the columns of this report's table (layer and run drive both tabs)
                        [
                            dbc.Label("Columns", className="small me-2"),
                            dbc.Checklist(
                                id=ids.OPERATIONS_COLUMNS,
                                inline=True,
                                value=DEFAULT_COLUMNS,
                                options=[{"label": c.replace("_", " "), "value": c} for c in view.COLUMNS],
                            ),
                        ],
                        className="d-flex align-items-center mb-1",
                    ),
                    html.Div(id="operations-source", className="small text-muted mb-1"),
                    dcc.Loading(html.Div(id="operations-table"), type="dot"),
                    html.Div(id=ids.OPERATIONS_DETAILS, className="mt-3"),
                ],
                compare.section(),
            ),
        ]
    )


@callback(
    Output("operations-table", "children"),
    Output("operations-source", "children"),
    Input(ids.OPERATIONS_LAYER, "value"),
    Input(ids.OPERATIONS_RUN, "value"),
    Input(ids.OPERATIONS_COLUMNS, "value"),
)
def table(layer: str, run: Any, columns: list[str]) -> tuple[Any, str]:
    run_arg = None if run in (None, -1, "-1") else int(run)
    args = {"layer": layer, "run": run_arg}
    df = grid.frame(KIND, grid.json.dumps(args, sort_keys=True))
    hidden = tuple(c for c in view.COLUMNS if c not in (columns or []))
    src = (
        f"{view.count_sentence(view.operation_count(df), outside_cycles(df), int(df['cycles'].sum()))}. "
        f"Cycles: {df.attrs.get('cycles_source', '')}{_concurrency_note(state.report().target_info.num_ipus)}. "
        "Filter in the row under the headers; click a header to sort; click a row for details."
    )
    table = grid.big_grid(KIND, args, sample=df, row_id="op_id", hidden=(*hidden, "file", "line"), height=420, fill=300)
    return table, src


def _concurrency_note(num_ipus: int) -> str:
    """Why, over several IPUs, the operations' cycles can add up to more than the run's."""
    if num_ipus < 2:
        return ""
    return (
        ", each step's slowest IPU; IPUs that run steps at the same time (a pipeline's stages) are each "
        "counted, so the column can add up to more than the run"
    )


def outside_cycles(df: Any) -> int | None:
    rows = df.loc[df["op_id"] == view.OUTSIDE_ID, "cycles"]
    return int(rows.iat[0]) if len(rows) else None


@callback(
    Output(ids.OPERATIONS_DETAILS, "children"),
    Input({"type": grid.GRID_TYPE, "kind": KIND, "args": ALL}, "cellClicked"),
    Input(ids.OPERATIONS_LAYER, "value"),
    prevent_initial_call=True,
)
def details(cells: list[dict | None], layer: str) -> Any:
    cell = (cells or [None])[0]
    if not cell or cell.get("rowId") is None:
        return html.Div("Click an operation to see its steps, variables and cycles by tile.", className="text-muted")
    report = state.report()
    op = int(cell["rowId"])
    ops = view.operations(report, layer, None).set_index("op_id")
    row = ops.loc[op]
    summary = {
        k: row[k]
        for k in (
            "name",
            "op_type",
            "cycles",
            "flops",
            "flops_per_cycle",
            "memory_bytes",
            "code_bytes",
            "tiles",
            "steps",
            "variables",
        )
    }
    if row["file"]:
        summary["source"] = f"{row['file']}:{row['line']}"
    return dbc.Card(
        dbc.CardBody(
            [
                html.H5(f"{row['name']} ({row['op_type']})"),
                dbc.Tabs(
                    active_tab="summary",
                    children=[
                        dbc.Tab(key_values(summary), label="Summary", tab_id="summary"),
                        dbc.Tab(
                            grid.small_grid(view.operation_programs(report, layer, op), height=300),
                            label="Program steps",
                            tab_id="steps",
                        ),
                        dbc.Tab(
                            grid.small_grid(view.operation_variables(report, layer, op).head(2000), height=300),
                            label="Variables",
                            tab_id="variables",
                        ),
                        dbc.Tab(
                            dcc.Graph(
                                figure=operation_tile_cycles_figure(
                                    view.operation_tile_cycles(report, layer, op), str(row["name"])
                                ),
                                config={"displaylogo": False},
                            ),
                            label="Cycles by tile",
                            tab_id="cycles",
                        ),
                    ],
                ),
            ]
        )
    )


dash.register_page(
    __name__, path="/operations", name="Operations", order=5, title="tilescope · Operations", layout=layout
)
