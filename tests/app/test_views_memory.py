"""Memory view on the hand-made small report (numbers worked out in small_report's docstring)."""

from __future__ import annotations

import numpy as np
import pytest

from app.views import memory as view


def test_category_breakdown_sums_to_tile_totals_with_gaps(small_report):
    df = view.tile_memory_breakdown(small_report, "category", True)
    # tile 0: vertex code 100 + 50, control code 20, variables w 16 + x 4 + y 8, constant c 4, gaps 8
    assert df.loc[0].to_dict() == {"vertexCode": 150, "controlCode": 20, "variable": 28, "constant": 4, "gaps": 8}
    assert df.loc[7, "variable"] == 4 + 8 + 8
    tm = small_report.tile_memory().set_index("tile")
    np.testing.assert_array_equal(df.sum(axis=1).to_numpy(), tm["total_bytes_including_gaps"].to_numpy())


def test_region_and_liveness_breakdowns_exclude_gaps_when_asked(small_report):
    reg = view.tile_memory_breakdown(small_report, "region", False)
    assert "gaps" not in reg.columns and "overflowed" not in reg.columns  # all-zero series are dropped
    assert reg.loc[0, "non_interleaved"] == 194 and reg.loc[0, "interleaved"] == 8
    live = view.tile_memory_breakdown(small_report, "liveness", False)
    assert live.loc[0, "always_live"] == 150 + 20 + 16 + 4 and live.loc[0, "not_always_live"] == 12
    with pytest.raises(ValueError, match="breakdown"):
        view.tile_memory_breakdown(small_report, "colour", False)


def test_bin_tiles_means_and_max_per_bin(small_report):
    df = view.tile_memory_breakdown(small_report, "liveness", False)
    binned, maxes, width = view.bin_tiles(df, max_columns=3)
    assert width == 3 and list(binned.index) == [0, 3, 6]
    totals = df.sum(axis=1).to_numpy()
    np.testing.assert_allclose(maxes, [totals[0:3].max(), totals[3:6].max(), totals[6:8].max()])
    np.testing.assert_allclose(binned["always_live"].to_numpy()[2], df["always_live"].to_numpy()[6:8].mean())
    same, same_max, one = view.bin_tiles(df, max_columns=100)
    assert one == 1 and same is df and list(same_max) == list(totals)


def test_order_sorted_puts_fullest_tile_first(small_report):
    df = view.order_tiles(view.tile_memory_breakdown(small_report, "category", True), "sorted")
    assert df.index[0] == 0 and df.index[-1] == 6  # tile 6 (82 B) is the emptiest


def test_selected_tiles_tabs(small_report):
    d = view.tile_details(small_report, [0, 1])
    reg = d["regions"].set_index("region")
    assert reg.loc["total", "including_gaps"] == 210 + 198 and reg.loc["total", "excluding_gaps"] == 202 + 198
    cat = d["categories"].set_index(["category", "always_live"])["bytes"]
    assert cat[("vertexCode", True)] == 300 and cat[("variable", False)] == 24  # x 4 + y 8 on each tile
    cs = view.tile_compute_sets(small_report, [0, 7]).set_index("name")
    assert cs.loc["matmul", "vertices"] == 1 and cs.loc["add", "vertices"] == 2 and cs.loc["add", "state_bytes"] == 16
    vx = view.tile_vertices(small_report, [0, 7]).set_index("name")
    assert vx.loc["popops::Add<float>", "code_bytes"] == 2 * 50  # code once per tile using the codelet
    ex = view.tile_exchanges(small_report, [0]).set_index("program_id")
    assert ex.loc[7, "bytes_in"] == 8 and ex.loc[7, "code_bytes"] == 12 and ex.loc[3, "type"] == "StreamCopyMid"
    var = view.tile_variables(small_report, [7]).set_index("name")
    assert var["bytes"].to_dict() == {"y": 8, "z": 8, "x": 4} and var.loc["y", "total_bytes"] == 64
    assert var.loc["y", "shape"] == "[16]"
    assert len(view.tile_variables(small_report, None)) == 5


def test_variable_bytes_by_tile_and_tile_map(small_report):
    w = view.variable_bytes_by_tile(small_report, [0])
    assert w[["tile", "bytes"]].values.tolist() == [[0, 16], [1, 16]] and set(w["name"]) == {"w"}
    tm = view.tile_map(small_report).set_index("tile")
    assert (tm.loc[5, "ipu"], tm.loc[5, "row"], tm.loc[5, "col"]) == (1, 0, 1)  # 4 tiles per IPU: rows of 2
    assert tm.loc[0, "bytes"] == 210
    # physical: 4 tiles per IPU are one island, one column: tile 5 (IPU 1's tile 1) on its row 1
    ph = view.tile_map(small_report, layout="physical").set_index("tile")
    assert (ph.loc[5, "ipu"], ph.loc[5, "row"], ph.loc[5, "col"], ph.loc[5, "island"]) == (1, 1, 0, 0)
    assert ph["bytes"].equals(tm["bytes"])


def test_physical_positions_of_real_ipus():
    """Columns of 16 islands of 4 tiles: GC200/C600 1472 tiles = 23 columns, GC2 1216 = 19; tile 201
    of a GC200 is tile 9 of column 3, so island 2, tile 1 of it. Small targets: whole islands."""
    col, isl, tile = view.physical_position(np.array([0, 63, 64, 201, 1471]), 1472)
    assert col.tolist() == [0, 0, 1, 3, 22] and isl.tolist() == [0, 15, 0, 2, 15] and tile.tolist() == [0, 3, 0, 1, 3]
    assert view.physical_position(np.arange(1216), 1216)[0].max() == 18
    assert [view.tiles_per_column(n) for n in (4, 16, 64, 100, 1216, 1472)] == [4, 4, 64, 12, 64, 64]


def test_tile_memory_map_orders_variables_by_address(small_report):
    m = view.tile_memory_map(small_report, 0)
    # placements are written in variable order at offset 64 * (row of the placements table): w 0, x 128, y 640, c 1216
    assert m["name"].tolist() == ["w", "x", "y", "c"]
    assert (m["end"] - m["offset"]).tolist() == [16, 4, 8, 4] and m["always_live"].tolist() == [
        True,
        False,
        False,
        True,
    ]
    assert m["region"].tolist() == ["non_interleaved", "non_interleaved", "interleaved", "non_interleaved"]
    assert view.tile_memory_map(small_report, 6)["name"].tolist() == ["x", "y"]
