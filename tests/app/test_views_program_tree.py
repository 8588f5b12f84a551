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


def test_search_shows_matches_under_their_ancestors(small_report):
    t = view.program_tree(small_report)
    # any case; the name of step 3 (program 6), and the ONNX node MatMul_0 its exchange (program 7)
    # sits in too: the tree names steps by the model first
    rows, matches = view.search_rows(t, "MATMUL")
    assert matches == 2 and rows["program_id"].tolist() == [0, 1, 5, 6, 7]
    rows, matches = view.search_rows(t, "streamcopy")  # types too: Begin / Mid / End of "in"
    assert matches == 3 and rows["program_id"].tolist() == [0, 1, 2, 3, 4]
    rows, matches = view.search_rows(t, "no such node")
    assert matches == 0 and rows.empty


def test_estimated_cycles_shown_only_where_they_differ(small_report, compile_only_report):
    t = view.program_tree(small_report)
    # run 1 costs twice run 0 here, so executed (15 for "in" begin) is not estimate x executions (2 x 5)
    assert not view.estimates_repeat_executed(t, True)
    same = t.assign(executed_cycles=t["estimated_cycles"] * t["executions"])
    assert view.estimates_repeat_executed(same, True)
    assert not view.estimates_repeat_executed(view.program_tree(compile_only_report), False)


def test_the_weight_upload_starts_folded(small_report, demo_reports):
    # the small report's program mixes stream copies with compute: not a host transfer
    t = view.program_tree(small_report)
    assert not t["host_transfer"].any() and t.loc[t["program_id"] == 0, "stream_steps"].item() == 3
    # FashionMNIST (a real simulator run) uploads its weights in a program of its own before training
    from report_format.reader import open_report

    tree = view.program_tree(open_report(demo_reports("fashion_mnist") / "fashion_mnist"))
    upload = tree[(tree["depth"] == 0) & (tree["name"] == "WeightsFromHost")]
    assert len(upload) == 1 and bool(upload["host_transfer"].item())
    under = tree[tree["step"] >= 0]
    assert upload["stream_steps"].item() > 0
    assert not (set(upload["program_id"]) & view.default_expanded(tree))  # folded
    training = tree[(tree["depth"] == 0) & (tree["name"] == "train step")]
    assert set(training["program_id"]) <= view.default_expanded(tree)  # the rest opens as before
    assert len(under) > upload["stream_steps"].item()
