"""Program tree view on the small report."""

from __future__ import annotations

from app.views import program_tree as view


def test_program_tree_rolls_up_cycles_and_code(small_report):
    t = view.program_tree(small_report).set_index("program_id")
    # matmul runs twice per run; per execution the step lasts max over IPUs: 60 (run 0), 120 (run 1)
    assert t.loc[6, "executions"] == 4 and t.loc[6, "executed_cycles"] == 2 * 60 + 2 * 120
    assert t.loc[0, "executed_cycles"] == 230 + 460  # the whole program = both runs
    assert t.loc[5, "estimated_cycles"] == 2 * (60 + 20 + 5)  # Repeat x2
    assert t.loc[1, "code_bytes"] == 8 * (6 + 6 + 6 + 12)
    assert t["depth"].tolist() == [0, 1, 2, 2, 2, 2, 3, 3, 3, 2] and t.loc[5, "children"] == 3


def test_visible_rows_follow_expansion(small_report):
    t = view.program_tree(small_report)
    assert view.visible_rows(t, set())["program_id"].tolist() == [0]
    assert view.visible_rows(t, {0, 1})["program_id"].tolist() == [0, 1, 2, 3, 4, 5, 9]
    assert view.default_expanded(t) == {0, 1}


def test_program_details(small_report):
    d = view.program_details(small_report, 7)
    assert (d["type"], d["bytes_in"], d["exchange_tiles"]) == ("DoExchange", 64, 8)
    assert d["debug_context"] == "poplibs: matMul (MatMul)"
    assert view.program_details(small_report, 6)["compute_set"] == "matmul"
    assert (d["step"], d["executions"]) == (4, 4) and "repeat_count" not in d
    # a control node has no step or executions of its own (no -1 / 0 sentinels); a Repeat gives its count
    root, repeat = view.program_details(small_report, 0), view.program_details(small_report, 5)
    assert not {"step", "executions", "repeat_count"} & set(root) and root["executed_cycles"] == 230 + 460
    assert repeat["repeat_count"] == 2 and "step" not in repeat


def test_compile_only_report_has_no_executed_cycles(compile_only_report):
    t = view.program_tree(compile_only_report)
    assert t["executed_cycles"].sum() == 0 and t["estimated_cycles"].iat[0] == 5 + 40 + 5 + 170 + 10
