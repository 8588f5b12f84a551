"""The sweep view: a sweep's points as a table, which of them are on the Pareto front, and the best
point within a memory budget. Shared by ``tilescope sweep`` (its closing table) and the viewer's
Sweep page."""

from __future__ import annotations

import numpy as np
import pandas as pd

from report_format.sweep import Sweep

#: Grid options a sweep table holds, in its column order: the Pareto plot colours by one of them.
OPTIONS: tuple[str, ...] = (
    "target",
    "batch",
    "dtype",
    "partials",
    "available_memory_proportion",
    "ipus",
    "replicas",
    "pipeline",
)


def pareto_front(samples_per_second: np.ndarray, max_tile_bytes: np.ndarray) -> np.ndarray:
    """Which points no other beats: none has at least their samples/s with at most their peak tile
    memory and is strictly better in one. Points without a throughput (did not fit) are never on it."""
    s = np.asarray(samples_per_second, dtype=np.float64)
    m = np.asarray(max_tile_bytes, dtype=np.float64)
    valid = np.isfinite(s) & (s > 0)
    # pairwise: a dominates b (a few hundred points at most, so n^2 booleans is small)
    ge = (s[:, None] >= s[None, :]) & (m[:, None] <= m[None, :])
    gt = (s[:, None] > s[None, :]) | (m[:, None] < m[None, :])
    dominated = (ge & gt & valid[:, None]).any(axis=0)
    return valid & ~dominated


def sweep_points(sweep: Sweep) -> pd.DataFrame:
    """The sweep table, in point order, with ``pareto``: whether the point is on the front of
    samples/s against peak tile memory."""
    df = sweep.sweep()
    df["pareto"] = pareto_front(df["samples_per_second"].to_numpy(), df["max_tile_bytes"].to_numpy())
    return df


def best_within(df: pd.DataFrame, max_tile_bytes: int) -> pd.Series | None:
    """The fastest point whose peak tile memory is at most ``max_tile_bytes`` (None if none fits)."""
    ok = df[(df["max_tile_bytes"] <= max_tile_bytes) & np.isfinite(df["samples_per_second"])]
    return None if ok.empty else ok.loc[ok["samples_per_second"].idxmax()]
