"""Operations view on the small report: onnx MatMul_0 encloses poplibs matMul (matmul compute set,
exchange); onnx Add_1 encloses poplibs add."""

from __future__ import annotations

import numpy as np

from app.views import operations as view


def test_op_of_context_follows_parents(small_report):
    assert view.op_of_context(small_report, "onnx").tolist() == [0, 0, 2, 2, -1]
    assert view.op_of_context(small_report, "poplibs").tolist() == [-1, 1, -1, 3, -1]


def test_onnx_operations_all_runs(small_report):
    ops = view.operations(small_report, "onnx").set_index("name")
    mm = ops.loc["MatMul_0"]
    # matmul (60, 120) + exchange (20, 40), twice per run, runs 0 and 1
    assert mm["cycles"] == 2 * (60 + 20) + 2 * (120 + 40)
    assert mm["flops"] == 4 * 2 * (10 + 20 + 30 + 40 + 50 + 60)  # 4 executions of the matmul compute set
    assert mm["memory_bytes"] == 32 + 64 and mm["variables"] == 2  # w and y
    assert mm["tiles"] == 6 and mm["steps"] == 2
    assert mm["code_bytes"] == 8 * 12 + 6 * 24  # exchange code + vertex state
    assert mm["flops_per_cycle"] == round(mm["flops"] / mm["cycles"], 3)
    assert ops.index.tolist() == ["MatMul_0", view.OUTSIDE, "Add_1"]  # most cycles first
    # work outside any operation is one row, so the operations' cycles add up to the runs' cycles
    assert ops["cycles"].sum() == small_report.runs()["cycles"].sum()
    assert view.operation_count(ops.reset_index()) == 2


def test_one_run_and_estimates_without_execution(small_report, compile_only_report):
    ops = view.operations(small_report, "poplibs", 0).set_index("name")
    assert ops.loc["matMul", "cycles"] == 2 * (60 + 20) and ops.loc["add", "cycles"] == 2 * 5
    est = view.operations(compile_only_report, "poplibs").set_index("name")
    assert est.loc["matMul", "cycles"] == 60 + 20 and est.attrs["cycles_source"].startswith("compile-time")


def test_operation_drill_down_and_graph(small_report):
    assert view.operation_programs(small_report, "onnx", 0)["program_id"].tolist() == [6, 7]
    assert view.operation_variables(small_report, "onnx", 0)["name"].tolist() == ["y", "w"]
    tc = view.operation_tile_cycles(small_report, "poplibs", 1)
    assert tc["cycles"].tolist() == [10, 20, 30, 40, 50, 60]
    nodes, edges = view.operations_graph(small_report, "onnx")
    # this report records no data flow (program_variables is empty): edges follow execution order
    assert edges[["source", "target"]].values.tolist() == [[0, 2]] and len(nodes) == 2
    assert edges["kind"].tolist() == ["order"] and nodes.set_index("op_id")["x"].to_dict() == {0: 0, 2: 1}


def test_graph_edges_are_data_flow(tmp_path):
    """Synthetic data flow: op i's compute step writes variable i and reads variable i - 1, so every
    edge joins an op to the next one, carrying one variable, and depth grows along the chain."""
    from report_format.reader import open_report
    from report_format.synthetic import synthetic_report

    report = open_report(synthetic_report(tmp_path / "r", program_steps=30, executed_steps=30, variables=50))
    nodes, edges = view.operations_graph(report, "poplibs")
    assert len(edges) == len(nodes) - 1 > 3
    assert (edges["kind"] == "data").all() and (edges["variables"] == 1).all()
    assert (edges["target"] - edges["source"] == 1).all()
    depth = nodes.set_index("op_id")["x"]
    assert (depth.reindex(edges["target"]).to_numpy() == depth.reindex(edges["source"]).to_numpy() + 1).all()


def test_graph_layers_put_a_source_just_before_its_first_reader():
    """Longest-path layers for a chain 0 -> 1 -> 2 -> 3 -> 4; op 5 (nothing flows into it, like a
    weight's Fill) is read by ops 3 and 4 and op 6 by op 1: each moves to the layer before its first
    reader (2 and 0), not layer 0 with an edge across the graph. Op 7, unlinked, stays at 0."""
    import pandas as pd

    from app.views.operations import _layers

    ops = np.arange(8)
    edges = pd.DataFrame({"source": [0, 1, 2, 3, 5, 5, 6], "target": [1, 2, 3, 4, 3, 4, 1]})
    first_step = pd.Series(np.arange(8), index=ops)  # op i first runs at step i
    first_step[5] = first_step[6] = -1  # the sources run first, as a program's initialisation does
    depth, y = _layers(ops, edges, first_step)
    assert depth.tolist() == [0, 1, 2, 3, 4, 2, 0, 0]
    # within a layer, ops are stacked in first-execution order, a source moved there below them
    assert y[6] < y[0] < y[7] and y[2] < y[5]


def test_graph_counts_the_run_that_computes(small_report):
    """The graph's cycles are those of the run Summary and Operations lead with (runs.opening_run),
    not all runs': a one-off weight upload would otherwise outweigh the layers that compute."""
    from app.views.runs import opening_run

    run = opening_run(small_report)
    nodes, _ = view.operations_graph(small_report, "onnx")
    of_run = view.operations(small_report, "onnx", run).set_index("op_id")["cycles"]
    all_runs = view.operations(small_report, "onnx").set_index("op_id")["cycles"]
    got = nodes.set_index("op_id")["cycles"]
    assert got.to_dict() == of_run.reindex(got.index).to_dict()
    assert (all_runs.reindex(got.index) > got).any()  # the other run's cycles are left out
