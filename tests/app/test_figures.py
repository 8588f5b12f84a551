"""Figures from view tables: the right traces, level of detail and sizes."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

from app.figures.execution_trace import proportions_figure, tile_steps_figure, timeline_figure
from app.figures.liveness import liveness_figure
from app.figures.memory import OTHER, merge_thin_series, tile_map_figure, tile_memory_figure, variables_figure
from app.views import execution_trace as et
from app.views import liveness as lv
from app.views import memory as mem


def test_tile_memory_figure_stacks_series_and_marks_max_memory(small_report):
    df = mem.tile_memory_breakdown(small_report, "category", True)
    fig = go.Figure(tile_memory_figure(df, df.sum(axis=1).to_numpy(), 1, 1000, selected=[3]))
    bars = [t for t in fig.data if isinstance(t, go.Bar)]
    assert [b.name for b in bars] == list(df.columns) and fig.layout.barmode == "stack"
    assert list(bars[0].x) == list(range(8))
    shapes = fig.layout.shapes
    assert any(s.y0 == 1000 for s in shapes)  # max-memory line
    assert any(s.x0 == 2.5 and s.x1 == 3.5 for s in shapes)  # selected tile highlighted
    areas = go.Figure(tile_memory_figure(df, df.sum(axis=1).to_numpy(), 1, 1000, bars_up_to=4))  # 8 columns > 4
    assert [t.stackgroup for t in areas.data] == ["memory"] * len(df.columns)
    assert list(areas.data[0].y) == df.iloc[:, 0].tolist()
    binned, maxes, width = mem.bin_tiles(df, 3)
    fig = go.Figure(tile_memory_figure(binned, maxes, width, 1000))
    # 3 columns: the fullest-tile line in SVG (WebGL only beyond common.WEBGL_ABOVE points)
    assert any(isinstance(t, go.Scatter) and list(t.y) == list(maxes) for t in fig.data)


def test_series_under_a_pixel_merge_into_one():
    import pandas as pd

    df = pd.DataFrame({"big": [1000, 900], "a": [1, 0], "b": [2, 3], "c": [500, 10]}, index=[0, 1])
    # 100 px for 1,000 bytes: a (0.1 px) and b (0.3 px) are under a pixel on both tiles, c is not
    out, merged = merge_thin_series(df, 1000.0, 100.0)
    assert merged == ["a", "b"] and list(out.columns) == ["big", "c", OTHER]
    assert out[OTHER].tolist() == [3, 3] and out.sum(axis=1).tolist() == df.sum(axis=1).tolist()
    # one thin series alone stays itself (merging it would hide its name for nothing)
    assert merge_thin_series(df.drop(columns="a"), 1000.0, 100.0)[1] == []
    fig = tile_memory_figure(df, df.sum(axis=1).to_numpy(), 1, 100, show_max_memory=False)
    names = [t["name"] for t in fig["data"]]
    assert "other (2 series under 1 px)" in names and "a" not in names  # 1,503 B over PLOT_PX (324 px): a, b thin


def test_liveness_figure_marks_peak(small_report):
    fig = go.Figure(liveness_figure(lv.liveness_by_step(small_report), include_always_live=True))
    peak = [t for t in fig.data if t.name == "peak"][0]
    assert list(peak.x) == [3] and list(peak.y) == [96 + 1196]
    per_ipu = go.Figure(liveness_figure(lv.liveness_by_step(small_report), per_ipu=True))
    assert [t.name for t in per_ipu.data][:2] == ["IPU 0", "IPU 1"]


def test_timeline_figure_one_bar_trace_per_kind(small_report):
    lod = et.level_of_detail(et.flat_spans(small_report, 0), 0, 230)
    fig = go.Figure(timeline_figure(lod.table, row_label="IPU", rows=[0, 1], x_range=(0, 230)))
    assert all(isinstance(t, go.Bar) and t.orientation == "h" for t in fig.data)
    assert fig.layout.barmode == "overlay"  # kinds share a row, no side-by-side offset
    labels = [a.text for a in fig.layout.annotations]
    assert "in (StreamCopyMid)" in labels  # 40 of 230 cycles: wide enough to be named
    assert [t.name for t in fig.data] == ["compute", "exchange", "stream copy", "sync"]
    compute = fig.data[0]
    # steps 3, 5, 6, 8 on IPU 0 then IPU 1 (small_report's flat spans), each a bar from its start
    assert list(compute.base) == [50, 50, 110, 130, 115, 135, 175, 215]
    assert list(compute.y) == [0, 1, 0, 1, 0, 1, 0, 1]
    # lengths less a 230/1500-cycle gap at the end, whole cycles: 40 - 0.15 -> 40, 5 - 0.15 -> 5
    assert list(compute.x) == [40, 60, 5, 5, 40, 60, 5, 5]
    # each bar's own [row, step, middle cycle]: what a click on it reads
    assert [list(c) for c in compute.customdata] == [[0, 3, 70], [1, 3, 80], [0, 5, 112], [1, 5, 132],
                                                     [0, 6, 135], [1, 6, 165], [0, 8, 177], [1, 8, 217]]  # fmt: skip
    assert compute.text[0] == "MatMul_0 (matmul, OnTileExecute)<br>cycles 50..90 (40)"
    assert compute.textposition == "none"  # hover text only: names are annotations
    assert list(fig.layout.xaxis.range) == [0, 230]


def test_tile_memory_map_figure(small_report):
    from app.figures.memory import tile_memory_map_figure

    fig = tile_memory_map_figure(mem.tile_memory_map(small_report, 0), 0, 1000, 524288)
    always = [t for t in fig.data if t.name == "always live"][0]
    assert list(always.base) == [0, 1216] and list(always.x) == [16, 4]  # w: placement row 0, c: row 19 (x 64 B)
    assert {s.x0 for s in fig.layout.shapes} == {524288, 1000}


def test_other_figures_build(small_report):
    cyc, steps, starts, width = et.tile_step_cycles(small_report, 0, 0, 0, 10)
    hm = go.Figure(tile_steps_figure(cyc, steps, starts, width))
    assert np.shape(hm.data[0].z) == (4, 10)
    prop = proportions_figure(et.trace_summary(small_report, 0))
    assert list(prop.data[0].y)[0] == "compute"
    assert len(variables_figure(mem.variable_bytes_by_tile(small_report, [0, 2])).data) == 2
    assert len(tile_map_figure(mem.tile_map(small_report), 1000)["data"]) == 2  # one panel per IPU


def test_memory_series_keep_their_colour_whatever_the_report():
    """A category is one colour in every report: stack in a report holding it first or last."""
    import pandas as pd

    from app.figures.common import SERIES_COLOURS, series_colour
    from app.figures.memory import tile_memory_figure
    from report_format.schema import MEMORY_CATEGORIES, MEMORY_REGIONS

    named = [*MEMORY_CATEGORIES, *MEMORY_REGIONS]
    assert all(c in SERIES_COLOURS for c in named)
    assert len({SERIES_COLOURS[c] for c in MEMORY_CATEGORIES}) == len(MEMORY_CATEGORIES)
    one = pd.DataFrame({"stack": [10, 20], "vertexCode": [5, 5]}, index=[0, 1])
    other = pd.DataFrame({"variable": [1, 1], "constant": [2, 2], "stack": [10, 20]}, index=[0, 1])
    colour = {}
    for binned in (one, other):
        for trace in go.Figure(tile_memory_figure(binned, binned.sum(axis=1).to_numpy(), 1, 100)).data:
            colour.setdefault(trace.name, set()).add(trace.marker.color)
    assert colour["stack"] == {series_colour("stack")} and series_colour("no such series") == series_colour(
        "no such series"
    )


def test_tile_map_scale_follows_the_data():
    import pandas as pd

    from app.figures.memory import tile_map_figure

    tm = pd.DataFrame(
        {"ipu": 0, "tile": [0, 1, 2, 3], "row": [0, 0, 1, 1], "col": [0, 1, 0, 1], "bytes": [0, 100, 200, 26624]}
    )
    heat = tile_map_figure(tm, 638976)["data"][0]
    assert heat["zmax"] == 26624 and "capacity" in heat["colorbar"]["title"]["text"]  # capacity named, not the scale
    over = tile_map_figure(tm.assign(bytes=tm["bytes"] * 40), 638976)["data"][0]
    assert "capacity 624.0 KiB" in over["colorbar"]["ticktext"]  # out of memory: the capacity is a tick


def test_tile_map_outliers_do_not_darken_every_other_tile():
    import numpy as np
    import pandas as pd

    from app.figures.memory import tile_map_figure

    n = 200
    b = np.full(n, 20_000)
    b[:2] = 700_000  # two tiles out of memory
    tm = pd.DataFrame({"ipu": 0, "tile": range(n), "row": np.arange(n) // 20, "col": np.arange(n) % 20, "bytes": b})
    heat = tile_map_figure(tm, 638976)["data"][0]
    assert 20_000 < heat["zmax"] < 50_000 and heat["colorbar"]["ticktext"][4].startswith("≥")  # not 700,000


def test_tiles_x_steps_scale_stops_below_a_step_that_dwarfs_the_rest() -> None:
    """One 20,000-cycle stream copy among 100-400-cycle compute steps: the colour scale stops at the
    95th percentile of the steps' longest tile times, so the compute steps keep their contrast;
    hover still gives every cell's cycles. Without such an outlier the scale is the data's."""
    from app.figures.execution_trace import tile_steps_cap as colour_cap

    tiles, steps = 8, 40
    cycles = np.tile(np.linspace(100, 400, steps), (tiles, 1))  # step s takes 100 + 300 s / 39 cycles
    cycles[:, 3] = 20_000
    zmax, title = colour_cap(cycles)
    longest = np.sort(cycles.max(axis=0))
    assert zmax == pytest.approx(np.percentile(longest, 95)) and zmax < 400 and "stops" in title
    fig = go.Figure(tile_steps_figure(cycles, np.arange(steps), np.arange(tiles), 1))
    assert fig.data[0].zmax == zmax and fig.data[0].z[0][3] == 20_000
    cycles[:, 3] = 300
    assert colour_cap(cycles) == (None, "cycles")
    assert go.Figure(tile_steps_figure(cycles, np.arange(steps), np.arange(tiles), 1)).data[0].zmax is None


def test_tile_memory_map_draws_a_variable_across_the_interleaved_start_in_both_rows() -> None:
    """A 300,000-byte receive buffer at 188,656 on a tile whose interleaved memory starts at 262,144
    (as on a ResNet-50 tile): drawn as 73,488 B in the non-interleaved row and 226,512 B in the
    interleaved one, never as one non-interleaved bar running past the region's end."""
    import pandas as pd

    from app.figures.memory import tile_memory_map_figure

    placed = pd.DataFrame({
        "name": ["received", "w"], "region": ["non_interleaved", "interleaved"], "offset": [188_656, 500_000],
        "bytes": [300_000, 1_000], "always_live": [False, True],
    })  # fmt: skip
    placed["end"] = placed["offset"] + placed["bytes"]
    fig = tile_memory_map_figure(placed, 441, 638_976, 262_144)
    bars = [(y, int(base), int(x)) for tr in fig.data for y, base, x in zip(tr.y, tr.base, tr.x, strict=True)]
    assert sorted(bars) == [
        ("interleaved", 262_144, 226_512), ("interleaved", 500_000, 1_000), ("non_interleaved", 188_656, 73_488),
    ]  # fmt: skip
    hover = sorted((d[0], int(d[1]), int(d[2]), d[3]) for tr in fig.data for d in tr.customdata)
    assert hover == [  # the variable's own offset and bytes, and which part a bar is
        ("received", 188_656, 300_000, " (the part in interleaved memory)"),
        ("received", 188_656, 300_000, " (the part in non-interleaved memory)"),
        ("w", 500_000, 1_000, ""),
    ]


