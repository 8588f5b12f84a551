"""Layout in real headless Chromium at 1600×1000 on the demo reports. Served in Compare mode
(`tilescope serve mlp --compare mlp_batch64`), every page shows its own view above the fold (the
comparison is one tab away, and fills the same place when that tab opens). On every page of the
MLP (its own view with a trace step clicked, and its comparison tab) and of the other demo
reports (transformer, out-of-memory MLP, CNN, ResNet-style), no table cell or header cuts its
text (measured as ``scrollWidth > clientWidth`` on AG Grid cells, headers and plain table cells,
and on the navbar's texts), every grid's columns fit in the grid (none cut at its right edge) and
nothing overflows the window sideways."""

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
#: What is cut: text elements (cells, headers, the navbar's texts) not showing their whole text,
#: and grids whose columns are wider than the grid (a column cut at its right edge until one
#: scrolls sideways) or that run past the window.
CUT = """() => {
  const shown = e => e.offsetParent !== null;
  const where = e => (e.closest('[id]') || {}).id;
  const sel = '.ag-cell, .ag-header-cell-text, td, th, .navbar-text, .navbar-text *, .navbar .nav-link';
  const cut = [...document.querySelectorAll(sel)]
    .filter(e => shown(e) && e.scrollWidth > e.clientWidth + 1)
    .map(e => where(e) + ': ' + e.textContent.trim().slice(0, 60));
  for (const g of [...document.querySelectorAll('.ag-root-wrapper')].filter(shown)) {
    const view = g.querySelector('.ag-center-cols-viewport');
    const cols = [...g.querySelectorAll('.ag-header-row-column .ag-header-cell')]
      .reduce((sum, c) => sum + c.getBoundingClientRect().width, 0);
    if (view && cols > view.clientWidth + 1) cut.push(where(g) + `: columns ${cols} px in a ${view.clientWidth} px grid`);
    if (g.getBoundingClientRect().right > document.documentElement.clientWidth + 1) cut.push(where(g) + ': past the window');
  }
  return cut;
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


@pytest.fixture(scope="module")
def real_size(tmp_path_factory):
    """The --real-size ResNet-50 (batch 32) and BERT-base reports (12-24 s of host time each): long
    codelet, exchange and operation names, ~230 and ~700 operations."""
    from tilescope.samples import REAL_SIZE_SAMPLES, make_sample

    out = tmp_path_factory.mktemp("real")
    for sample in REAL_SIZE_SAMPLES:
        if sample.name in ("resnet50_b32", "bert_base_b1"):  # not the packed batch-40 BERT (~9 GB of host memory)
            make_sample(sample, out)
    return out / "resnet50_b32", out / "bert_base_b1"


@pytest.mark.slow
def test_real_size_reports_cut_nothing(chromium, real_size):
    """ResNet-50 compared with BERT-base: every grid of every page and compare tab fits, nothing cut
    (Insights' codelet and exchange tables and the compare tables were cut on the right)."""
    resnet, bert = real_size
    ctx = chromium.new_context(viewport={"width": WIDTH, "height": HEIGHT})
    page = ctx.new_page()
    with served(resnet, "--compare", str(bert)) as url:
        for path in PAGES:
            page.goto(url + path)
            settle(page, 800)
            assert page.evaluate(CUT) == [], path
            tab = page.get_by_role("tab", name="Compare with bert_base_b1", exact=True)
            if tab.count():
                tab.click()
                settle(page, 1000)
                assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH, f"{path} compare overflows"
                assert page.evaluate(CUT) == [], f"{path} compare"
    ctx.close()
