"""Server-side sorting, filtering and paging of big grids (AG Grid infinite row model requests)."""

from __future__ import annotations

import pandas as pd

from app.grid import apply_request, column_defs

DF = pd.DataFrame({"name": ["alpha", "beta", "gamma", "delta", "alphabet"], "bytes": [10, 50, 30, 20, 40]})


def test_sort_and_page():
    r = apply_request(DF, {"startRow": 1, "endRow": 3, "sortModel": [{"colId": "bytes", "sort": "desc"}]})
    assert r["rowCount"] == 5 and [x["bytes"] for x in r["rowData"]] == [40, 30]


def test_text_and_number_filters():
    r = apply_request(
        DF,
        {
            "startRow": 0,
            "endRow": 100,
            "filterModel": {"name": {"filterType": "text", "type": "contains", "filter": "ALPHA"}},
        },
    )
    assert [x["name"] for x in r["rowData"]] == ["alpha", "alphabet"]
    r = apply_request(
        DF,
        {
            "startRow": 0,
            "endRow": 100,
            "filterModel": {"bytes": {"filterType": "number", "type": "inRange", "filter": 20, "filterTo": 40}},
        },
    )
    assert sorted(x["bytes"] for x in r["rowData"]) == [20, 30, 40]
    r = apply_request(
        DF,
        {
            "startRow": 0,
            "endRow": 100,
            "filterModel": {
                "bytes": {
                    "filterType": "number",
                    "operator": "OR",
                    "conditions": [
                        {"filterType": "number", "type": "lessThan", "filter": 15},
                        {"filterType": "number", "type": "greaterThan", "filter": 45},
                    ],
                }
            },
        },
    )
    assert sorted(x["bytes"] for x in r["rowData"]) == [10, 50] and r["rowCount"] == 2


def test_records_are_plain_python_and_columns_typed():
    r = apply_request(DF, None)
    assert type(r["rowData"][0]["bytes"]) is int
    defs = {d["field"]: d for d in column_defs(DF, hidden=("name",))}
    assert defs["bytes"]["filter"] == "agNumberColumnFilter" and defs["name"]["hide"]
