"""Pages' layouts and callbacks called as plain functions (Dash's unit-testing style), on the
small report and on its compile-only twin. The app is created once for the module."""

from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go
import plotly.utils
import pytest

from app import state


@pytest.fixture(scope="module")
def pages(small_report):
    from app.server import PAGES, create_app

    create_app(small_report.path)
    import importlib

    return {name: importlib.import_module(f"app.pages.{name}") for name in PAGES}


def as_json(component) -> str:
    return json.dumps(component, cls=plotly.utils.PlotlyJSONEncoder)


def test_every_layout_renders_and_names_its_page(pages):
    titles = {
        "summary": "Summary",
        "insights": "Insights",
        "memory": "Memory",
        "liveness": "Liveness",
        "program_tree": "Program Tree",
        "operations": "Operations",
        "operations_graph": "Operations Graph",
        "execution_trace": "Execution Trace",
    }
    for name, module in pages.items():
        text = as_json(module.layout())
        assert f'"children": "{titles[name]}"' in text, name
    # the peak, hand-computed, named by its ONNX node (the PopLibs op in brackets)
    assert "96 B at program step 3 (OnTileExecute MatMul_0 (matmul))" in as_json(pages["liveness"].layout())


def _rows(fig) -> list[int]:  # type: ignore[no-untyped-def]
    """Timeline rows (IPUs) that have spans drawn (line traces separate spans with gaps)."""
    data = fig["data"] if isinstance(fig, dict) else fig.data  # the trace sends plain dicts
    ys = [np.asarray(t["y"], dtype=float) for t in data if t["y"] is not None]
    ys = np.concatenate(ys) if ys else np.zeros(0)
    return sorted({int(y) for y in ys[np.isfinite(ys)]})


def test_trace_callbacks(pages):
    et = pages["execution_trace"]  # (zoom -> cycle range runs in the browser: test_browser_trace's zoom test)
    fig, detail, tiles = et.render_trace(0, "flat", -1, [50, 100])  # All IPUs
    fig = go.Figure(fig)  # a figure dict (app.figures.common.figure_dict): valid plotly
    # cycles 50..100: IPU 0 runs matmul (50-90) and the exchange (90-110); IPU 1 only matmul (50-110)
    assert "executed steps. exact: 3 executed steps in cycles 50..100" in detail
    # tiles x steps shows one IPU: for All IPUs the run's busiest, IPU 1 (its matmul lasts 60 cycles to IPU 0's
    # 40), and says so; within 50..100 IPU 1 runs step 3 only
    assert "Tiles x steps: IPU 1 (the busiest; choose an IPU above for another), steps 3..3" in detail
    assert _rows(fig) == [0, 1]
    fig, detail, tiles = et.render_trace(0, "flat", 1, [50, 100])  # IPU 1 selected: its row only
    fig, tiles = go.Figure(fig), go.Figure(tiles)
    assert "executed steps. exact: 1 executed step in cycles 50..100" in detail
    assert "IPU 1, steps 3..3" in detail and np.shape(tiles.data[0].z) == (4, 1)
    assert _rows(fig) == [1]
    # the page draws tiles x steps only in its open panel: the same figure, for the same view
    import dash

    assert et.tiles_panel(None, "0", "1", [50, 100]) is dash.no_update  # closed: nothing drawn
    assert go.Figure(et.tiles_panel("tiles", "0", "1", [50, 100]).figure) == tiles
    fig, detail, _ = et.render_trace(0, "flame", 1, None)  # IPU 1's flame: the same 10 steps, nested
    assert "exact: 10 executed steps in cycles 0..230 (under 12 enclosing spans" in detail
    names = dict(zip(fig["layout"]["yaxis"]["tickvals"], fig["layout"]["yaxis"]["ticktext"], strict=True))
    assert names[0] == "0 program" and names[3] == "3 operations" and names[5] == "5 steps"
    assert any("MatMul_0 (MatMul)<br>onnx operation: 80 cycles" in t for tr in fig["data"] for t in tr.get("text", []))
    assert "230" in as_json(et.summary("0")) and "460" in as_json(et.summary("1"))
    from app.views.runs import longest_run, opening_run

    assert longest_run(state.report()) == opening_run(state.report()) == 1  # run 1 is the longer; both compute


