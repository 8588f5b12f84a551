"""Comparison figures: level of detail on long axes (hand-worked bins), traces that carry the
comparison tables' numbers, and empty inputs."""

from __future__ import annotations

import numpy as np
import pandas as pd

from app.comparison import figures as figs


def test_bin_extremes_keeps_largest_increase_and_decrease_per_bin() -> None:
    delta = np.array([1, -5, 3, 0, 0, 0, -2, 7, -1, 4])
    x, up, down, width = figs.bin_extremes(np.arange(10), delta, max_points=4)
    assert width == 3
    assert x.tolist() == [0, 3, 6, 9]
    assert up.tolist() == [3, 0, 7, 4]
    assert down.tolist() == [-5, 0, -2, 0]
    x, up, down, width = figs.bin_extremes(np.arange(10), delta, max_points=10)
    assert width == 1 and (up + down).tolist() == delta.tolist()


def _tiles(n: int) -> pd.DataFrame:
    delta = np.zeros(n, dtype=np.int64)
    delta[[3, n - 2]] = [5000, -700]
    return pd.DataFrame(
        {
            "tile": np.arange(n),
            "baseline_total_bytes_including_gaps": np.full(n, 1000),
            "active_total_bytes_including_gaps": 1000 + delta,
            "delta_total_bytes_including_gaps": delta,
        }
    )


def test_tile_delta_figure_bins_a_pod_and_marks_outliers() -> None:
    fig = figs.tile_memory_delta_figure(_tiles(23552), max_points=2000)
    grew, shrank, marked = fig.data
    assert len(grew.x) <= 2000 and max(grew.y) == 5000 and min(shrank.y) == -700
    assert list(marked.x) == [3, 23550] and list(marked.y) == [5000, -700]


def test_liveness_figure_lines_up_aligned_steps() -> None:
    lv = pd.DataFrame(
        {
            "baseline_step": [0, 1, -1, 2],
            "active_step": [0, 1, 2, 3],
            "status": ["same", "same", "added", "same"],
            "type": ["OnTileExecute"] * 4,
            "name": ["a", "b", "new", "c"],
            "baseline_bytes": [10, 20, 0, 30],
            "active_bytes": [10, 25, 5, 30],
            "delta_bytes": [0, 5, 5, 0],
        }
    )
    fig = figs.liveness_comparison_figure(lv)
    base, active, grew, shrank = fig.data
    assert np.isnan(base.y[2]) and list(base.y[[0, 1, 3]]) == [10, 20, 30]  # gap where the step was added
    assert list(active.y) == [10, 25, 5, 30]
    assert list(grew.y) == [0, 5, 5, 0] and list(shrank.y) == [0, 0, 0, 0]


def test_top_delta_figure_orders_by_size_and_marks_added() -> None:
    t = pd.DataFrame(
        {
            "name": ["a", "b", "c", "d"],
            "status": ["changed", "added", "same", "removed"],
            "delta_bytes": [5, 40, 0, -20],
        }
    )
    fig = figs.top_delta_figure(t, "name", "delta_bytes", "t", n=3)
    (bar,) = fig.data
    assert list(bar.x) == [5, -20, 40]  # biggest at the top (plotly draws the last bar highest)
    assert list(bar.y) == [0, 1, 2]  # a row each, even where shortened names coincide
    assert list(fig.layout.yaxis.ticktext) == ["a", "d [removed]", "b [added]"]


def test_top_delta_bars_never_share_a_row() -> None:
    """Two operation paths that differ only in their start (the ONNX node) get a bar each, labelled
    with both ends of the path; bytes in binary units on the bars and the axis."""
    tail = " > poplibs:Conv(Conv) > poplibs:conv matmul(MatMul)"
    t = pd.DataFrame({"name": ["onnx:s3b0_b_conv_365(Conv)" + tail, "onnx:s1b0_b_conv_101(Conv)" + tail],
                      "delta_bytes": [3 * 2**20, 2**20]})  # fmt: skip
    fig = figs.top_delta_figure(t, "name", "delta_bytes", "t", unit="B")
    (bar,) = fig.data
    labels = list(fig.layout.yaxis.ticktext)
    assert list(bar.y) == [0, 1] and len(set(labels)) == 2
    assert labels[1].startswith("onnx:s3b0_b_conv_365") and labels[1].endswith("conv matmul(MatMul)")
    assert list(bar.text) == ["+1.0 MiB", "+3.0 MiB"]
    assert list(fig.layout.xaxis.ticktext) == ["0", "0.5 MiB", "1 MiB", "1.5 MiB", "2 MiB", "2.5 MiB", "3 MiB"]


def test_empty_inputs_give_a_message_not_an_error() -> None:
    empty = pd.DataFrame()
    for fig in (
        figs.tile_memory_delta_figure(empty),
        figs.liveness_comparison_figure(empty),
        figs.step_cycles_delta_figure(empty),
        figs.top_delta_figure(pd.DataFrame({"name": [], "delta_bytes": []}), "name", "delta_bytes", "t"),
    ):
        assert fig.layout.annotations and not fig.data
