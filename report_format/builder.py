"""``ReportBuilder``: the one way tilescope's fabricated reports are written (the synthetic
reports of ``report_format.synthetic``, the hand-made reports of the tests).

It is a ``ReportWriter`` that completes every table given as columns with a typed default for each
schema column left out (0, "", false, an empty list), so a new column is added once, in
``report_format.schema``, and every fabricated report still writes; a builder sets a column only
where its value matters. Real reports (``profiler.capture.autoreport``) use ``ReportWriter``, which insists on
every column.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from report_format import schema
from report_format.errors import ReportError
from report_format.writer import ReportWriter, TableData


def default_values(type_: pa.DataType, rows: int) -> Any:
    """``rows`` default values of an Arrow type: zeros, empty strings, false, empty lists."""
    if pa.types.is_list(type_):
        return [[] for _ in range(rows)]
    if pa.types.is_string(type_) or pa.types.is_large_string(type_):
        return [""] * rows
    if pa.types.is_boolean(type_):
        return np.zeros(rows, dtype=bool)
    return np.zeros(rows, dtype=type_.to_pandas_dtype())


def with_defaults(name: str, data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` (columns of table ``name``) with every schema column it leaves out filled in."""
    spec = schema.table_spec(name)
    if not data:
        raise ReportError(f"table {name}", "no columns given (at least one sets the number of rows)")
    rows = len(next(iter(data.values())))
    out = dict(data)
    for col in spec.columns:
        if col.name not in out:
            out[col.name] = default_values(col.type, rows)
    return out


class ReportBuilder(ReportWriter):
    """A ``ReportWriter`` for fabricated reports: columns left out get their defaults."""

    def append(self, name: str, data: TableData) -> None:
        if isinstance(data, Mapping):
            data = with_defaults(name, data)
        super().append(name, data)
