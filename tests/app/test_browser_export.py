"""`tilescope export REPORT --html FILE` and `tilescope diff A B --html FILE` in real headless
Chromium: each page opens from disk with the network cut off, draws every figure with no console
error, and shows the figures the viewer shows (same values, same formatting)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.units import format_bytes, format_percent
from app.views.summary import summary
from report_format.reader import open_report
from tests.app.small_report import write_small_report
from tilescope.cli import main

pytestmark = pytest.mark.browser


def open_offline(chromium, html: Path):
    """``html`` opened from disk with the network cut off: (page, console errors, requests that
    left the file, context to close)."""
    ctx = chromium.new_context(viewport={"width": 1400, "height": 1000}, offline=True)
    page = ctx.new_page()
    errors: list[str] = []
    outside: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: None if r.url.startswith(("file:", "data:", "blob:")) else outside.append(r.url))
    page.goto(html.as_uri())
    page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot .main-svg').length > 0")
    page.wait_for_timeout(500)
    return page, errors, outside, ctx


@pytest.mark.parametrize("execution", [True, False], ids=["executed", "compile-only"])
def test_report_html_opens_offline(chromium, tmp_path: Path, capsys, execution: bool) -> None:
    report = write_small_report(tmp_path / "report", execution=execution)
    out = tmp_path / "report.html"
    assert main(["export", str(report), "--html", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    page, errors, outside, ctx = open_offline(chromium, out)
    plots = page.locator(".js-plotly-plot").count()
    assert plots == (4 if execution else 2)  # memory, liveness (+ trace timeline, cycle proportions)
    body = page.locator("body").inner_text()
    for section in ("Summary", "Memory", "Liveness", "Operations", "Execution Trace"):
        assert section in body
    doc = summary(open_report(report))
    assert format_bytes(doc["memory"]["total_bytes_including_gaps"]) in body
    if execution:
        assert f"Tile balance\t{format_percent(doc['execution']['tile_balance'])} (all runs)" in body
    assert errors == [] and outside == []
    ctx.close()


def test_demo_report_and_diff_html_open_offline(chromium, demo_pair, tmp_path: Path, capsys) -> None:
    """The demo MLP's page and its comparison with batch 64: every figure drawn offline, the
    headline figures as `tilescope summary` / `tilescope diff --json` give them."""
    active, baseline = demo_pair
    report_html, diff_html = tmp_path / "mlp.html", tmp_path / "diff.html"
    assert main(["export", str(active), "--html", str(report_html)]) == 0
    assert main(["diff", str(baseline), str(active), "--html", str(diff_html)]) == 0
    capsys.readouterr()
    doc = summary(open_report(active))
    page, errors, outside, ctx = open_offline(chromium, report_html)
    assert page.locator(".js-plotly-plot").count() == 4
    body = page.locator("body").inner_text()
    assert format_bytes(doc["memory"]["total_bytes_including_gaps"]) in body
    assert f"Tile balance\t{format_percent(doc['execution']['tile_balance'])} (all runs)" in body
    assert errors == [] and outside == []
    ctx.close()
    page, errors, outside, ctx = open_offline(chromium, diff_html)
    assert page.locator(".js-plotly-plot").count() >= 5
    body = page.locator("body").inner_text()
    assert "Same target and engine options" in body and "execution.total_cycles" in body
    assert errors == [] and outside == []
    ctx.close()
