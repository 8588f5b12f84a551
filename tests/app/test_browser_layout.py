"""Layout in real headless Chromium at 1600×1000 on the demo reports. Served in Compare mode
(`tilescope serve mlp --compare mlp_batch64`), every page shows its own view above the fold (the
comparison is one tab away, and fills the same place when that tab opens). On every page of the
MLP (its own view with a trace step clicked, and its comparison tab) and of the other demo
reports (transformer, out-of-memory MLP, CNN, ResNet-style), no table cell or header cuts its
text (measured as ``scrollWidth > clientWidth`` on AG Grid cells, headers and plain table cells)
and nothing overflows the window sideways."""

from __future__ import annotations

import pytest

from tests.app.browser import PAGES, served, settle

pytestmark = pytest.mark.browser
WIDTH, HEIGHT = 1600, 1000
#: The element that is each page's own view.
OWN_VIEW = {
    "/": "#summary-body",
    "/insights": "#insights-body",
    "/memory": "#memory-graph",
    "/liveness": "#liveness-graph",
    "/program-tree": "#program-tree-grid",
    "/operations": "#operations-table .ag-root-wrapper",
    "/operations-graph": "#operations-graph",
    "/execution-trace": "#trace-timeline",
}
#: Text elements that must show their whole text.
CUT = """() => {
  const sel = '.ag-cell, .ag-header-cell-text, td, th';
  return [...document.querySelectorAll(sel)]
    .filter(e => e.offsetParent !== null && e.scrollWidth > e.clientWidth + 1)
    .map(e => (e.closest('[id]') || {}).id + ': ' + e.textContent.trim().slice(0, 60));
}"""


@pytest.fixture(scope="module")
def demo(demo_reports):
    return demo_reports("mlp", "mlp_batch64", "transformer", "mlp_oom", "cnn", "resnet")


@pytest.fixture(scope="module")
def base(demo):
    with served(demo / "mlp", "--compare", str(demo / "mlp_batch64")) as url:
        yield url


@pytest.fixture
def wide(chromium, base):
    ctx = chromium.new_context(viewport={"width": WIDTH, "height": HEIGHT})
    pg = ctx.new_page()
    yield pg
    ctx.close()


@pytest.mark.parametrize("path", PAGES)
def test_own_view_above_the_fold_and_nothing_cut(wide, base, path):
    wide.goto(base + path)
    settle(wide, 800)
    assert wide.locator("#compare-banner").is_visible()  # compare mode is on
    box = wide.locator(OWN_VIEW[path]).first.bounding_box()
    assert box is not None and box["y"] < HEIGHT - 250, f"{path}: its own view starts at {box}"
    assert wide.evaluate("document.documentElement.scrollWidth") <= WIDTH, "the page overflows sideways"
    if path == "/execution-trace":  # a clicked step adds its table and per-tile split
        lane = wide.locator("#trace-timeline .nsewdrag").first.bounding_box()
        wide.mouse.click(lane["x"] + lane["width"] * 0.5, lane["y"] + lane["height"] / 2)
        settle(wide, 600)
        assert wide.locator("#trace-step-grid").is_visible()
    assert wide.evaluate(CUT) == []
    tab = wide.get_by_role("tab", name="Compare with mlp_batch64", exact=True)
    if path == "/operations-graph":  # its comparison is a colouring of the same graph (Δ cycles)
        assert tab.count() == 0
        return
    tab.click()  # the comparison in its tab: in place of the page's own view, nothing cut either
    settle(wide, 800)
    assert not wide.locator(OWN_VIEW[path]).first.is_visible()
    pane = wide.locator("[id*='compare-pane']").first.bounding_box()
    assert pane is not None and pane["y"] < HEIGHT - 250, f"{path}: the comparison starts at {pane}"
    assert wide.evaluate("document.documentElement.scrollWidth") <= WIDTH, "the comparison overflows sideways"
    assert wide.evaluate(CUT) == []


@pytest.mark.parametrize("name", ["transformer", "mlp_oom", "cnn", "resnet"])
def test_other_demo_reports_cut_nothing(chromium, demo, name):
    ctx = chromium.new_context(viewport={"width": WIDTH, "height": HEIGHT})
    page = ctx.new_page()
    with served(demo / name) as url:
        for path in PAGES:
            page.goto(url + path)
            settle(page, 600)
            assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH, f"{name}{path} overflows"
            assert page.evaluate(CUT) == [], f"{name}{path}"
        page.goto(url + "/")
        settle(page, 400)
        if name == "mlp_oom":  # the out-of-memory message once, not once per note
            assert page.locator("#summary-notes .alert").count() == 1
    ctx.close()
