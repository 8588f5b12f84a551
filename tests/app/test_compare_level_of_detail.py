"""Level of detail in compare mode: on a long alignment the figures the sections send stay small
(at most the section's point budget per trace, well under 5 MB) and keep the extremes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.io as pio

from app.comparison.figures import liveness_comparison_figure, step_cycles_delta_figure, tile_memory_delta_figure
from app.comparison.pages.execution_trace import MAX_STEP_POINTS as TRACE_POINTS
from app.comparison.pages.liveness import MAX_STEP_POINTS
from app.comparison.pages.memory import MAX_TILE_POINTS

FIVE_MB = 5 * 1024 * 1024


def long_liveness(n: int) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    b = rng.integers(0, 1 << 20, n)
    a = b + rng.integers(-4096, 4096, n)
    a[n // 3] = 5 << 20  # the active peak, a single step
    b_step = np.arange(n)
    b_step[n // 2] = -1  # one added step
    return pd.DataFrame(
        {
            "baseline_step": b_step,
            "active_step": np.arange(n),
            "status": np.where(b_step < 0, "added", "same"),
            "type": "OnTileExecute",
            "name": [f"cs{i}" for i in range(n)],
            "baseline_bytes": np.where(b_step < 0, 0, b),
            "active_bytes": a,
            "delta_bytes": a - np.where(b_step < 0, 0, b),
        }
    )


def test_long_liveness_is_binned_and_keeps_the_peak():
    n = 100_000
    lv = long_liveness(n)
    fig = liveness_comparison_figure(lv, max_points=MAX_STEP_POINTS)
    assert all(len(t.x) <= MAX_STEP_POINTS for t in fig.data)
    active = next(t for t in fig.data if t.name == "active")
    assert max(active.y) == 5 << 20  # the one-step peak survives binning
    assert len(pio.to_json(fig)) < FIVE_MB
    # a short alignment keeps every step (and its name on hover)
    short = liveness_comparison_figure(lv.head(500), max_points=MAX_STEP_POINTS)
    assert len(next(t for t in short.data if t.name == "active").x) == 500


def test_pod_size_tiles_and_steps_stay_small():
    tiles = 16 * 1472
    rng = np.random.default_rng(3)
    delta = rng.integers(-1000, 1000, tiles)
    delta[12345] = 90_000
    tm = pd.DataFrame({"tile": np.arange(tiles), "delta_total_bytes_including_gaps": delta})
    fig = tile_memory_delta_figure(tm, max_points=MAX_TILE_POINTS)
    assert all(len(t.x) <= MAX_TILE_POINTS for t in fig.data)
    assert max(max(t.y) for t in fig.data) == 90_000
    assert len(pio.to_json(fig)) < FIVE_MB
    steps = pd.DataFrame({"delta_cycles": rng.integers(-50, 50, 200_000)})
    fig = step_cycles_delta_figure(steps, max_points=TRACE_POINTS)
    assert all(len(t.x) <= TRACE_POINTS for t in fig.data)
    assert len(pio.to_json(fig)) < FIVE_MB
