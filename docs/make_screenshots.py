"""Regenerate docs/screenshots/<page>.png: the viewer in headless Debian Chromium on a synthetic
report (2 IPUs x 1472 tiles, 2,000 executed steps), each page in a typical state (a tile
selected, the peak liveness step clicked, one IPU's liveness, an operation selected, a zoomed
trace), and the Execution Trace of a pipelined training run (4 IPUs, 8 micro-batches).

    python docs/make_screenshots.py [--report PATH] [--only NAME ...]

It also shoots the Execution Trace of a pipelined GPT-2-style block (4 IPUs, 6 micro-batches) and
the Liveness page zoomed into a 6,000-step report (redrawn step by step at the zoom).

With ``--graphs DIR`` (the samples of ``tilescope demo --real-size --no-serve --out DIR``) it
shoots only the Operations Graph at real-model scale: ResNet-50 b32 and BERT-base closed, then
opened by clicks on the heaviest group in the list beside the graph (operations_graph*.png), and
the MLP coloured by Δ cycles against its batch-64 twin (compare_operations_graph.png).

    python docs/make_screenshots.py --graphs /tmp/graph-demo

With ``--real DIR`` (the same samples) it shoots the Execution Trace's flame (layers > operations >
steps) and the Memory tile map's physical layout of ResNet-50 b32 and BERT-base
(execution_trace_flame_<model>.png, zoomed to a few layers in _zoomed, and
memory_tile_map_physical_<model>.png).

    python docs/make_screenshots.py --real /tmp/graph-demo

With ``--pages DIR`` (the same samples) it shoots every page of ResNet-50 b32 and BERT-base, each
served in compare mode against the other, at 1600x1000 (the window, not the whole page): the page's
own view (<page>_<model>.png) and its compare tab (compare_<page>_<model>.png).

    python docs/make_screenshots.py --pages sample_reports/demo

With ``--sweep DIR`` (a sweep directory of ``tilescope sweep``, docs/sweep.md's ResNet-50 sweep) it
shoots only the Sweep page, coloured by dtype (sweep.png).

    python docs/make_screenshots.py --sweep /tmp/resnet50-sweep
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.app.browser import CHROMIUM, CHROMIUM_ARGS, click_centre, served, settle  # noqa: E402

OUT = ROOT / "docs" / "screenshots"


#: With --only: the screenshots to write (the others' pages are still driven, not shot).
ONLY: set[str] = set()


def wanted(name: str) -> bool:
    return not ONLY or name in ONLY


def shoot(page, name: str, full_page: bool = True) -> None:
    if not wanted(name):
        return
    settle(page, 1200)
    page.mouse.move(2, 2)  # no hover label over the figures
    # nor plotly's "Double-click to zoom back out" notice after a zoom (it fades after a few seconds)
    page.evaluate("() => document.querySelectorAll('.plotly-notifier').forEach(n => n.remove())")
    page.wait_for_timeout(300)
    page.screenshot(path=str(OUT / f"{name}.png"), full_page=full_page)
    print(f"wrote docs/screenshots/{name}.png")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--report", type=Path, help="report to show (default: a synthetic one in a temp directory)")
    ap.add_argument("--graphs", type=Path, help="shoot only the Operations Graph of the real-size samples in DIR")
    ap.add_argument("--real", type=Path, help="shoot only the flame and physical tile map of the real-size samples")
    ap.add_argument("--sweep", type=Path, help="shoot only the Sweep page of the sweep directory DIR")
    ap.add_argument("--pages", type=Path, help="shoot every page of the real-size samples in DIR, and its compare tab")
    ap.add_argument("--models", nargs="*", help="with --pages: only these models (resnet50, bert)")
    ap.add_argument("--stems", nargs="*", help="with --pages: only these pages (memory, liveness, ...)")
    ap.add_argument("--only", nargs="*", help="the default shots: only these names (execution_trace_zoomed, ...)")
    args = ap.parse_args()
    ONLY.update(args.only or [])
    from playwright.sync_api import sync_playwright

    if args.graphs is not None:
        return graphs(args.graphs)
    if args.real is not None:
        return real_size(args.real)
    if args.pages is not None:
        return every_page(args.pages, args.models, args.stems)
    if args.sweep is not None:
        return sweep(args.sweep)

    with tempfile.TemporaryDirectory() as tmp:
        report = args.report
        if report is None:
            from report_format.synthetic import synthetic_report

            report = synthetic_report(
                Path(tmp) / "synthetic_2ipu",
                num_ipus=2,
                tiles_per_ipu=1472,
                executed_steps=2000,
                variables=5000,
                oom_tiles=3,
                seed=1,
            )
        OUT.mkdir(parents=True, exist_ok=True)
        with served(report) as base, sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            page.goto(base + "/")
            shoot(page, "summary")
            page.goto(base + "/insights")
            shoot(page, "insights")
            page.goto(base + "/memory")
            settle(page)
            page.fill("#memory-tiles-input", "1470-1475")
            page.press("#memory-tiles-input", "Enter")
            settle(page)
            shoot(page, "memory")
            page.fill("#memory-tiles-input", "1471")
            page.press("#memory-tiles-input", "Enter")
            shoot(page, "memory_one_tile")
            page.get_by_role("tab", name="Tile map").click()
            shoot(page, "memory_tile_map")
            page.goto(base + "/liveness")
            settle(page)
            click_centre(page, page.locator("#liveness-graph .scatterlayer .point").last)  # the peak
            shoot(page, "liveness")
            page.select_option("#liveness-ipu", "1")  # one IPU's liveness
            shoot(page, "liveness_ipu")
            page.goto(base + "/program-tree")
            settle(page)
            page.click("#program-tree-expand-all")
            settle(page)
            page.locator("#program-tree-grid .ag-row[row-index='8']").first.click()  # a step inside the Repeat
            shoot(page, "program_tree")
            page.goto(base + "/operations")
            settle(page)
            page.locator("#operations-table .ag-row[row-index='0']").first.click()
            shoot(page, "operations")
            page.goto(base + "/operations-graph")
            shoot(page, "operations_graph")
            page.goto(base + "/execution-trace")
            settle(page)
            box = page.locator("#trace-timeline .nsewdrag").first.bounding_box()
            y = box["y"] + box["height"] * 0.25  # IPU 0's row
            page.mouse.click(box["x"] + box["width"] * 0.5, y)  # a step: its IPUs and per-tile split
            shoot(page, "execution_trace")
            page.mouse.move(box["x"] + box["width"] * 0.30, y)
            page.mouse.down()
            page.mouse.move(box["x"] + box["width"] * 0.33, y, steps=5)
            page.mouse.up()
            shoot(page, "execution_trace_zoomed")
            page.check("#trace-view input[value='flame']", force=True)
            shoot(page, "execution_trace_flame")
            if wanted("execution_trace_training"):
                training = _training_report(Path(tmp))
                with served(training) as train_base:
                    page.goto(train_base + "/execution-trace")
                    settle(page)
                    page.select_option("#trace-run", "1")  # the training step (run 0 initialises)
                    shoot(page, "execution_trace_training")
            if wanted("execution_trace_pipelined"):
                with served(_pipelined_report(Path(tmp))) as pipe_base:
                    page.goto(pipe_base + "/execution-trace")
                    settle(page)
                    page.select_option("#trace-run", "1")  # the pipelined inference (run 0 uploads the weights)
                    shoot(page, "execution_trace_pipelined")
            if wanted("liveness_zoomed"):
                from report_format.synthetic import synthetic_report

                # 6,000 program steps, four per pixel column: zoomed in, the line is re-drawn step by step
                long = synthetic_report(Path(tmp) / "long", program_steps=6000, executed_steps=6000, runs=1, seed=5)
                with served(long) as long_base:
                    page.goto(long_base + "/liveness")
                    settle(page)
                    box = page.locator("#liveness-graph .nsewdrag").first.bounding_box()
                    y = box["y"] + box["height"] / 2
                    page.mouse.move(box["x"] + box["width"] * 0.40, y)
                    page.mouse.down()
                    page.mouse.move(box["x"] + box["width"] * 0.42, y, steps=5)
                    page.mouse.up()
                    shoot(page, "liveness_zoomed")
            browser.close()
    return 0


def graphs(samples: Path) -> int:
    """The Operations Graph of the real-size samples: closed, then the heaviest group opened (twice
    for BERT: its heaviest layer, then what is heaviest in it), and compare mode's Δ colours."""
    from playwright.sync_api import sync_playwright

    OUT.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        for sample, name, clicks in (
            ("resnet50_b32", "operations_graph_resnet50", 2),
            ("bert_base_b1", "operations_graph_bert", 2),
        ):
            with served(samples / sample) as base:
                page.goto(base + "/operations-graph")
                shoot(page, name)
                for i in range(clicks):
                    page.locator("#operations-graph-heaviest .list-group-item").first.click()
                    shoot(page, f"{name}_open{i + 1}")
                if sample == "bert_base_b1":
                    shoot(page, "operations_graph")  # the page's own screenshot: BERT-base, two clicks in
        with served(samples / "mlp", "--compare", str(samples / "mlp_batch64")) as base:
            page.goto(base + "/operations-graph")
            settle(page)
            page.select_option("#operations-graph-layer", "poplibs")
            settle(page)
            page.check("#operations-graph-colour input[value='delta_cycles']", force=True)
            settle(page)
            page.locator("#operations-graph-heaviest .list-group-item").first.click()
            shoot(page, "compare_operations_graph")
        browser.close()
    return 0


