"""Execution trace view on the small report. Run 0, per IPU: stream copies 5 + 40 + 5, then twice
(matmul, exchange 20, add 5), then sync 10; matmul is 40 cycles on IPU 0 and 60 on IPU 1."""

from __future__ import annotations

import pytest

from app.views import execution_trace as view


def test_trace_summary_run0(small_report):
    s = view.trace_summary(small_report, 0)
    assert (s["cycles"], s["flops"], s["steps"]) == (230, 968, 10)
    total = (50 + 2 * 45 + 2 * 20 + 10) + (50 + 2 * 65 + 2 * 20 + 10)  # both IPUs
    assert s["proportion.compute"] == pytest.approx((2 * 45 + 2 * 65) / total)
    assert s["proportion.stream copy"] == pytest.approx(100 / total)
    assert s["stream_copy_bytes_in"] == 32 and s["stream_copy_bytes_out"] == 0
    assert s["exchange_bytes_in"] == 4 * 8 * 2 * 2  # 8 B per tile, 4 tiles, 2 IPUs, 2 iterations
    assert s["global_exchange_bytes_in"] == 0


def test_runs_differ(small_report):
    assert view.run_length(small_report, 0) == 230 and view.run_length(small_report, 1) == 460


def test_level_of_detail_exact_then_binned(small_report):
    spans = view.flat_spans(small_report, 0)
    exact = view.level_of_detail(spans, 0, 230, max_per_row=100)
    assert exact.exact and len(exact.table) == 20 and exact.detail.startswith("exact")
    zoomed = view.level_of_detail(spans, 50, 100, max_per_row=100)
    assert sorted(zoomed.table["step"].unique()) == [3, 4]  # only steps overlapping cycles 50..100
    binned = view.level_of_detail(spans, 0, 230, max_per_row=4)
    assert not binned.exact and binned.table.groupby("row").size().max() <= 4
    assert binned.table["steps"].sum() == 20  # every visible step falls in one bin


def test_flame_merges_repeat_iterations(small_report):
    fl = view.flame_spans(small_report, 0, 1).set_index("label")
    assert (fl.loc["loop (Repeat)", "start"], fl.loc["loop (Repeat)", "end"]) == (50, 220)
    assert fl.loc["loop (Repeat)", "kind"] == "control" and fl.loc["sync (Sync)", "kind"] == "sync"
    assert (fl.loc["main program (Program)", "row"], fl.loc["sync (Sync)", "row"]) == (0, 2)


def test_tile_step_cycles_reads_range_or_samples(small_report):
    assert view.steps_in_cycle_range(small_report, 0, 0, 50, 100) == (3, 5)
    cyc, steps, starts, width = view.tile_step_cycles(small_report, 0, 1, 3, 5)
    assert steps.tolist() == [3, 4] and width == 1
    assert cyc[:, 0].tolist() == [50, 60, 0, 0]  # matmul on tiles 4..7
    cyc, steps, starts, width = view.tile_step_cycles(small_report, 0, 1, 0, 10, max_steps=4, max_tiles=2)
    assert len(steps) == 4 and steps[0] == 0 and steps[-1] == 9
    assert width == 2 and starts.tolist() == [0, 2] and cyc.shape == (2, 4)


def test_step_details_per_ipu(small_report):
    d = view.step_details(small_report, 0, 3).set_index("ipu")  # the first matmul
    assert d.loc[0, "cycles"] == 40 and d.loc[1, "cycles"] == 60 and d.loc[1, "active_tiles"] == 2
    assert d.loc[0, "name"] == "matmul" and d.loc[1, "flops"] == 2 * (50 + 60)
    assert d.loc[1, "tile_balance"] == round((50 + 60) / 4 / 60, 3)


def test_step_at_a_cycle(small_report):
    # run 0, IPU 1: matmul 50-110, exchange 110-130; IPU 0: matmul 50-90, exchange 90-110
    assert view.step_at(small_report, 0, 1, 100) == 3 and view.step_at(small_report, 0, 0, 100) == 4
    assert view.step_at(small_report, 0, 0, 10_000) == 9  # past the end: the nearest (last) step
