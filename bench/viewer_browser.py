"""Browser time of every viewer page on the real-size reports, in headless Debian Chromium
(Playwright), 1600x1000: what a user waits for, server and browser together.

    python bench/viewer_browser.py                       # ResNet-50 b32 and BERT-base (tilescope demo --real-size)
    python bench/viewer_browser.py REPORT [REPORT ...] --repeat 3 --out bench/viewer_browser.json

For each report it serves the viewer (``tilescope serve REPORT --compare OTHER``: the other report is
the compare baseline) and measures, ``--repeat`` times each, the median kept:

* **page loads**: a full navigation to each page until idle (the browser loads the app's scripts);
* **visits**: from the Summary (Summary: from Insights), a click on the page's navbar link until idle (the app is loaded);
* **the first graph of a fresh browser**: the Operations page (no graph of its own) in a new
  browser context, then its compare tab (``--first-graph``: only this), with the click's longest
  long task and whether plotly.js was fetched by the click;
* **interactions**: a click (timed from its event's time stamp) until idle: Memory's breakdown by
  region, the Execution Trace's flame view, and each page's "Compare with ..." tab; the session's
  first compare tab (which computes the comparison) once, apart, before the compare tabs' medians.

"Idle" is when no Dash callback is in flight and nothing has happened for ``QUIET_MS``: no callback
request or answer, no DOM change, no long task (> 50 ms, the browser's own report of a busy main
thread). The time is that of the last such event, counted from the navigation's start
(``performance.now()``) or the click; each figure's ``ended_by`` says what that event was. Work
shorter than 50 ms after the last DOM change is not seen. A DOM change is a node added or removed or
an attribute given a new value: since s23, an attribute written with the value it had, and AG Grid's
flash of its hidden scrollbar (COSMETIC_CLASSES), are not (before, that flash ended the measure of
every grid page ~400-550 ms after the page was drawn). The first load of each page fills the
server's caches and is reported apart ("cold").

Not a test: timing depends on the machine's load (``os.getloadavg()`` is written with the figures).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.app.browser import CHROMIUM, CHROMIUM_ARGS, served  # noqa: E402

DEMO = ROOT / "sample_reports" / "demo"
REPORTS = (DEMO / "resnet50_b32", DEMO / "bert_base_b1")
PAGES = {
    "Summary": "/",
    "Insights": "/insights",
    "Memory": "/memory",
    "Liveness": "/liveness",
    "Program Tree": "/program-tree",
    "Operations": "/operations",
    "Operations Graph": "/operations-graph",
    "Execution Trace": "/execution-trace",
}
#: Nothing for this long (ms) after the last event: the page is idle.
QUIET_MS = 600
TARGET_MS = 1000.0

#: Class changes that are not counted as activity: AG Grid flashes a scrollbar it draws itself over the
#: OS's *invisible* (overlay) scrollbar on each scroll and removes the flash 400 ms after the scroll ends
#: (ScrollbarComp.hideAndShowInvisibleScrollAsNeeded in dash_ag_grid's bundle). Headless Chromium hides
#: every scrollbar (--hide-scrollbars), so the flash fires on a grid's first layout, on a scrollbar that is
#: `ag-invisible` besides; a desktop browser with classic scrollbars never sets it. Counting it added
#: ~400-550 ms to every page with a grid (bench before s23).
COSMETIC_CLASSES = ("ag-scrollbar-scrolling", "ag-scrollbar-active")

#: Installed before any page script: counts Dash requests (layout, callbacks) in flight and notes the time of
#: the last activity (callback sent or answered, DOM change, long task) and what it was. A DOM change is a
#: node added or removed or an attribute given a new value; an attribute written with the value it
#: had, or a class change only of COSMETIC_CLASSES, is not one.
WATCH = """(() => {
  window.__inflight = 0; window.__last = 0; window.__lastWhat = ''; window.__calls = [];
  const note = (what) => { window.__last = performance.now(); window.__lastWhat = what; };
  const orig = window.fetch;
  window.fetch = function (input, init) {
    const url = typeof input === 'string' ? input : (input && input.url) || '';
    if (!url.includes('_dash-')) return orig.apply(this, arguments);
    window.__inflight += 1; note('request ' + url.split('/').pop().split('?')[0]);
    const t0 = performance.now();
    let what = url.split('/').pop();
    try { what = JSON.parse(init.body).output.slice(0, 60); } catch (e) { /* not a callback */ }
    return orig.apply(this, arguments).then(r => {
      r.clone().text().then(b => window.__calls.push([what, Math.round(t0), Math.round(performance.now() - t0), b.length]));
      return r;
    }).finally(() => { window.__inflight -= 1; note('answer ' + what); });
  };
  new PerformanceObserver(list => {
    for (const e of list.getEntries()) {
      if (e.startTime + e.duration > window.__last) {
        window.__last = e.startTime + e.duration; window.__lastWhat = 'long task';
      }
      window.__calls.push(['long task', Math.round(e.startTime), Math.round(e.duration), 0]);
    }
  }).observe({type: 'longtask', buffered: true});
  const seen = (m) => {
    if (m.type !== 'attributes') return true;
    const now = m.target.getAttribute(m.attributeName);
    if (now === m.oldValue) return false;  // written with the value it had: nothing changed
    if (m.attributeName !== 'class') return true;
    const before = new Set((m.oldValue || '').split(/\\s+/)), after = new Set((now || '').split(/\\s+/));
    const changed = [...before].filter(c => !after.has(c)).concat([...after].filter(c => !before.has(c)));
    return !changed.every(c => COSMETIC.includes(c));
  };
  const COSMETIC = __COSMETIC__;
  const start = () => new MutationObserver(list => {
    const m = list.find(seen);
    if (m) note('DOM ' + m.type + ' ' + (m.attributeName || '') + ' on ' + (m.target.id || String(m.target.className || m.target.nodeName)).slice(0, 60));
  }).observe(document, {subtree: true, childList: true, attributes: true, attributeOldValue: true});
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start); else start();
})();""".replace("__COSMETIC__", json.dumps(COSMETIC_CLASSES))
IDLE = """(quiet) => window.__inflight === 0 && window.__last > 0
  && !document.querySelector('[data-dash-is-loading="true"]') && !!document.getElementById('_pages_content')
  && performance.now() - window.__last > quiet"""
CLICK_TIME = """() => document.addEventListener('click', e => { window.__clickAt = e.timeStamp; },
  {capture: true, once: true})"""


def _idle(page: Any) -> None:
    page.wait_for_function(IDLE, arg=QUIET_MS, timeout=120_000, polling=50)


DETAIL = False
#: One measurement: ms, and what its last activity was (the event that ends the measure).
Run = tuple[float, str]


def _ended(page: Any) -> str:
    what = str(page.evaluate("() => window.__lastWhat"))
    if DETAIL:  # each Dash request: what, sent at (ms), took (ms), bytes; and what ended the measure
        for call in page.evaluate("() => window.__calls"):
            print("      ", call)
        print("       ended by:", what)
    return what


def load(page: Any, url: str) -> Run:
    """ms from a full navigation's start to idle."""
    page.goto(url, wait_until="commit")
    _idle(page)
    return float(page.evaluate("() => window.__last")), _ended(page)


