"""Regenerate docs/screenshots/compare_<page>.png: the viewer in compare mode in headless Debian
Chromium, on the sample MLP (batch 32, active) against the same MLP with batch 64 (baseline), as
`tilescope demo --compare` serves them, at 1600x1000. Each page with a comparison, its "Compare
with mlp_batch64" tab opened (the screenshot runs down to the comparison's end).

    python docs/make_compare_screenshots.py [--active PATH --baseline PATH]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.app.browser import CHROMIUM, CHROMIUM_ARGS, served, settle  # noqa: E402

OUT = ROOT / "docs" / "screenshots"
#: page path -> (screenshot name, id of the comparison in the page's compare tab)
PAGES = {
    "/": ("compare_summary", "compare-summary"),
    "/insights": ("compare_insights", "compare-insights"),
    "/memory": ("compare_memory", "compare-memory"),
    "/liveness": ("compare_liveness", "compare-liveness"),
    "/program-tree": ("compare_program_tree", "compare-program-tree"),
    "/operations": ("compare_operations", "compare-operations"),
    "/execution-trace": ("compare_execution_trace", "compare-trace"),
}


def sample_pair(out: Path) -> tuple[Path, Path]:
    """The demo's MLP pair: (active batch 32, baseline batch 64)."""
    from tilescope.samples import SAMPLES, make_sample

    for sample in SAMPLES:
        if sample.name in ("mlp", "mlp_batch64"):
            make_sample(sample, out)
    return out / "mlp", out / "mlp_batch64"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--active", type=Path, help="active report (default: the sample MLP, batch 32)")
    ap.add_argument("--baseline", type=Path, help="baseline report (default: the sample MLP, batch 64)")
    ap.add_argument("--only", help="only this page path (e.g. /memory)")
    ap.add_argument("--out", type=Path, default=OUT, help="directory of the PNGs (default docs/screenshots)")
    ap.add_argument("--window", action="store_true", help="the 1600x1000 window only, not the whole page")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        active, baseline = (args.active, args.baseline) if args.active else sample_pair(Path(tmp))
        args.out.mkdir(parents=True, exist_ok=True)
        with served(active, "--compare", str(baseline)) as base, sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            for path, (name, section) in PAGES.items():
                if args.only and path != args.only:
                    continue
                page.goto(base + path)
                settle(page, 1500)
                if path == "/execution-trace" and page.locator("#trace-run option[value='1']").count():
                    page.select_option("#trace-run", "1")  # the training run (run 0 initialises)
                    settle(page, 1000)
                page.get_by_role("tab", name=f"Compare with {baseline.name}", exact=True).click()
                settle(page, 1200)
                if path == "/operations":  # an operation selected: its baseline / active card
                    page.locator("#compare-operations .ag-center-cols-container .ag-row[row-index='1']").first.click()
                    settle(page, 800)
                # the whole page at the 1000-pixel-high window: a taller window would stretch the
                # window-filling grids instead
                page.wait_for_function(
                    f"() => (document.getElementById('{section}') || {{}}).innerText?.includes('Compare:')",
                    timeout=180000,  # a POD16 pair's comparison takes a while on a busy machine
                )
                page.mouse.move(2, 2)
                settle(page, 800)
                page.screenshot(path=str(args.out / f"{name}.png"), full_page=not args.window)
                print(f"wrote {args.out / name}.png")
            browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
