"""Regenerate docs/screenshots/whatif_resnet50.png: the Insights page of a ResNet-50 b32 report
(C600, float16, half partials) after its "re-simulate" button ran what-if 1 (a lower
availableMemoryProportion): the proposal, then predicted against re-simulated. docs/whatif.md says
how the report is made.

    python docs/make_whatif_screenshot.py REPORT [--proposal N]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.app.browser import CHROMIUM, CHROMIUM_ARGS, served, settle  # noqa: E402

OUT = ROOT / "docs" / "screenshots" / "whatif_resnet50.png"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("report", type=Path)
    ap.add_argument("--proposal", type=int, default=1)
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    with served(args.report, "--allow-resimulate") as url, sync_playwright() as pw:

        def open_insights():  # a fresh browser: it is closed while the what-if runs
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
            page.goto(url + "/insights")
            settle(page, 800)
            return browser, page

        browser, page = open_insights()
        page.get_by_role("button", name="re-simulate").nth(args.proposal - 1).click()
        page.wait_for_selector("text=re-simulating what-if", timeout=60_000)
        # a real-size what-if holds GBs of host memory: Chromium is closed meanwhile (on a busy
        # machine the kernel's OOM killer picks its renderer first); the page shows the result on return
        browser.close()
        deadline = time.monotonic() + 900
        while True:
            time.sleep(15)
            browser, page = open_insights()
            if page.locator("#whatif-result").count() or time.monotonic() > deadline:
                break
            browser.close()
        page.wait_for_selector("#whatif-result", timeout=1000)
        page.screenshot(path=str(OUT), clip={"x": 0, "y": 0, "width": 1400, "height": 760})
        print(f"wrote {OUT.relative_to(ROOT)}")
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
