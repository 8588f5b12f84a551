"""Liveness zoom in headless Chromium: a line of many more steps than pixel columns is drawn as an
envelope; a zoom into a narrow range asks the server for that range again, and what is drawn there
is every step's own value; a double-click returns to the whole line's envelope."""

from __future__ import annotations

import numpy as np
import pytest
from playwright.sync_api import expect

from app.figures.decimate import SCREEN_COLUMNS
from app.views import liveness as lv
from report_format.reader import open_report
from report_format.synthetic import synthetic_report
from tests.app.browser import served, settle

pytestmark = pytest.mark.browser

#: The drawn liveness line (the first trace) as plotly holds it: its x, y and the x range shown.
DRAWN = """() => {
  const gd = document.querySelector('#liveness-graph .js-plotly-plot');
  const t = gd._fullData[0];
  return {x: Array.from(t.x), y: Array.from(t.y), range: gd._fullLayout.xaxis.range.slice()};
}"""


@pytest.fixture(scope="module")
def report_path(tmp_path_factory):
    # 6,000 program steps: four per pixel column of the 1,500 the envelope keeps
    return synthetic_report(
        tmp_path_factory.mktemp("liveness") / "report", program_steps=6000, executed_steps=6000, runs=1, seed=5
    )


@pytest.fixture(scope="module")
def base(report_path):
    with served(report_path) as url:
        yield url


def drag_zoom(page, left: float, right: float) -> None:
    """A horizontal drag over the plot from ``left`` to ``right`` (fractions of its width): plotly's
    x zoom, as a user makes it."""
    box = page.locator("#liveness-graph .nsewdrag").first.bounding_box()
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * left, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * right, y, steps=5)
    page.mouse.up()
    settle(page, 600)


def test_a_narrow_zoom_draws_each_steps_own_value(page, base, report_path):
    by_step = lv.liveness_by_step(open_report(report_path))
    total = by_step["not_always_live"].to_numpy()
    steps = by_step.index.to_numpy()
    assert len(steps) > 3 * SCREEN_COLUMNS
    page.goto(base + "/liveness")
    settle(page)
    # plotly.js evaluates in 1-1.6 s after the page's first answer; on a loaded machine that can end
    # after settle's quiet pause (the graph's div not yet there): wait for the drawn line itself
    page.wait_for_function(
        "() => document.querySelector('#liveness-graph .js-plotly-plot')?._fullData?.length > 0", timeout=30_000
    )
    whole = page.evaluate(DRAWN)
    assert len(whole["x"]) <= 2 * SCREEN_COLUMNS + 2 < len(steps)  # the envelope
    drag_zoom(page, 0.40, 0.43)  # ~3 % of the plot: ~180 steps, far fewer than the columns
    drawn = page.evaluate(DRAWN)
    x0, x1 = drawn["range"]
    assert 0 < x1 - x0 < 0.1 * len(steps)
    inside = steps[(steps >= x0) & (steps <= x1)]
    x, y = np.asarray(drawn["x"], dtype=np.int64), np.asarray(drawn["y"], dtype=np.int64)
    # every step in the window is drawn, with the report's own bytes: exact, not the envelope
    shown = x[(x >= x0) & (x <= x1)]
    assert shown.tolist() == inside.tolist()
    assert (y == total[np.searchsorted(steps, x)]).all()
    # the whole line's envelope skipped steps there (or the test shows nothing)
    coarse = np.asarray(whole["x"])
    assert coarse[(coarse >= x0) & (coarse <= x1)].size < inside.size
    # the peak marker is still the whole line's
    peak = page.evaluate("() => document.querySelector('#liveness-graph .js-plotly-plot')._fullData.at(-1).x[0]")
    assert peak == lv.peak_step(by_step)
    # a double-click returns to the whole line, drawn as its envelope again
    box = page.locator("#liveness-graph .nsewdrag").first.bounding_box()
    page.mouse.dblclick(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    settle(page, 600)
    again = page.evaluate(DRAWN)
    assert again["x"] == whole["x"] and again["y"] == whole["y"]
    expect(page.locator("#liveness-headline")).to_contain_text("Peak not-always-live memory")
    assert page.watch.errors == []
