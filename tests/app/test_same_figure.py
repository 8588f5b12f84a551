"""One figure, one value: on the demo's MLP pair (batch 32 active, batch 64 baseline, real
simulator runs), every page, the CLI summary and the diff that show a figure show the same value
for the same report. Pages are rendered as plain functions (their layouts and callbacks), the CLI
through ``tilescope.cli.main``; each figure is read back from what a user would see."""

from __future__ import annotations

import importlib
import json
import math
import re
from pathlib import Path

import pytest

from app import ids
from app.units import format_bytes, format_percent
from app.views.runs import run_figures
from report_format.reader import open_report
from tests.app.dash_tree import find, text
from tilescope.cli import main


@pytest.fixture(scope="module")
def pages(demo_pair):
    from app.comparison.pages import baselines
    from app.server import PAGES, create_app

    active, baseline = demo_pair
    create_app(active, baseline)
    mods = {name: importlib.import_module(f"app.pages.{name}") for name in PAGES}
    for name in ("summary", "memory", "operations", "execution_trace"):
        mods[f"compare_{name}"] = importlib.import_module(f"app.comparison.pages.{name}")
    mods["key"] = baselines.default_key()
    return mods


def cli_json(capsys, *argv: str) -> dict:
    capsys.readouterr()
    main(list(argv))
    return json.loads(capsys.readouterr().out)


def cli_text(capsys, *argv: str) -> str:
    capsys.readouterr()
    main(list(argv))
    return capsys.readouterr().out


def grid_rows(component) -> list[dict]:
    return component.rowData


def text_of_percent(report: Path, run: int) -> str:
    """The baseline's tile balance of the run that computes, as the compare table writes it."""
    return format_percent(run_figures(open_report(report), run)["tile_balance"])


def test_tile_balance(demo_pair, pages, capsys):
    active, baseline = demo_pair
    summary = cli_json(capsys, "summary", str(active), "--json")["execution"]
    diff = cli_json(capsys, "diff", str(baseline), str(active), "--json")
    a, run = open_report(active), summary["opening_run"]
    overall, per_run = summary["tile_balance"], run_figures(a, run)["tile_balance"]
    assert diff["metrics"]["execution.tile_balance"]["active"] == pytest.approx(overall)
    assert summary["tile_balance_per_run"][run] == pytest.approx(per_run)
    assert not math.isclose(overall, per_run)  # all runs and one run are told apart, not confused
    # all runs: the CLI summary's execution line
    assert f"tile balance {format_percent(overall)}" in cli_text(capsys, "summary", str(active))
    # the run that computes: the compare headline table and the diff's text lead with it
    headline = text(find(pages["compare_summary"].render(pages["key"]), ids.COMPARE_SUMMARY_TABLE))
    assert (
        f"Execution tile balance (run that computes) {text_of_percent(baseline, run)} {format_percent(per_run)}"
        in headline
    )
    assert diff["metrics"]["execution.headline.tile_balance"]["active"] == pytest.approx(per_run)
    assert re.search(
        rf"execution\.headline\.tile_balance\s+\S+\s+{re.escape(format_percent(per_run))}",
        cli_text(capsys, "diff", str(baseline), str(active)),
    )
    # one run: the Summary's headline card (the opening run), the Execution Trace card, the Summary's
    # runs table, the compare runs table, the CLI's headline and per-run lines
    assert f"Tile balance {format_percent(per_run)} run {run}" in text(
        find(pages["summary"].layout(), ids.SUMMARY_BODY)
    )
    assert f"tile balance {format_percent(per_run)}" in cli_text(capsys, "summary", str(active)).split("headline")[1]
    assert f"Tile balance {format_percent(per_run)}" in text(pages["execution_trace"].summary(str(run)))
    runs = find(pages["summary"].layout(), ids.SUMMARY_RUNS).rowData
    assert runs[run]["tile_balance"] == format_percent(per_run)
    cmp_runs = find(pages["compare_execution_trace"].render(pages["key"], str(run)), ids.COMPARE_TRACE_RUNS).rowData
    assert cmp_runs[run]["active_tile_balance"] == format_percent(per_run)
    assert f"tile balance {format_percent(per_run)}" in cli_text(capsys, "summary", str(active)).split(f"run {run}")[1]


