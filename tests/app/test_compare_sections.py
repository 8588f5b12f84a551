"""Compare mode's sections and shell, called as plain functions on a hand-made pair whose every
delta is worked by hand: active inserts one op, cast_1 (one 300-cycle, 500-FLOP step before
relu_1, with a 1024-byte output live only at that step) and drops the always-live variable
old_w (512 bytes); see tests/compare/compare_builders.py for how a spec becomes a report.
Base model (mlp_steps): 12 steps, 2390 cycles in its one run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import dash
import pytest

from app import grid, ids, state
from app.comparison.pages import baselines, shell
from app.comparison.pages import execution_trace as cmp_trace
from app.comparison.pages import liveness as cmp_liveness
from app.comparison.pages import memory as cmp_memory
from app.comparison.pages import operations as cmp_operations
from app.comparison.pages import summary as cmp_summary
from app.comparison.pages.components import short_header
from tests.app.dash_tree import find, text
from tests.compare.compare_builders import Spec, Step, Var, build_report, mlp_steps

BASE_CYCLES = 2390


def _vars(*, old_w: bool, cast: bool) -> list[Var]:
    out = [
        Var("w1", 4096, "matmul_1", tile=1),
        Var("w2", 2048, "matmul_2", tile=2),
        Var("act1", 4096, "matmul_1", first=0, last=5, tile=0),
    ]
    if old_w:
        out.append(Var("old_w", 512, "matmul_2", tile=2))
    if cast:
        out += [Var("cast_out", 1024, "cast_1", first=6, last=6, tile=3), Var("act2", 2048, "relu_1", 7, 12, 0)]
    else:
        out.append(Var("act2", 2048, "relu_1", first=6, last=11, tile=0))
    return out


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """baseline and active side by side in one directory, with a third report and a non-report."""
    root = tmp_path_factory.mktemp("pair")
    cast = Step("OnTileExecute", "cast_1", "cast_1", cycles=300, flops=500, tile_balance=0.25)
    b = build_report(root / "baseline", Spec(mlp_steps(), _vars(old_w=True, cast=False)))
    a = build_report(root / "active", Spec(mlp_steps(extra=[(6, cast)]), _vars(old_w=False, cast=True)))
    build_report(root / "runs" / "other", Spec(mlp_steps(), _vars(old_w=False, cast=False)))
    (root / "notes").mkdir()
    (root / "notes" / "readme.txt").write_text("not a report")
    (root / "web").mkdir()  # a web app's manifest.json: not a report, whatever the file is called
    (root / "web" / "manifest.json").write_text('{"name": "app", "start_url": "/"}')
    state.configure(a, None)  # started without --compare: the picker finds the baseline beside it
    return {"root": str(root), "active": str(Path(a).absolute()), "baseline": str(Path(b).absolute())}


def rows(kind: str, args: dict[str, Any]) -> Any:
    return grid.frame(kind, json.dumps(args, sort_keys=True))


def test_candidates_are_reports_beside_the_given_one(pair):
    found = baselines.candidates()
    other = str(Path(pair["root"], "runs", "other"))
    assert found == {pair["baseline"]: "baseline", other: "runs/other"}  # not itself, not a non-report
    assert baselines.default_key() is None  # started without --compare: compare mode off


def test_only_listed_baselines_open(pair, tmp_path):
    outside = build_report(tmp_path / "outside", Spec(mlp_steps(), _vars(old_w=False, cast=False)))
    with pytest.raises(ValueError, match="not a baseline this viewer was started with"):
        baselines.comparison(str(outside))
    # a path sent by the browser is refused and the picker reset; the off button clears the store
    assert shell.next_baseline(False, str(outside)) == (dash.no_update, shell.OFF)
    assert shell.next_baseline(False, pair["baseline"]) == (pair["baseline"], dash.no_update)
    assert shell.next_baseline(True, pair["baseline"]) == (None, shell.OFF)
    assert shell.next_baseline(False, "") == (None, dash.no_update)


def test_the_url_names_a_listed_baseline_or_off(pair, tmp_path):
    """?compare=NAME opens a baseline by the name the picker lists; a path or an unlisted name
    changes nothing; no compare (a link between pages) changes nothing."""
    other = str(Path(pair["root"], "runs", "other"))
    assert shell.from_url("?compare=baseline") == (pair["baseline"], pair["baseline"])
    assert shell.from_url("?compare=runs%2Fother&x=1") == (other, other)
    assert shell.from_url("?compare=off") == (None, shell.OFF)
    for search in ("", None, "?x=1", f"?compare={pair['baseline']}", "?compare=..%2Fsecret"):
        assert shell.from_url(search) == (dash.no_update, dash.no_update), search


def test_banner_names_both_reports(pair):
    body, colour = shell.banner_body(pair["baseline"])
    assert colour == "info"
    assert "Comparing active (active) against baseline (baseline)" in " ".join(text(body).split())
    assert shell.banner_body(None) == (None, "info")
    assert shell.banner_body("/etc")[1] == "danger"


def test_every_section_is_empty_when_compare_is_off(pair):
    for section in (cmp_summary.render(None), cmp_memory.render(None), cmp_liveness.render(None)[0]):
        assert text(section) == ""
    assert text(cmp_operations.render(None, "poplibs", "-1")) == ""
    assert text(cmp_trace.render(None, "0")) == ""


def test_summary_headline_deltas(pair):
    out = cmp_summary.render(pair["baseline"])
    assert text(find(out, ids.COMPARE_SUMMARY_PARITY)) == "Same target and engine options."
    table = find(out, ids.COMPARE_SUMMARY_TABLE)
    body = {text(r.children[0]): [text(c) for c in r.children[1:]] for r in table.children[1].children}
    ratio = (BASE_CYCLES + 300) / BASE_CYCLES
    assert body["Total cycles (all runs)"] == ["2,390", "2,690", "+300", f"×{ratio:.4g} (+{(ratio - 1) * 100:.2f}%)"]
    # the rows lead with the run that computes: the same figure Summary's headline and `tilescope summary` give
    from app.views.summary import summary
    from report_format.reader import open_report

    head = [summary(open_report(pair[side]))["execution"]["headline"]["cycles"] for side in ("baseline", "active")]
    assert body["Cycles of the run that computes"][:3] == [f"{head[0]:,}", f"{head[1]:,}", f"+{head[1] - head[0]:,}"]
    assert head[1] - head[0] == 300  # the cast step is in the run that computes
    assert list(body).index("Cycles of the run that computes") < list(body).index("Total cycles (all runs)")
    assert body["Program steps"][2] == "+1"
    # cast_out (+1024 B on tile 3) and old_w (-512 B): +512 B of variables in all
    assert body["Total memory (excl. gaps)"][2] == "+512 B"
    assert "12 in both, 1 only in active, 0 only in baseline" in text(out)


def test_memory_source_target_lists_added_and_removed(pair):
    out = cmp_memory.render(pair["baseline"])
    assert text(find(out, ids.COMPARE_MEMORY_COUNTS)).startswith("1 added, 1 removed")
    st = cmp_memory.source_target_rows(pair["baseline"]).set_index("name")
    assert st.loc["cast_out", ["status", "source_bytes", "target_bytes", "diff_bytes"]].tolist() == [
        "added",
        0,
        1024,
        1024,
    ]
    assert st.loc["old_w", ["status", "diff_bytes"]].tolist() == ["removed", -512]
    assert st.loc["Total", "diff_bytes"] == 512


def test_liveness_selects_an_aligned_step_and_compares_its_variables(pair):
    key = pair["baseline"]
    body, position = cmp_liveness.render(key)
    # the active peak: cast_out (1024) at its step 6 sits under the 4096 of act1 at steps 0..5,
    # so the peak is the first aligned step, where act1 is live in both
    assert position == 0 and "stayed at step 0" in text(body)
    grid_, step_text, fig = cmp_liveness.step_body(6, "live", key)
    assert step_text.startswith("Aligned step 6 (only in active): OnTileExecute model (cast_1) — no baseline step")
    live = rows(cmp_liveness.STEP_VARIABLES_KIND, json.loads(grid_.id["args"]))
    assert live[["name", "status", "baseline_bytes", "active_bytes"]].values.tolist() == [
        ["cast_out", "added", 0, 1024]
    ]
    # the selected step is marked: only the figure's shapes are sent (a patch), not the figure again
    assert isinstance(fig, dash.Patch) and cmp_liveness.marker(6)[0]["x0"] == 6
    assert [s.x0 for s in cmp_liveness.figure(key, 6).layout.shapes] == [6]
    # aligned step 7: baseline step 6 and active step 7, act2 live in both
    grid_, step_text, _ = cmp_liveness.step_body(7, "live", key)
    assert "baseline step 6" in step_text and "active step 7" in step_text
    live = rows(cmp_liveness.STEP_VARIABLES_KIND, json.loads(grid_.id["args"]))
    assert live[["name", "status", "delta_bytes"]].values.tolist() == [["act2", "same", 0]]
    grid_, _, _ = cmp_liveness.step_body(7, "always", key)
    always = rows(cmp_liveness.STEP_VARIABLES_KIND, json.loads(grid_.id["args"])).set_index("name")
    assert always.loc["old_w", "status"] == "removed" and always.loc["w1", "status"] == "same"


def test_liveness_step_from_click_or_typed(pair):
    n = len(baselines.comparison(pair["baseline"]).liveness)
    assert n == 13  # 12 aligned steps + the added one
    assert cmp_liveness.step_of_event(False, {"points": [{"x": 6.2, "curveNumber": 0}]}, None, n) == 6
    assert cmp_liveness.step_of_event(True, None, 12, n) == 12
    assert cmp_liveness.step_of_event(True, None, 13, n) is None  # past the last step
    assert cmp_liveness.step_of_event(False, {"points": []}, 4, n) is None


def test_operations_deltas_grid(pair):
    out = cmp_operations.render(pair["baseline"], "poplibs", "-1")
    assert text(find(out, ids.COMPARE_OPERATIONS_COUNTS)).startswith(
        "Active: 5 operations. Against the baseline: 1 added, 0 removed"
    )
    ops = cmp_operations.operation_rows(pair["baseline"], "poplibs", None)
    first = ops.iloc[0]  # sorted by the size of the cycle change
    # named as the Operations page names it, the model's name first; matched by its path
    assert first["name"] == "model (cast_1)" and first["key"].endswith("cast_1(Cast)") and first["status"] == "added"
    assert (first["baseline_cycles"], first["active_cycles"], first["delta_cycles"], first["delta_flops"]) == (
        0,
        300,
        300,
        500,
    )
    assert (ops.iloc[1:]["delta_cycles"] == 0).all()


def test_execution_trace_step_deltas_of_the_run(pair):
    out = cmp_trace.render(pair["baseline"], "0")
    assert text(find(out, ids.COMPARE_TRACE_TEXT)) == (
        "Run 0: 13 executed steps in active, 12 in baseline (12 in both, 1 only in active, 0 only in "
        "baseline); the run's cycles changed by +300 (2,390 → 2,690)."
    )
    steps = find(out, ids.COMPARE_TRACE_STEPS).rowData
    assert [(s["status"], s["name"], s["delta_cycles"]) for s in steps] == [("added", "model (cast_1)", 300)]
    runs = find(out, ids.COMPARE_TRACE_RUNS).rowData
    assert [(r["run"], r["baseline_cycles"], r["active_cycles"], r["delta_cycles"]) for r in runs] == [
        (0, BASE_CYCLES, BASE_CYCLES + 300, 300)
    ]
    assert "no run 3" in text(cmp_trace.render(pair["baseline"], "3"))


def test_short_headers():
    assert short_header("delta_memory_bytes") == "Δ memory"
    assert short_header("baseline_cycles") == "base cycles"
    assert short_header("diff_percent") == "diff %"


def test_memory_variables_of_selected_tiles(pair):
    key = pair["baseline"]
    tile2 = cmp_memory.tile_variable_rows(key, [2]).set_index("name")
    assert tile2[["status", "baseline_bytes", "active_bytes"]].to_dict("index") == {
        "w2": {"status": "same", "baseline_bytes": 2048, "active_bytes": 2048},
        "old_w": {"status": "removed", "baseline_bytes": 512, "active_bytes": 0},
    }
    both = cmp_memory.tile_variable_rows(key, [2, 3])
    assert set(both["name"]) == {"w2", "old_w", "cast_out"}
    block = cmp_memory.follow_selection([3], key)
    assert "selected tiles 3" in text(block)
    assert text(find(block, ids.COMPARE_MEMORY_COUNTS)).startswith("1 added, 0 removed, 0 changed, 0 the same")
    assert "all tiles" in text(cmp_memory.follow_selection(None, key))


def test_operation_details_card(pair):
    key = pair["baseline"]
    ops = cmp_operations.operation_rows(key, "poplibs", None)
    cast = ops.loc[ops["status"] == "added", "key"].iat[0]
    card = cmp_operations.operation_details(key, "poplibs", None, cast)
    table = card.children[2]
    body = {text(r.children[0]): [text(c) for c in r.children[1:]] for r in table.children[1].children}
    assert body["cycles"] == ["0", "300", "+300", "-"]  # no ratio against nothing
    assert body["FLOPs"] == ["0 FLOPs", "500 FLOPs", "+500 FLOPs", "-"]  # FLOPs in their unit, as on the cards
    assert "(Cast, added)" in text(card.children[0])
    assert cmp_operations.operation_details(key, "poplibs", None, "no such op") is None


def test_program_tree_and_insights_sections(pair):
    from app.comparison.pages import insights as cmp_insights
    from app.comparison.pages import program_tree as cmp_tree

    key = pair["baseline"]
    counts = text(find(cmp_tree.render(key), ids.COMPARE_PROGRAM_TREE_COUNTS))
    assert counts.startswith("12 program steps in both, 1 only in active, 0 only in baseline")
    added = cmp_tree.step_rows(key).set_index("status").loc["added"]
    assert (added["name"], added["active_cycles"], added["delta_cycles"]) == ("model (cast_1)", 300, 300)
    hints = find(cmp_insights.render(key), ids.COMPARE_INSIGHTS_HINTS)
    assert "Baseline" in text(hints) and "Active" in text(hints)
    assert text(cmp_tree.render(None)) == "" and text(cmp_insights.render(None)) == ""


def test_a_fall_is_written_with_the_grids_minus_sign(pair):
    """Reversed, the run's cycles fall by 300: the sentence writes −300 with U+2212, as the step
    grid's d3-format writes its delta column beside it (never the hyphen-minus '-300')."""
    state.configure(pair["baseline"], None)  # the baseline as the active report, so the change is a fall
    try:
        out = cmp_trace.render(pair["active"], "0")
        sentence = text(find(out, ids.COMPARE_TRACE_TEXT))
        assert sentence.endswith("the run's cycles changed by \u2212300 (2,690 → 2,390).") and "-300" not in sentence
    finally:
        state.configure(pair["active"], None)


def test_the_warm_up_fills_what_each_compare_tab_reads_first(pair, monkeypatch):
    """``serve --compare`` warms each compare tab's first section, so the session's first tab does not
    compute the baseline's views (its Insights tab took 2.8 s cold on the real-size BERT report)."""
    from app import server

    server.create_app(pair["active"], pair["baseline"])  # the pages the steps read register with an app
    try:
        import app.views.insights as insights_view

        seen: list = []
        real = insights_view.hints
        monkeypatch.setattr(insights_view, "hints", lambda report: seen.append(report) or real(report))
        c = baselines.comparison(pair["baseline"])
        for step in server._compare_steps(pair["baseline"], state.report()):
            step()
        assert seen == [c.baseline]  # the Insights tab's baseline hints
        cached = vars(c)
        for name in ("liveness_peaks", "metrics", "memory_totals", "tile_memory", "liveness", "runs"):
            assert name in cached, name
    finally:
        state.configure(pair["active"], None)
