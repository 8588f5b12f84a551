"""Tables in the browser: AG Grid with the infinite row model for big tables (the server sorts,
filters and pages; the browser holds one block of rows), plain AG Grid for small ones.

A big grid's id names a *kind* (a registered producer) and its JSON arguments; the one
server-side callback (``register_callbacks``) turns a grid's row request into rows.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import dash_ag_grid as dag
import numpy as np
import pandas as pd
from dash import MATCH, Input, Output, State, callback

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


def column_defs(
    df: pd.DataFrame, *, hidden: tuple[str, ...] = (), headers: dict[str, str] | None = None, filters: bool = True
) -> list[dict[str, Any]]:
    """Column definitions: number filter and thousands separators for numeric columns, full names on hover."""
    defs = []
    for c in df.columns:
        numeric = pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])
        d: dict[str, Any] = {
            "field": c,
            "headerName": (headers or {}).get(c, c.replace("_", " ")),
            "headerTooltip": c,
            "filter": (("agNumberColumnFilter" if numeric else "agTextColumnFilter") if filters else False),
            "sortable": True,
            "resizable": True,
            "hide": c in hidden,
        }
        if c == "name":  # names (codelets, variables, ops) are long: give them room
            d.update(flex=3, minWidth=220, tooltipField="name")
        if numeric:
            d["type"] = "rightAligned"
            if pd.api.types.is_float_dtype(df[c]):
                d["valueFormatter"] = {"function": "params.value == null ? '' : d3.format(',.3~f')(params.value)"}
            else:
                # FLOPs run to 10^12 and more: SI prefixes keep the column readable (exact value on hover)
                fmt = "'.4~s'" if "flops" in c else "','"
                d["valueFormatter"] = {"function": f"params.value == null ? '' : d3.format({fmt})(params.value)"}
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
) -> dag.AgGrid:
    """A server-side (infinite row model) grid over ``frame(kind, args)``."""
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
    }
    return dag.AgGrid(
        id={"type": GRID_TYPE, "kind": kind, "args": args_json},
        columnDefs=column_defs(df, hidden=hidden),
        defaultColDef={
            "flex": 1,
            "minWidth": 90,
            "floatingFilter": True,
            "filterParams": {"maxNumConditions": 1, "buttons": ["reset"]},
        },
        rowModelType="infinite",
        dashGridOptions=options,
        getRowId=f'"" + params.data.{row_id}' if row_id else None,
        style={"height": f"{height}px", "width": "100%"},
        className="ag-theme-alpine",
    )


def small_grid(
    df: pd.DataFrame, *, height: int | None = None, grid_id: str | None = None, row_id: str | None = None
) -> dag.AgGrid:
    """A client-side grid for small tables (details, top-N lists)."""
    h = height or min(60 + 42 * max(len(df), 1), 420)
    kwargs: dict[str, Any] = {"id": grid_id} if grid_id else {}
    return dag.AgGrid(
        columnDefs=column_defs(df, filters=False),
        rowData=to_records(df),
        defaultColDef={"flex": 1, "minWidth": 90},
        dashGridOptions={
            "tooltipShowDelay": 300,
            "rowSelection": {"mode": "singleRow", "checkboxes": False, "enableClickSelection": True},
        },
        getRowId=f'"" + params.data.{row_id}' if row_id else None,
        style={"height": f"{h}px", "width": "100%"},
        className="ag-theme-alpine",
        **kwargs,
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


def apply_request(df: pd.DataFrame, request: dict[str, Any] | None) -> dict[str, Any]:
    """AG Grid infinite-model request -> response: filter, sort, then slice [startRow, endRow)."""
    request = request or {}
    mask = pd.Series(True, index=df.index)
    for col, spec in (request.get("filterModel") or {}).items():
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
    start = int(request.get("startRow", 0))
    end = int(request.get("endRow", start + 100))
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
