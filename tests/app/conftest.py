"""Fixtures: the hand-made small report (with and without an execution profile), the demo's sample
reports (real simulator runs, made once per session) and a headless Chromium."""

from __future__ import annotations

import pytest

from report_format.reader import Report, open_report
from tests.app.small_report import write_small_report


@pytest.fixture(scope="session")
def small_report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    return open_report(write_small_report(tmp_path_factory.mktemp("small") / "report"))


@pytest.fixture(scope="session")
def compile_only_report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    return open_report(write_small_report(tmp_path_factory.mktemp("compile") / "report", execution=False))


@pytest.fixture(scope="session")
def demo_reports(tmp_path_factory: pytest.TempPathFactory):
    """``make(*names)``: the directory holding those demo samples (each made once per session)."""
    from tilescope.samples import SAMPLES, make_sample

    out = tmp_path_factory.mktemp("demo")

    def make(*names: str):
        for sample in SAMPLES:
            if sample.name in names and not (out / sample.name / "manifest.json").exists():
                make_sample(sample, out)
        return out

    return make


@pytest.fixture(scope="session")
def demo_pair(demo_reports):
    """The demo's compare pair: (active: the MLP at batch 32, baseline: the same MLP at batch 64)."""
    out = demo_reports("mlp", "mlp_batch64")
    return out / "mlp", out / "mlp_batch64"


@pytest.fixture(scope="session")
def chromium():
    """A headless Debian Chromium driven by Playwright (skipped where Chromium is not installed)."""
    from pathlib import Path

    from tests.app.browser import CHROMIUM, CHROMIUM_ARGS

    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} not installed")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(chromium, base):
    """A fresh browser page watched for console errors and external requests (``base``: the module's server)."""
    from tests.app.browser import PageWatch

    ctx = chromium.new_context(viewport={"width": 1400, "height": 1000})
    pg = ctx.new_page()
    pg.watch = PageWatch(pg, base)
    yield pg
    ctx.close()
