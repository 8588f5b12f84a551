"""Program Tree: the compiled control program as an expandable tree (type, name, cycles, code
bytes). Clicking a control node opens or closes it; clicking any node shows its details. A search
box shows the nodes whose name or type matches, each under its ancestors. The weight upload (a
program of stream copies only) starts folded into one line; the estimated-cycles column shows only
where it says something the executed one does not."""

from __future__ import annotations

from typing import Any

import dash
import dash_ag_grid as dag
import dash_bootstrap_components as dbc
import pandas as pd
from dash import Input, Output, State, callback, ctx, dcc, html

from app import ids, state
from app.comparison.pages import program_tree as compare  # the page's compare tab
from app.comparison.pages.components import compare_tabs
from app.components import key_values
from app.grid import column_defs, fill_height, to_records
from app.views import program_tree as view
from app.views.provenance import data_dependent_sentence, estimated

COLUMNS = ["program_id", "tree", "type", "step", "executions", "executed_cycles", "estimated_cycles", "code_bytes"]
#: The two cycle columns count differently, so their headers say how.
HEADERS = {
    "tree": "program",
    "program_id": "id",
    "executed_cycles": "executed cycles (all runs)",
    "estimated_cycles": "estimated cycles (one execution)",
}
#: Under the grid: what the cycle columns add up.
EXECUTED_NOTE = (
    "Executed cycles: every execution in all captured runs, a control node summing its subtree (steps that run at "
    "the same time on different IPUs each count, so a pipelined program can sum to more than its runs' length)."
)
ESTIMATED_NOTE = (
    " Estimated cycles: the compiler's estimate of one execution of the node (a Repeat's includes its repeats)."
)


def tree_rows(tree: pd.DataFrame, expanded: set[int], query: str = "") -> pd.DataFrame:
    """The grid's rows: the expanded tree, or (with a ``query``) the matching nodes under their ancestors."""
    if query.strip():
        vis, _ = view.search_rows(tree, query)
        expanded = set(vis.loc[vis["children"] > 0, "program_id"].astype(int))  # ancestors shown open
    else:
        vis = view.visible_rows(tree, expanded)
    marker = [
        ("▾ " if pid in expanded else "▸ ") if ch else "  "
        for pid, ch in zip(vis["program_id"], vis["children"], strict=True)
    ]
    folded = [  # a folded host transfer says what it holds (the weight upload's hundreds of steps)
        f"  ({n:,} stream-copy steps)" if ht and pid not in expanded else ""
        for pid, ht, n in zip(vis["program_id"], vis["host_transfer"], vis["stream_steps"], strict=True)
    ]
    label = [
        "\u2003" * int(d) + m + (n or t) + (f"  ×{r:,}" if r else "") + f
        for d, m, n, t, r, f in zip(
            vis["depth"], marker, vis["shown_name"], vis["type"], vis["repeat_count"], folded, strict=True
        )
    ]
    leaf = vis["step"] >= 0
    # control nodes have no program step and are not executed themselves: blank, not -1 / 0
    return vis.assign(
        tree=label,
        step=vis["step"].where(leaf).astype("Int64"),
        executions=vis["executions"].where(leaf).astype("Int64"),
    )[COLUMNS]


