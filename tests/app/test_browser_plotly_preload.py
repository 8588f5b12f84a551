"""plotly.js is loaded while the user reads, never while they act, in real headless Chromium: on a
page with no graph of its own (Operations: a grid) the browser evaluates plotly.js (1-1.6 s of main
thread) only once the page has been quiet (app/assets/plotly_preload.js), so a click soon after a
page loads is not held up by it, and a first graph later finds it loaded."""

from __future__ import annotations

import pytest

from report_format.fabricate import write_report
from tests.app.browser import served, settle
from tests.app.small_report import small_spec

pytestmark = pytest.mark.browser

LOADED = "() => typeof window.Plotly !== 'undefined'"


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    path = write_report(tmp_path_factory.mktemp("preload") / "r", small_spec())
    with served(path) as url:
        yield url


def test_plotly_waits_while_the_user_acts_then_loads_when_quiet(page, base):
    page.goto(base + "/operations")
    settle(page, 0)
    assert page.locator(".ag-root").count() > 0, "the Operations grid should be drawn"
    # The pointer moving every 300 ms for 3 s: past the quiet window (1.5 s) twice over, no preload.
    for i in range(10):
        page.mouse.move(100 + 10 * (i % 2), 300)
        page.wait_for_timeout(300)
        assert not page.evaluate(LOADED), f"plotly.js loaded while the pointer moved ({i * 300} ms in)"
    # Then still: it loads (quiet 1.5 s, then the bundle's fetch and evaluation).
    page.wait_for_function(LOADED, timeout=15_000, polling=100)
    assert page.locator("#plotly-preload .js-plotly-plot").count() == 1, "the hidden slot holds the graph"
    assert page.watch.errors == []
