"""Execution trace in real headless Chromium on a synthetic report long enough to be binned:
switch run -> the summary changes; zoom (drag) -> the server re-queries and detail gets finer,
down to exact steps."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from app.views import execution_trace as et
from app.views.runs import opening_run
from report_format.reader import open_report
from report_format.synthetic import synthetic_report
from tests.app.browser import PageWatch, served, settle

pytestmark = pytest.mark.browser

#: Page coordinates of the middle of each timeline bar (a span) drawn at least 4 px wide well inside the
#: view, with its (middle cycle, row, step): [[x, y, cycle, row, step], ...], in drawing order.
BAR_TARGETS = """() => {
  const gd = document.querySelector('#trace-timeline .js-plotly-plot');
  const fl = gd._fullLayout, box = gd.getBoundingClientRect(), [x0, x1] = fl.xaxis.range;
  const out = [];
  for (const t of gd._fullData) {
    if (t.type !== 'bar') continue;
    for (let i = 0; i < t.base.length; i++) {
      const a = t.base[i], b = t.base[i] + t.x[i], mid = (a + b) / 2;
      if (fl.xaxis.l2p(b) - fl.xaxis.l2p(a) < 4 || mid < x0 + 0.05 * (x1 - x0) || mid > x1 - 0.05 * (x1 - x0)) continue;
      out.push([box.left + fl._size.l + fl.xaxis.l2p(mid), box.top + fl._size.t + fl.yaxis.l2p(t.y[i]),
                mid, t.y[i], t.customdata[i][1]]);
    }
  }
  return out.sort((p, q) => p[3] - q[3] || p[2] - q[2]);
}"""


@pytest.fixture(scope="module")
def report_path(tmp_path_factory):
    return synthetic_report(
        tmp_path_factory.mktemp("trace") / "report", num_ipus=2, tiles_per_ipu=16, executed_steps=4000, runs=2, seed=3
    )


@pytest.fixture(scope="module")
def base(report_path):
    with served(report_path) as url:
        yield url


@pytest.fixture
def page(chromium, base):
    ctx = chromium.new_context(viewport={"width": 1400, "height": 1000})
    pg = ctx.new_page()
    pg.watch = PageWatch(pg, base)
    pg.goto(base + "/execution-trace")
    settle(pg)
    yield pg
    ctx.close()


def test_switch_run_updates_summary(page, report_path):
    runs = open_report(report_path).runs().set_index("run")
    first = opening_run(open_report(report_path))  # the run the page opens on
    other = 1 - first
    summary = page.locator("#trace-summary")
    expect(summary).to_contain_text(f"{runs.at[first, 'cycles']:,}")
    page.select_option("#trace-run", str(other))
    settle(page)
    expect(summary).to_contain_text(f"{runs.at[other, 'cycles']:,}")
    assert runs.at[first, "cycles"] != runs.at[other, "cycles"]
    assert page.watch.errors == []


def test_zoom_gives_finer_detail(page, report_path):
    detail = page.locator("#trace-detail")
    expect(detail).to_contain_text("binned")
    before = int(re.search(r"binned: ([\d,]+) executed steps", detail.inner_text()).group(1).replace(",", ""))
    box = page.locator("#trace-timeline .nsewdrag").first.bounding_box()
    y = box["y"] + box["height"] / 2
    for _ in range(3):  # drag-zoom three times into the left part of the plot
        page.mouse.move(box["x"] + 5, y)
        page.mouse.down()
        page.mouse.move(box["x"] + box["width"] * 0.08, y, steps=5)
        page.mouse.up()
        settle(page, 600)
        if "exact" in detail.inner_text():
            break
    text = detail.inner_text()
    assert "executed steps. exact:" in text, text
    m = re.search(r"exact: ([\d,]+) executed steps? in cycles ([\d,]+)\.\.([\d,]+)", text)
    spans, x0, x1 = (int(g.replace(",", "")) for g in m.groups())
    assert spans < before
    # the server's answer matches the view for that range
    report = open_report(report_path)
    longest = int(report.runs().set_index("run")["cycles"].idxmax())
    lod = et.level_of_detail(et.flat_spans(report, longest), x0, x1)
    assert lod.exact and lod.visible_steps == spans
    # click exact spans, neighbours of each other -> each names the step under the pointer (the report's
    # own step at that cycle on that IPU), with its details on every IPU
    targets = page.evaluate(BAR_TARGETS)
    assert len(targets) >= 6
    details = page.locator("#trace-step-details")
    for px, py, cycle, ipu, step in targets[:3] + targets[-3:]:
        page.mouse.click(px, py)
        settle(page)
        assert step == et.step_at(report, longest, int(ipu), cycle)  # the bar drawn there is that step
        row = et.step_details(report, longest, step).set_index("ipu").loc[int(ipu)]
        assert row["cycles_from"] <= cycle < row["cycles_to"]
        expect(details).to_contain_text(f"Executed step {step:,}: {row['name']}")
        expect(details).to_contain_text(f"Step {step:,} on IPU {int(ipu)}, per tile")
        expect(details).to_contain_text(f"{row['cycles_to']:,}")
    # ...and on the clicked IPU, each tile's busy and waiting cycles (they add up to the step)
    split = page.locator("#trace-step-tiles .js-plotly-plot")
    expect(split).to_be_visible()
    bars = page.evaluate(
        "() => document.querySelector('#trace-step-tiles .js-plotly-plot')._fullData.map(t => t.y.length)"
    )
    assert bars == [16, 16]  # 16 tiles per IPU: busy and waiting
    ipu_rows = page.locator("#trace-ipu-table .ag-center-cols-container .ag-row")
    expect(ipu_rows).to_have_count(2)
    assert page.watch.errors == []
    page.click("#trace-reset")
    settle(page)
    expect(detail).to_contain_text("binned")


def test_tiles_x_steps_draws_when_opened(page):
    """The tiles x steps heatmap is not drawn with the page; one click on its panel draws it."""
    assert page.locator("#trace-tiles").count() == 0
    page.get_by_role("button", name=re.compile("Tiles x steps")).click()
    settle(page)
    shape = page.evaluate(
        "() => { const z = document.querySelector('#trace-tiles .js-plotly-plot')._fullData[0].z; return [z.length, z[0].length]; }"
    )
    assert shape[0] == 16 and shape[1] > 1  # 16 tiles of the busiest IPU, by the steps shown
    assert page.watch.errors == []
