"""Pairs of hand-made reports that differ in known ways; every expected delta is worked by hand
from the specs in this file (see compare_builders.py for how a spec becomes a report).

The base model (mlp_steps): matmul_1 (1000 + 50 + 10 cycles), add_1 (200 + 50 + 10), relu_1
(150 + 50 + 10), matmul_2 (800 + 50 + 10): 2390 cycles per run; FLOPs 64000 + 2000 + 32000 = 98000.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from compare_builders import Spec, Step, Var, build_report, mlp_steps

from app.comparison.comparison import Comparison
from app.comparison.variables import step_variable_comparison
from report_format.reader import open_report

BASE_CYCLES = 2390
BASE_FLOPS = 98000


def base_vars(act2: int = 2048) -> list[Var]:
    return [
        Var("w1", 4096, "matmul_1", tile=1),
        Var("w2", 2048, "matmul_2", tile=2),
        Var("act1", 4096, "matmul_1", first=0, last=5, tile=0),
        Var("act2", act2, "relu_1", first=6, last=11, tile=0),
    ]


def compare(tmp_path: Path, baseline: Spec, active: Spec) -> Comparison:
    b = build_report(tmp_path / "baseline", baseline)
    a = build_report(tmp_path / "active", active)
    return Comparison(open_report(b), open_report(a))


@pytest.fixture
def inserted(tmp_path: Path) -> Comparison:
    """Active inserts one op, cast_1 (300 cycles, 500 FLOPs, a 1024-byte output live only during
    it), before relu_1: active steps 6.. are baseline steps 6.. shifted by one."""
    cast = Step("OnTileExecute", "cast_1", "cast_1", cycles=300, flops=500, tile_balance=0.25)
    act_vars = base_vars()[:3] + [
        Var("cast_out", 1024, "cast_1", first=6, last=6, tile=3),
        Var("act2", 2048, "relu_1", first=7, last=12, tile=0),
    ]
    return compare(tmp_path, Spec(mlp_steps(), base_vars()), Spec(mlp_steps(extra=[(6, cast)]), act_vars))


def test_inserted_op_is_aligned_as_one_added_step(inserted: Comparison) -> None:
    st = inserted.steps
    assert inserted.step_counts() == {"same": 12, "added": 1, "removed": 0}
    added = st[st["status"] == "added"]
    assert added[["baseline_step", "active_step", "name"]].values.tolist() == [
        [-1, 6, "model (cast_1)"]
    ]  # as Liveness names it
    same = st[st["status"] == "same"]
    # baseline step k pairs with active step k before the insertion and k + 1 after it
    expected = [k if k < 6 else k + 1 for k in range(12)]
    assert same["active_step"].tolist() == expected
    assert same["baseline_step"].tolist() == list(range(12))
    # only the inserted step changed its executed cycles and FLOPs
    assert int(added["delta_cycles"].iat[0]) == 300 and int(added["delta_flops"].iat[0]) == 500
    assert (same["delta_cycles"] == 0).all() and (same["delta_flops"] == 0).all()
    assert (same["delta_tile_balance"] == 0).all()


def test_inserted_op_headline_metrics(inserted: Comparison) -> None:
    m = inserted.metrics
    assert m["execution.total_cycles"] == {
        "baseline": BASE_CYCLES,
        "active": BASE_CYCLES + 300,
        "delta": 300,
        "ratio": pytest.approx((BASE_CYCLES + 300) / BASE_CYCLES),
    }
    assert m["execution.total_flops"]["delta"] == 500
    assert m["graph.program_steps"]["delta"] == 1
    # cast_out sits on tile 3, which held only code before: +1024 bytes there and in total
    assert m["memory.total_bytes_including_gaps"]["delta"] == 1024
    assert m["memory.category.variable"]["delta"] == 1024
    tiles = inserted.tile_memory.set_index("tile")
    assert tiles["delta_total_bytes_including_gaps"].to_dict() == {0: 0, 1: 0, 2: 0, 3: 1024}


def test_inserted_op_liveness_delta_at_aligned_steps(inserted: Comparison) -> None:
    lv = inserted.liveness
    # baseline: act1 (4096) on steps 0-5, act2 (2048) on 6-11; active adds 1024 at the new step
    assert lv["baseline_bytes"].tolist() == [4096] * 6 + [0] + [2048] * 6
    assert lv["active_bytes"].tolist() == [4096] * 6 + [1024] + [2048] * 6
    assert lv["delta_bytes"].tolist() == [0] * 6 + [1024] + [0] * 6
    peaks = inserted.liveness_peaks
    assert peaks["moved"] is False and peaks["baseline"]["step"] == 0 and peaks["delta_bytes"] == 0


def test_inserted_op_operations_match_by_path_despite_shifted_ids(inserted: Comparison) -> None:
    ops = inserted.operations.set_index("name")
    # cast_1 takes debug-context id 3 in active, so relu_1 and matmul_2 moved ids: still "same"
    b_ids = inserted.operation_tables[0].set_index("name")["debug_context_id"]
    a_ids = inserted.operation_tables[1].set_index("name")["debug_context_id"]
    assert b_ids["model (relu_1)"] != a_ids["model (relu_1)"]
    assert ops.loc["model (cast_1)", "status"] == "added"
    assert ops.loc["model (cast_1)", "delta_cycles"] == 300 and ops.loc["model (cast_1)", "delta_memory_bytes"] == 1024
    for op in ("matmul_1", "add_1", "relu_1", "matmul_2"):  # named as Liveness names them: 'model (relu_1)'
        name = f"model ({op})"
        assert ops.loc[name, "status"] == "same", name
    assert (
        ops.loc["model (relu_1)", "baseline_cycles"] == 210
        and ops.loc["model (matmul_1)", "active_memory_bytes"] == 8192
    )
    assert inserted.operations["key"].iat[0] == "onnx:model(Model) > poplibs:cast_1(Cast)"


def test_removed_op(tmp_path: Path) -> None:
    """Active drops add_1 (steps 3-5, 260 cycles, 2000 FLOPs)."""
    c = compare(tmp_path, Spec(mlp_steps(), base_vars()), Spec(mlp_steps(drop=[3, 4, 5]), []))
    st = c.steps
    removed = st[st["status"] == "removed"]
    assert removed["baseline_step"].tolist() == [3, 4, 5] and removed["name"].tolist()[0] == "model (add_1)"
    assert c.metrics["execution.total_cycles"]["delta"] == -260
    assert c.metrics["execution.total_flops"]["delta"] == -2000
    ops = c.operations.set_index("name")
    assert ops.loc["model (add_1)", "status"] == "removed" and ops.loc["model (add_1)", "delta_cycles"] == -260
    assert c.parity == []


def test_parity_lists_target_and_option_differences(tmp_path: Path) -> None:
    b = Spec(
        mlp_steps(),
        options={
            "autoReport.all": "true",
            "autoReport.directory": "./a",
            "autoReport.executionProfileProgramRunCount": "2",
            "debug.allowOutOfMemory": "true",
        },
        target="GC200",
    )
    a = Spec(
        mlp_steps(),
        options={
            "autoReport.all": "true",
            "autoReport.directory": "./b",  # where the report goes: not a setup difference
            "autoReport.executionProfileProgramRunCount": "5",
            "profiler.includeFlopEstimates": "true",
        },
        target="Bow",
        bytes_per_tile=131072,
        clock_hz=1.85e9,
        runs=2,
    )
    c = compare(tmp_path, b, a)
    assert c.parity == [
        "different target: GC200 vs Bow",
        "target bytes_per_tile: 65536 vs 131072",
        "target clock_hz: 1330000000 vs 1850000000",
        "engine option autoReport.executionProfileProgramRunCount: 2 vs 5",
        "engine option debug.allowOutOfMemory: true in baseline, not set in active",
        "engine option profiler.includeFlopEstimates: not set in baseline, true in active",
        "captured runs: 1 vs 2 (runs are compared by index)",
    ]
    runs = c.runs.set_index("run")
    assert runs.loc[0, "status"] == "both" and runs.loc[0, "delta_cycles"] == 0
    assert runs.loc[1, "status"] == "active" and np.isnan(runs.loc[1, "baseline_cycles"])
    assert c.metrics["execution.total_cycles"]["delta"] == BASE_CYCLES  # two runs instead of one


def test_memory_tiles_categories_and_variables(tmp_path: Path) -> None:
    """Active doubles w1 (tile 1), drops w2 (tile 2), adds bias (512 B, tile 3) and has 6 tiles
    instead of 4 (tiles 4 and 5 hold only their 1000 bytes of code)."""
    b = Spec(mlp_steps(), base_vars())
    a_vars = [
        Var("w1", 8192, "matmul_1", tile=1),
        Var("bias", 512, "add_1", tile=3),
        *base_vars()[2:],
    ]
    c = compare(tmp_path, b, Spec(mlp_steps(), a_vars, tiles=6))
    tiles = c.tile_memory.set_index("tile")
    assert tiles["delta_total_bytes_including_gaps"].to_dict() == {0: 0, 1: 4096, 2: -2048, 3: 512, 4: 1000, 5: 1000}
    assert tiles["present"].to_dict() == {0: "both", 1: "both", 2: "both", 3: "both", 4: "active", 5: "active"}
    cats = c.memory_categories
    assert cats.loc["variable", "delta"] == 4096 - 2048 + 512
    assert cats.loc["vertexCode", "delta"] == 2000
    assert c.metrics["memory.total_bytes_including_gaps"]["delta"] == 4096 - 2048 + 512 + 2000
    assert any(p == "target tiles_per_ipu: 4 vs 6" for p in c.parity)
    v = c.variables.set_index("name")
    assert v.loc["w1"].to_dict() | {} == {
        "status": "changed",
        "baseline_bytes": 4096,
        "active_bytes": 8192,
        "delta_bytes": 4096,
        "diff_percent": 50.0,  # PopVision: difference over the larger size
        "always_live": True,
    }
    assert (v.loc["w2", "status"], v.loc["w2", "delta_bytes"], v.loc["w2", "diff_percent"]) == (
        "removed",
        -2048,
        -100.0,
    )
    assert (v.loc["bias", "status"], v.loc["bias", "diff_percent"]) == ("added", 100.0)
    assert v.loc["act1", "status"] == "same"
    assert c.variables["name"].iat[0] == "w1"  # biggest change first
    st = c.source_target
    total = st.iloc[0]
    # the Total is the reports' memory including gaps (what the Summary shows), not a sum of rows
    # (not-always-live variables share memory)
    assert total["item"] == "Total" and total["diff"] == c.memory_totals.loc["total_including_gaps", "delta"]
    assert st.set_index("item").loc["vertexCode", "diff"] == 2000


def test_peak_liveness_moves(tmp_path: Path) -> None:
    """act2 grows from 2048 to 8192 bytes: the peak moves from step 0 (act1, 4096) to step 6."""
    c = compare(tmp_path, Spec(mlp_steps(), base_vars()), Spec(mlp_steps(), base_vars(act2=8192)))
    p = c.liveness_peaks
    assert p["moved"] is True
    assert (p["baseline"]["step"], p["baseline"]["bytes"]) == (0, 4096)
    assert (p["active"]["step"], p["active"]["bytes"], p["active"]["name"]) == (6, 8192, "model (relu_1)")
    assert p["delta_bytes"] == 4096
    assert c.peak_sentence() == ("peak liveness moved from step 0 (model (matmul_1)) to step 6 (model (relu_1))")
    assert c.metrics["liveness.peak_step"]["delta"] == 6


def test_layer_attribution_rolls_operations_up(tmp_path: Path) -> None:
    c = compare(tmp_path, Spec(mlp_steps(), base_vars()), Spec(mlp_steps(drop=[3, 4, 5]), base_vars()))
    onnx = Comparison(c.baseline, c.active, layer="onnx").operations
    assert onnx["name"].tolist() == ["model"]
    assert int(onnx["delta_cycles"].iat[0]) == -260 and int(onnx["baseline_cycles"].iat[0]) == BASE_CYCLES


def test_tile_balance_change(tmp_path: Path) -> None:
    """Every step's tile balance halves: the cycle-weighted balance (Sync steps left out, as
    app.views.runs defines it) halves too."""
    slow = [Step(s.type, s.name, s.op, s.cycles, s.flops, s.tile_balance / 2) for s in mlp_steps()]
    c = compare(tmp_path, Spec(mlp_steps()), Spec(slow))
    m = c.metrics["execution.tile_balance"]
    cyc = np.array([s.cycles for s in mlp_steps() if s.type != "Sync"], dtype=float)
    bal = np.array([s.tile_balance for s in mlp_steps() if s.type != "Sync"])
    expected = float((cyc * bal).sum() / cyc.sum())
    assert m["baseline"] == pytest.approx(expected) and m["active"] == pytest.approx(expected / 2)
    assert (c.steps["delta_tile_balance"] <= 0).all()


def test_executed_steps_align_in_execution_order(inserted: Comparison) -> None:
    ex = inserted.executed_steps(run=0)
    assert ex["status"].tolist().count("added") == 1
    row = ex[ex["status"] == "added"].iloc[0]
    assert (row["active_step"], row["name"], row["active_cycles"]) == (6, "model (cast_1)", 300)
    same = ex[ex["status"] == "same"]
    # steps after the insertion start 300 cycles later; before it, at the same cycle
    drift = same["delta_cycles_from"].to_numpy()
    assert drift.tolist() == [0] * 6 + [300] * 6
    assert (same["delta_cycles"] == 0).all()
    # the baseline's step 6 started after 1060 + 260 cycles
    assert same["baseline_cycles_from"].tolist()[6] == 1320


def test_no_execution_profile_on_one_side(tmp_path: Path) -> None:
    """Without an execution profile the operations fall back to compile-time estimates (here equal
    to the executed cycles), the parity check says so, and executed totals are 0 on that side."""
    c = compare(tmp_path, Spec(mlp_steps(), base_vars()), Spec(mlp_steps(), base_vars(), execution=False))
    assert "execution profile captured in baseline only: its figures are compared against nothing" in c.parity
    assert "captured runs: 1 vs 0 (runs are compared by index)" in c.parity
    ops = c.operations
    assert ops.attrs["cycles_source"]["active"].startswith("compile-time estimate")
    assert (ops["delta_cycles"] == 0).all()  # estimates equal the simulated cycles in this spec
    assert c.metrics["execution.total_cycles"]["active"] == 0
    assert (c.steps["active_executions"] == 0).all() and (c.steps["baseline_executions"] == 1).all()
    assert c.runs["status"].tolist() == ["baseline"]


def test_selected_step_pair_variables(inserted: Comparison) -> None:
    """Baseline step 6 (relu_1) pairs with active step 7; at active step 6 only cast_out is live."""
    t = step_variable_comparison(inserted.baseline, inserted.active, 6, 7)
    assert t[["name", "status", "baseline_bytes", "active_bytes"]].values.tolist() == [["act2", "same", 2048, 2048]]
    t = step_variable_comparison(inserted.baseline, inserted.active, -1, 6)  # the added step: nothing in baseline
    assert t[["name", "status", "delta_bytes", "diff_percent"]].values.tolist() == [["cast_out", "added", 1024, 100.0]]
    al = step_variable_comparison(inserted.baseline, inserted.active, 0, 0, always_live=True)
    assert sorted(al["name"]) == ["w1", "w2"] and (al["status"] == "same").all()
