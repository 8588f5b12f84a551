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


def test_liveness_of_one_ipu(small_report):
    from app.views.ipus import ALL_IPUS

    assert view.liveness_on_ipu(small_report, ALL_IPUS) is view.liveness_by_step(small_report)
    one = view.liveness_on_ipu(small_report, 1)
    # IPU 1 (tiles 4..7): x 4 tiles x 4 B at steps 1..3, y 4 x 8 B at 3..5, z 8 B on tile 7 at 5..6
    assert one["not_always_live"].tolist() == [0, 16, 16, 48, 32, 40, 8]
    # always live on IPU 1: vertex code 150 B on tiles 4, 5 and 50 B on 6, 7, control code 4 x 20 B
    assert one["always_live"].iat[0] == 2 * 150 + 2 * 50 + 4 * 20 == 480
    zero = view.liveness_on_ipu(small_report, 0)  # tiles 0..3, plus w (16 B on tiles 0, 1) and c (4 B on 0)
    assert zero["always_live"].iat[0] == 4 * 150 + 4 * 20 + 32 + 4 == 716
    assert view.peak_step(one) == 3
    assert view.live_variables_on_ipu(small_report, 5, 1)["name"].tolist() == ["y", "z"]
    assert view.live_variables_on_ipu(small_report, 5, 0)["name"].tolist() == ["y"]  # z is on tile 7 only
