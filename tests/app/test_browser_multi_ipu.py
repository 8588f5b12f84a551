"""A pipelined 4-IPU transformer in real headless Chromium: the Execution Trace shows its stages
computing at the same time on different IPUs; Memory selects one IPU's tiles; Summary shows the
pipeline and per-IPU figures."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from playwright.sync_api import expect

from profiler import ipu_model
from profiler.frontends.onnx import Session, examples, import_model, random_inputs
from tests.app.browser import PageWatch, served, settle

pytestmark = pytest.mark.browser

MICRO_BATCHES = 4
#: Screenshots of the pages these tests change, for a look (tmp, not the docs'; docs/make_screenshots.py makes those).
SHOTS = Path(tempfile.gettempdir()) / "tilescope_multi_ipu_shots"
SHOTS.mkdir(exist_ok=True)
#: Compute spans of the timeline per IPU row: [[start, end], ...] from the drawn Plotly bars.
COMPUTE_SEGMENTS = """() => {
  const gd = document.querySelector('#trace-timeline .js-plotly-plot');
  const rows = {};
  for (const t of gd._fullData) {
    if (t.type !== 'bar' || t.name !== 'compute') continue;
    for (let i = 0; i < t.base.length; i++) {
      (rows[t.y[i]] = rows[t.y[i]] || []).push([t.base[i], t.base[i] + t.x[i]]);
    }
  }
  return rows;
}"""


@pytest.fixture(scope="module")
def report_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("multi") / "report"
    model = import_model(examples.gpt2_block(seq=8, hidden=32, heads=2, batch=1),
                         ipu_model(tiles_per_ipu=16, bytes_per_tile=1 << 20, num_ipus=4))  # fmt: skip
    options = {"autoReport.all": "true", "autoReport.directory": str(path)}
    with Session(model, options, micro_batches=MICRO_BATCHES) as s:
        s.run(random_inputs(model, rows=MICRO_BATCHES))
    return path


@pytest.fixture(scope="module")
def base(report_path):
    with served(report_path) as url:
        yield url


@pytest.fixture
def page(chromium, base):
    ctx = chromium.new_context(viewport={"width": 1400, "height": 1000})
    pg = ctx.new_page()
    pg.watch = PageWatch(pg, base)
    yield pg
    ctx.close()


def _overlap(a: list[list[float]], b: list[list[float]]) -> bool:
    return any(s1 < e2 and s2 < e1 for s1, e1 in a for s2, e2 in b)


def test_pipelined_stages_overlap_across_ipus_in_the_execution_trace(page, base, tmp_path):
    page.goto(base + "/execution-trace")
    settle(page)
    page.select_option("#trace-run", "1")  # the pipelined inference (run 0 uploads the weights)
    settle(page, 800)
    rows = page.evaluate(COMPUTE_SEGMENTS)
    assert sorted(rows) == ["0", "1", "2", "3"]  # every stage computes
    # while one stage computes a micro-batch, the next computes the micro-batch before it
    assert _overlap(rows["0"], rows["1"]) and _overlap(rows["1"], rows["2"]) and _overlap(rows["2"], rows["3"])
    shot = tmp_path / "execution_trace_pipelined.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    assert not page.watch.errors and not page.watch.external


def test_memory_ipu_selector_shows_one_ipus_tiles(page, base):
    page.goto(base + "/memory")
    settle(page)
    # the per-IPU table draws after the page's callbacks settle on a loaded machine: wait for it
    expect(page.locator("#memory-ipus").get_by_text("fullest tile bytes")).to_have_count(1, timeout=15_000)
    page.select_option("#memory-ipu", "2")
    settle(page, 800)
    expect(page.locator("#memory-selection-text")).to_have_text("IPU 2: tiles 32..47", timeout=15_000)
    ticks = page.evaluate(
        "() => { const fl = document.querySelector('#memory-graph .js-plotly-plot')._fullLayout;"
        " return fl.xaxis.range; }"
    )
    assert ticks[0] >= 31 and ticks[1] <= 48  # IPU 2 holds tiles 32..47 (bars centred on their ids)
    # nothing selected: the tabs show the chosen IPU's tiles
    assert page.inner_text("#memory-selection-text") == "IPU 2: tiles 32..47"
    assert not page.watch.errors


def test_summary_shows_the_pipeline_and_each_ipu(page, base):
    page.goto(base + "/")
    settle(page)
    text = page.inner_text("body")
    assert f"4 stages, {MICRO_BATCHES} micro-batches" in text
    assert "Per IPU" in text and "Pipeline stages" in text
    assert not page.watch.errors


def test_liveness_ipu_selector_shows_one_ipus_liveness(page, base):
    page.goto(base + "/liveness")
    settle(page)
    assert "on IPU" not in page.inner_text("#liveness-headline")
    page.select_option("#liveness-ipu", "2")  # the same control and word as on the Memory page
    settle(page, 800)
    assert "Peak not-always-live memory on IPU 2" in page.inner_text("#liveness-headline")
    title = page.evaluate(
        "() => document.querySelector('#liveness-graph .js-plotly-plot')._fullLayout.yaxis.title.text"
    )
    assert title == "bytes (IPU 2)"
    page.screenshot(path=str(SHOTS / "liveness_ipu.png"), full_page=True)
    assert not page.watch.errors


def test_execution_trace_ipu_selector_shows_one_ipus_execution(page, base):
    page.goto(base + "/execution-trace")
    settle(page)
    page.select_option("#trace-run", "1")
    settle(page, 800)
    assert sorted(page.evaluate(COMPUTE_SEGMENTS)) == ["0", "1", "2", "3"]  # All IPUs
    page.select_option("#trace-ipu", "1")
    settle(page, 800)
    assert sorted(page.evaluate(COMPUTE_SEGMENTS)) == ["1"]  # IPU 1's row only
    assert "Tiles x steps: IPU 1" in page.inner_text("#trace-detail")
    page.screenshot(path=str(SHOTS / "execution_trace_ipu.png"), full_page=True)
    assert not page.watch.errors


@pytest.fixture(scope="module")
def training_report(tmp_path_factory):
    """Pipelined training over 4 IPUs (profiler.workloads.pipelined_mlp): 6 micro-batches."""
    from profiler.workloads import pipelined_mlp

    path = tmp_path_factory.mktemp("training") / "report"
    w = pipelined_mlp.build(4, 6, batch=4, inputs=32, width=32, classes=10, tiles=8)
    w.run(1, {"autoReport.all": "true", "autoReport.directory": str(path)}).close()
    return path / "pipelined_mlp"


def test_pipelined_training_overlaps_forward_and_backward_across_ipus(chromium, training_report):
    with served(training_report) as url:
        ctx = chromium.new_context(viewport={"width": 1400, "height": 1000})
        pg = ctx.new_page()
        pg.watch = PageWatch(pg, url)
        pg.goto(url + "/execution-trace")
        settle(pg)
        pg.select_option("#trace-run", "1")  # the training step (run 0 initialises)
        settle(pg, 800)
        rows = pg.evaluate(COMPUTE_SEGMENTS)
        assert sorted(rows) == ["0", "1", "2", "3"]
        assert all(_overlap(rows[str(i)], rows[str(i + 1)]) for i in range(3))
        pg.screenshot(path=str(SHOTS / "execution_trace_training.png"), full_page=True)
        assert not pg.watch.errors and not pg.watch.external
        ctx.close()
