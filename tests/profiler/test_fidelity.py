"""docs/fidelity.md's calibration rows: each recomputed and held to its stated tolerance.

A row the table marks KNOWN OFF is expected to fail (strict xfail): when the component it names is
fixed, the xfail turns into an unexpected pass and this test fails until the row's status is updated
in bench/calibrate.py (and the doc regenerated with ``python -m bench.calibrate``). Nothing here can
pass silently: a within-tolerance row that drifts out fails, and a stale doc table fails.
"""

from __future__ import annotations

import pytest

from bench import calibrate


def _slow(row: calibrate.Row) -> bool:
    """Rows bench/calibrate.py does not call fast, and the gemm sweep beyond N = 10000: each gemm row
    simulates the whole product (0.3-1.6 s at load 4); the unit tier keeps every M and K once."""
    return not row.fast or (row.key.startswith("poplibs_gemm_") and not row.key.endswith("x10000"))


def _param(row: calibrate.Row) -> object:
    marks = [pytest.mark.slow] if _slow(row) else []
    if row.known_off:
        marks.append(pytest.mark.xfail(strict=True, reason=f"KNOWN OFF: {row.known_off}"))
    return pytest.param(row, id=row.key, marks=marks)


@pytest.mark.parametrize("row", [_param(r) for r in calibrate.ROWS + calibrate.OP_ROWS])
def test_row_within_its_tolerance(row: calibrate.Row) -> None:
    value = float(row.compute())
    ratio = value / row.published
    assert abs(ratio - 1) <= row.tolerance + 1e-9, (
        f"{row.key}: tilescope {value:.6g} vs published {row.published:.6g} {row.unit} "
        f"(ratio {ratio:.3f}) outside ±{row.tolerance:.0%} ({row.why})"
    )


def test_rows_are_well_formed() -> None:
    keys = [r.key for r in calibrate.ROWS + calibrate.OP_ROWS]
    assert len(keys) == len(set(keys))
    for r in calibrate.ROWS + calibrate.OP_ROWS:
        assert r.published > 0 and r.tolerance >= 0 and r.source and r.setting and r.why
        assert r.provenance in ("measured", "estimated")


def test_render_marks_status_and_ratio() -> None:
    # a hand-made row: published 100, tilescope 130 -> ratio 1.300, outside a 25 % tolerance
    row = calibrate.Row(
        key="demo", source="s", setting="t", published=100.0, provenance="measured", unit="cycles",
        tolerance=0.25, why="w", compute=lambda: 130.0,
    )  # fmt: skip
    (res,) = calibrate.evaluate([row])
    assert res.ratio == pytest.approx(1.3) and not res.within
    line = next(x for x in calibrate.render_table([res]).splitlines() if "`demo`" in x)
    assert "| 1.300 |" in line and "±25%" in line and "**OUTSIDE**" in line


@pytest.mark.slow
def test_doc_table_is_up_to_date() -> None:
    table = calibrate.render_table(calibrate.evaluate())
    assert calibrate._table_in_doc(calibrate.DOC.read_text()) == table, "run: python -m bench.calibrate"


def test_doc_operation_cost_table_is_up_to_date() -> None:
    """The operation cost table (one-tile graphs: a few seconds) is rendered as the doc holds it."""
    table = calibrate.render_op_table(calibrate.evaluate(calibrate.OP_ROWS))
    doc = calibrate._table_in_doc(calibrate.DOC.read_text(), calibrate.OP_TABLE_BEGIN, calibrate.OP_TABLE_END)
    assert doc == table, "run: python -m bench.calibrate"


def test_operation_cost_table_has_a_row_per_class() -> None:
    """Issue 35's classes each have a row: unary (transcendentals included), binary, cast, reduction,
    softmax, layer and batch norm, gather, pooling, matmul, convolution variants, copy, rearrangement."""
    classes = {c.op_class.split(":")[0] for c in calibrate.op_costs.CASES}
    unary = {c.op_class.split(": ")[1] for c in calibrate.op_costs.CASES if c.op_class.startswith("elementwise unary")}
    convs = {c.key for c in calibrate.op_costs.CASES if c.op_class.startswith("convolution")}
    assert {"elementwise unary", "elementwise binary", "cast", "reduction", "softmax", "layer norm", "batch norm",
            "gather", "pooling", "matmul", "convolution", "copy", "rearrangement (transpose)"} <= classes  # fmt: skip
    assert {"erf", "tanh", "exp", "log", "sigmoid", "gelu", "relu"} <= unary
    assert {"op_conv_1x1", "op_conv_3x3", "op_conv_few_in_chans", "op_conv_depthwise", "op_conv_strided_1x1"} == convs


def test_operation_cost_rows_run_the_operation() -> None:
    """The simulated side is a compiled graph, not the cost formula: an op that lowered to a second stage
    would count it. Softmax on one tile compiles to its popnn stages (two reductions, sub, exp, inverse,
    multiply), and their cycles add up to the row's figure."""
    from profiler import Engine, Graph, Sequence

    g = Graph(calibrate.op_costs.ONE_TILE)
    prog = Sequence()
    calibrate.op_costs._softmax(g, prog)
    e = Engine(g, [prog], options={"debug.instrument": "false"})
    e.compile()
    names = [s.name for s in e.compiled.steps if s.type == "OnTileExecute"]
    assert names == ["reduce", "sub", "exp", "reduce", "inv", "mul"]
    case = calibrate.op_costs.CASES_BY_KEY["op_softmax"]
    total = sum(int(s.cost.tile_cycles.max()) for s in e.compiled.steps if s.type == "OnTileExecute")
    assert case.simulated() == pytest.approx(total / case.count)


@pytest.mark.parametrize("batch", [32, 4])
def test_end_to_end_record_is_current(batch: int) -> None:
    """The end-to-end rows are recorded by ``python -m bench.end_to_end``: the record must still
    match the model. Re-planning every recorded matmul/conv shape takes a second; any change to the
    planner or the costs it uses changes a plan's estimate, and then the record is stale."""
    from bench import end_to_end

    assert batch in end_to_end.RESNET_BATCHES
    rec = end_to_end.recorded(batch)
    assert rec["batch"] == batch
    assert rec["partials"] == end_to_end.RESNET_PARTIALS and {p["partials"] for p in rec["plans"]} == {"float16"}
    assert rec["plans"], "the record holds no matmul plans"
    assert rec["plans_cycles"] == sum(p["cycles"] for p in rec["plans"])
    assert end_to_end.replan(rec["plans"], rec["target"]) == rec["plans_cycles"], (
        f"bench/end_to_end.json is stale: run {end_to_end.COMMAND}"
    )
    assert rec["img_per_s"] == pytest.approx(rec["batch"] * rec["clock_hz"] / rec["cycles"])


@pytest.mark.slow  # ~10 s quiet, 21 s at load 4
def test_end_to_end_record_matches_a_run_now() -> None:
    """Exchange and memory changes leave the plans alone: the smaller recorded batch is simulated
    again (~10 s) and its cycles and memory must be the record's exactly (the model is deterministic)."""
    from bench import end_to_end

    batch = min(end_to_end.RESNET_BATCHES)
    rec, now = end_to_end.recorded(batch), end_to_end.resnet50(batch)
    stale = f"bench/end_to_end.json is stale: run {end_to_end.COMMAND}"
    assert (now["cycles"], now["total_bytes"], now["categories"]) == (
        rec["cycles"], rec["total_bytes"], rec["categories"]), stale  # fmt: skip