def click(page: Any, target: Callable[[], Any]) -> Run:
    """ms from the click on ``target()`` to idle."""
    page.evaluate(CLICK_TIME)
    page.evaluate("() => { window.__calls = []; }")  # this interaction's requests only (--detail)
    target().click()
    _idle(page)
    return float(page.evaluate("() => window.__last - window.__clickAt")), _ended(page)


#: The plotly.js bundle's URL, as dash serves it (``package_data/plotly.min.js``, namespace plotly).
PLOTLY_JS = "plotly.min.js"


#: --first-graph: the pause between the Operations page's load and the click on its compare tab, a user's
#: first look at the page. The viewer loads plotly.js in it (app/assets/plotly_preload.js: once the page has
#: been quiet 1.5 s, then ~0.4-1.6 s to fetch and evaluate); without a pause the click lands before any preload could.
READ_MS = 3000


def first_graph(browser: Any, base: str, compare_tab: str, repeat: int) -> dict[str, list[Any]]:
    """The Operations page (a grid, no graph of its own) in a fresh browser context (an empty cache,
    as a new browser), then, ``READ_MS`` later, its compare tab: the session's first graph. Per run: the load and the
    click (``Run``), the click's longest long task (ms) and whether plotly.js was fetched after the
    page's load, i.e. by the click. One run first, not returned, so the server's caches are warm."""
    out: dict[str, list[Any]] = {"load": [], "click": [], "longest_task_ms": [], "plotly_js_by_click": []}
    for k in range(repeat + 1):
        ctx = browser.new_context(viewport={"width": 1600, "height": 1000})
        page = ctx.new_page()
        page.add_init_script(WATCH)
        fetched: list[str] = []
        page.on("request", lambda r, into=fetched: into.append(r.url))
        loaded = load(page, base + "/operations")
        page.wait_for_timeout(READ_MS)  # the user reads the page before the first click
        seen = len(fetched)
        clicked = click(page, lambda pg=page: pg.get_by_role("tab", name=compare_tab, exact=True))
        tasks = [c[2] for c in page.evaluate("() => window.__calls") if c[0] == "long task"]
        ctx.close()
        if k == 0:
            continue
        out["load"].append(loaded)
        out["click"].append(clicked)
        out["longest_task_ms"].append(max(tasks, default=0))
        out["plotly_js_by_click"].append(any(PLOTLY_JS in u for u in fetched[seen:]))
    return out