def test_per_ipu_liveness_marks_the_fullest_ipus_peak() -> None:
    """Per IPU, the peak marker sits on the highest line (IPU 1 at step 2: 70 B), not on the all-IPU
    total (100 B at step 1), and the axis says the lines are per IPU."""
    import pandas as pd

    from app.figures.liveness import liveness_figure

    by_step = pd.DataFrame(
        {"not_always_live": [10, 100, 90], "always_live": [5, 5, 5], "ipu0": [5, 60, 20], "ipu1": [5, 40, 70],
         "type": ["OnTileExecute"] * 3, "name": ["a", "b", "c"]}
    )  # fmt: skip
    fig = go.Figure(liveness_figure(by_step, per_ipu=True))
    peak = [t for t in fig.data if t.name == "peak"][0]
    assert (list(peak.x), list(peak.y), peak.text[0]) == ([2], [70], "peak: IPU 1, step 2")
    assert fig.layout.yaxis.title.text == "bytes per IPU"
    total = [t for t in go.Figure(liveness_figure(by_step)).data if t.name == "peak"][0]
    assert (list(total.x), list(total.y), total.text[0]) == ([1], [100], "peak: step 1")


def test_rates_read_with_separators_not_exponents() -> None:
    """FLOPs per cycle as the Operations details and the Execution Trace card show it: 26,104 (not
    '2.61e+04'), 60,000 (not '6e+04'); small rates keep 3 significant digits."""
    from app.components import key_values
    from app.units import format_rate
    from tests.app.dash_tree import text

    assert [format_rate(x) for x in (26104.296, 6e4, 3.2172, 0.5)] == ["26,104", "60,000", "3.22", "0.5"]
    from app.units import format_seconds  # simulated times in the unit that reads best

    assert [format_seconds(t) for t in (3.692e-05, 0.1258, 2.5, 0.0)] == ["36.92 µs", "125.8 ms", "2.5 s", "0 µs"]
    assert format_rate(float("nan")) == "-"
    assert "flops per cycle 26,104" in text(key_values({"flops_per_cycle": 26104.296}))


