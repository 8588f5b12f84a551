"""Memory: total memory by tile (stacked by category / region / liveness), tile selection and the
Details, Compute Sets, Vertices, Exchanges and Variables tabs, the variables graph and the tile map."""

from __future__ import annotations

from typing import Any

import dash
import dash_bootstrap_components as dbc
from dash import ALL, Input, Output, State, callback, clientside_callback, ctx, dcc, html

from app import grid, ids, state
from app.comparison.pages import memory as compare  # the page's compare tab
from app.comparison.pages.components import compare_tabs
from app.components import ipu_selector, section
from app.figures.memory import tile_map_figure, tile_memory_figure, tile_memory_map_figure, variables_figure
from app.tile_list import parse_tile_list
from app.units import format_bytes
from app.views import ipus
from app.views import memory as view

#: Tile-axis level of detail: at most this many bars (the rest are binned, see views.memory.bin_tiles).
MAX_COLUMNS = 1500
VARIABLES_KIND = "memory-variables"


@grid.producer(VARIABLES_KIND)
def _variables_rows(tiles: list[int] | None) -> Any:
    return view.tile_variables(state.report(), tiles)


def default_options() -> list[str]:
    """Gaps on; the max-memory line only when the fullest tile is past half of it (otherwise the
    line would squash every bar to the bottom of the plot)."""
    report = state.report()
    fullest = report.table("tile_memory", ["total_bytes_including_gaps"])["total_bytes_including_gaps"]
    peak = int(fullest.to_numpy().max()) if len(fullest) else 0
    return ["gaps", "max"] if peak > report.target_info.bytes_per_tile / 2 else ["gaps"]


def _ipu_table() -> Any:
    """Memory of each IPU under the plot (several IPUs only)."""
    report = state.report()
    if report.target_info.num_ipus < 2:
        return html.Div(id=ids.MEMORY_IPUS)
    df = ipus.ipu_memory(report)
    for c in ("bytes_including_gaps", "bytes_excluding_gaps", "fullest_tile_bytes"):
        df[c] = df[c].map(format_bytes)
    return html.Div(section("Memory per IPU", grid.small_grid(df)), id=ids.MEMORY_IPUS)


def layout(**_: object) -> html.Div:
    controls = dbc.Row(
        [
            ipu_selector(ids.MEMORY_IPU),
            dbc.Col(
                [
                    dbc.Label("Breakdown", className="me-2 small"),
                    dbc.RadioItems(
                        id=ids.MEMORY_BREAKDOWN,
                        inline=True,
                        value="category",
                        options=[
                            {"label": "by category", "value": "category"},
                            {"label": "by region", "value": "region"},
                            {"label": "by liveness", "value": "liveness"},
                        ],
                    ),
                ],
                width="auto",
            ),
            dbc.Col(
                dbc.Checklist(
                    id=ids.MEMORY_INCLUDE_GAPS,
                    switch=True,
                    inline=True,
                    value=default_options(),
                    options=[{"label": "Include gaps", "value": "gaps"}, {"label": "Show max memory", "value": "max"}],
                ),
                width="auto",
            ),
            dbc.Col(
                dbc.RadioItems(
                    id=ids.MEMORY_ORDER,
                    inline=True,
                    value="tile",
                    options=[{"label": "by tile id", "value": "tile"}, {"label": "sorted by size", "value": "sorted"}],
                ),
                width="auto",
            ),
            dbc.Col(
                dbc.InputGroup(
                    [
                        dbc.InputGroupText("Tiles"),
                        dbc.Input(
                            id=ids.MEMORY_TILES_INPUT,
                            placeholder="e.g. 0, 5, 100-120 (Enter)",
                            debounce=True,
                            type="text",
                        ),
                    ],
                    size="sm",
                ),
                md=3,
            ),
        ],
        className="g-3 align-items-center mb-2",
    )
    tabs = dbc.Tabs(
        [
            dbc.Tab(label=lab, tab_id=tid)
            for lab, tid in (
                ("Details", "details"),
                ("Compute Sets", "compute_sets"),
                ("Vertices", "vertices"),
                ("Exchanges", "exchanges"),
                ("Variables", "variables"),
                ("Tile map", "tile_map"),
            )
        ],
        id=ids.MEMORY_TABS,
        active_tab="details",
    )
    return html.Div(
        [
            html.H3("Memory", className="mb-2"),
            compare_tabs(
                "memory",
                [
                    controls,
                    dcc.Loading(dcc.Graph(id=ids.MEMORY_GRAPH, config={"displaylogo": False}), type="dot"),
                    _ipu_table(),
                    html.Div(
                        className="small text-muted mb-2",
                        children="Click the plot to select a tile (or a column of binned tiles), drag across it to select "
                        "a range, or type tiles above.",
                    ),
                    dcc.Store(id=ids.MEMORY_SELECTION, data=None),
                    dcc.Store(id=ids.MEMORY_VARIABLES_PICK, data=[]),
                    html.Div(id=ids.MEMORY_SELECTION_TEXT, className="fw-semibold mb-2"),
                    tabs,
                    _tile_map_controls(),
                    dcc.Loading(html.Div(id=ids.MEMORY_TAB_BODY, className="pt-2"), type="dot"),
                ],
                compare.section(),
            ),
        ]
    )