def test_executed_steps_per_run(demo_pair, pages, capsys):
    active, baseline = demo_pair
    summary = cli_json(capsys, "summary", str(active), "--json")["execution"]
    run = summary["opening_run"]
    steps, base_steps = summary["steps_per_run"][run], run_figures(open_report(baseline), run)["steps"]
    # the pair's step counts are equal when the matmul plans at batch 32 and 64 have the same structure
    # (PopLibs-like plans split K at both); then the figure must at least tell this run from the others
    others = [n for i, n in enumerate(summary["steps_per_run"]) if i != run]
    assert steps != base_steps or all(n != steps for n in others)
    assert find(pages["summary"].layout(), ids.SUMMARY_RUNS).rowData[run]["executed steps"] == steps
    assert f"Executed steps {steps:,}" in text(pages["execution_trace"].summary(str(run)))
    _, detail, _ = pages["execution_trace"].render_trace(run, "flat", 0, None)
    assert detail.startswith(f"Run {run}: {steps:,} executed steps.") and f"exact: {steps:,} executed steps" in detail
    _, flame, _ = pages["execution_trace"].render_trace(run, "flame", 0, None)  # the same count, nested
    assert f"exact: {steps:,} executed steps in cycles" in flame
    assert f"steps 0..{steps - 1:,}" in detail
    compare = text(find(pages["compare_execution_trace"].render(pages["key"], str(run)), ids.COMPARE_TRACE_TEXT))
    assert compare.startswith(f"Run {run}: {steps:,} executed steps in active, {base_steps:,} in baseline")
    assert f"{steps:,} executed steps" in cli_text(capsys, "summary", str(active))


def test_operation_count_and_work_outside_any_operation(demo_pair, pages):
    from app.views.operations import OUTSIDE_ID, operations

    active, _ = demo_pair
    ops = operations(open_report(active), "poplibs", None)
    count = int((ops["op_id"] != OUTSIDE_ID).sum())
    outside = int(ops.loc[ops["op_id"] == OUTSIDE_ID, "cycles"].iat[0])
    total = int(ops["cycles"].sum())
    assert total == open_report(active).runs()["cycles"].sum()  # every cycle belongs to one row
    share = f"{count:,} operations, plus one row for work outside any of them ({100 * outside / total:.1f}% of cycles)"
    _, sentence = pages["operations"].table("poplibs", "-1", ["cycles"])
    assert sentence.startswith(share)
    compare = pages["compare_operations"].render(pages["key"], "poplibs", "-1")
    assert text(find(compare, ids.COMPARE_OPERATIONS_COUNTS)).startswith(f"Active: {share}.")


def test_memory_totals(demo_pair, pages, capsys):
    from app.comparison.pages.memory import source_target_rows

    active, baseline = demo_pair
    incl = cli_json(capsys, "summary", str(active), "--json")["memory"]["total_bytes_including_gaps"]
    base_incl = cli_json(capsys, "summary", str(baseline), "--json")["memory"]["total_bytes_including_gaps"]
    diff = cli_json(capsys, "diff", str(baseline), str(active), "--json")["metrics"]
    assert diff["memory.total_bytes_including_gaps"] == {
        "baseline": base_incl,
        "active": incl,
        "delta": incl - base_incl,
        "ratio": pytest.approx(incl / base_incl),
    }
    assert format_bytes(incl) in text(find(pages["summary"].layout(), ids.SUMMARY_BODY))
    total = source_target_rows(pages["key"]).iloc[0]
    assert (total["name"], total["source_bytes"], total["target_bytes"]) == ("Total", base_incl, incl)


def test_step_cycle_deltas_add_up_to_the_run(demo_pair, pages):
    from app.comparison.pages import baselines

    active, baseline = demo_pair
    run = run_figures(open_report(active), 1)
    base = run_figures(open_report(baseline), 1)
    ex = baselines.comparison(pages["key"]).executed_steps(1)
    assert int(ex["delta_cycles"].sum()) == run["cycles"] - base["cycles"]
    # steps in one report only (none when the plans at both batch sizes have the same structure) have no
    # start delta
    one_sided = ex["status"] != "same"
    assert ex.loc[one_sided, "delta_cycles_from"].isna().all()


def test_operations_graph_colours_by_the_operations_deltas(demo_pair, pages):
    """Each node's Δ is its operations' Δ cycles from the comparison, summed over a group; the
    colour agrees with the banner: green where the active report costs less, red where more."""
    import numpy as np
    import pandas as pd

    from app import state
    from app.comparison.pages import baselines
    from app.views import operations_graph as og

    og_page = pages["operations_graph"]
    store, els, _legend, _heaviest, note, _ = og_page.update("poplibs", "delta_cycles", pages["key"], None)
    h = og.hierarchy(state.report(), "poplibs")
    c = baselines.comparison(pages["key"], layer="poplibs")
    key_of = c.operation_tables[1].set_index("debug_context_id")["key"]
    delta = c.operations.set_index("key")["delta_cycles"]
    per_op = pd.Series([float(delta.get(key_of[op], 0)) for op in h.ops["op_id"]], index=h.ops["op_id"].to_numpy())
    nodes, _ = og.frontier(h, frozenset(store["open"]))
    want = dict(zip(nodes["id"], og.node_values(h, nodes, per_op), strict=True))
    shown = [e["data"] for e in els if "source" not in e["data"] and e["data"]["kind"] != "open"]
    assert {d["id"]: d["value"] for d in shown} == pytest.approx(want) and any(want.values())
    for d in shown:
        r, g, _b = (float(x) for x in d["colour"][4:-1].split(","))
        assert (d["value"] > 0) <= (r > g) and (d["value"] < 0) <= (g > r), d  # red costs more, green less
    assert "active − baseline" in note
    # the Δ choice is greyed out without a baseline and offered with one
    assert [o["disabled"] for o in og_page.colours(None) if o["value"] == "delta_cycles"] == [True]
    assert [o["disabled"] for o in og_page.colours(pages["key"]) if o["value"] == "delta_cycles"] == [False]
    off_note = og_page.update("poplibs", "delta_cycles", None, None)[4]
    assert "needs a baseline" in off_note
    assert np.isfinite([d["value"] for d in shown]).all()


