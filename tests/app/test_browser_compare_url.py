"""Compare state in the URL, in real headless Chromium on the fabricated small report and a copy
beside it: the chosen baseline (or "off") is in the address (``?compare=NAME``), survives links
between pages and a reload, and a link with it opens with that baseline; a name the viewer did not
list changes nothing."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.app.browser import served, settle
from tests.app.small_report import write_small_report

pytestmark = pytest.mark.browser


@pytest.fixture
def page(chromium):
    """A browser page collecting console errors (its server is started by each test)."""
    ctx = chromium.new_context(viewport={"width": 1400, "height": 1000})
    pg = ctx.new_page()
    pg.errors = []
    pg.on("console", lambda m: pg.errors.append(m.text) if m.type == "error" else None)
    pg.on("pageerror", lambda e: pg.errors.append(str(e)))
    yield pg
    ctx.close()


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    out = tmp_path_factory.mktemp("url")
    return write_small_report(out / "active"), write_small_report(out / "baseline")


def test_a_picked_baseline_survives_links_and_reload(page, pair):
    active, baseline = pair
    with served(active) as base:  # started without --compare: the baseline is found beside it
        page.goto(base + "/memory")
        settle(page)
        assert page.locator("#compare-picker").input_value() == "off"
        assert "compare=" not in page.url
        page.select_option("#compare-picker", str(baseline.absolute()))
        settle(page)
        assert page.url.endswith("/memory?compare=baseline")
        page.locator(".navbar .nav-link", has_text="Liveness").click()  # a link between pages drops the query...
        settle(page)
        assert page.url.endswith("/liveness?compare=baseline")  # ...and the URL gets it back
        page.reload()
        settle(page)
        expect(page.locator("#compare-banner")).to_be_visible()
        assert page.locator("#compare-picker").input_value() == str(baseline.absolute())
        page.get_by_role("tab", name="Compare with baseline", exact=True).click()
        settle(page)
        expect(page.locator("#compare-liveness-graph")).to_be_visible()
        # a shared link opens with its baseline; a name not listed is ignored
        page.goto(base + "/memory?compare=baseline")
        settle(page)
        expect(page.locator("#compare-banner")).to_be_visible()
        page.goto(base + "/memory?compare=..%2Fetc")
        settle(page)
        assert page.locator("#compare-picker").input_value() == "off"
        expect(page.locator("#compare-banner")).to_be_hidden()
        assert page.errors == []


def test_off_survives_reload_when_started_with_compare(page, pair):
    active, baseline = pair
    with served(active, "--compare", str(baseline)) as base:
        page.goto(base + "/")
        settle(page)
        assert page.url.endswith("/?compare=baseline")
        page.click("#compare-off")
        settle(page)
        assert page.url.endswith("/?compare=off")
        page.reload()
        settle(page)
        assert page.locator("#compare-picker").input_value() == "off"
        expect(page.locator("#compare-banner")).to_be_hidden()
        assert page.errors == []
