"""The Insights page's what-if in headless Chromium: a proposal shows its change; with
``serve --allow-resimulate`` its "re-simulate" button runs the what-if and the page shows predicted
against re-simulated; without the flag there is no button."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.app.browser import served, settle
from tests.whatif.test_whatif_cli import save_mlp, tilescope

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("browser_whatif")
    model = save_mlp(out / "mlp.onnx")
    r = tilescope("run", str(model), "--target", "IPUModel", "--batch", "4", "--report-dir", str(out / "report"))
    assert r.returncode == 0, r.stderr
    return out / "report"


@pytest.fixture
def page(chromium):
    ctx = chromium.new_context(viewport={"width": 1400, "height": 1000})
    yield ctx.new_page()
    ctx.close()


def test_the_button_re_simulates_and_shows_predicted_against_measured(page, report: Path) -> None:
    with served(report, "--allow-resimulate") as url:
        page.goto(url + "/insights")
        settle(page)
        proposal = page.locator(".whatif-proposal").first
        assert "What if 1: --batch 8" in proposal.inner_text()
        page.get_by_role("button", name="re-simulate").click()
        page.wait_for_selector("#whatif-result", timeout=120_000)
        table = page.locator("#whatif-result table")
        rows = [[c.inner_text() for c in r.locator("td").all()] for r in table.locator("tbody tr").all()]
        assert [r[0] for r in rows] == ["memory peak (fullest tile)", "total memory (all tiles)", "cycles per run",
                                        "samples/s"]  # fmt: skip
        # the re-simulated cycles are the new report's, as `tilescope whatif --json` reads them
        doc = json.loads(tilescope("whatif", str(report), "--json").stdout)
        assert doc["proposals"][0]["change"] == {"batch": 8}
        from app.views.whatif import figures, format_figure
        from report_format.reader import open_report

        after = figures(open_report(Path(f"{report}.whatif-1")))
        assert rows[2][3] == format_figure("cycles", after["cycles"])
        # a reload shows the result again (the page asks the server, never a cached answer), and a
        # second click runs again: the new report is rewritten
        stamp = (Path(f"{report}.whatif-1") / "manifest.json").stat().st_mtime_ns
        page.reload()
        page.wait_for_selector("#whatif-result", timeout=30_000)
        page.get_by_role("button", name="re-simulate").click()
        page.wait_for_selector("text=re-simulating what-if 1", timeout=30_000)
        page.wait_for_selector("#whatif-result", timeout=120_000)
        assert (Path(f"{report}.whatif-1") / "manifest.json").stat().st_mtime_ns > stamp


def test_without_the_flag_there_is_no_button(page, report: Path) -> None:
    with served(report) as url:
        page.goto(url + "/insights")
        settle(page)
        assert "What if 1: --batch 8" in page.locator(".whatif-proposal").first.inner_text()
        assert page.get_by_role("button", name="re-simulate").count() == 0
        assert "--allow-resimulate" in page.locator(".whatif-proposal").first.inner_text()
