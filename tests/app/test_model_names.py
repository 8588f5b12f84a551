"""The model's names first on a report of an ONNX model (the small report: ONNX nodes MatMul_0 and
Add_1 enclose PopLibs matMul and add): Liveness and the Execution Trace name a step by its ONNX node,
the PopLibs op beside it; steps outside every node (the input stream copies, the sync) keep the
op's name alone."""

from __future__ import annotations

from app.views import execution_trace as et
from app.views import model_names


def test_programs_take_their_enclosing_onnx_node(small_report):
    # programs 6 and 7 (matmul, ex) have debug context 1 (matMul) inside MatMul_0; program 8 (add)
    # context 3 inside Add_1; 2..4 (the "input" user context) and 9 (no context) lie in no node
    names = model_names.of_programs(small_report)
    assert names.to_dict() == {
        0: "",
        1: "",
        2: "",
        3: "",
        4: "",
        5: "",
        6: "MatMul_0",
        7: "MatMul_0",
        8: "Add_1",
        9: "",
    }


def test_model_name_first_op_in_brackets():
    out = model_names.with_model_name(["MatMul_0", "", "relu_3"], ["matmul", "in", "relu_3"])
    assert out.tolist() == ["MatMul_0 (matmul)", "in", "relu_3"]
    typed = model_names.with_model_name(["MatMul_0", "", "relu_3"], ["matmul", "in", "relu_3"], ["A", "B", "C"])
    assert typed.tolist() == ["MatMul_0 (matmul, A)", "in (B)", "relu_3 (C)"]


def test_trace_steps_named_by_the_model(small_report):
    labels = et.trace_steps(small_report, 0).drop_duplicates("program_id").set_index("program_id")["label"]
    # one format with Liveness's "MatMul_0 (matmul)": the program type inside the same brackets
    assert labels[6] == "MatMul_0 (matmul, OnTileExecute)" and labels[8] == "Add_1 (add, OnTileExecute)"
    assert labels[3] == "in (StreamCopyMid)"  # outside every ONNX node: the op alone
    # Liveness's peak and selected step: tests/app/test_pages.py


def test_program_tree_names_steps_by_the_model(small_report):
    from app.views import program_tree as pt

    tree = pt.program_tree(small_report).set_index("program_id")
    p = small_report.programs().set_index("program_id")
    # the ONNX node first, the program's own name in brackets, as Liveness shows a step
    assert tree.at[6, "shown_name"] == f"MatMul_0 ({p.at[6, 'name']})"
    assert tree.at[8, "shown_name"] == f"Add_1 ({p.at[8, 'name']})"
    assert tree.at[3, "shown_name"] == p.at[3, "name"]  # outside every node: its own name alone
    assert tree.at[6, "model_name"] == "MatMul_0" and tree.at[3, "model_name"] == ""
    rows, hits = pt.search_rows(pt.program_tree(small_report), "matmul_0")  # found by the model's name
    assert hits == 2 and {6, 7} <= set(rows["program_id"])
    assert pt.program_details(small_report, 6)["model_name"] == "MatMul_0"
    assert "model_name" not in pt.program_details(small_report, 3)


def test_compare_tables_name_steps_and_operations_by_the_model(small_report, compile_only_report):
    """Compare mode names a step and an operation as the single-report pages do ("MatMul_0
    (matmul)"), on an ONNX report pair (the small report against its compile-only twin): the
    Liveness, Program Tree and Execution Trace compare tables (aligned steps), the peak sentence,
    and the Operations compare grid on the PopLibs layer; matching still uses Poplar's names."""
    from app.comparison.comparison import Comparison
    from report_format.vocabulary import Layer

    c = Comparison(compile_only_report, small_report, layer=Layer.POPLIBS)
    steps = c.steps.set_index("active_step")
    own = small_report.programs().set_index("program_id")
    assert steps.at[own.at[6, "step"], "name"] == "MatMul_0 (matmul)"  # program 6: the matmul step
    assert steps.at[own.at[8, "step"], "name"] == "Add_1 (add)"
    assert all(not k.startswith("MatMul_0") for k in steps["key"])  # the key keeps Poplar's names
    assert set(steps["status"]) == {"same"}  # paired as before
    ex = c.executed_steps(run=0)
    assert "MatMul_0 (matmul)" in set(ex["name"])
    ops = c.operations.set_index("name")
    assert {"MatMul_0 (matMul)", "Add_1 (add)"} <= set(ops.index)


def test_each_side_of_the_peak_sentence_is_named_by_its_own_report():
    """Two models' steps aligned at one position have different names; the baseline's peak is named
    by the baseline's step (BERT's 'ff2_matmul_50'), not by the active step aligned with it."""
    import pandas as pd

    from app.comparison.liveness import describe_peaks, liveness_peaks

    lv = pd.DataFrame(
        {
            "baseline_step": [0, 1],
            "active_step": [0, 1],
            "name": ["a_0 (x)", "a_1 (y)"],  # the aligned row's name: the active's
            "baseline_name": ["b_0 (x)", "b_1 (y)"],
            "active_name": ["a_0 (x)", "a_1 (y)"],
            "baseline_bytes": [5, 1],
            "active_bytes": [1, 5],
        }
    )
    assert describe_peaks(liveness_peaks(lv)) == "peak liveness moved from step 0 (b_0 (x)) to step 1 (a_1 (y))"