def _tile_map_controls() -> html.Div:
    """The tile map's order: software (tile ids in rows) or physical (the die's columns and islands,
    as PopVision offers). Always in the page, shown with the Tile map tab, so tab_body can read it."""
    return html.Div(
        dbc.RadioItems(
            id=ids.MEMORY_TILE_MAP_LAYOUT,
            inline=True,
            value="software",
            options=[
                {"label": "software order", "value": "software"},
                {"label": "physical layout (columns and islands on the die)", "value": "physical"},
            ],
        ),
        id=ids.MEMORY_TILE_MAP_CONTROLS,
        className="pt-2 small",
        style={"display": "none"},
    )


# in the browser: a round trip to the server for a style would keep the page busy as it loads
clientside_callback(
    "function (tab) { return tab === 'tile_map' ? {} : {display: 'none'}; }",
    Output(ids.MEMORY_TILE_MAP_CONTROLS, "style"),
    Input(ids.MEMORY_TABS, "active_tab"),
)


def _tiles_of_points(points: list[dict[str, Any]], first_tiles: Any, width: int) -> list[int]:
    """Bar points -> tiles: a point's index is its bar; a bar covers ``width`` tiles from its first."""
    tiles: set[int] = set()
    for p in points:
        i = p.get("pointIndex", p.get("pointNumber"))
        if i is not None and p.get("curveNumber", 0) >= 0 and 0 <= int(i) < len(first_tiles):
            first = int(first_tiles[int(i)])
            tiles.update(range(first, first + width))
    n = state.report().target_info.num_tiles
    return sorted(t for t in tiles if t < n)


@callback(
    Output(ids.MEMORY_SELECTION, "data"),
    Output(ids.MEMORY_SELECTION_TEXT, "children"),
    Input(ids.MEMORY_GRAPH, "clickData"),
    Input(ids.MEMORY_GRAPH, "selectedData"),
    Input(ids.MEMORY_TILES_INPUT, "value"),
    Input(ids.MEMORY_IPU, "value"),
    State(ids.MEMORY_BREAKDOWN, "value"),
    State(ids.MEMORY_INCLUDE_GAPS, "value"),
    State(ids.MEMORY_ORDER, "value"),
    prevent_initial_call=True,
)
def select_tiles(
    click: dict | None,
    selected: dict | None,
    typed: str | None,
    ipu: str | None,
    breakdown: str,
    options: list[str],
    order: str,
) -> tuple[Any, Any]:
    report = state.report()
    if f"{ids.MEMORY_IPU}.value" in ctx.triggered_prop_ids:  # another IPU: its tiles, nothing selected
        return None, selection_text(None, _ipu_tiles(ipu))
    df = view.order_tiles(_on_ipu(view.tile_memory_breakdown(report, breakdown, "gaps" in options), ipu), order)
    binned, _, width = view.bin_tiles(df, MAX_COLUMNS)
    first_tiles = binned.index.to_numpy()
    props = ctx.triggered_prop_ids
    try:
        if f"{ids.MEMORY_TILES_INPUT}.value" in props:
            tiles = parse_tile_list(typed or "", report.target_info.num_tiles)
        elif f"{ids.MEMORY_GRAPH}.selectedData" in props and (selected or {}).get("points"):
            tiles = _tiles_of_points(selected["points"], first_tiles, width)
        elif f"{ids.MEMORY_GRAPH}.clickData" in props:
            tiles = _tiles_of_points((click or {}).get("points", [])[:1], first_tiles, width)
        else:
            return dash.no_update, dash.no_update
    except ValueError as exc:
        return dash.no_update, dbc.Alert(str(exc), color="danger", className="py-1")
    return (tiles or None), selection_text(tiles)