def test_axes_use_si_prefixes_not_plotly_billions() -> None:
    """A byte axis of 1.5e9 must read "1.5G", not plotly's default "1.5B" (read as 1.5 bytes): every
    page figure and every compare figure sets SI prefixes."""
    import pandas as pd

    from app.comparison.figures import category_delta_figure
    from app.figures.common import base_layout

    page = base_layout(go.Figure(go.Bar(x=[1, 2], y=[1.5e9, 2e9])))
    compare = category_delta_figure(pd.DataFrame({"baseline": [1e9], "active": [2.5e9]}, index=["variable"]))
    assert page.layout.xaxis.exponentformat == page.layout.yaxis.exponentformat == "SI"
    assert compare.layout.yaxis.exponentformat == "SI" and len(compare.data) == 2


def test_tile_map_colours_by_rank_when_most_tiles_hold_nearly_the_same():
    """ResNet-50's shape: most tiles within a few KiB of each other, a tail of emptier tiles. On a
    linear scale from 0 the bulk is one colour; by rank it spreads, the bar naming the bytes at
    each quartile and hover giving each tile's bytes."""
    import pandas as pd

    from app.figures.memory import percentile_rank, tile_map_figure

    assert percentile_rank(np.array([30.0, 10.0, 20.0, 20.0, 40.0])).tolist() == [75.0, 0.0, 25.0, 25.0, 100.0]
    n = 100
    b = 490_000 + 100 * np.arange(n)  # 490,000 .. 499,900 B: the middle half spans 5,000 B of ~500,000
    b[:5] = 20_000 * np.arange(1, 6)  # an emptier tail
    tm = pd.DataFrame({"ipu": 0, "tile": range(n), "row": np.arange(n) // 10, "col": np.arange(n) % 10, "bytes": b})
    heat = tile_map_figure(tm, 638976)["data"][0]
    bar = heat["colorbar"]
    assert (heat["zmin"], heat["zmax"]) == (0, 100) and bar["title"]["text"] == "bytes<br>(by rank)"
    assert bar["ticktext"][0] == "min 19.5 KiB" and bar["ticktext"][-1] == "max 488.2 KiB"
    assert heat["z"][0][0] == 0 and heat["z"][9][9] == 100  # smallest and largest tile: the scale's two ends
    assert hover(heat, 9, 9) == "tile 99 (IPU 0): 499,900 B (488 KiB)"  # hover: the bytes
    # spread over a good part of the scale: linear, as before
    wide = tile_map_figure(tm.assign(bytes=np.arange(n) * 5_000), 638976)["data"][0]
    assert wide["colorbar"]["title"]["text"] == "bytes<br>(capacity<br>624.0 KiB)" and wide["zmax"] == 495_000


def test_physical_tile_map_draws_the_die_and_names_each_tiles_place():
    """A GC200-size IPU (1472 tiles) in the physical layout: 23 columns of 16 islands of 4 tiles,
    an empty row between islands (16 x 5 - 1 = 79 rows); tile 201 is tile 9 of column 3 (201 - 3 x 64),
    so island 2, tile 1 of it: row 2 x 5 + 1 = 11. Its hover names the tile, its place and its bytes."""
    import pandas as pd

    from app.views.memory import physical_position

    n = 1472
    column, island, in_island = physical_position(np.arange(n), n)
    b = 1000 + np.arange(n) * 10  # all different: a linear scale
    tm = pd.DataFrame({"tile": range(n), "ipu": 0, "tile_in_ipu": range(n), "bytes": b}).assign(
        row=island * 5 + in_island, col=column, column=column, island=island, in_island=in_island
    )
    fig = tile_map_figure(tm, 638976, "physical")
    heat = fig["data"][0]
    assert heat["z"].shape == (79, 23) and np.isnan(heat["z"][4]).all()  # row 4: the gap after island 0
    assert (
        hover(heat, 11, 3)
        == "tile 201 (tile 201 of IPU 0)<br>die column 3, island 2, tile 1 of the island<br>3,010 B (3 KiB)"
    )
    assert "laid out on the die" in fig["layout"]["title"]["text"]
    software = tile_map_figure(tm.assign(row=np.arange(n) // 39, col=np.arange(n) % 39), 638976)
    assert hover(software["data"][0], 5, 6) == "tile 201 (IPU 0): 3,010 B (3 KiB)"  # 201 = 5 x 39 + 6


def hover(heat: dict, row: int, col: int) -> str:
    """A heatmap cell's hover as plotly.js words it: its hovertemplate over its customdata."""
    import re

    cell = heat["customdata"][row][col]

    def fill(m: re.Match) -> str:
        v = cell[int(m.group(1))]
        return f"{v:,}" if m.group(2) else str(v)

    return re.sub(r"%\{customdata\[(\d+)\](:,)?\}", fill, heat["hovertemplate"]).replace("<extra></extra>", "")


def test_a_pod_tile_map_sends_numbers_not_a_sentence_per_tile():
    """16 IPUs x 1,472 tiles on the physical layout (the POD16 report's map was 3.0 MB, a hover
    sentence per tile): no per-tile text; each tile's hover is 3 whole numbers (tile, bytes, KiB),
    the rank colour to 0.1; the figure under 1 MB as Dash sends it."""
    import json

    import pandas as pd
    import plotly.utils

    from app.views.memory import physical_position

    tpi, ipus = 1472, 16
    t = np.arange(tpi * ipus)
    column, island, in_island = physical_position(t % tpi, tpi)
    b = 500_000 + (t * 7919) % 5_000  # close together: coloured by rank
    tm = pd.DataFrame({"tile": t, "ipu": t // tpi, "tile_in_ipu": t % tpi, "bytes": b}).assign(
        row=island * 5 + in_island, col=column, column=column, island=island, in_island=in_island
    )
    fig = tile_map_figure(tm, 638976, "physical")
    assert len(fig["data"]) == 16 and all("text" not in d for d in fig["data"])
    last = fig["data"][15]
    assert last["customdata"].shape == (79, 23, 3) and hover(last, 0, 0).startswith("tile 22080 (IPU 15): ")
    assert len(json.dumps(fig, cls=plotly.utils.PlotlyJSONEncoder)) < 1_000_000


def test_figure_dict_has_the_common_look_and_merges_layout_one_level_deep() -> None:
    """A figure dict carries what ``base_layout`` gives a go.Figure (template, margins, SI ticks), and
    a page's layout changes one key of a nested dict without dropping its siblings."""
    import plotly.io as pio

    from app.figures.common import base_layout, figure_dict

    trace = {"type": "bar", "x": [1, 2], "y": [3, 4]}
    fig = figure_dict([trace], {"margin": {"t": 30}, "yaxis": {"title": {"text": "bytes"}}}, height=300)
    assert fig["layout"]["margin"] == {"l": 86, "r": 44, "t": 30, "b": 56}
    assert fig["layout"]["yaxis"] == {"exponentformat": "SI", "title": {"text": "bytes"}}
    assert fig["layout"]["xaxis"] == {"exponentformat": "SI"} and fig["data"] == [trace]
    valid = go.Figure(fig)  # plotly accepts it as is
    same = base_layout(go.Figure(go.Bar(x=[1, 2], y=[3, 4])), height=300)
    assert valid.layout.template == same.layout.template == pio.templates["plotly_white"]
    assert (valid.layout.height, valid.layout.legend, valid.layout.hoverlabel) == (
        same.layout.height,
        same.layout.legend,
        same.layout.hoverlabel,
    )


def test_tile_memory_hover_names_the_tile_in_either_order() -> None:
    """In tile order x is the tile (no per-series copy of the tiles); sorted, x is the rank and each
    series carries its tiles for the hover."""
    import pandas as pd

    binned = pd.DataFrame({"stack": [10, 30, 20]}, index=[4, 5, 6])
    by_tile = tile_memory_figure(binned, binned.sum(axis=1).to_numpy(), 1, 100)["data"][0]
    assert by_tile["x"] == [4, 5, 6] and "customdata" not in by_tile and "tile %{x}" in by_tile["hovertemplate"]
    ranked = binned.sort_values("stack", ascending=False)
    fullest = tile_memory_figure(ranked, ranked.sum(axis=1).to_numpy(), 1, 100, sorted_order=True)["data"][0]
    assert fullest["x"] == [0, 1, 2] and fullest["customdata"] == [5, 6, 4]
    assert "tile %{customdata}" in fullest["hovertemplate"]
