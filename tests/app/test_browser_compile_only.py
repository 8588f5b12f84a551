"""A report without an execution profile: every page still loads; the trace says why it is empty."""

from __future__ import annotations

import pytest

from tests.app.browser import PAGES, PageWatch, served, settle
from tests.app.small_report import write_small_report

pytestmark = pytest.mark.browser


def test_compile_only_report_pages(chromium, tmp_path):
    path = write_small_report(tmp_path / "report", execution=False)
    with served(path) as base:
        ctx = chromium.new_context(viewport={"width": 1400, "height": 1000})
        page = ctx.new_page()
        watch = PageWatch(page, base)
        for p in PAGES:
            page.goto(base + p)
            settle(page)
            assert watch.errors == [], (p, watch.errors)
        body = page.locator("body").inner_text()
        assert "needs an execution profile" in body and "compile only" in body
        page.goto(base + "/")
        settle(page)
        assert "not captured" in page.locator("body").inner_text()
        ctx.close()


def test_estimated_report_pages_show_the_trace_labelled(chromium, tmp_path):
    """A compile-only profile with an estimated trace: every page loads without errors; the trace is
    drawn (no "needs an execution profile") and says it is estimated and which step follows data."""
    path = write_small_report(tmp_path / "report", estimated=True)
    with served(path) as base:
        ctx = chromium.new_context(viewport={"width": 1400, "height": 1000})
        page = ctx.new_page()
        watch = PageWatch(page, base)
        for p in PAGES:
            page.goto(base + p)
            settle(page)
            assert watch.errors == [], (p, watch.errors)
            assert "needs an execution profile" not in page.locator("body").inner_text(), p
        page.goto(base + "/execution-trace")
        settle(page)
        body = page.locator("body").inner_text()
        assert "Execution Trace (estimated)" in body and "Estimated trace: a compile-only profile" in body
        assert "depend on data" in body and page.locator("#_pages_content .js-plotly-plot").count() > 0
        ctx.close()
