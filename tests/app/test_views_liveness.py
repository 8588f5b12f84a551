"""Liveness view on the small report: steps 0..6, x live 1..3, y 3..5, z 5..6 (bytes 32, 64, 8)."""

from __future__ import annotations

from app.views import liveness as view


def test_liveness_by_step_totals_per_ipu_and_peak(small_report):
    by = view.liveness_by_step(small_report)
    assert by["not_always_live"].tolist() == [0, 32, 32, 96, 64, 72, 8]
    assert by.loc[5, "ipu0"] == 32 and by.loc[5, "ipu1"] == 32 + 8  # z lives on tile 7 (IPU 1)
    assert by["always_live"].iat[0] == 190 + 186 + 4 * 170 + 2 * 70
    assert view.peak_step(by) == 3
    assert by.loc[3, "type"] == "OnTileExecute" and by.loc[3, "name"] == "matmul"


def test_live_variables_and_difference(small_report):
    assert view.live_variables(small_report, 3)["name"].tolist() == ["y", "x"]  # biggest first
    assert view.live_variables(small_report, 0).empty
    assert set(view.always_live_variables(small_report)["name"]) == {"w", "c"}
    diff = view.step_difference(small_report, 1, 5)
    assert dict(zip(diff["name"], diff["live_in"], strict=True)) == {
        "x": "step 1 only",
        "y": "step 5 only",
        "z": "step 5 only",
    }


def test_step_vertices_and_cycle_estimates(small_report):
    v = view.step_vertices(small_report, 3)
    assert v[["name", "count", "tiles", "cycles"]].values.tolist() == [["poplin::MatMul<half>", 6, 6, 210]]
    assert view.step_vertices(small_report, 4).empty  # an exchange runs no vertices
    est = view.step_cycle_estimates(small_report, 3)
    assert (est["estimated_cycles"], est["max_tile_cycles"], est["min_tile_cycles"], est["busiest_tile"]) == (
        60,
        60,
        10,
        5,
    )
