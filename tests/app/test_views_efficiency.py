"""Operation efficiency (app.views.efficiency) and the insight naming an operation far below its class,
on the hand-made small report (tests/app/small_report.py) with the matmul's plan type set by hand.

Run 1 (the opening run, the one that computes): matMul (MatMul_0) runs its OnTileExecute twice, 2 x
(max over IPUs of tiles 0..5's cycles, 120 in run 1) plus its exchange, 2 x 40: 320 cycles, 840 FLOPs
(2 FLOPs per run-0 cycle of each vertex, 420 a step): 2.625 FLOP/cycle. add: 20 cycles, 128 FLOPs,
6.4 FLOP/cycle. Outside work (the stream copies and the Sync): 120 cycles. All: 460 cycles.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from app.views import insights as view
from app.views.efficiency import operation_efficiency
from report_format.fabricate import write_report
from report_format.reader import Report, open_report
from tests.app.small_report import small_spec


def _report(path: Path, attributes: str, add_type: str = "Add") -> Report:
    spec = small_spec()
    assert spec.debug_contexts is not None
    dc = dataclasses.replace(
        spec.debug_contexts,
        attributes=["{}", attributes, "{}", "{}", "{}"],
        op_type=["MatMul", "MatMul", "Add", add_type, "Stream"],
    )
    return open_report(write_report(path, dataclasses.replace(spec, debug_contexts=dc)))


def test_an_amp_operation_is_measured_against_the_targets_peak(tmp_path: Path) -> None:
    eff = operation_efficiency(_report(tmp_path / "r", '{"plan": {"dtype": "float16"}}')).set_index("name")
    mm = eff.loc["matMul"]
    # fp16 peak 64 FLOP/tile/cycle x 4 tiles an IPU x the 2 IPUs it ran on
    assert (mm["reference"], mm["reference_kind"], mm["model_name"]) == (512.0, "fp16 peak", "MatMul_0")
    assert mm["efficiency"] == pytest.approx(2.625 / 512)
    assert mm["share"] == pytest.approx(320 / 460)
    # add is alone in its class: it is its class's best
    assert (eff.loc["add", "reference_kind"], eff.loc["add", "efficiency"]) == ("best Add", 1.0)
    fp32 = operation_efficiency(_report(tmp_path / "f", '{"dtype": "float32"}')).set_index("name")
    assert fp32.loc["matMul", "reference"] == 16.0 * 4 * 2


def test_without_a_peak_an_operation_is_measured_against_its_classs_best(tmp_path: Path) -> None:
    # float8: the target table carries no fp8 peak; add made a MatMul too, so the class's best is add's 6.4
    eff = operation_efficiency(_report(tmp_path / "r", '{"dtype": "float8"}', add_type="MatMul")).set_index("name")
    assert eff.loc["matMul", "reference_kind"] == "best MatMul"
    assert eff.loc["matMul", "efficiency"] == pytest.approx(2.625 / 6.4)


def test_the_insight_names_the_slow_operation_with_its_numbers(tmp_path: Path) -> None:
    said = [h for h in view.hints(_report(tmp_path / "r", '{"dtype": "float16"}')) if "far below" in h]
    assert said == [
        "Operation far below its class: MatMul_0 (matMul, MatMul) takes 69.6% of run 1's cycles (320) at "
        "2.6 FLOP/cycle on 6 tiles, 0.5% of the IPUModel's fp16 peak of 512 FLOP/cycle."
    ]


def test_an_operation_near_its_reference_or_with_a_small_share_is_not_named(small_report: Report) -> None:
    # no plan type: matMul is its class's best; add is its own class's best
    assert not [h for h in view.hints(small_report) if "far below" in h]