def test_trace_click_names_the_clicked_span(pages):
    """A click reads the clicked bar's own customdata [row, step, cycle]: an exact span is its own
    step; a bin or a flame's frame (step -1) is the step at its middle cycle, on the row's IPU (flat)
    or on the flame's IPU (hand-computed from small_report's run 0)."""
    et = pages["execution_trace"]
    assert et.clicked_step(0, "flat", -1, [1, 6, 165]) == (6, 1)
    assert et.clicked_step(0, "flat", -1, [0, -1, 100]) == (4, 0)  # IPU 0 exchanges in cycles 90..110
    assert et.clicked_step(0, "flat", -1, [1, -1, 100]) == (3, 1)  # IPU 1 computes in cycles 50..110
    assert et.clicked_step(0, "flame", 1, [4, -1, 200]) == (7, 1)  # IPU 1's flame: its exchange, 195..215
    assert et.clicked_step(0, "flame", -1, [2, -1, 200]) == (7, 1)  # "All IPUs": the busiest, IPU 1
    panel = as_json(et.step_clicked({"points": [{"customdata": [0, 5, 112], "x": 5, "y": 0}]}, "0", "flat", "-1"))
    assert "Executed step 5: add (OnTileExecute), run 0" in panel
    assert "Step 5 on IPU 0, per tile" in panel


def test_trace_ipu_selector_says_what_is_drawn(pages):
    """The flame shows one IPU: with "All IPUs" chosen, the selector reads as the IPU drawn."""
    et = pages["execution_trace"]
    assert [o["label"] for o in et.ipu_options(0, "flat")] == ["All IPUs", "IPU 0", "IPU 1"]
    flame = et.ipu_options(0, "flame")
    assert flame[0] == {"label": "IPU 1 (busiest)", "value": "-1"} and flame[2]["label"] == "IPU 1"


def test_memory_liveness_tree_and_operations_callbacks(pages):
    mem, lv, pt, ops = pages["memory"], pages["liveness"], pages["program_tree"], pages["operations"]
    assert mem._tiles_of_points([{"pointIndex": 2, "curveNumber": 0}], [0, 3, 6], 3) == [6, 7]  # tile 8 does not exist
    assert mem.toggle_pick([1, 2], 2) == [1] and mem.toggle_pick([1], 2) == [1, 2]
    assert mem.selection_text([0, 1]) == "Selected tiles: 0, 1" and mem.selection_text(None) == "All tiles"
    assert "memory-tile-address-map" in as_json(mem.tab_body("details", [0], ["gaps"]))  # one tile: its map
    assert "memory-tile-address-map" not in as_json(mem.tab_body("details", [0, 1], ["gaps"]))
    physical = mem.tab_body("tile_map", None, ["gaps"], None, "physical").figure
    assert "die column %{customdata[4]}, island %{customdata[5]}" in physical["data"][1]["hovertemplate"]
    assert physical["data"][1]["customdata"][1][0].tolist()[3:] == [1, 0, 0, 1]  # tile 5: column 0, island 0, tile 1
    assert "software order" in mem.tab_body("tile_map", None, ["gaps"]).figure["layout"]["title"]["text"]
    fig = go.Figure(mem.memory_figure("region", ["gaps"], "tile", [2]))
    assert [t.name for t in fig.data] == ["non_interleaved", "interleaved", "gaps"]
    assert "1,000" not in as_json(fig.layout.shapes)  # no max-memory line when not asked
    assert lv.next_selection([3], 5) == [3, 5] and lv.next_selection([3, 5], 6) == [5, 6]
    assert lv.next_selection([3], 3) == [3]
    body, text = lv.tab_body("cycles", [3])
    # named by the model first (ONNX node MatMul_0), the PopLibs op in brackets: tests/app/test_model_names.py
    assert text.startswith("Step 3: OnTileExecute MatMul_0 (matmul)") and "busiest tile" in as_json(body)
    tree = pt.tree_rows(pt.view.program_tree(state.report()), {0, 1, 5})
    assert tree["tree"].iloc[5].strip() == "▾ loop  ×2" and tree["step"].isna().sum() == 3
    grid, sentence = ops.table("onnx", "-1", ["cycles"])
    assert sentence.startswith(
        "2 operations, plus one row for work outside any of them (26.1% of cycles). Cycles: executed"
    )
    hidden = {d["field"] for d in grid.columnDefs if d["hide"]}
    assert "flops" in hidden and "cycles" not in hidden
    assert "MatMul_0" in as_json(ops.details([{"rowId": "0"}], "onnx"))