def _on_ipu(df: Any, ipu: str | None) -> Any:
    """The selected IPU's tiles of a per-tile frame (all tiles for "All IPUs")."""
    return ipus.tiles_of_ipu(df, state.report(), None if ipu in (None, "") else int(ipu))


def _ipu_tiles(ipu: str | None) -> list[int] | None:
    """Tiles of the IPU chosen in the selector (None: all IPUs)."""
    if ipu in (None, "") or int(ipu) == ipus.ALL_IPUS:  # type: ignore[arg-type]
        return None
    tpi = state.report().target_info.tiles_per_ipu
    return list(range(int(ipu) * tpi, (int(ipu) + 1) * tpi))  # type: ignore[arg-type]


def selection_text(tiles: list[int] | None, ipu_tiles: list[int] | None = None) -> str:
    if not tiles and ipu_tiles:
        return f"IPU {ipu_tiles[0] // len(ipu_tiles)}: tiles {ipu_tiles[0]}..{ipu_tiles[-1]}"
    if not tiles:
        return "All tiles"
    if len(tiles) <= 12:
        return "Selected tiles: " + ", ".join(map(str, tiles))
    return f"Selected {len(tiles):,} tiles ({tiles[0]}..{tiles[-1]})"


@callback(
    Output(ids.MEMORY_GRAPH, "figure"),
    Input(ids.MEMORY_BREAKDOWN, "value"),
    Input(ids.MEMORY_INCLUDE_GAPS, "value"),
    Input(ids.MEMORY_ORDER, "value"),
    Input(ids.MEMORY_SELECTION, "data"),
    Input(ids.MEMORY_IPU, "value"),
)
def memory_figure(
    breakdown: str, options: list[str], order: str, tiles: list[int] | None, ipu: str | None = None
) -> Any:
    report = state.report()
    df = view.order_tiles(_on_ipu(view.tile_memory_breakdown(report, breakdown, "gaps" in options), ipu), order)
    binned, maxes, width = view.bin_tiles(df, MAX_COLUMNS)
    return tile_memory_figure(
        binned,
        maxes,
        width,
        report.target_info.bytes_per_tile,
        show_max_memory="max" in options,
        selected=tiles,
        sorted_order=order == "sorted",
        tiles_per_ipu=report.target_info.tiles_per_ipu,
    )