#: Each page of the viewer: its path and the file name's stem.
PAGE_FILES = {
    "/": "summary",
    "/insights": "insights",
    "/memory": "memory",
    "/liveness": "liveness",
    "/program-tree": "program_tree",
    "/operations": "operations",
    "/operations-graph": "operations_graph",
    "/execution-trace": "execution_trace",
}


def every_page(samples: Path, only: list[str] | None = None, pages: list[str] | None = None) -> int:
    """Every page of the real-size ResNet-50 and BERT-base samples (each compared with the other):
    its own view, then its compare tab, as the window shows them at 1600x1000."""
    from playwright.sync_api import sync_playwright

    OUT.mkdir(parents=True, exist_ok=True)
    pairs = (("resnet50_b32", "bert_base_b1", "resnet50"), ("bert_base_b1", "resnet50_b32", "bert"))
    pairs = tuple(p for p in pairs if only is None or p[2] in only)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        for sample, baseline, name in pairs:
            with served(samples / sample, "--compare", str(samples / baseline)) as base:
                for path, stem in PAGE_FILES.items():
                    if pages is not None and stem not in pages:
                        continue
                    page.goto(base + path)
                    shoot(page, f"{stem}_{name}", full_page=False)
                    tab = page.get_by_role("tab", name=f"Compare with {baseline}", exact=True)
                    if tab.count():  # the Operations Graph compares in its own chart (colour by Δ cycles)
                        tab.click()
                        # a real-size comparison takes seconds: wait for its heading, not a fixed time
                        page.wait_for_function(
                            "() => document.getElementById('_pages_content').innerText.includes('Compare:')",
                            timeout=120000,
                        )
                        shoot(page, f"compare_{stem}_{name}", full_page=False)
        browser.close()
    return 0


