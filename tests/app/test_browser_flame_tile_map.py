"""The Execution Trace's flame nested by the model's layers, and the Memory tile map's physical
layout, in real headless Chromium on the hand-built ResNet-style report of test_views_flame (four
convolutions s0b0_a, s0b0_b, s1b0_a, s1b0_b; 2 IPUs x 4 tiles)."""

from __future__ import annotations

import pytest

from tests.app.browser import PageWatch, served, settle
from tests.app.test_views_flame import chain_report

pytestmark = pytest.mark.browser

FIGURE = "sel => document.querySelector(sel + ' .js-plotly-plot')"


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    names = ["s0b0_a_conv_1", "s0b0_b_conv_2", "s1b0_a_conv_3", "s1b0_b_conv_4"]
    report = chain_report(tmp_path_factory.mktemp("flame") / "r", names, [100, 200, 300, 400])
    with served(report.path) as url:
        yield url


@pytest.fixture
def page(chromium, base):
    ctx = chromium.new_context(viewport={"width": 1600, "height": 1000})
    pg = ctx.new_page()
    pg.watch = PageWatch(pg, base)
    yield pg
    ctx.close()


def test_flame_shows_layers_operations_and_steps(page, base):
    page.goto(base + "/execution-trace")
    settle(page)
    flat = page.inner_text("#trace-detail")
    assert "exact: 14 executed steps in cycles 0..1,030" in flat  # 7 steps on each of 2 IPUs
    page.check("#trace-view input[value='flame']", force=True)
    settle(page)
    # the flame shows one IPU (the busiest, IPU 0 of equals): its 7 steps, as the flat view of one IPU counts
    assert "exact: 7 executed steps in cycles 0..1,030 (under 18 enclosing spans" in page.inner_text("#trace-detail")
    gd = page.evaluate_handle(FIGURE, "#trace-timeline")
    ticks = page.evaluate("gd => gd._fullLayout.yaxis.ticktext", gd)
    assert ticks == ["0 program", "1 program", "2 layers", "3 layers", "4 layers", "5 operations", "6 operations",
                     "7 steps"]  # fmt: skip
    drawn = page.evaluate("gd => gd._fullLayout.annotations.map(a => a.text)", gd)
    assert {"s0", "s1", "s0b0", "s1b0", "s1b0_b"} <= set(drawn)
    hover = page.evaluate("gd => gd.data.flatMap(t => t.text || [])", gd)
    assert any(t.startswith("s1<br>name scope s1: 710 cycles (0 self)") for t in hover)
    assert page.watch.errors == [] and page.watch.external == []


def test_tile_map_physical_layout(page, base):
    page.goto(base + "/memory")
    settle(page)
    assert not page.is_visible("#memory-tile-map-layout")  # only with the Tile map tab
    page.get_by_role("tab", name="Tile map").click()
    settle(page)
    title = page.evaluate(f"({FIGURE})('#memory-tile-map').layout.title.text")
    assert "software order" in title
    page.check("#memory-tile-map-layout input[value='physical']", force=True)
    settle(page)
    gd = page.evaluate_handle(FIGURE, "#memory-tile-map")
    assert "laid out on the die" in page.evaluate("gd => gd.layout.title.text", gd)
    # IPU 1's panel: its 4 tiles are one island of one column; tile 5 is its tile 1
    cell = page.evaluate(
        "gd => gd.data[1].customdata[1][0]", gd
    )  # tile, bytes, KiB, tile in IPU, column, island, place
    assert cell[0] == 5 and cell[3:] == [1, 0, 0, 1]
    template = page.evaluate("gd => gd.data[1].hovertemplate", gd)
    assert template.startswith("tile %{customdata[0]} (tile %{customdata[3]} of IPU 1)<br>die column %{customdata[4]}")
    assert page.watch.errors == [] and page.watch.external == []