def test_compile_only_report_says_why_the_trace_is_empty(pages, compile_only_report, small_report):
    state.configure(compile_only_report.path)
    try:
        text = as_json(pages["execution_trace"].layout())
        assert "needs an execution profile" in text and "compile only" in text
        assert "compile-time estimate" in pages["operations"].table("poplibs", "-1", ["cycles"])[1]
        assert "not captured" in as_json(pages["summary"].layout())
    finally:
        state.configure(small_report.path)


def test_estimated_report_shows_its_trace_labelled(pages, small_report, tmp_path):
    """A compile-only profile with an estimated trace: the trace is shown (no "needs an execution
    profile"), and every page that shows its cycles says they are estimated; the step marked as
    depending on data is named, with why."""
    from tests.app.small_report import write_small_report

    state.configure(write_small_report(tmp_path / "estimated", estimated=True))
    try:
        trace = as_json(pages["execution_trace"].layout())
        assert "needs an execution profile" not in trace
        assert "Execution Trace (estimated)" in trace and "cycles, estimated)" in trace
        assert "Estimated trace: a compile-only profile" in trace
        assert "1 program node has cycles that depend on data" in trace and "MultiSlice" in trace
        summary = as_json(pages["summary"].layout())
        assert "Cycles (estimated)" in summary and "Estimated trace" in summary
        assert "estimated run (compile-only" in pages["operations"].table("poplibs", "-1", ["cycles"])[1]
        tree = as_json(pages["program_tree"].layout())
        assert "executed cycles are estimated" in tree and "depend on data" in tree
    finally:
        state.configure(small_report.path)
    # the simulated twin says neither
    trace = as_json(pages["execution_trace"].layout())
    assert "estimated" not in trace.lower().replace("estimated_cycles", "")


def test_report_without_debug_info(pages, small_report, tmp_path):
    from tests.app.small_report import write_small_report

    state.configure(write_small_report(tmp_path / "nodebug", debug_info=False))
    try:
        for module in pages.values():
            as_json(module.layout())  # every page renders
        grid, sentence = pages["operations"].table("poplibs", "-1", ["cycles"])
        assert sentence.startswith("0 operations")
        assert "No operations" in as_json(pages["operations_graph"].graph("poplibs", "cycles"))
        assert "debug_context" not in pages["program_tree"].view.program_details(state.report(), 6)
    finally:
        state.configure(small_report.path)


def _tables(component) -> list:
    """Every html.Table in a component tree (dbc.Table renders one)."""
    import dash_bootstrap_components as dbc
    from dash import html

    found = []
    if isinstance(component, (list, tuple)):
        for c in component:
            found += _tables(c)
        return found
    if isinstance(component, (html.Table, dbc.Table)):
        return [component]
    if hasattr(component, "_prop_names"):
        return _tables(getattr(component, "children", None))
    return found


def test_insights_tables_write_bytes_in_binary_units(pages, small_report):
    """The Insights page's top lists write bytes as its sentences do ('1.2 KiB', app.units.format_bytes),
    never as exact integers ('1,216') in a bytes column."""
    import re

    from app.units import format_bytes
    from tests.app.dash_tree import text

    byte_headers = {"bytes", "always live", "not always live", "state bytes", "code bytes", "bytes in", "bytes out"}
    seen = 0
    for table in _tables(pages["insights"].layout()):
        head, body = table.children
        headers = [text(th) for th in head.children.children]
        for row in body.children:
            for header, cell in zip(headers, row.children, strict=True):
                if header in byte_headers:
                    seen += 1
                    assert not re.fullmatch(r"[\d,]+", text(cell)), (header, text(cell))
                    assert re.fullmatch(r"-?[\d.]+ (B|KiB|MiB|GiB)", text(cell)), (header, text(cell))
    assert seen >= 3  # the test saw byte columns of the tables it is about
    top = pages["insights"].view.top_tiles(small_report)
    first = _tables(pages["insights"].layout())[0].children[1].children[0]
    assert text(first.children[2]) == format_bytes(top["bytes"].iat[0])
