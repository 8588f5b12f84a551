"""Server-side sorting, filtering and paging of big grids (AG Grid infinite row model requests)."""

from __future__ import annotations

import pandas as pd
import pytest

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


def test_a_filter_of_thousands_of_conditions_or_a_huge_slice_is_refused_before_any_work() -> None:
    from app.grid import MAX_FILTER_CONDITIONS, MAX_ROWS_PER_REQUEST

    cond = {"filterType": "number", "type": "greaterThan", "filter": 1}
    ok = {"bytes": {"operator": "OR", "conditions": [cond] * MAX_FILTER_CONDITIONS}}
    assert (
        apply_request(DF, {"filterModel": ok})["rowCount"]
        == apply_request(DF, {"filterModel": {"bytes": cond}})["rowCount"]
    )
    too_many = {"bytes": {"operator": "OR", "conditions": [cond] * 2000}}
    with pytest.raises(ValueError, match=f"at most {MAX_FILTER_CONDITIONS} conditions"):
        apply_request(DF, {"filterModel": too_many})
    many_columns = {f"c{i}": cond for i in range(MAX_FILTER_CONDITIONS + 1)}
    with pytest.raises(ValueError, match="conditions"):
        apply_request(DF, {"filterModel": many_columns})
    with pytest.raises(ValueError, match=f"at most {MAX_ROWS_PER_REQUEST}"):
        apply_request(DF, {"startRow": 0, "endRow": 10**9})
    with pytest.raises(ValueError, match="0 <= start <= end"):
        apply_request(DF, {"startRow": 5, "endRow": 2})


def test_an_infinite_grid_with_wrapped_names_has_rows_tall_enough():
    """The infinite row model gives all rows one height (autoHeight does nothing there), so a name
    that wraps was cut after its first line: a compare grid's 60-character name ('x (op)') in the
    260 px short column needs 2 lines (60 x 8 + 36 = 516 px), so the rows are 14 + 2 x 19 px."""
    import pandas as pd

    from app import grid

    df = pd.DataFrame({"name": ["p" * 60, "q"], "delta_cycles": [1, 2]})
    defs = grid.column_defs(df, short=True)
    assert grid.wrapped_lines(df, defs) == 2
    assert grid.wrapped_lines(df.assign(name="short"), grid.column_defs(df.assign(name="short"), short=True)) == 1
    assert grid.wrapped_lines(df.assign(name="x" * 400), grid.column_defs(df.assign(name="x" * 400))) == grid.MAX_LINES
