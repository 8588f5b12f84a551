"""Execution trace view on the small report. Run 0, per IPU: stream copies 5 + 40 + 5, then twice
(matmul, exchange 20, add 5), then sync 10; matmul is 40 cycles on IPU 0 and 60 on IPU 1."""

from __future__ import annotations

import pytest

from app.views import execution_trace as view


def test_trace_summary_run0(small_report):
    s = view.trace_summary(small_report, 0)
    assert (s["cycles"], s["flops"], s["steps"]) == (230, 968, 10)
    # the IPUs' time: the run's 230 cycles on each of 2 IPUs; IPU 0's steps fill 190 of them (its
    # matmul is 20 cycles shorter than IPU 1's, twice), so it idles 40 waiting for IPU 1
    total = 2 * 230
    assert s["proportion.compute"] == pytest.approx((2 * 45 + 2 * 65) / total)
    assert s["proportion.stream copy"] == pytest.approx(100 / total)
    assert s["proportion.idle"] == pytest.approx(40 / total)
    assert sum(v for k, v in s.items() if k.startswith("proportion.")) == pytest.approx(1.0)
    ipus = view.ipu_table(small_report, 0).set_index("ipu")
    assert ipus["idle cycles"].tolist() == [40, 0]
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
    # bins of 57.5 cycles; spans at least that long stay exact: at most 4 bins and 4 exact spans a row
    assert not binned.exact and binned.table.groupby("row").size().max() <= 2 * 4
    assert binned.table["steps"].sum() == 20  # every visible step is drawn once, exact or in one bin
    exact = binned.table[binned.table["step"] >= 0]
    assert ((exact["end"] - exact["start"]) >= 57.5).all()


def test_binned_spans_show_how_busy_each_bin_is():
    """Row 0: 100 one-cycle steps, one every 10 cycles (busy 10 %); row 1: 100 ten-cycle steps back to
    back (busy 100 %); row 2: one 600-cycle step. At 10 bins of 100 cycles, row 0's bins are drawn 10
    cycles long, row 1's whole, and row 2's step stays one exact span."""
    import pandas as pd

    rows = {
        "row": [0] * 100 + [1] * 100 + [2],
        "start": list(range(0, 1000, 10)) * 2 + [200],
        "end": [s + 1 for s in range(0, 1000, 10)] + [s + 10 for s in range(0, 1000, 10)] + [800],
    }
    n = len(rows["row"])
    spans = pd.DataFrame({**rows, "kind": ["compute"] * n, "label": ["x"] * n, "step": range(n)})
    lod = view.level_of_detail(spans, 0, 1000, max_per_row=10)
    t = lod.table.assign(length=lambda d: d["end"] - d["start"])
    assert not lod.exact
    assert t[t["row"] == 0]["length"].tolist() == [10] * 10 and t[t["row"] == 0]["steps"].tolist() == [10] * 10
    assert t[t["row"] == 1]["length"].tolist() == [100] * 10
    assert t[t["row"] == 2][["start", "end", "step"]].values.tolist() == [[200, 800, 200]]
    assert "busy 10% of 100 cycles" in t[t["row"] == 0]["label"].iat[0]


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


def test_data_dependent_nodes_of_one_name_and_reason_are_said_once(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import pandas as pd

    from app.views import provenance

    dd = pd.DataFrame(
        {
            "program_id": [4, 9, 12],
            "name": ["multi slice", "multi slice", ""],
            "reason": ["MultiSlice: indices decide", "MultiSlice: indices decide", "If: the condition decides"],
        }
    )
    monkeypatch.setattr(provenance, "data_dependent", lambda report: dd)
    assert provenance.data_dependent_sentence(None) == (  # type: ignore[arg-type]
        "3 program nodes have cycles that depend on data, charged the cost model's estimate whatever the values "
        "(multi slice: MultiSlice: indices decide (2 nodes); program 12: If: the condition decides)."
    )
    assert provenance.data_dependent_sentence(None, shown=1).endswith("(2 nodes); and 1 more).")  # type: ignore[arg-type]
