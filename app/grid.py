"""Tables in the browser: AG Grid with the infinite row model for big tables (the server sorts,
filters and pages; the browser holds one block of rows), plain AG Grid for small ones, and plain
HTML tables for a handful of fixed rows (no grid to set up: ``plain_table``).

A big grid's id names a *kind* (a registered producer) and its JSON arguments; the one
server-side callback (``register_callbacks``) turns a grid's row request into rows.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from functools import lru_cache
from typing import Any

import dash_ag_grid as dag
import dash_bootstrap_components as dbc
import numpy as np
import pandas as pd
from dash import MATCH, Input, Output, State, callback, html

from app.units import format_bytes

GRID_TYPE = "big-grid"
_PRODUCERS: dict[str, Callable[..., pd.DataFrame]] = {}


def producer(kind: str) -> Callable[[Callable[..., pd.DataFrame]], Callable[..., pd.DataFrame]]:
    """Register ``fn(**args) -> DataFrame`` as the rows of big grids of this kind."""

    def deco(fn: Callable[..., pd.DataFrame]) -> Callable[..., pd.DataFrame]:
        _PRODUCERS[kind] = fn
        return fn

    return deco


def kinds() -> tuple[str, ...]:
    """The grid kinds the viewer serves (app.guard refuses any other)."""
    return tuple(_PRODUCERS)


def frame(kind: str, args_json: str) -> pd.DataFrame:
    """The rows of a big grid, cached per report (so a cache never outlives a change of report)."""
    from app import state

    return _frame(str(state.report().path), kind, args_json)


@lru_cache(maxsize=32)
def _frame(report_path: str, kind: str, args_json: str) -> pd.DataFrame:
    return _PRODUCERS[kind](**json.loads(args_json))


def _bytes_like(col: str) -> bool:
    return "bytes" in col


#: Column sizing from content (AG Grid's Alpine theme, 14 px font): pixels per character of cell
#: text, plus the cell's padding; a header also holds the sort and menu icons.
CHAR_PX = 8.0
HEADER_CHAR_PX = 7.2  # measured in Chromium: 6.3-7.0 px per character of a header
CELL_PAD_PX = 36
HEADER_PAD_PX = 58  # padding, the sort arrow and the column menu
HEADER_PAD_NO_FILTER_PX = 44
MAX_COLUMN_PX = 1100
#: A text column needing more than this wraps its cells instead (long debug-context paths); in a
#: compare grid (``short`` headers: a dozen columns of baseline / active / delta) from narrower, so
#: every column fits 1600 px (the ONNX layer's compare of ResNet-50 with BERT needed 1,558 px of
#: columns at 300: its op types run to "LayerNormalization").
WRAP_ABOVE_PX = 520
WRAP_ABOVE_SHORT_PX = 260
#: Rows looked at to size a column of a big table (text lengths of all rows are cheap; this bounds
#: formatting numbers).
SIZE_SAMPLE_ROWS = 2000


def _text_chars(df: pd.DataFrame, c: str) -> int:
    """Characters of the longest cell of column ``c`` as the grid shows it (thousands separators,
    3 decimals, FLOPs with SI prefixes)."""
    col = df[c]
    if len(col) == 0:
        return 0
    if pd.api.types.is_bool_dtype(col):
        return 5
    if pd.api.types.is_numeric_dtype(col):
        v = col.to_numpy(dtype=np.float64)
        v = v[np.isfinite(v)]
        if v.size == 0:
            return 1
        if "flops" in c:
            return 6  # '123 M' (see the FLOPs formatter in column_defs)
        lo, hi = float(v.min()), float(v.max())
        if pd.api.types.is_float_dtype(col):
            return max(len(f"{x:,.3f}") for x in (lo, hi))
        return max(len(f"{int(x):,}") for x in (lo, hi))
    lengths = col.iloc[: SIZE_SAMPLE_ROWS * 50].astype(str).str.len().fillna(1)  # a blank (None) cell
    return int(lengths.max()) if len(lengths) else 0


def header_chars(header: str) -> int:
    """Characters of a header's longer line when it wraps onto at most two lines at the best space
    ('global exchange cycles' -> 15: 'global exchange' / 'cycles'): headers wrap
    (``wrapHeaderText``), so a long name does not make a column of short numbers wide."""
    words = header.split(" ")
    return min(
        (max(len(" ".join(words[:k])), len(" ".join(words[k:]))) for k in range(1, len(words))),
        default=len(header),
    )


def content_width(df: pd.DataFrame, c: str, header: str, filters: bool = True) -> int:
    """Pixels a column needs so neither its header (on up to two lines) nor any of its cells is cut."""
    cells = _text_chars(df, c) * CHAR_PX + CELL_PAD_PX
    head = header_chars(header) * HEADER_CHAR_PX + (HEADER_PAD_PX if filters else HEADER_PAD_NO_FILTER_PX)
    return int(min(max(cells, head, 60), MAX_COLUMN_PX))


def short_header(column: str) -> str:
    """'delta_memory_bytes' -> 'Δ memory', 'baseline_cycles' -> 'base cycles': compare grids have
    many columns, so headers stay short (the full column name shows on hover)."""
    text = column.replace("memory_bytes", "memory").replace("flops", "FLOPs").replace("diff_percent", "diff %")
    for prefix, short in (("delta_", "Δ "), ("baseline_", "base "), ("active_", "active ")):
        if text.startswith(prefix):
            text = short + text[len(prefix) :]
    return text.replace("_", " ")


def column_defs(
    df: pd.DataFrame,
    *,
    hidden: tuple[str, ...] = (),
    headers: dict[str, str] | None = None,
    filters: bool = True,
    short: bool = False,
) -> list[dict[str, Any]]:
    """Column definitions: number filter and thousands separators for numeric columns, full names on
    hover; every column at least as wide as its content (the grid scrolls sideways rather than cut
    a number or a header), wider columns sharing the rest of the width."""
    defs = []
    for c in df.columns:
        numeric = pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])
        header = (headers or {}).get(c, short_header(c) if short else c.replace("_", " "))
        d: dict[str, Any] = {
            "field": c,
            "headerName": header,
            "minWidth": content_width(df, c, header, filters),
            # the starting width, before flex shares out the rest: a grid built in a hidden pane
            # (a compare tab) keeps it until it is resized, so not AG Grid's 200 px
            "width": content_width(df, c, header, filters),
            "headerTooltip": c,
            "filter": (("agNumberColumnFilter" if numeric else "agTextColumnFilter") if filters else False),
            "sortable": True,
            "resizable": True,
            "hide": c in hidden,
            # a long header wraps onto a second line rather than widen the column (header_chars)
            "wrapHeaderText": True,
            "autoHeaderHeight": True,
        }
        if c == "name":  # names (codelets, variables, ops) are long: give them the spare room
            d.update(flex=3, tooltipField="name")
        wrap_above = WRAP_ABOVE_SHORT_PX if short else WRAP_ABOVE_PX
        if not numeric and d["minWidth"] > wrap_above:
            # a very long text (a debug-context path) wraps onto more lines rather than push the
            # numbers off screen or be cut
            d.update(
                minWidth=wrap_above,
                width=wrap_above,
                wrapText=True,
                autoHeight=True,
                cellStyle={
                    "wordBreak": "break-word",
                    "lineHeight": "1.35",
                    "paddingTop": "6px",
                    "paddingBottom": "6px",
                },
            )
        if numeric:
            d["type"] = "rightAligned"
            if pd.api.types.is_float_dtype(df[c]):
                d["valueFormatter"] = {"function": "params.value == null ? '' : d3.format(',.3~f')(params.value)"}
            else:
                # FLOPs run to 10^12 and more: SI prefixes keep the column readable (exact value on
                # hover), 3 significant digits and a space before the prefix, as app.units.format_si
                # writes them on cards ('2.84 G' in the FLOPs column beside '2.84 GFLOPs')
                fmt = (
                    "d3.format('.3~s')(params.value).replace(/([0-9])([kMGTP])$/, '$1 $2')"
                    if "flops" in c
                    else "d3.format(',')(params.value)"
                )
                d["valueFormatter"] = {"function": f"params.value == null ? '' : {fmt}"}
                if "flops" in c:
                    d["tooltipValueGetter"] = {"function": "d3.format(',')(params.value)"}
        defs.append(d)
    return defs


def big_grid(
    kind: str,
    args: dict[str, Any],
    *,
    sample: pd.DataFrame | None = None,
    height: int = 380,
    row_id: str | None = None,
    hidden: tuple[str, ...] = (),
    multi_select: bool = False,
    fill: int | None = None,
    short: bool = False,
) -> dag.AgGrid:
    """A server-side (infinite row model) grid over ``frame(kind, args)``. With ``fill`` (pixels
    above the grid on the page), the grid takes the rest of the window's height (at least
    ``height``) instead of a fixed height."""
    args_json = json.dumps(args, sort_keys=True)
    df = frame(kind, args_json) if sample is None else sample
    options: dict[str, Any] = {
        "rowModelType": "infinite",
        "cacheBlockSize": 100,
        "maxBlocksInCache": 20,
        "infiniteInitialRowCount": 100,
        "rowSelection": {"mode": "multiRow", "headerCheckbox": False}
        if multi_select
        else {"mode": "singleRow", "checkboxes": False, "enableClickSelection": True},
        "tooltipShowDelay": 300,
        # columns are sized to their content, so a wide table scrolls sideways: render every column
        # (a dozen at most), so none is missing when scrolled to or searched for
        "suppressColumnVirtualisation": True,
        # sizing the columns to fit (columnSize below) otherwise slides them for 200 ms (AG Grid's
        # `ag-column-moving` transition) after the grid has its rows: the page settles that much later
        "suppressColumnMoveAnimation": True,
    }
    defs = column_defs(df, hidden=hidden, short=short)
    lines = wrapped_lines(df, defs)
    if lines > 1:
        # the infinite row model gives every row one height (autoHeight does nothing): rows tall
        # enough for the longest wrapped text, which was cut after its first line
        options["rowHeight"] = ROW_PAD_PX + lines * LINE_PX
    return dag.AgGrid(
        id={"type": GRID_TYPE, "kind": kind, "args": args_json},
        columnDefs=defs,
        defaultColDef={
            "flex": 1,
            "floatingFilter": True,
            "filterParams": {"maxNumConditions": 1, "buttons": ["reset"]},
        },
        rowModelType="infinite",
        dashGridOptions=options,
        getRowId=f'"" + params.data.{row_id}' if row_id else None,
        style={"height": fill_height(height, fill), "width": "100%"},
        className="ag-theme-alpine",
        # share the spare width out again whenever the grid is resized or shown (a grid built in a
        # hidden compare pane would otherwise keep its starting widths)
        columnSize="responsiveSizeToFit",
    )


#: A wrapped cell's line (14 px text at line-height 1.35, column_defs' cellStyle) and its padding.
LINE_PX, ROW_PAD_PX = 19, 14
#: At most this many lines per row (a row of 3 shows a few rows only): the rest of a longer text
#: shows on hover (the name column's tooltip).
MAX_LINES = 2


def wrapped_lines(df: pd.DataFrame, defs: list[dict[str, Any]]) -> int:
    """Lines the longest text of a wrapping column (``wrapText``) takes at its width, up to MAX_LINES."""
    lines = 1
    for d in defs:
        if d.get("wrapText") and not d.get("hide"):
            need = _text_chars(df, d["field"]) * CHAR_PX + CELL_PAD_PX
            lines = max(lines, -(-int(need) // max(int(d["width"]), 1)))
    return min(lines, MAX_LINES)


def fill_height(height: int, above: int | None) -> str:
    """A CSS height: fixed, or the window's height below ``above`` pixels (never under ``height``)."""
    return f"{height}px" if above is None else f"max({height}px, calc(100vh - {above}px))"


