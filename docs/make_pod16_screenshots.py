"""Screenshots of every page on a POD16-size report (16 IPUs x 1,472 tiles), for
docs/screenshots/pod16/: headless Debian Chromium at 1600x1000, each page as it opens plus the
states a POD16 needs (one IPU's tile map, liveness per IPU, the flame of one IPU).

    python docs/make_pod16_screenshots.py REPORT [--out DIR]

REPORT is a compile-only profile of the Llama-2-7B-shaped decoder (docs/viewer.md, "A POD16
report"). Each shot is the 1600x1000 window, not the whole scrolled page, to keep the PNGs small.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.app.browser import CHROMIUM, CHROMIUM_ARGS, served, settle  # noqa: E402


def shoot(page, out: Path, name: str) -> None:
    settle(page, 1200)
    # a cold page's layout can take seconds on a POD16 report: wait for the page's own content
    page.wait_for_function(
        "() => { const c = document.getElementById('_pages_content'); return c && c.innerText.trim().length > 0; }",
        timeout=120000,
    )
    settle(page, 600)
    page.mouse.move(2, 2)  # no hover label over the figures
    page.wait_for_timeout(300)
    path = out / f"{name}.png"
    page.screenshot(path=str(path), full_page=False)
    print(f"wrote {path} ({path.stat().st_size / 1024:.0f} KiB)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("report", type=Path)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots" / "pod16")
    ap.add_argument("--only", nargs="*", default=None, help="page paths to shoot (default: all)")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    want = lambda p: args.only is None or p in args.only  # noqa: E731
    with served(args.report) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.set_default_timeout(60000)
        if want("summary"):
            page.goto(base + "/")
            shoot(page, args.out, "summary")
        if want("insights"):
            page.goto(base + "/insights")
            shoot(page, args.out, "insights")
        if want("memory"):
            page.goto(base + "/memory")
            shoot(page, args.out, "memory")
            page.get_by_role("tab", name="Tile map").click()
            settle(page)
            page.select_option("#memory-ipu", "15")  # the last IPU: the LM head's
            shoot(page, args.out, "memory_tile_map_ipu15")
            page.check("#memory-tile-map-layout input[value='physical']", force=True)  # the die's columns
            shoot(page, args.out, "memory_tile_map_physical_ipu15")
        if want("liveness"):
            page.goto(base + "/liveness")
            settle(page)
            page.check("#liveness-per-ipu input", force=True)
            shoot(page, args.out, "liveness_per_ipu")
        if want("program-tree"):
            page.goto(base + "/program-tree")
            shoot(page, args.out, "program_tree")
        if want("operations"):
            page.goto(base + "/operations")
            shoot(page, args.out, "operations")
        if want("operations-graph"):
            page.goto(base + "/operations-graph")
            shoot(page, args.out, "operations_graph")
        if want("execution-trace"):
            page.goto(base + "/execution-trace")
            shoot(page, args.out, "execution_trace")
            if page.locator("#trace-view").count():  # an out-of-memory report has no trace
                page.check("#trace-view input[value='flame']", force=True)
                shoot(page, args.out, "execution_trace_flame")
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