def real_size(samples: Path) -> int:
    """The flame (the opening run, nested by the model's layers and operations) and the physical
    tile map of the real-size ResNet-50 and BERT-base samples."""
    from playwright.sync_api import sync_playwright

    OUT.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        for sample, name in (("resnet50_b32", "resnet50"), ("bert_base_b1", "bert")):
            with served(samples / sample) as base:
                page.goto(base + "/execution-trace")
                settle(page)
                page.check("#trace-view input[value='flame']", force=True)
                shoot(page, f"execution_trace_flame_{name}")
                # zoomed to a few layers: their operations and steps named
                box = page.locator("#trace-timeline .nsewdrag").first.bounding_box()
                y = box["y"] + box["height"] * 0.5
                page.mouse.move(box["x"] + box["width"] * 0.20, y)
                page.mouse.down()
                page.mouse.move(box["x"] + box["width"] * 0.24, y, steps=5)
                page.mouse.up()
                shoot(page, f"execution_trace_flame_{name}_zoomed")
                page.goto(base + "/memory")
                settle(page)
                page.get_by_role("tab", name="Tile map").click()
                settle(page)
                page.check("#memory-tile-map-layout input[value='physical']", force=True)
                shoot(page, f"memory_tile_map_physical_{name}")
        browser.close()
    return 0


def sweep(directory: Path) -> int:
    """The Sweep page of a sweep directory, its plot coloured by dtype."""
    from playwright.sync_api import sync_playwright

    OUT.mkdir(parents=True, exist_ok=True)
    with served(directory) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.goto(base + "/sweep")
        settle(page)
        page.select_option("#sweep-colour", "dtype")
        shoot(page, "sweep")
        browser.close()
    return 0


def _pipelined_report(tmp: Path) -> Path:
    """A GPT-2-style block pipelined over 4 IPUs, 6 micro-batches (as ``tilescope run model.onnx
    --ipus 4 --pipeline --micro-batches 6``; tests/app/test_browser_multi_ipu.py's model)."""
    from profiler import ipu_model
    from profiler.frontends.onnx import Session, examples, import_model, random_inputs

    model = import_model(examples.gpt2_block(seq=8, hidden=32, heads=2, batch=1),
                         ipu_model(tiles_per_ipu=16, bytes_per_tile=1 << 20, num_ipus=4))  # fmt: skip
    with Session(
        model, {"autoReport.all": "true", "autoReport.directory": str(tmp / "pipelined")}, micro_batches=6
    ) as s:
        s.run(random_inputs(model, rows=6))
    return tmp / "pipelined"


def _training_report(tmp: Path) -> Path:
    """Pipelined training of 4 dense layers on 4 IPUs over 8 micro-batches (profiler.workloads.pipelined_mlp)."""
    from profiler.workloads import pipelined_mlp

    w = pipelined_mlp.build(4, 8, batch=8, inputs=64, width=64, classes=10, tiles=16)
    w.run(1, {"autoReport.all": "true", "autoReport.directory": str(tmp / "training")}).close()
    return tmp / "training" / "pipelined_mlp"


if __name__ == "__main__":
    sys.exit(main())