@callback(
    Output(ids.MEMORY_TAB_BODY, "children"),
    Input(ids.MEMORY_TABS, "active_tab"),
    Input(ids.MEMORY_SELECTION, "data"),
    Input(ids.MEMORY_INCLUDE_GAPS, "value"),
    Input(ids.MEMORY_IPU, "value"),
    Input(ids.MEMORY_TILE_MAP_LAYOUT, "value"),
    State(ids.MEMORY_VARIABLES_PICK, "data"),
)
def tab_body(
    tab: str,
    tiles: list[int] | None,
    options: list[str],
    ipu: str | None = None,
    map_layout: str = "software",
    picked: list[int] | None = None,
) -> Any:
    report = state.report()
    tiles = tiles or _ipu_tiles(ipu)  # nothing selected: the tabs show the selected IPU's tiles
    if tab == "details":
        d = view.tile_details(report, tiles)
        gaps = "including_gaps" if "gaps" in options else "excluding_gaps"
        reg = d["regions"][["region", gaps]].rename(columns={gaps: "bytes"})
        reg["size"] = reg["bytes"].map(format_bytes)
        cat = d["categories"].assign(size=d["categories"]["bytes"].map(format_bytes))
        body = [
            dbc.Row(
                [
                    # a few fixed rows each: plain tables (an AG Grid's setup would cost more than the rest
                    # of the page's first render)
                    dbc.Col(section(f"By region ({gaps.replace('_', ' ')})", grid.plain_table(reg)), md=5),
                    dbc.Col(section("By category (excluding gaps)", grid.plain_table(cat)), md=7),
                ]
            )
        ]
        if tiles and len(tiles) == 1:  # one tile: its memory map, as PopVision shows for a selected tile
            t = report.target_info
            body.append(
                dcc.Graph(
                    id=ids.MEMORY_TILE_ADDRESS_MAP,
                    config={"displaylogo": False},
                    figure=tile_memory_map_figure(
                        view.tile_memory_map(report, tiles[0]), tiles[0], t.bytes_per_tile, t.interleaved_memory_start
                    ),
                )
            )
        return html.Div(body)
    if tab == "compute_sets":
        return grid.small_grid(view.tile_compute_sets(report, tiles), height=400)
    if tab == "vertices":
        return grid.small_grid(view.tile_vertices(report, tiles), height=400)
    if tab == "exchanges":
        return grid.small_grid(view.tile_exchanges(report, tiles), height=400)
    if tab == "variables":
        return html.Div(
            [
                html.Div(
                    "Filter and sort in the column headers; click a variable's name to add it to (or remove it "
                    "from) the variables graph.",
                    className="small text-muted mb-1",
                ),
                grid.big_grid(VARIABLES_KIND, {"tiles": tiles}, row_id="variable_id", height=360),
                dcc.Graph(
                    id=ids.MEMORY_VARIABLES_GRAPH,
                    figure=variables_figure(view.variable_bytes_by_tile(report, picked or [])),
                    config={"displaylogo": False},
                ),
            ]
        )
    if tab == "tile_map":
        tm = view.tile_map(report, "gaps" in options, map_layout)
        chosen = ipus.selected_ipu(ipu)
        if chosen != ipus.ALL_IPUS:  # the IPU picker's IPU alone: one readable panel, not 16 small ones
            tm = tm[tm["ipu"].to_numpy() == chosen]
        return dcc.Graph(
            id=ids.MEMORY_TILE_MAP,
            config={"displaylogo": False},
            figure=tile_map_figure(tm, report.target_info.bytes_per_tile, map_layout),
        )
    return html.Div()


@callback(
    Output(ids.MEMORY_VARIABLES_PICK, "data"),
    Input({"type": grid.GRID_TYPE, "kind": VARIABLES_KIND, "args": ALL}, "cellClicked"),
    State(ids.MEMORY_VARIABLES_PICK, "data"),
    prevent_initial_call=True,
)
def pick_variable(cells: list[dict | None], picked: list[int] | None) -> Any:
    cell = (cells or [None])[0]
    if not cell or cell.get("colId") != "name" or cell.get("rowId") is None:
        return dash.no_update
    return toggle_pick(picked or [], int(cell["rowId"]))


def toggle_pick(picked: list[int], variable_id: int, limit: int = 12) -> list[int]:
    """Add a variable to the graph, or remove it if it is there; keep the ``limit`` most recent."""
    if variable_id in picked:
        return [v for v in picked if v != variable_id]
    return [*picked, variable_id][-limit:]


@callback(
    Output(ids.MEMORY_VARIABLES_GRAPH, "figure"),
    Input(ids.MEMORY_VARIABLES_PICK, "data"),
    prevent_initial_call=True,
)
def variables_graph(picked: list[int] | None) -> Any:
    report = state.report()
    return variables_figure(view.variable_bytes_by_tile(report, picked or []), report.target_info.num_tiles)


dash.register_page(__name__, path="/memory", name="Memory", order=2, title="tilescope · Memory", layout=layout)
