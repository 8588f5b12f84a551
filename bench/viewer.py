"""Viewer benchmark: server-side time of each page's first render and main interactions on a
POD16-size synthetic report (16 IPUs x 1472 tiles, 20,000 executed steps with per-tile cycles,
100,000 variables), and the JSON size of what each sends to the browser.

It calls the same functions the Dash callbacks call (layouts, callbacks, views, figures) in the
order a user meets them, so "first" timings include reading the tables they need (cold caches).
Targets (issue 6): under 1 s each, under 5 MB per figure.

    python bench/viewer.py                       # writes the POD16 report under /tmp (~5 s once)
    python bench/viewer.py --report PATH         # an existing report
    python bench/viewer.py --quick               # 2 IPUs x 1472 tiles, 2,000 steps
    python bench/viewer.py --report PATH --warm  # after the warm-up `tilescope serve` runs at start

An out-of-memory report (no execution profile) is measured without the Execution Trace section.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import plotly.utils

from report_format.vocabulary import Layer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

POD16 = {"num_ipus": 16, "tiles_per_ipu": 1472, "executed_steps": 20000, "variables": 100000}
QUICK = {"num_ipus": 2, "tiles_per_ipu": 1472, "executed_steps": 2000, "variables": 10000}
TARGET_S, TARGET_BYTES = 1.0, 5 * 2**20
rows: list[tuple[str, str, float, int]] = []


def size_of(obj: Any) -> int:
    return len(json.dumps(obj, cls=plotly.utils.PlotlyJSONEncoder))


def measure(page: str, what: str, fn: Callable[[], Any]) -> Any:
    t = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t
    size = size_of(out)
    rows.append((page, what, dt, size))
    flag = "" if dt < TARGET_S and size < TARGET_BYTES else "  <-- over target"
    print(f"{page:16s} {what:58s} {dt * 1000:8.0f} ms {size / 1024:9.0f} KiB{flag}", flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--report", type=Path, help="an existing report (default: write a synthetic one under /tmp)")
    ap.add_argument("--quick", action="store_true", help="a smaller report, for a smoke run")
    ap.add_argument(
        "--warm",
        action="store_true",
        help="first run the start-up warm-up `tilescope serve` runs in the background (timed apart), "
        "so each page is timed as a user meets it once the server is ready",
    )
    args = ap.parse_args()
    path = args.report
    if path is None:
        from report_format.synthetic import synthetic_report

        size = QUICK if args.quick else POD16
        path = Path("/tmp") / ("tilescope_bench_viewer_quick" if args.quick else "tilescope_bench_viewer_pod16")
        if not (path / "manifest.json").exists():
            t = time.perf_counter()
            synthetic_report(path, **size)
            print(f"wrote {path} in {time.perf_counter() - t:.1f} s")

    from app.server import create_app

    t = time.perf_counter()
    create_app(path)
    print(f"create_app (open + validate report, import pages): {time.perf_counter() - t:.2f} s")
    if args.warm:
        from app.server import warm_caches

        t = time.perf_counter()
        warm_caches()
        print(f"start-up warm-up (tilescope serve runs it in the background): {time.perf_counter() - t:.2f} s")
    from app import grid, state
    from app.pages import execution_trace, insights, liveness, memory, operations, operations_graph, program_tree
    from app.pages import summary as summary_page
    from app.tile_list import parse_tile_list
    from app.views import liveness as lv
    from app.views import operations as ops
    from app.views import program_tree as pt

    report = state.report()
    t = report.target_info
    print(
        f"report: {t.num_ipus} IPUs x {t.tiles_per_ipu} tiles, {report.num_rows('variables'):,} variables, "
        f"{report.num_rows('execution_steps'):,} execution step rows, {report.num_rows('tile_cycles'):,} tile-cycle rows"
    )
    print(f"{'page':16s} {'what':58s} {'server':>11s} {'to browser':>13s}")

    measure("Summary", "first render (layout)", summary_page.layout)
    measure("Insights", "first render (layout)", insights.layout)

    opts = ["gaps", "max"]
    measure(
        "Memory",
        "first render: layout + figure by category",
        lambda: (memory.layout(), memory.memory_figure("category", opts, "tile", None)),
    )
    measure("Memory", "figure by region", lambda: memory.memory_figure("region", opts, "tile", None))
    measure("Memory", "figure by liveness, excluding gaps", lambda: memory.memory_figure("liveness", [], "tile", None))
    measure("Memory", "figure sorted by size", lambda: memory.memory_figure("category", opts, "sorted", None))
    sel = parse_tile_list("1000-1099", t.num_tiles)
    measure(
        "Memory",
        "select 100 tiles -> figure with selection",
        lambda: memory.memory_figure("category", opts, "tile", sel),
    )
    for tab in ("details", "compute_sets", "vertices", "exchanges", "variables", "tile_map"):
        measure("Memory", f"tab {tab}, 100 tiles", lambda tab=tab: memory.tab_body(tab, sel, opts))
    for tab in ("details", "compute_sets", "vertices", "exchanges", "variables"):
        measure("Memory", f"tab {tab}, all tiles", lambda tab=tab: memory.tab_body(tab, None, opts))
    measure("Memory", "tile map, physical layout", lambda: memory.tab_body("tile_map", None, opts, None, "physical"))
    vkey = json.dumps({"tiles": None}, sort_keys=True)
    measure(
        "Memory",
        "variables grid: sort by bytes, rows 0-100 (all tiles)",
        lambda: grid.apply_request(
            grid.frame(memory.VARIABLES_KIND, vkey),
            {"startRow": 0, "endRow": 100, "sortModel": [{"colId": "bytes", "sort": "desc"}]},
        ),
    )
    measure(
        "Memory",
        "variables grid: filter name contains 'grad'",
        lambda: grid.apply_request(
            grid.frame(memory.VARIABLES_KIND, vkey),
            {
                "startRow": 0,
                "endRow": 100,
                "filterModel": {"name": {"filterType": "text", "type": "contains", "filter": "grad"}},
            },
        ),
    )
    vids = [int(v) for v in report.variables()["variable_id"].head(5)]
    measure("Memory", "variables graph, 5 variables", lambda: memory.variables_graph(vids))

    measure("Liveness", "first render: layout + figure", lambda: (liveness.layout(), liveness.figure([], [], [])))
    peak = lv.peak_step(lv.liveness_by_step(report))
    measure("Liveness", "figure per IPU with always-live", lambda: liveness.figure(["always"], ["ipu"], [peak]))
    measure("Liveness", "click peak step -> live variables tab", lambda: liveness.tab_body("live", [peak]))
    measure(
        "Liveness",
        "live variables grid rows 0-100",
        lambda: grid.apply_request(
            grid.frame(liveness.LIVE_KIND, json.dumps({"step": peak})), {"startRow": 0, "endRow": 100}
        ),
    )
    measure("Liveness", "vertices tab", lambda: liveness.tab_body("vertices", [peak]))
    measure("Liveness", "cycle estimates tab", lambda: liveness.tab_body("cycles", [peak]))
    measure(
        "Liveness",
        "second step -> difference rows 0-100",
        lambda: grid.apply_request(
            grid.frame(liveness.DIFF_KIND, json.dumps({"a": 0, "b": peak}, sort_keys=True)),
            {"startRow": 0, "endRow": 100},
        ),
    )

    measure("Program Tree", "first render (layout)", program_tree.layout)
    tree = pt.program_tree(report)
    measure(
        "Program Tree",
        "expand all",
        lambda: grid.to_records(program_tree.tree_rows(tree, set(tree["program_id"].astype(int)))),
    )
    leaf = int(tree.loc[tree["step"] >= 0, "program_id"].iat[0])
    measure("Program Tree", "select a step -> details", lambda: pt.program_details(report, leaf))

    measure(
        "Operations",
        "first render: layout + table (poplibs, all runs)",
        lambda: (operations.layout(), operations.table(Layer.POPLIBS, "-1", operations.DEFAULT_COLUMNS)),
    )
    okey = json.dumps({"layer": Layer.POPLIBS, "run": None}, sort_keys=True)
    measure(
        "Operations",
        "grid: filter + sort",
        lambda: grid.apply_request(
            grid.frame(operations.KIND, okey),
            {
                "startRow": 0,
                "endRow": 100,
                "sortModel": [{"colId": "cycles", "sort": "desc"}],
                "filterModel": {"name": {"filterType": "text", "type": "contains", "filter": "matmul"}},
            },
        ),
    )
    measure(
        "Operations",
        "switch layer (onnx, run 1)",
        lambda: operations.table(Layer.ONNX, "1", operations.DEFAULT_COLUMNS),
    )
    op = int(ops.operations(report, Layer.POPLIBS)["op_id"].iat[0])
    measure("Operations", "select an op -> details", lambda: operations.details([{"rowId": str(op)}], Layer.POPLIBS))
    measure(
        "Operations Graph",
        "first render: layout + graph",
        lambda: (operations_graph.layout(), operations_graph.graph(Layer.POPLIBS, "cycles")),
    )

    if not report.has_execution_profile:  # an out-of-memory report: memory and liveness only
        return summarise()
    from app.views.runs import opening_run

    first = opening_run(report)  # the run the page opens on (a real model's inference, not its weight upload)
    run_ids = [int(r) for r in report.table("runs", ["run"]).column("run").to_pylist()]
    other = next((r for r in run_ids if r != first), first)  # "switch run": another run when there is one
    measure(
        "Execution Trace",
        "first render: layout + summary + per-IPU table",
        lambda: (execution_trace.layout(), execution_trace.summary(str(first)), execution_trace.ipus(str(first))),
    )
    full = measure(
        "Execution Trace",
        "timeline flat, whole run (+ tiles x steps)",
        lambda: execution_trace.render_trace(first, "flat", 0, None),
    )
    print(f"{'':16s}   {full[1]}")
    measure("Execution Trace", f"switch run {other} -> summary", lambda: execution_trace.summary(str(other)))
    measure(
        "Execution Trace",
        f"switch run {other} -> timeline",
        lambda: execution_trace.render_trace(other, "flat", 0, None),
    )
    from app.views import execution_trace as et

    length = et.run_length(report, first)
    # IPUs 3 and 5 of a POD16; the last IPU of a smaller report (a real-size sample has one)
    zoom_ipu, flame_ipu = min(3, t.num_ipus - 1), min(5, t.num_ipus - 1)
    for frac in (0.1, 0.01, 0.001):
        out = measure(
            "Execution Trace",
            f"zoom to {frac:.1%} of the run",
            lambda frac=frac: execution_trace.render_trace(
                first, "flat", zoom_ipu, [int(length * 0.4), int(length * (0.4 + frac))]
            ),
        )
        print(f"{'':16s}   {out[1]}")
    measure(
        "Execution Trace",
        "click a step -> its IPUs + per-tile split",
        lambda: execution_trace.step_clicked({"points": [{"x": length * 0.5, "y": zoom_ipu}]}, str(first), "flat", "0"),
    )
    out = measure(
        "Execution Trace",
        f"flame view, run {first}, IPU {flame_ipu}, whole run",
        lambda: execution_trace.render_trace(first, "flame", flame_ipu, None),
    )
    print(f"{'':16s}   {out[1]}")
    measure(
        "Execution Trace",
        "flame view zoom to 1%",
        lambda: execution_trace.render_trace(first, "flame", flame_ipu, [int(length * 0.4), int(length * 0.41)]),
    )
    return summarise()


def summarise() -> int:
    worst_t = max(rows, key=lambda r: r[2])
    worst_s = max(rows, key=lambda r: r[3])
    print(
        f"\nslowest: {worst_t[0]} / {worst_t[1]}: {worst_t[2] * 1000:.0f} ms; "
        f"largest: {worst_s[0]} / {worst_s[1]}: {worst_s[3] / 2**20:.2f} MiB"
    )
    over = [r for r in rows if r[2] >= TARGET_S or r[3] >= TARGET_BYTES]
    print(f"{len(rows)} measurements, {len(over)} over target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