def small_grid(
    df: pd.DataFrame,
    *,
    height: int | None = None,
    grid_id: str | None = None,
    row_id: str | None = None,
    short: bool = False,
) -> dag.AgGrid:
    """A client-side grid for small tables (details, top-N lists); ``short`` headers for compare
    tables (``short_header``)."""
    h = height or min(60 + 42 * max(len(df), 1), 420)
    kwargs: dict[str, Any] = {"id": grid_id} if grid_id else {}
    return dag.AgGrid(
        columnDefs=column_defs(df, filters=False, short=short),
        rowData=to_records(df),
        defaultColDef={"flex": 1},
        dashGridOptions={
            "tooltipShowDelay": 300,
            "rowSelection": {"mode": "singleRow", "checkboxes": False, "enableClickSelection": True},
            "suppressColumnVirtualisation": True,
            "suppressColumnMoveAnimation": True,  # as big_grid: no 200 ms slide when sized to fit
        },
        getRowId=f'"" + params.data.{row_id}' if row_id else None,
        style={"height": f"{h}px", "width": "100%"},
        className="ag-theme-alpine",
        # share the spare width out again whenever the grid is resized or shown (a grid built in a
        # hidden compare pane would otherwise keep its starting widths)
        columnSize="responsiveSizeToFit",
        **kwargs,
    )


