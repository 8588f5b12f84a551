"""Browser time of the Operations Graph in headless Debian Chromium (Playwright), 1600x1000.

    python bench/operations_graph_browser.py REPORT [REPORT ...] [--repeat 5]

For each report it serves the viewer (``tilescope serve``), then measures, ``--repeat`` times:

* **load**: a full navigation to /operations-graph until idle: from the navigation's start
  (``performance.now()`` counts from it) until no Dash callback is in flight, the graph holds its
  nodes and two animation frames have passed (Cytoscape has drawn them);
* **open**: from the click (its event's time stamp) on the heaviest group in the list beside the
  graph until idle again (the graph
  holds the group's box, no callback in flight, two frames);
* **visit**: from the Summary page, a click on the navbar's Operations Graph link until idle (the
  app is loaded: Dash renders the page and runs its callbacks).

The first load of each report fills the server's caches and is reported apart ("cold"). Medians
of the rest are printed, in milliseconds. Not a test: timing depends on the machine's load.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.app.browser import CHROMIUM, CHROMIUM_ARGS, served  # noqa: E402

#: True once Dash is idle and Cytoscape shows ``n`` or more nodes (n: the page's argument).
IDLE = """(n) => {
  if (document.querySelector('[data-dash-is-loading="true"]')) return false;
  const host = document.getElementById('operations-graph');
  if (!host) return false;
  const box = [host, ...host.querySelectorAll('div')].find(e => e._cyreg && e._cyreg.cy);
  return !!box && box._cyreg.cy.nodes().length >= n && !!document.querySelector('#operations-graph-heaviest .list-group-item');
}"""
FRAMES = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(performance.now()))))"
#: Note when the page receives the next click (the user's moment, not Playwright's before it).
CLICK_TIME = """() => document.addEventListener('click', e => { window.__clickAt = e.timeStamp; },
  {capture: true, once: true})"""
NODES = """() => {
  const host = document.getElementById('operations-graph');
  const box = [host, ...host.querySelectorAll('div')].find(e => e._cyreg && e._cyreg.cy);
  return box._cyreg.cy.nodes().length;
}"""


def measure(report: Path, repeat: int) -> dict[str, list[float]]:
    from playwright.sync_api import sync_playwright

    out: dict[str, list[float]] = {"cold": [], "load": [], "open": [], "visit": []}
    with served(report) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        for i in range(repeat + 1):
            page.goto(base + "/operations-graph", wait_until="commit")
            page.wait_for_function(IDLE, arg=1, timeout=60_000, polling=10)
            (out["cold"] if i == 0 else out["load"]).append(page.evaluate(FRAMES))
            before = page.evaluate(NODES)
            page.evaluate(CLICK_TIME)
            page.locator("#operations-graph-heaviest .list-group-item").first.click()
            page.wait_for_function(IDLE, arg=before + 1, timeout=60_000, polling=10)
            out["open"].append(page.evaluate(FRAMES) - page.evaluate("() => window.__clickAt"))
        for _ in range(repeat):
            page.goto(base + "/")
            page.wait_for_load_state("networkidle")
            page.wait_for_function("() => !document.querySelector('[data-dash-is-loading=\"true\"]')")
            page.evaluate(CLICK_TIME)
            page.locator(".navbar .nav-link", has_text="Operations Graph").click()
            page.wait_for_function(IDLE, arg=1, timeout=60_000, polling=10)
            out["visit"].append(page.evaluate(FRAMES) - page.evaluate("() => window.__clickAt"))
        browser.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("reports", nargs="+", type=Path)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    print(f"{'report':16s} {'cold load':>10s} {'load':>8s} {'open':>8s} {'visit':>8s}   (ms, median of {args.repeat})")
    for report in args.reports:
        t = time.time()
        m = measure(report, args.repeat)
        med = {k: statistics.median(v) for k, v in m.items() if v}
        print(
            f"{report.name:16s} {med['cold']:10.0f} {med['load']:8.0f} {med['open']:8.0f} {med['visit']:8.0f}"
            f"   ({time.time() - t:.0f} s)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
