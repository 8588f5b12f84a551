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
