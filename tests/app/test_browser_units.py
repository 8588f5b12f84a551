"""Units on every figure, in real headless Chromium on the fabricated small report compared with a
copy holding half its memory: every axis of bytes (and the tile map's colour bar) is labelled in
binary units (KiB, MiB), as every total on the pages is, never with plotly's decimal SI ticks
("500k", "1.5M"), on every page, its memory interactions and every compare tab."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from report_format.fabricate import write_report
from tests.app.browser import PAGES, served, settle
from tests.app.small_report import small_spec

pytestmark = pytest.mark.browser

#: What the browser drew: per visible figure, each axis (or colour bar) titled in bytes with the
#: tick labels plotly rendered for it.
BYTE_AXES = r"""() => {
  const out = [];
  for (const gd of document.querySelectorAll('.js-plotly-plot')) {
    if (gd.offsetParent === null || !gd._fullLayout) continue;
    const owner = (gd.closest('[id]') || {}).id;
    const fl = gd._fullLayout;
    for (const key of Object.keys(fl).filter(k => /^[xy]axis\d*$/.test(k))) {
      const ax = fl[key];
      const title = (ax.title && ax.title.text) || '';
      if (!ax.visible || !/bytes|address/i.test(title)) continue;
      out.push({owner, axis: key, title, ticks: (ax._vals || []).map(v => v.text)});
    }
    for (const tr of gd._fullData || []) {
      const cb = tr.colorbar;
      if (!tr.showscale || !cb) continue;
      const title = (cb.title && cb.title.text) || '';
      if (/bytes/i.test(title)) out.push({owner, axis: 'colorbar', title, ticks: cb.ticktext || []});
    }
  }
  return out;
}"""
#: A binary tick label: '0', '512 B', '1.5 KiB', '-2 MiB' (the tile map's colour bar may name the
#: capacity, say '≥ ... (to ...)' at its top, or name percentiles when it colours by rank).
BINARY = re.compile(
    r"^(?:capacity |≥ |(?:min|p\d+|median|max) )?(0|[−-]?[\d,]+(\.\d+)? (B|KiB|MiB|GiB|TiB))( \(to .*\))?$"
)


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    out = tmp_path_factory.mktemp("units")
    spec = small_spec()
    # the baseline holds half the memory, so every compare figure has deltas to draw
    half = replace(
        spec,
        memory=replace(spec.memory, bytes=[b // 2 for b in spec.memory.bytes]),
        variables=replace(
            spec.variables,
            placements=replace(spec.variables.placements, bytes=[b // 2 for b in spec.variables.placements.bytes]),
        ),
    )
    return write_report(out / "active", spec), write_report(out / "baseline", half)


@pytest.fixture(scope="module")
def base(reports):
    active, baseline = reports
    with served(active, "--compare", str(baseline)) as url:
        yield url


def decimal_axes(page, seen: list[dict]) -> list[dict]:
    axes = page.evaluate(BYTE_AXES)
    seen.extend(axes)
    return [a for a in axes if not a["ticks"] or not all(BINARY.match(t) for t in a["ticks"])]


def test_every_byte_axis_is_binary(page, base):
    seen: list[dict] = []
    for path in PAGES:
        page.goto(base + path)
        settle(page, 500)
        assert decimal_axes(page, seen) == [], path
        if path == "/memory":  # one tile: its address map; a picked variable: the variables graph; the tile map
            page.fill("#memory-tiles-input", "1")
            page.press("#memory-tiles-input", "Enter")
            settle(page, 500)
            assert decimal_axes(page, seen) == [], "memory, one tile"
            page.get_by_role("tab", name="Variables").click()
            settle(page, 500)
            page.locator("#memory-tab-body .ag-center-cols-container .ag-row [col-id='name']").first.click()
            settle(page, 500)
            assert decimal_axes(page, seen) == [], "memory, a variable"
            page.get_by_role("tab", name="Tile map").click()
            settle(page, 500)
            assert decimal_axes(page, seen) == [], "memory, tile map"
        if path == "/liveness":
            page.get_by_text("Per IPU").click()
            settle(page, 500)
            assert decimal_axes(page, seen) == [], "liveness per IPU"
        tab = page.get_by_role("tab", name="Compare with baseline", exact=True)
        if tab.count():
            tab.click()
            settle(page, 800)
            assert decimal_axes(page, seen) == [], f"{path} compare"
    # the test saw the byte axes it is about: the memory and liveness figures and their comparisons
    owners = {a["owner"] for a in seen}
    assert {"memory-graph", "memory-tile-address-map", "memory-variables-graph", "liveness-graph"} <= owners, owners
    assert sum(a["title"] in ("delta bytes", "active - baseline bytes") for a in seen) >= 2, seen
    assert any(a["axis"] == "colorbar" for a in seen), seen