def test_html_pages_show_the_same_tile_balance(demo_pair, tmp_path, capsys):
    active, baseline = demo_pair
    a = open_report(active)
    run = cli_json(capsys, "summary", str(active), "--json")["execution"]["opening_run"]
    per_run = format_percent(run_figures(a, run)["tile_balance"])
    main(["diff", str(baseline), str(active), "--html", str(tmp_path / "diff.html")])
    main(["export", str(active), "--html", str(tmp_path / "report.html")])
    assert f">{per_run}<" in (tmp_path / "diff.html").read_text()  # the runs table
    assert f"tile balance {per_run}" in (tmp_path / "report.html").read_text()  # the trace paragraph


def test_one_run_figures_in_summary_and_diff(demo_pair, pages, capsys):
    """--run N: the execution totals are that run's, the same in `summary` and `diff`, so a CI
    threshold on execution.total_cycles judges that run (the upload or a warm-up cannot hide it)."""
    active, baseline = demo_pair
    a, b = open_report(active), open_report(baseline)
    one = cli_json(capsys, "summary", str(active), "--json", "--run", "1")["execution"]
    every = cli_json(capsys, "summary", str(active), "--json")["execution"]
    assert one["only_run"] == 1 and every["only_run"] is None
    # the Summary's cycles card leads with the opening run and gives the all-runs total exactly, as the CLI does
    body = text(find(pages["summary"].layout(), ids.SUMMARY_BODY))
    h = every["headline"]
    assert (
        f"Cycles {h['cycles']:,} run {h['run']}" in body
        and f"all {every['runs']} runs {every['total_cycles']:,}" in body
    )
    assert one["total_cycles"] == run_figures(a, 1)["cycles"] != every["total_cycles"]
    assert one["total_flops"] == run_figures(a, 1)["flops"]
    assert one["tile_balance"] == pytest.approx(run_figures(a, 1)["tile_balance"])
    diff = cli_json(capsys, "diff", str(baseline), str(active), "--json", "--run", "1")
    assert diff["run"] == 1
    cyc = diff["metrics"]["execution.total_cycles"]
    assert (cyc["baseline"], cyc["active"]) == (run_figures(b, 1)["cycles"], one["total_cycles"])
    assert "run 1 only" in cli_text(capsys, "diff", str(baseline), str(active), "--run", "1")
    # "fell by more than X%" is crossed just short of run 1's change and not just beyond it
    change = 100 * (cyc["active"] / cyc["baseline"] - 1)
    args = ["diff", str(baseline), str(active), "--run", "1", "--fail-if"]
    assert main([*args, f"execution.total_cycles<{change + 0.5:+.1f}%"]) == 1
    assert main([*args, f"execution.total_cycles<{change - 0.5:+.1f}%"]) == 0
    for argv in (["diff", str(baseline), str(active), "--run", "7"], ["summary", str(active), "--run", "7"]):
        assert main(argv) == 2
        assert "no run 7" in capsys.readouterr().err


def test_executed_step_changes_name_the_program_step_the_cli_names(demo_pair, pages, capsys):
    """The Execution Trace compare tab numbers executed steps within the run and gives, beside each,
    the program step it runs: the number `tilescope diff` and the Program Tree use."""
    active, baseline = demo_pair
    top = pages["compare_execution_trace"].top_steps(pages["key"], 1)
    assert {"baseline_executed_step", "active_program_step"} <= set(top.columns)
    # every row changed; a step on one side only is blank on the other (no -1)
    assert set(top["status"]) <= {"changed", "added", "removed"}
    removed = top[top["status"] == "removed"]
    assert removed["active_executed_step"].isna().all() and removed["active_program_step"].isna().all()
    assert (top[top["status"] != "added"]["baseline_program_step"] >= 0).all()
    programs = open_report(active).programs().set_index("step")
    for _, r in top[top["active_program_step"] >= 0].iterrows():
        prog = programs.loc[r["active_program_step"]]
        assert (prog["type"], prog["name"]) == (r["type"], r["name"])
    # a program step the CLI lists among its biggest changes appears here under the same number
    cli = cli_json(capsys, "diff", str(baseline), str(active), "--json", "--run", "1", "--top", "50")
    named = {r["active_step"] for r in cli["top"]["steps_by_cycles"] if r["active_step"] >= 0}
    assert named & set(top["active_program_step"])
