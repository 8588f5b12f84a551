"""The Program Tree in real headless Chromium on the FashionMNIST demo (a real simulator run that
uploads its weights before training): the weight upload is one folded line that opens on a click,
the search box shows matching nodes under their ancestors, and the estimated-cycles column, equal to
executed cycles / executions on every step of this report, is left out with a note saying why."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.app.browser import served, settle

pytestmark = pytest.mark.browser
ROWS = "#program-tree-grid .ag-center-cols-container .ag-row"


def tree_texts(page) -> list[str]:
    cells = page.locator(f"{ROWS} [col-id='tree']")
    return [t.strip() for t in cells.all_inner_texts()]


def test_upload_folded_search_and_columns(chromium, demo_reports):
    ctx = chromium.new_context(viewport={"width": 1600, "height": 1000})
    page = ctx.new_page()
    with served(demo_reports("fashion_mnist") / "fashion_mnist") as base:
        page.goto(base + "/program-tree")
        settle(page)
        first = tree_texts(page)[0]
        assert first.startswith("▸ WeightsFromHost") and "stream-copy steps)" in first, first
        expect(page.locator("#program-tree-grid [col-id='estimated_cycles']")).to_have_count(0)
        expect(page.locator("body")).to_contain_text("Estimated cycles are not shown")
        page.locator(f"{ROWS} [col-id='tree']", has_text="WeightsFromHost").first.click()  # open the upload
        settle(page)
        texts = tree_texts(page)
        assert texts[0].startswith("▾ WeightsFromHost") and "stream-copy" not in texts[0]
        # search: the matches under their ancestors, and a count
        page.fill("#program-tree-search", "StreamCopyMid")
        page.press("#program-tree-search", "Enter")
        settle(page)
        note = page.locator("#program-tree-search-note").inner_text()
        assert note.split(" of ")[0].isdigit() and int(note.split(" ")[0]) > 0, note
        rows = page.locator(f"{ROWS} [col-id='type']").all_inner_texts()
        assert rows and set(rows) <= {"Program", "Sequence", "Repeat", "Call", "StreamCopyMid"}, set(rows)
        assert "StreamCopyMid" in rows
        page.fill("#program-tree-search", "")
        page.press("#program-tree-search", "Enter")
        settle(page)
        assert tree_texts(page)[0].startswith("▾ WeightsFromHost")  # the tree as it was left
        assert page.locator("#program-tree-search-note").inner_text() == ""
    ctx.close()