def _cell_text(value: Any) -> str:
    """A cell as the grids show it: thousands separators, floats to 3 decimals, nothing for NaN."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return ""
    if isinstance(value, bool | np.bool_):
        return str(bool(value))
    if isinstance(value, int | np.integer):
        return f"{int(value):,}"
    if isinstance(value, float | np.floating):
        return f"{float(value):,.3f}".rstrip("0").rstrip(".")
    return str(value)


def plain_table(df: pd.DataFrame, bytes_columns: Collection[str] = ()) -> html.Div:
    """A small table of a few fixed rows as plain HTML: no sorting or filtering, but nothing for the
    browser to set up (an AG Grid costs a few hundred ms on a busy machine, even for four rows).
    Numbers right-aligned with thousands separators, as the grids write them; ``bytes_columns`` in
    binary units (``app.units.format_bytes``, as the sentences beside the table write them); cells
    never wrap, so the table is as wide as its widest cell (its parent scrolls sideways rather than
    cut one)."""
    numeric = {c for c in df.columns if pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])}
    head = html.Tr(
        [
            html.Th(str(c).replace("_", " "), className="text-end text-nowrap" if c in numeric else "text-nowrap")
            for c in df.columns
        ]
    )
    cols = [(c, c in numeric) for c in df.columns]
    rows = [
        html.Tr(
            [
                html.Td(
                    format_bytes(v) if c in bytes_columns and num and pd.notna(v) else _cell_text(v),
                    className="text-end text-nowrap" if num else "text-nowrap",
                )
                for (c, num), v in zip(cols, r, strict=True)
            ]
        )
        for r in df.itertuples(index=False, name=None)
    ]
    return html.Div(
        dbc.Table([html.Thead(head), html.Tbody(rows)], size="sm", striped=True, hover=True, className="mb-0 w-auto"),
        style={"overflowX": "auto"},
    )


def to_records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """JSON-safe records (numpy scalars to Python, NaN to None)."""
    out = df.astype(object).where(pd.notna(df), None)
    return [{k: (v.item() if isinstance(v, np.generic) else v) for k, v in r.items()} for r in out.to_dict("records")]


_TEXT_OPS: dict[str, Callable[[pd.Series, str], pd.Series]] = {
    "contains": lambda s, v: s.str.contains(v, case=False, regex=False),
    "notContains": lambda s, v: ~s.str.contains(v, case=False, regex=False),
    "equals": lambda s, v: s.str.lower() == v.lower(),
    "notEqual": lambda s, v: s.str.lower() != v.lower(),
    "startsWith": lambda s, v: s.str.lower().str.startswith(v.lower()),
    "endsWith": lambda s, v: s.str.lower().str.endswith(v.lower()),
}
_NUM_OPS: dict[str, Callable[[pd.Series, float, float | None], pd.Series]] = {
    "equals": lambda s, v, _: s == v,
    "notEqual": lambda s, v, _: s != v,
    "lessThan": lambda s, v, _: s < v,
    "lessThanOrEqual": lambda s, v, _: s <= v,
    "greaterThan": lambda s, v, _: s > v,
    "greaterThanOrEqual": lambda s, v, _: s >= v,
    "inRange": lambda s, v, w: (s >= v) & (s <= (w if w is not None else v)),
}


def _condition_mask(s: pd.Series, cond: dict[str, Any]) -> pd.Series:
    kind = cond.get("type", "contains")
    if kind == "blank":
        return s.isna() | (s.astype(str) == "")
    if kind == "notBlank":
        return ~(s.isna() | (s.astype(str) == ""))
    if cond.get("filterType") == "number":
        v = cond.get("filter")
        if v is None:
            return pd.Series(True, index=s.index)
        return _NUM_OPS.get(kind, _NUM_OPS["equals"])(s, float(v), cond.get("filterTo"))
    v = str(cond.get("filter", ""))
    return _TEXT_OPS.get(kind, _TEXT_OPS["contains"])(s.astype(str), v)


# The grids' filter UI makes 1 condition a column (filterParams' maxNumConditions, big_grid); a request
# with thousands (a crafted one took 5 s of CPU for 2,000) is refused before any is applied.
MAX_FILTER_CONDITIONS = 64
# The infinite model asks for blocks of 100 rows (cacheBlockSize); a larger slice is refused.
MAX_ROWS_PER_REQUEST = 1000


def _conditions(filter_model: dict[str, Any]) -> int:
    return sum(len(spec.get("conditions") or ()) or 1 for spec in filter_model.values() if isinstance(spec, dict))


def apply_request(df: pd.DataFrame, request: dict[str, Any] | None) -> dict[str, Any]:
    """AG Grid infinite-model request -> response: filter, sort, then slice [startRow, endRow).
    ValueError (a 400) for a filter of more than MAX_FILTER_CONDITIONS conditions or a slice of more
    than MAX_ROWS_PER_REQUEST rows."""
    request = request or {}
    filter_model = request.get("filterModel") or {}
    if not isinstance(filter_model, dict) or _conditions(filter_model) > MAX_FILTER_CONDITIONS:
        raise ValueError(f"a grid filter holds at most {MAX_FILTER_CONDITIONS} conditions")
    start = int(request.get("startRow", 0))
    end = int(request.get("endRow", start + 100))
    if not 0 <= start <= end or end - start > MAX_ROWS_PER_REQUEST:
        raise ValueError(
            f"a grid asks for rows [start, end) with 0 <= start <= end, at most {MAX_ROWS_PER_REQUEST} at once"
        )
    mask = pd.Series(True, index=df.index)
    for col, spec in filter_model.items():
        if col not in df.columns:
            continue
        if "conditions" in spec:
            masks = [_condition_mask(df[col], c) for c in spec["conditions"]]
            m = masks[0]
            for other in masks[1:]:
                m = (m & other) if spec.get("operator", "AND") == "AND" else (m | other)
        else:
            m = _condition_mask(df[col], spec)
        mask &= m
    out = df[mask.to_numpy()]
    sort = [s for s in (request.get("sortModel") or []) if s.get("colId") in df.columns]
    if sort:
        out = out.sort_values(
            [s["colId"] for s in sort], ascending=[s.get("sort") != "desc" for s in sort], kind="stable"
        )
    return {"rowData": to_records(out.iloc[start:end]), "rowCount": len(out)}


def register_callbacks() -> None:
    @callback(
        Output({"type": GRID_TYPE, "kind": MATCH, "args": MATCH}, "getRowsResponse"),
        Input({"type": GRID_TYPE, "kind": MATCH, "args": MATCH}, "getRowsRequest"),
        State({"type": GRID_TYPE, "kind": MATCH, "args": MATCH}, "id"),
        prevent_initial_call=True,
    )
    def _rows(request: dict[str, Any] | None, grid_id: dict[str, str]) -> dict[str, Any]:
        return apply_request(frame(grid_id["kind"], grid_id["args"]), request)
