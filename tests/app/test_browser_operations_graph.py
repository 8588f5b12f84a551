"""The Operations Graph in real headless Chromium at 1600x1000 on the demo's ResNet-style report:
Cytoscape draws the closed groups of the model (its two bottleneck blocks), a click on a group in
the graph opens it (its operations drawn inside a box), a click on the box closes it, and the
list beside the graph opens a group too, "Close all groups" closes them; no console errors."""

from __future__ import annotations

import pytest

from app.figures.operations_graph import FONT_PX
from app.views import operations_graph as og
from report_format.reader import open_report
from tests.app.browser import served, settle

pytestmark = pytest.mark.browser

#: The Cytoscape instance of the graph (kept by Cytoscape on its container).
CY = """[document.getElementById('operations-graph'), ...document.querySelectorAll('#operations-graph div')]
  .find(e => e._cyreg && e._cyreg.cy)._cyreg.cy"""


@pytest.fixture(scope="module")
def resnet(demo_reports):
    return demo_reports("resnet") / "resnet"


@pytest.fixture
def wide(chromium):
    ctx = chromium.new_context(viewport={"width": 1600, "height": 1000})
    page = ctx.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.errors = errors
    yield page
    ctx.close()


def shown(page) -> dict[str, str]:
    """Node id -> kind ('group', 'open', 'op') of what the graph draws."""
    return page.evaluate(f"() => Object.fromEntries({CY}.nodes().map(n => [n.id(), n.data('kind')]))")


def click_node(page, node: str) -> None:
    """A real mouse click where Cytoscape draws ``node`` (an open group: on its label, above its box), after
    moving there as a hand does (Cytoscape finds what is under the pointer as it moves)."""
    pos = page.evaluate(
        f"""() => {{ const n = {CY}.getElementById({node!r}); const b = n.renderedBoundingBox({{includeLabels: false}});
        return n.isParent() ? {{x: (b.x1 + b.x2) / 2, y: b.y1 - 6}} : n.renderedPosition(); }}"""
    )
    box = page.locator("#operations-graph").bounding_box()
    page.mouse.move(box["x"] + pos["x"], box["y"] + pos["y"], steps=4)
    page.mouse.click(box["x"] + pos["x"], box["y"] + pos["y"])


def test_groups_open_and_close_on_click(wide, resnet):
    h = og.hierarchy(open_report(resnet), "poplibs")
    blocks = {f"g{g}": label for g, label in zip(h.groups.index, h.groups["label"], strict=True)}
    with served(resnet) as url:
        wide.goto(url + "/operations-graph")
        settle(wide, 600)
        top = shown(wide)
        assert sorted(blocks[n] for n in top) == ["block0", "block1"] and set(top.values()) == {"group"}
        labels = wide.evaluate(f"() => {CY}.nodes().map(n => n.data('label'))")
        assert all(label.startswith("▸ block") and "%" in label for label in labels)  # name, cycles, share
        assert wide.locator("#operations-graph-legend").inner_text().startswith("cycles (log scale")
        # the server's places, fitted to the panel: labels at least 9 px on screen
        assert wide.evaluate(f"() => {CY}.zoom()") * FONT_PX >= 9

        first = next(n for n in top if blocks[n] == "block0")
        click_node(wide, first)
        settle(wide, 600)
        now = shown(wide)
        assert now[first] == "open" and len(now) > len(top)
        inside = wide.evaluate(f"() => {CY}.getElementById({first!r}).children().map(n => n.id())")
        assert inside and all(now[n] in ("group", "op") for n in inside)
        assert "In block0" in wide.locator("#operations-graph-heaviest").inner_text()

        click_node(wide, first)  # its box: closed again
        settle(wide, 600)
        assert shown(wide) == top

        wide.locator("#operations-graph-heaviest .list-group-item").first.click()  # the list opens one too
        settle(wide, 600)
        assert "open" in shown(wide).values()

        for _ in range(2):  # the same click after "Close all" opens it again (not ignored as no change)
            wide.click("#operations-graph-close")
            settle(wide, 600)
            assert shown(wide) == top
            click_node(wide, first)
            settle(wide, 600)
            assert shown(wide)[first] == "open"
    assert wide.errors == []
