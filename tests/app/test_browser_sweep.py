"""The Sweep page (tests/sweep has the rest of the sweep's tests) in headless Chromium: the table and the plot, a click on a point opens its report on
the Summary, two ticked rows open compare mode."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

from report_format.sweep import open_sweep
from tests.app.browser import click_centre, served, settle

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def small_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.sweep.builders import small_sweep as make

    return make(tmp_path_factory.mktemp("small_sweep"))


@pytest.fixture(scope="module")
def base(small_sweep: Path):  # type: ignore[no-untyped-def]
    with served(small_sweep) as url:
        yield url


def test_the_sweep_page_shows_every_point_and_opens_one(page, base, small_sweep: Path) -> None:  # type: ignore[no-untyped-def]
    df = open_sweep(small_sweep).sweep()
    page.goto(base + "/sweep")
    settle(page)
    assert page.locator("h3").first.inner_text() == "Sweep"
    expect(page.locator("#sweep-grid .ag-center-cols-container .ag-row")).to_have_count(3)
    expect(page.locator("#sweep-graph .scatterlayer .point")).to_have_count(3)
    assert page.watch.errors == [] and page.watch.external == []
    # the click lands on batch 1's marker: the server opens its report and the Summary shows it
    name = df[df["batch"] == 1]["name"].iloc[0]
    click_centre(page, page.locator("#sweep-graph .scatterlayer .trace").first.locator(".point").first)
    page.wait_for_url(base + "/")
    settle(page)
    expect(page.locator("#shell-report-title")).to_contain_text(name)
    # tick two rows: compare the first ticked (active) with the second (baseline)
    page.goto(base + "/sweep")
    settle(page)
    for row in (1, 2):
        page.locator(f"#sweep-grid .ag-row[row-index='{row}'] .ag-selection-checkbox input").first.check()
    settle(page)
    button = page.locator("#sweep-actions a", has_text="Compare")
    expect(button).to_contain_text(f"Compare {df['name'][1]} (active) with {df['name'][2]} (baseline)")
    button.click()
    page.wait_for_url("**/?compare=*")
    settle(page)
    expect(page.locator("#shell-report-title")).to_contain_text(df["name"][1])
    expect(page.locator("#compare-banner-text")).to_contain_text(df["name"][2])
    assert page.watch.errors == []