def measure(
    report: Path,
    baseline: Path,
    repeat: int,
    loads_only: bool = False,
    visits: bool = False,
    first_graph_only: bool = False,
) -> dict[str, dict[str, Any]]:
    from playwright.sync_api import sync_playwright

    out: dict[str, dict[str, Any]] = {}

    def note(name: str, runs: list[Run]) -> None:
        values = [ms for ms, _ in runs]
        out[name] = {
            "median_ms": round(statistics.median(values)),
            "runs_ms": [round(v) for v in values],
            "ended_by": [what for _, what in runs],  # each run's last activity
        }
        print(f"  {name:42s} {out[name]['median_ms']:7,d} ms  {out[name]['runs_ms']}", flush=True)

    compare_tab = f"Compare with {baseline.name}"
    with served(report, "--compare", str(baseline)) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)

        def first_graph_measure() -> None:
            fresh = first_graph(browser, base, compare_tab, repeat)
            note("Operations: load in a fresh browser", fresh["load"])
            note("Operations: compare tab, the fresh browser's first graph", fresh["click"])
            out["Operations: compare tab, the fresh browser's first graph"].update(
                longest_task_ms=fresh["longest_task_ms"], plotly_js_by_click=fresh["plotly_js_by_click"]
            )
            print(
                f"    longest task {fresh['longest_task_ms']} ms, plotly.js fetched by the click {fresh['plotly_js_by_click']}"
            )

        if first_graph_only:
            first_graph_measure()
            browser.close()
            return out
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.add_init_script(WATCH)
        cold = {name: load(page, base + path) for name, path in PAGES.items()}  # fills the server's caches
        loads: dict[str, list[Run]] = {name: [] for name in PAGES}
        for _ in range(repeat):  # round robin: a page never follows itself (no browser cache of its figures)
            for name, path in PAGES.items():
                loads[name].append(load(page, base + path))
        for name in PAGES:
            note(f"{name}: load", loads[name])
            out[f"{name}: load"]["cold_ms"] = round(cold[name][0])
        if loads_only and not visits:
            browser.close()
            return out

        def nav_link(name: str) -> Callable[[], Any]:
            return lambda: page.locator(".navbar .nav-link", has_text=name).first

        for name in PAGES:  # in-app navigation: the navbar link, from Summary
            runs: list[Run] = []
            start = "/insights" if PAGES[name] == "/" else "/"  # a link to the page shown does nothing
            for _ in range(repeat):
                load(page, base + start)
                runs.append(click(page, nav_link(name)))
            note(f"{name}: visit", runs)
        if loads_only and "Execution Trace" in PAGES:  # --pages with --visits
            runs = []
            for _ in range(repeat):
                load(page, base + "/execution-trace")
                runs.append(click(page, lambda: page.locator("#trace-view label").nth(1)))
            note("Execution Trace: flame view", runs)
        if loads_only:
            browser.close()
            return out
        runs = []
        for _ in range(repeat):
            load(page, base + "/memory")
            # the Breakdown radio's label (a bare "region" text is also a Details table's header)
            runs.append(click(page, lambda: page.locator("#memory-breakdown label", has_text="by region").first))
        note("Memory: breakdown by region", runs)
        runs = []
        for _ in range(repeat):
            load(page, base + "/execution-trace")
            runs.append(click(page, lambda: page.locator("#trace-view label").nth(1)))
        note("Execution Trace: flame view", runs)
        tabbed = [name for name in PAGES if name != "Operations Graph"]  # it compares inside its own chart
        if tabbed:  # the session's first compare tab computes the comparison: reported apart, out of the medians
            load(page, base + PAGES[tabbed[0]])
            first = click(page, lambda: page.get_by_role("tab", name=compare_tab, exact=True))
            note(f"first compare tab of the session ({tabbed[0]})", [first])
        for name, path in PAGES.items():
            if name not in tabbed:
                continue
            runs = []
            for _ in range(repeat):
                load(page, base + path)
                runs.append(click(page, lambda: page.get_by_role("tab", name=compare_tab, exact=True)))
            note(f"{name}: compare tab", runs)
        if "Operations" in tabbed:
            first_graph_measure()
        browser.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("reports", nargs="*", type=Path, default=list(REPORTS))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, help="default bench/viewer_browser.json (--first-graph: _first_graph.json)")
    ap.add_argument("--detail", action="store_true", help="print each Dash request of each page load")
    ap.add_argument("--pages", help="only these pages (comma-separated names), loads only")
    ap.add_argument(
        "--visits", action="store_true", help="with --pages: their visits too (and the trace's flame click)"
    )
    ap.add_argument(
        "--first-graph",
        action="store_true",
        help="only the Operations compare tab as a fresh browser's first graph (plotly.js not yet loaded)",
    )
    args = ap.parse_args()
    if args.out is None:  # --first-graph alone never overwrites the full run's figures
        args.out = ROOT / "bench" / ("viewer_browser_first_graph.json" if args.first_graph else "viewer_browser.json")
    global DETAIL
    DETAIL = args.detail
    if args.pages:
        keep = args.pages.split(",")
        for name in list(PAGES):
            if name not in keep:
                del PAGES[name]
    missing = [r for r in args.reports if not (r / "manifest.json").exists()]
    if missing:
        print(f"no report at {', '.join(map(str, missing))}: make them with `tilescope demo --real-size --no-serve`")
        return 2
    result: dict[str, Any] = {"load_before": os.getloadavg(), "repeat": args.repeat, "quiet_ms": QUIET_MS}
    for k, report in enumerate(args.reports):
        baseline = args.reports[(k + 1) % len(args.reports)]
        print(f"{report.name} (compare baseline {baseline.name}), median of {args.repeat}:", flush=True)
        t = time.time()
        result[report.name] = measure(
            report,
            baseline,
            args.repeat,
            loads_only=bool(args.pages),
            visits=args.visits,
            first_graph_only=args.first_graph,
        )
        print(f"  ({time.time() - t:.0f} s)")
        args.out.write_text(json.dumps(result, indent=1) + "\n")  # what is measured so far
    result["load_after"] = os.getloadavg()
    over = [
        f"{r}: {k}"
        for r, m in result.items()
        if isinstance(m, dict)
        for k, v in m.items()
        if v["median_ms"] > TARGET_MS
    ]
    result["over_target"] = over
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"over {TARGET_MS:.0f} ms: {', '.join(over) if over else 'none'}; written {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