def layout(**_: object) -> html.Div:
    report = state.report()
    tree = view.program_tree(report)
    expanded = view.default_expanded(tree)
    rows = tree_rows(tree, expanded)
    # sized for the whole tree, so expanding a node never cuts a name or a number
    every = tree_rows(tree, set(tree["program_id"].tolist()))
    # on this simulator a step's executed cycles are usually its estimate times its executions: then
    # the estimated column only repeats the executed one and is left out (the note says so)
    repeated = view.estimates_repeat_executed(tree, report.has_execution_profile)
    defs = column_defs(every, headers=HEADERS, filters=False, hidden=("estimated_cycles",) if repeated else ())
    for d in defs:
        d["sortable"] = False
        if d["field"] == "tree":  # monospace: wider characters than the grid's font
            d.update(flex=3, cellStyle={"whiteSpace": "pre", "fontFamily": "monospace"})
            d["minWidth"] = int(min(every["tree"].str.len().max() * 8.8 + 40, 1100)) if len(every) else 200
    note = (
        "No execution profile: executed cycles are 0; estimated cycles come from the compiler's cost model."
        if not report.has_execution_profile
        else "Estimated cycles are not shown: every step's executed cycles equal the compiler's estimate times its "
        "executions (the run used the same cost model)."
        if repeated
        else ""
    )
    if estimated(report):  # the executed column is a compile-only estimate, said before anything else
        note = "Compile-only profile: the executed cycles are estimated (no values computed). " + note
    dependent = data_dependent_sentence(report)
    if dependent:
        note += (" " if note else "") + dependent
    folded = tree.loc[tree["host_transfer"] & (tree["depth"] == 0), "name"].tolist()
    if folded:
        note += (" " if note else "") + (
            f"{', '.join(folded)}: host transfers only (stream copies), folded into one line; click to open."
        )
    return html.Div(
        [
            html.H3("Program Tree", className="mb-2"),
            compare_tabs(
                "program_tree",
                [
                    html.Div(note, className="text-muted small"),
                    html.Div(
                        [
                            dbc.ButtonGroup(
                                [
                                    dbc.Button(
                                        "Expand all",
                                        id=ids.PROGRAM_TREE_EXPAND_ALL,
                                        size="sm",
                                        color="secondary",
                                        outline=True,
                                    ),
                                    dbc.Button(
                                        "Collapse all",
                                        id=ids.PROGRAM_TREE_COLLAPSE_ALL,
                                        size="sm",
                                        color="secondary",
                                        outline=True,
                                    ),
                                ],
                            ),
                            dbc.Input(
                                id=ids.PROGRAM_TREE_SEARCH,
                                type="search",
                                placeholder="Search names and types (e.g. matmul, StreamCopy)",
                                debounce=True,
                                size="sm",
                                style={"maxWidth": "26rem"},
                            ),
                            html.Span(id=ids.PROGRAM_TREE_SEARCH_NOTE, className="small text-muted"),
                        ],
                        className="d-flex align-items-center gap-3 mb-2",
                    ),
                    dcc.Store(id=ids.PROGRAM_TREE_EXPANDED, data=sorted(expanded)),
                    dag.AgGrid(
                        id=ids.PROGRAM_TREE_GRID,
                        columnDefs=defs,
                        rowData=to_records(rows),
                        getRowId='"" + params.data.program_id',
                        defaultColDef={"flex": 1, "resizable": True},
                        dashGridOptions={
                            "animateRows": False,
                            "suppressColumnVirtualisation": True,  # every column present when the grid scrolls sideways
                            "rowSelection": {"mode": "singleRow", "checkboxes": False, "enableClickSelection": True},
                        },
                        style={"height": fill_height(460, 230)},  # the rest of the window
                        className="ag-theme-alpine",
                    ),
                    html.Div(EXECUTED_NOTE + ("" if repeated else ESTIMATED_NOTE), className="text-muted small mt-1"),
                    html.Div(id=ids.PROGRAM_TREE_DETAILS, className="mt-3"),
                ],
                compare.section(),
            ),
        ]
    )


@callback(
    Output(ids.PROGRAM_TREE_EXPANDED, "data"),
    Output(ids.PROGRAM_TREE_GRID, "rowData"),
    Output(ids.PROGRAM_TREE_DETAILS, "children"),
    Output(ids.PROGRAM_TREE_SEARCH_NOTE, "children"),
    Input(ids.PROGRAM_TREE_GRID, "cellClicked"),
    Input(ids.PROGRAM_TREE_EXPAND_ALL, "n_clicks"),
    Input(ids.PROGRAM_TREE_COLLAPSE_ALL, "n_clicks"),
    Input(ids.PROGRAM_TREE_SEARCH, "value"),
    State(ids.PROGRAM_TREE_EXPANDED, "data"),
    prevent_initial_call=True,
)
def click(cell: dict | None, _all: Any, _none: Any, query: str | None, expanded: list[int]) -> tuple[Any, ...]:
    report = state.report()
    tree = view.program_tree(report)
    exp = set(expanded or [])
    query = (query or "")[:200]
    details: Any = dash.no_update
    if ctx.triggered_id == ids.PROGRAM_TREE_EXPAND_ALL:
        exp = set(tree.loc[tree["children"] > 0, "program_id"].astype(int))
    elif ctx.triggered_id == ids.PROGRAM_TREE_COLLAPSE_ALL:
        exp = set()
    elif ctx.triggered_id == ids.PROGRAM_TREE_GRID and cell and cell.get("rowId") is not None:
        pid = int(cell["rowId"])
        if int(tree.loc[tree["program_id"] == pid, "children"].iat[0]) and not query.strip():
            exp ^= {pid}
        d = view.program_details(report, pid)
        details = dbc.Card(dbc.CardBody([html.H5(f"{d['type']} {d['name']}"), key_values(d)]))
    note = ""
    if query.strip():
        _, matches = view.search_rows(tree, query)
        note = f"{matches:,} of {len(tree):,} nodes match (shown under their ancestors); clear the search for the tree."
    return sorted(exp), to_records(tree_rows(tree, exp, query)), details, note


dash.register_page(
    __name__, path="/program-tree", name="Program Tree", order=4, title="tilescope · Program Tree", layout=layout
)
