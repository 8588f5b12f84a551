"""Compare mode in real headless Chromium: `tilescope serve mlp --compare mlp_batch64` (the demo's
pair: the same MLP at batch 32 and 64). Every page with a comparison opens on its own view and
shows the comparison in its "Compare with mlp_batch64" tab (and no console error, no request
leaving the app), with the numbers the comparison views compute; a liveness step is selected by
click and by typing; the
operations deltas grid sorts and filters on the server; the trace follows the run selector; the
banner turns compare off and the navbar picker turns it back on."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect

from app import state
from app.comparison.comparison import Comparison
from app.comparison.pages.memory import tile_variable_rows
from app.comparison.pages.summary import HEADLINE
from app.comparison.variables import step_variable_comparison
from app.render.html import _fmt
from app.units import with_minus
from report_format.reader import open_report
from tests.app.browser import served, settle

pytestmark = pytest.mark.browser
SECTIONS = {
    "/": "#compare-summary",
    "/memory": "#compare-memory",
    "/liveness": "#compare-liveness",
    "/operations": "#compare-operations",
    "/execution-trace": "#compare-trace",
    "/program-tree": "#compare-program-tree",
    "/insights": "#compare-insights",
}


@pytest.fixture(scope="module")
def comparison(demo_pair):
    active, baseline = demo_pair
    state.configure(active, baseline)  # so this process can ask the compare sections' producers too
    return Comparison(open_report(baseline), open_report(active), layer="poplibs")


@pytest.fixture(scope="module")
def base(demo_pair):
    active, baseline = demo_pair
    with served(active, "--compare", str(baseline)) as url:
        yield url


def open_compare_tab(page, section: str) -> None:
    """Open the page's "Compare with mlp_batch64" tab: the page's own view goes behind it."""
    page.get_by_role("tab", name="Compare with mlp_batch64", exact=True).click()
    settle(page, 600)
    expect(page.locator(section)).to_contain_text("Compare:")
    expect(page.locator(section)).to_be_visible()
    expect(page.locator("[id*='compare-own-view']")).to_be_hidden()


def open_page(page, base, path):
    """Open a page started in compare mode: the banner names both demo_pair, the page opens on its
    own view with the comparison one tab away (not built until that tab opens)."""
    page.goto(base + path)
    settle(page, 600)
    expect(page.locator("#compare-banner")).to_contain_text("Comparing mlp (active) against mlp_batch64")
    expect(page.locator("[id*='compare-own-view']")).to_be_visible()
    expect(page.locator(SECTIONS[path])).to_be_hidden()
    expect(page.locator(SECTIONS[path])).to_have_text("")
    open_compare_tab(page, SECTIONS[path])


def eventually(read, check, timeout: float = 8.0):
    """Re-read the page until ``check(read())`` holds (the grid answers asynchronously); returns the last read."""
    deadline = time.time() + timeout
    while True:
        value = read()
        if check(value) or time.time() > deadline:
            return value
        time.sleep(0.2)


@pytest.fixture(autouse=True)
def clean_console(page):
    """Every test ends with no console error and no request leaving the app."""
    yield
    assert page.watch.errors == []
    assert page.watch.external == []


def test_summary_headline_deltas(page, base, comparison):
    open_page(page, base, "/")
    table = page.locator("#compare-summary-table")
    m = comparison.metrics["execution.total_cycles"]
    row = table.locator("tr", has_text=HEADLINE["execution.total_cycles"])
    cells = row.locator("td").all_inner_texts()
    assert cells[1:4] == [
        _fmt("c", m["baseline"]),
        _fmt("c", m["active"]),
        with_minus(_fmt("c", m["delta"])),  # a negative delta carries its own sign: U+2212, as the grids
    ]
    assert m["delta"] < 0  # batch 32 runs fewer cycles than batch 64
    expect(page.locator("#compare-summary-parity")).to_have_text("Same target and engine options.")
    expect(page.locator("#compare-summary")).to_contain_text(comparison.peak_sentence().capitalize())


def test_memory_source_target_filters_added_and_removed(page, base, comparison):
    open_page(page, base, "/memory")
    section = page.locator("#compare-memory")
    assert section.locator(".js-plotly-plot").count() == 3  # per-tile delta, overlay, categories
    grid = section.locator(".ag-root-wrapper")
    st = comparison.source_target
    # which statuses occur depends on the matmul plans at the two batch sizes (with PopLibs-like plans
    # both split K, so no variable need come or go): the filter is checked on every status present
    # besides "same", which must include at least one (the batch changes every variable's size)
    statuses = [s for s in ("added", "removed", "changed") if (st["status"] == s).any()]
    assert statuses
    for status in statuses:
        grid.locator(".ag-floating-filter[col-id='status'] input").fill(status)
        want = sorted(st.loc[st["status"] == status, "item"])
        # a long list is rendered only as far as the grid's viewport (row virtualisation): then the rows
        # shown must be some of that status's rows and no others
        whole = len(want) <= 10
        names = eventually(
            lambda: sorted(grid.locator(".ag-center-cols-container .ag-row [col-id='name']").all_inner_texts()),
            lambda got, want=want, whole=whole: got == want if whole else bool(got) and set(got) <= set(want),
        )
        assert (names == want) if whole else (bool(names) and set(names) <= set(want)), status
    # select tiles on the page's own view: the table compares only the variables on them
    page.get_by_role("tab", name="This report", exact=True).click()
    page.fill("#memory-tiles-input", "0-3")
    page.press("#memory-tiles-input", "Enter")
    settle(page)
    page.get_by_role("tab", name="Compare with mlp_batch64", exact=True).click()
    expect(section.locator("h6", has_text="selected tiles 0, 1, 2, 3")).to_be_visible()
    want = tile_variable_rows(str(comparison.baseline.path.absolute()), [0, 1, 2, 3])
    first = section.locator(".ag-root-wrapper .ag-row[row-index='0'] [col-id='name']").first
    expect(first).to_have_text(want["name"].iat[0])
    assert page.watch.errors == []


#: [|delta|, x px, y px] of the largest delta point in the liveness comparison's lower panel (the
#: "grew" / "shrank" areas), in page coordinates.
TALLEST_DELTA = """() => {
  const gd = document.querySelector('#compare-liveness-graph .js-plotly-plot');
  const fl = gd._fullLayout, box = gd.getBoundingClientRect();
  let best = null;
  for (const t of gd._fullData) {
    if (t.name !== 'grew' && t.name !== 'shrank') continue;
    const xa = fl[t.xaxis.replace('x', 'xaxis')], ya = fl[t.yaxis.replace('y', 'yaxis')];
    for (let i = 0; i < t.y.length; i++) {
      if (!best || Math.abs(t.y[i]) > best[0]) {
        best = [Math.abs(t.y[i]), box.left + xa._offset + xa.l2p(t.x[i]), box.top + ya._offset + ya.l2p(t.y[i])];
      }
    }
  }
  return best;
}"""


def test_liveness_select_a_step_by_typing_and_by_click(page, base, comparison):
    open_page(page, base, "/liveness")
    text = page.locator("#compare-liveness-step-text")
    peak = comparison.liveness_peaks["active"]["position"]
    expect(text).to_contain_text(f"Aligned step {peak}")  # a fresh page selects the active peak
    page.fill("#compare-liveness-step-input", "20")
    page.press("#compare-liveness-step-input", "Enter")
    settle(page, 800)
    expect(text).to_contain_text("Aligned step 20")
    row = comparison.liveness.iloc[20]
    want = step_variable_comparison(
        comparison.baseline, comparison.active, int(row["baseline_step"]), int(row["active_step"])
    )
    body = page.locator("#compare-liveness-tab-body")
    expect(body.locator(".ag-row[row-index='0'] [col-id='name']").first).to_have_text(want["name"].iat[0])
    names = body.locator(".ag-center-cols-container .ag-row [col-id='name']").all_inner_texts()
    assert names and set(names) <= set(want["name"])
    # click the tallest delta (the top of its filled step area): the selection moves to that aligned step
    _, px, py = page.evaluate(TALLEST_DELTA)
    page.mouse.click(px, py)
    settle(page, 800)
    m = re.match(r"Aligned step (\d+)", text.inner_text())
    assert m and int(m.group(1)) != 20
    assert comparison.liveness["delta_bytes"].iat[int(m.group(1))] != 0
    page.locator("#compare-liveness-tabs").get_by_role("tab", name="Always Live Variables", exact=True).click()
    settle(page)
    row = comparison.liveness.iloc[int(m.group(1))]
    always = step_variable_comparison(
        comparison.baseline, comparison.active, int(row["baseline_step"]), int(row["active_step"]), True
    )
    expect(body.locator(".ag-row[row-index='0'] [col-id='name']").first).to_have_text(always["name"].iat[0])
    assert page.watch.errors == []


def test_operations_deltas_sort_and_filter(page, base, comparison):
    open_page(page, base, "/operations")
    # the page opens on the model's layer and the run that computes; this test reads PopLibs' operations
    # over all runs, as the comparison fixture computes them
    page.select_option("#operations-layer", "poplibs")
    page.select_option("#operations-run", "-1")
    settle(page, 900)
    grid = page.locator("#compare-operations .ag-root-wrapper")
    ops = comparison.operations
    by_size = ops.loc[ops["delta_cycles"].abs().sort_values(ascending=False, kind="stable").index]
    expect(grid.locator(".ag-row[row-index='0'] [col-id='name']")).to_have_text(by_size["name"].iat[0])
    grid.locator(".ag-header-cell[col-id='delta_cycles'] .ag-header-cell-label").click()  # ascending
    settle(page, 900)
    expect(grid.locator(".ag-row[row-index='0'] [col-id='delta_cycles']")).to_have_text(
        f"{int(ops['delta_cycles'].min()):,}".replace("-", "−")
    )
    grid.locator(".ag-floating-filter[col-id='op_type'] input").fill("MatMul")
    types = eventually(
        lambda: set(grid.locator(".ag-center-cols-container .ag-row [col-id='op_type']").all_inner_texts()),
        lambda got: got == {"MatMul"},
    )
    assert types == {"MatMul"}
    assert page.locator("#compare-operations .js-plotly-plot").count() == 2  # top cycle and memory changes
    grid.locator(".ag-center-cols-container .ag-row[row-index='0'] [col-id='name']").click()
    first = grid.locator(".ag-row[row-index='0'] [col-id='name']").first.inner_text()
    expect(page.locator("#compare-operations-card")).to_contain_text(first)
    page.select_option("#operations-run", "1")  # the page's "Cycles of" selector drives the comparison too
    settle(page)
    expect(page.locator("#compare-operations h5")).to_contain_text("cycles of run 1")
    assert page.watch.errors == []


def test_execution_trace_follows_the_run(page, base, comparison):
    open_page(page, base, "/execution-trace")
    text = page.locator("#compare-trace-text")
    opened = int(page.locator("#trace-run").input_value())  # the page opens on the longest run
    expect(text).to_contain_text(f"Run {opened}:")
    page.select_option("#trace-run", "0")  # run 0: the init program
    settle(page, 800)
    expect(text).to_contain_text("Run 0:")
    page.select_option("#trace-run", "1")  # run 1: the training step, where the batch size shows
    settle(page, 800)
    ex = comparison.executed_steps(1)
    steps = comparison.run_tables[1].set_index("run").at[1, "steps"]  # the active report's executed steps
    expect(text).to_contain_text(f"Run 1: {steps:,} executed steps in active")
    # aligned positions cover both reports' executed steps (the baseline may have extra ones, depending
    # on the matmul plans at the two batch sizes)
    base_steps = comparison.run_tables[0].set_index("run").at[1, "steps"]
    assert len(ex) >= max(steps, base_steps)
    top = ex.loc[ex["delta_cycles"].abs().sort_values(ascending=False, kind="stable").index[0]]
    first = page.locator("#compare-trace-steps .ag-row[row-index='0'] [col-id='delta_cycles']")
    expect(first).to_have_text(f"{int(top['delta_cycles']):,}".replace("-", "−"))
    runs = page.locator("#compare-trace-runs .ag-center-cols-container .ag-row")
    assert runs.count() == len(comparison.runs)
    assert page.watch.errors == []


def test_turn_compare_off_and_pick_a_baseline_again(page, base, demo_pair):
    open_page(page, base, "/memory")
    page.click("#compare-off")
    settle(page)
    expect(page.locator("#compare-banner")).to_be_hidden()
    expect(page.get_by_role("tab", name="This report")).to_be_hidden()  # no tabs while compare is off
    expect(page.locator("#memory-graph")).to_be_visible()
    expect(page.locator("#compare-memory")).to_have_text("")
    assert page.locator("#compare-picker").input_value() == "off"
    expect(page.locator("#compare-picker option:checked")).to_have_text("compare: off")  # not blank
    page.select_option("#compare-picker", str(demo_pair[1].absolute()))
    settle(page)
    expect(page.locator("#compare-banner")).to_be_visible()
    expect(page.locator("#memory-graph")).to_be_visible()  # a new baseline: the page's own view in front
    open_compare_tab(page, "#compare-memory")
    # the choice holds across pages (client-side navigation keeps the shell's store)
    page.locator(".navbar .nav-link", has_text="Liveness").click()
    settle(page)
    expect(page.locator("#liveness-graph")).to_be_visible()
    open_compare_tab(page, "#compare-liveness")
    assert page.watch.errors == []


def test_program_tree_and_insights_compare_tabs(page, base, comparison):
    open_page(page, base, "/program-tree")
    counts = comparison.step_counts()
    expect(page.locator("#compare-program-tree-counts")).to_contain_text(
        f"{counts['same']:,} program steps in both, {counts['added']:,} only in active, "
        f"{counts['removed']:,} only in baseline"
    )
    rows = page.locator("#compare-program-tree .ag-center-cols-container .ag-row")
    assert eventually(rows.count, lambda n: n > 0) > 0
    open_page(page, base, "/insights")
    hints = page.locator("#compare-insights-hints")
    expect(hints).to_contain_text("Baseline")
    expect(hints).to_contain_text("Active")
    assert page.watch.errors == []
