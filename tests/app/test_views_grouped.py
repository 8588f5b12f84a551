"""app.views.grouped: the numpy group-by behind the per-tile tables of big (POD16) reports."""

from __future__ import annotations

import numpy as np
import pandas as pd

from app.views.grouped import sums_and_tiles


def test_sums_max_and_distinct_tiles_by_hand() -> None:
    # key 7: tiles 3, 3, 0 -> 2 distinct; key 2: tile 5 -> 1; sums and maxes by hand
    keys = np.array([7, 2, 7, 7])
    tiles = np.array([3, 5, 3, 0])
    out = sums_and_tiles(
        keys, tiles, sums={"b": np.array([10, 1, 20, 5])}, maxes={"c": np.array([4, 9, 6, 2])}, index_name="k"
    )
    assert out.index.name == "k"
    assert out.index.tolist() == [2, 7]
    assert out["b"].tolist() == [1, 35]
    assert out["c"].tolist() == [9, 6]
    assert out["tiles"].tolist() == [1, 2]


def test_matches_pandas_groupby_nunique() -> None:
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"k": rng.integers(0, 50, 5000), "tile": rng.integers(0, 23552, 5000),
                       "b": rng.integers(0, 2**40, 5000)})  # fmt: skip
    ref = df.groupby("k").agg(b=("b", "sum"), tiles=("tile", "nunique"))
    out = sums_and_tiles(df["k"].to_numpy(), df["tile"].to_numpy(), sums={"b": df["b"].to_numpy()}, index_name="k")
    pd.testing.assert_frame_equal(out, ref, check_dtype=False)


def test_empty() -> None:
    out = sums_and_tiles(np.array([], dtype=np.int64), np.array([], dtype=np.int64), sums={"b": np.array([])})
    assert out.empty and list(out.columns) == ["b", "tiles"]
