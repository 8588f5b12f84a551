"""One figure, one value, as a user reads it: in real headless Chromium on the demo's MLP pair
(`tilescope serve mlp --compare mlp_batch64`), each figure shown on several pages (tile balance of
all runs and of one run, executed steps, the operation count, total memory) reads the same on
every page and compare tab that shows it, and the same as `tilescope summary` and `tilescope diff`
print. tests/app/test_same_figure.py checks the same figures through the page functions."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from app.units import format_bytes, format_percent
from app.views.operations import OUTSIDE_ID, operations
from app.views.runs import run_figures
from app.views.summary import summary
from report_format.reader import open_report
from tests.app.browser import served, settle
from tilescope.cli import main

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def base(demo_pair):
    active, baseline = demo_pair
    with served(active, "--compare", str(baseline)) as url:
        yield url


@pytest.fixture(scope="module")
def figures(demo_pair):
    """The figures as the views define them (app/views), formatted as every page formats them."""
    active, baseline = demo_pair
    a, b = open_report(active), open_report(baseline)
    doc = summary(a)
    run = doc["execution"]["opening_run"]
    ops = operations(a, "poplibs", None)
    return {
        "run": run,
        "balance": format_percent(doc["execution"]["tile_balance"]),
        "run_balance": format_percent(run_figures(a, run)["tile_balance"]),
        "steps": run_figures(a, run)["steps"],
        "base_steps": run_figures(b, run)["steps"],
        "operations": int((ops["op_id"] != OUTSIDE_ID).sum()),
        "memory": format_bytes(doc["memory"]["total_bytes_including_gaps"]),
        "base_memory": format_bytes(summary(b)["memory"]["total_bytes_including_gaps"]),
    }


def cli(capsys, *argv: str) -> str:
    capsys.readouterr()
    main(list(argv))
    return capsys.readouterr().out


def compare_tab(page) -> None:
    page.get_by_role("tab", name="Compare with mlp_batch64", exact=True).click()
    settle(page, 600)


def grid_cell(page, grid: str, row: int, col: str):
    return page.locator(f"#{grid} .ag-center-cols-container .ag-row[row-index='{row}'] [col-id='{col}']")


def test_every_page_shows_the_same_figures(page, base, figures, demo_pair, capsys):
    f, run = figures, figures["run"]
    active, baseline = demo_pair
    # Summary: the cards (the opening run, as the Execution Trace opens on it), the runs table (one
    # run); its compare tab's headline table (the run that computes, as the cards)
    page.goto(base + "/")
    settle(page, 600)
    expect(page.locator("#summary-body")).to_contain_text(f"Tile balance{f['run_balance']}run {run}")
    expect(page.locator("#summary-body")).to_contain_text(f"{f['memory']}")
    expect(grid_cell(page, "summary-runs", run, "tile_balance")).to_have_text(f["run_balance"])
    expect(grid_cell(page, "summary-runs", run, "executed steps")).to_have_text(f"{f['steps']:,}")
    compare_tab(page)
    row = page.locator("#compare-summary-table tr", has_text="Execution tile balance (run that computes)").locator("td")
    expect(row.nth(2)).to_have_text(f["run_balance"])
    # Execution Trace (opens on the longest run): its cards and detail line; its compare tab's runs
    page.goto(base + "/execution-trace")
    settle(page, 800)
    assert page.locator("#trace-run").input_value() == str(run)
    expect(page.locator("#trace-summary")).to_contain_text(f"Tile balance{f['run_balance']}")
    expect(page.locator("#trace-summary")).to_contain_text(f"Executed steps{f['steps']:,}")
    expect(page.locator("#trace-detail")).to_contain_text(f"Run {run}: {f['steps']:,} executed steps.")
    compare_tab(page)
    expect(page.locator("#compare-trace-text")).to_contain_text(
        f"Run {run}: {f['steps']:,} executed steps in active, {f['base_steps']:,} in baseline"
    )
    expect(grid_cell(page, "compare-trace-runs", run, "active_tile_balance")).to_have_text(f["run_balance"])
    # Operations: the page's sentence and its compare tab's count
    page.goto(base + "/operations")
    settle(page, 600)
    counted = f"{f['operations']:,} operations, plus one row for work outside any of them"
    expect(page.locator("#operations-source")).to_contain_text(counted)
    compare_tab(page)
    expect(page.locator("#compare-operations-counts")).to_contain_text(f"Active: {counted}")
    # Memory: the compare tab's totals include gaps, as the Summary card does
    page.goto(base + "/memory")
    settle(page, 600)
    compare_tab(page)
    total = page.locator("#compare-memory tr", has_text="total including gaps").locator("td")
    expect(total.nth(1)).to_have_text(f["base_memory"])
    expect(total.nth(2)).to_have_text(f["memory"])
    # the command line prints the same
    text = cli(capsys, "summary", str(active))
    assert f"tile balance {f['balance']}" in text and f"{f['steps']:,} executed steps" in text
    assert re.search(
        rf"execution\.headline\.tile_balance\s+\S+\s+{re.escape(f['run_balance'])}",
        cli(capsys, "diff", str(baseline), str(active)),
    )  # the diff leads with the run that computes, as the compare table does
    assert page.watch.errors == []
