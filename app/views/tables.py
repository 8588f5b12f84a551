"""Report tables as DataFrames, converted once per report (Arrow -> pandas and formatting are the
costly steps on big reports, and several views read the same table)."""

from __future__ import annotations

from functools import lru_cache

import pandas as pd

from report_format.reader import Report


@lru_cache(maxsize=4)
def variables(report: Report) -> pd.DataFrame:
    """The variables table indexed by variable_id (kept as a column too), ``shape`` as text "[8, 16]"."""
    df = report.variables()
    df["shape"] = ["[" + ", ".join(map(str, s)) + "]" for s in df["shape"]]
    return df.set_index("variable_id", drop=False)
