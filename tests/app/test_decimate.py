"""Level of detail of long lines (app.figures.decimate) and the liveness figure drawn with it:
what is drawn keeps every pixel column's extremes and the exact peak."""

from __future__ import annotations

import numpy as np
import pandas as pd

from app.figures.decimate import decode_typed_array, envelope, typed_array, visible
from app.figures.liveness import liveness_figure
from app.views.liveness import peak_step


def test_envelope_keeps_each_buckets_first_min_and_max_in_order() -> None:
    rng = np.random.default_rng(7)
    y = rng.integers(0, 1000, size=10_007)
    kept = envelope(y, columns=100)
    per = 101  # ceil(10_007 / 100): 100 buckets, the last one short
    expected = {0, y.size - 1}
    for start in range(0, y.size, per):  # the reference: one bucket at a time
        chunk = y[start : start + per]
        expected |= {start + int(np.argmax(chunk)), start + int(np.argmin(chunk))}
    assert kept.tolist() == sorted(expected)
    assert kept.size <= 2 * 100 + 2


def test_envelope_keeps_short_lines_whole_and_the_first_peak() -> None:
    assert envelope(np.arange(6), columns=3).tolist() == list(range(6))
    y = np.zeros(5000)
    y[[1234, 4321]] = 9.0  # two equal peaks: the first is the one kept (as argmax names it)
    kept = envelope(y, columns=10)
    assert 1234 in kept and y[kept].max() == 9.0


def test_typed_array_round_trips_in_the_narrowest_type() -> None:
    for values, code in (
        (np.array([0, 6138]), "u2"),
        (np.array([0, 3_222_528]), "u4"),
        (np.array([-1, 5]), "i1"),
        (np.array([0, 2**40]), "f8"),  # beyond 32 bits: float64, still exact
        (np.array([0.5, 1.25]), "f8"),
    ):
        spec = typed_array(values)
        assert spec["dtype"] == code
        assert decode_typed_array(spec).tolist() == values.tolist()


def _long_by_step(n: int, n_ipus: int = 4) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    per_ipu = rng.integers(0, 1 << 20, size=(n, n_ipus))
    out = pd.DataFrame({f"ipu{i}": per_ipu[:, i] for i in range(n_ipus)}, index=pd.RangeIndex(n, name="step"))
    out.insert(0, "not_always_live", per_ipu.sum(axis=1))
    return out.assign(always_live=1000, type="OnTileExecute", name=[f"s{i}" for i in range(n)])


def test_a_long_liveness_line_draws_at_most_two_points_a_column_and_its_exact_peak() -> None:
    by_step = _long_by_step(40_000)
    fig = liveness_figure(by_step)
    line, marker = fig["data"][0], fig["data"][-1]
    x, y = decode_typed_array(line["x"]), decode_typed_array(line["y"])
    assert x.size <= 2 * 1500 + 2 and line["type"] == "scatter"  # few enough for SVG: no WebGL context
    peak = peak_step(by_step)
    assert (int(x[y.argmax()]), int(y.max())) == (peak, int(by_step["not_always_live"].iat[peak]))
    assert (marker["x"], marker["y"]) == ([peak], [int(by_step["not_always_live"].iat[peak])])
    assert line["customdata"][int(y.argmax())] == f"OnTileExecute s{peak}"  # hover names the step drawn
    # every drawn point is the step's real value
    assert (y == by_step["not_always_live"].to_numpy()[x]).all()


def test_per_ipu_lines_each_keep_their_own_peak() -> None:
    by_step = _long_by_step(20_000)
    fig = liveness_figure(by_step, per_ipu=True)
    for i, trace in enumerate(fig["data"][:4]):
        x, y = decode_typed_array(trace["x"]), decode_typed_array(trace["y"])
        col = by_step[f"ipu{i}"].to_numpy()
        assert x.size <= 2 * 1500 + 2
        assert (int(x[y.argmax()]), int(y.max())) == (int(col.argmax()), int(col.max()))
    lines = by_step[[f"ipu{i}" for i in range(4)]].to_numpy()
    assert fig["data"][-1]["y"] == [int(lines.max())]


def test_visible_is_the_window_and_one_point_beyond_each_edge() -> None:
    x = np.arange(10, 30)  # steps 10..29
    assert visible(x, 14.5, 17.2) == (4, 9)  # steps 14 (just left of 14.5) .. 18 (just right of 17.2)
    assert visible(x, 15, 17) == (4, 9)  # an edge on a step keeps it, and its outer neighbour too
    assert visible(x, -5, 3) == (0, 1)  # before the line: its first point only
    assert visible(x, None, None) == (0, 20)


def test_a_zoom_draws_every_step_it_shows_and_a_wide_zoom_its_own_envelope() -> None:
    by_step = _long_by_step(40_000)
    total = by_step["not_always_live"].to_numpy()
    zoomed = liveness_figure(by_step, x_range=(20_000.4, 20_900.6))
    assert zoomed["layout"]["xaxis"]["range"] == [20_000.4, 20_900.6]  # drawn over the zoom asked for
    assert "range" not in liveness_figure(by_step)["layout"]["xaxis"]
    narrow = zoomed["data"][0]
    x, y = decode_typed_array(narrow["x"]), decode_typed_array(narrow["y"])
    assert x.tolist() == list(range(20_000, 20_902))  # every step from just left to just right of the zoom
    assert (y == total[x]).all()
    assert narrow["mode"] == "lines"  # 902 points: no markers (those are for under 400)
    wide = liveness_figure(by_step, x_range=(10_000, 30_000))["data"][0]
    x = decode_typed_array(wide["x"])
    kept = 9_999 + envelope(total[9_999:30_002])  # the envelope of the zoom alone, not of the whole
    assert x.tolist() == kept.tolist() and x.size <= 2 * 1500 + 2
    # the peak marker stays the whole line's, wherever the zoom is
    assert liveness_figure(by_step, x_range=(0, 10))["data"][-1]["x"] == [peak_step(by_step)]


def test_a_zoom_of_the_per_ipu_lines_draws_each_lines_steps() -> None:
    by_step = _long_by_step(20_000)
    fig = liveness_figure(by_step, per_ipu=True, x_range=(5_000, 5_100))
    for i, trace in enumerate(fig["data"][:4]):
        x, y = decode_typed_array(trace["x"]), decode_typed_array(trace["y"])
        assert x.tolist() == list(range(4_999, 5_102))  # the 101 steps shown and one beyond each edge
        assert (y == by_step[f"ipu{i}"].to_numpy()[x]).all()
