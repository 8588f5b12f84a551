"""Pairs of real reports from the simulated IPU that differ in one known way: batch size,
availableMemoryProportion, one inserted op, another target. Deltas that follow from the change
itself are exact (an input of twice the batch is twice the bytes; an elementwise op on a
[batch, n] tensor is batch * n more FLOPs); the rest are asserted by sign.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from compare_builders import assert_signs

from app.comparison.comparison import Comparison
from profiler import Sequence, get_target, ipu_model, ops
from profiler.poplar.graph import Graph
from profiler.workloads import mlp
from profiler.workloads.common import Workload
from report_format.reader import open_report

SMALL = {"tiles_per_ipu": 16, "bytes_per_tile": 262144}


def _run(workload: Workload, out: Path, name: str, steps: int = 1) -> Path:
    workload.name = name
    workload.run(steps, options={"autoReport.all": "true", "autoReport.directory": str(out)}).close()
    return out / name


def dense_net(out: Path, name: str, *, batch: int = 8, amp: float = 0.6, extra_relu: bool = False, target=None) -> Path:  # type: ignore[no-untyped-def]
    """x[batch, 64] @ w[64, 48] -> relu (-> relu again if ``extra_relu``) -> @ w2[48, 16]."""
    g = Graph(target or ipu_model(**SMALL))
    x = ops.add_mapped(g, "float32", (batch, 64), "x")
    w1 = ops.parameter(g, "float32", (64, 48), "w1")
    w2 = ops.parameter(g, "float32", (48, 16), "w2")
    step = Sequence(name="step")
    with g.debug_context("fc1", op_type="Dense", layer="user"):
        h = ops.matmul(g, x, w1, step, available_memory_proportion=amp)
    with g.debug_context("act", op_type="Relu", layer="user"):
        h = ops.relu(g, h, step)
    if extra_relu:
        with g.debug_context("act2", op_type="Relu", layer="user"):
            h = ops.relu(g, h, step)
    with g.debug_context("fc2", op_type="Dense", layer="user"):
        ops.matmul(g, h, w2, step, available_memory_proportion=amp)
    rng = np.random.default_rng(0)
    initial = {
        "w1": rng.standard_normal((64, 48)).astype(np.float32),
        "w2": rng.standard_normal((48, 16)).astype(np.float32),
    }
    return _run(Workload(name, g, [Sequence(name="init"), step], initial, {}), out, name)


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sim")


def test_batch_4_vs_8(out: Path) -> None:
    b = _run(mlp.build(batch=4, inputs=64, hidden=32, tiles=16), out, "mlp_b4", steps=2)
    a = _run(mlp.build(batch=8, inputs=64, hidden=32, tiles=16), out, "mlp_b8", steps=2)
    c = Comparison(open_report(b), open_report(a), layer="user")
    assert c.parity == []
    assert_signs(
        c,
        {
            "execution.total_cycles": +1,
            "execution.total_flops": +1,
            "memory.total_bytes_including_gaps": +1,
            "liveness.peak_not_always_live_bytes": +1,
            "target.num_tiles": 0,
            "execution.runs": 0,
        },
    )
    v = c.variables.set_index("name")
    # the input batch x[batch, 64] float32: exactly twice the bytes
    assert (v.loc["x", "baseline_bytes"], v.loc["x", "active_bytes"]) == (4 * 64 * 4, 8 * 64 * 4)
    assert (v.loc["w1", "status"], v.loc["w1", "delta_bytes"]) == ("same", 0)  # weights do not depend on batch
    # variables repeated in every op ("matmul out") are matched by name and context: none is lost but
    # an operand copy the batch-8 plan does not need (a rearrangement into the plan's layout depends
    # on whether the operand's mapping already matches the plan)
    removed = c.variables.loc[c.variables["status"].eq("removed"), "name"]
    assert removed.str.contains("(rearranged)", regex=False).all()
    ops_ = c.operations.set_index("name")
    assert ops_.loc["fc1", "status"] == "changed" and ops_.loc["fc1", "delta_cycles"] > 0


def test_available_memory_proportion_06_vs_03(out: Path) -> None:
    """A 256x64 @ 64x48 matmul on 4 tiles of 128 KiB: at 0.3 the planner must split the input
    channels, adding partials and a reduction, so fc1 gets slower; relu does not change. fc2 may:
    fc1's result is mapped where its plan computes (or reduces) it, and fc2 first rearranges its
    input into its own plan's layout, which costs what that mapping makes it cost."""
    small = {"tiles_per_ipu": 4, "bytes_per_tile": 131072}
    b = dense_net(out, "amp06", batch=256, amp=0.6, target=ipu_model(**small))
    a = dense_net(out, "amp03", batch=256, amp=0.3, target=ipu_model(**small))
    c = Comparison(open_report(b), open_report(a), layer="user")
    assert c.parity == []  # a per-op planner option, not an engine option
    ops_ = c.operations.set_index("name")
    assert ops_.loc["fc1", "status"] == "changed"
    assert_signs(c, {"execution.total_cycles": +1, "graph.program_steps": +1})
    assert ops_.loc["fc1", "delta_cycles"] > 0
    assert (ops_.loc["act", "status"], ops_.loc["act", "delta_cycles"]) == ("same", 0)
    # the reduction's steps are inserted inside fc1; relu's steps stay aligned and unchanged
    st = c.steps
    assert st["status"].eq("added").sum() >= 1
    relu = st[st["name"].eq("relu")]
    assert len(relu) >= 1 and relu["status"].eq("same").all() and relu["delta_cycles"].eq(0).all()


def test_one_inserted_op(out: Path) -> None:
    b = dense_net(out, "plain")
    a = dense_net(out, "extra", extra_relu=True)
    c = Comparison(open_report(b), open_report(a), layer="user")
    st = c.steps
    added = st[st["status"] == "added"]
    assert len(added) >= 1 and (st["status"] != "removed").all()
    # the added steps are one contiguous block, after the first relu's steps and before fc2's
    pos = np.flatnonzero((st["status"] == "added").to_numpy())
    assert (np.diff(pos) == 1).all()
    ops_ = c.operations.set_index("name")
    assert ops_.loc["act2", "status"] == "added"
    for name in ("fc1", "act", "fc2"):
        assert ops_.loc[name, "status"] == "same", name
    # the inserted relu costs exactly its own executed cycles; nothing else moved
    assert (st.loc[st["status"] == "same", "delta_cycles"] == 0).all()
    assert (
        c.metrics["execution.total_cycles"]["delta"]
        == added["active_cycles"].sum()
        == ops_.loc["act2", "delta_cycles"]
        > 0
    )
    # relu on [8, 48]: one FLOP per element
    assert c.metrics["execution.total_flops"]["delta"] == ops_.loc["act2", "delta_flops"] == 8 * 48
    assert c.metrics["graph.program_steps"]["delta"] == len(added)


def test_different_target(out: Path) -> None:
    b = dense_net(out, "gc200", target=get_target("GC200"))
    a = dense_net(out, "bow", target=get_target("Bow"))
    c = Comparison(open_report(b), open_report(a))
    assert c.parity[0] == "different target: GC200 vs Bow"
    assert any(p.startswith("target clock_hz: ") for p in c.parity)
    # the same program: same steps, same FLOPs; Bow has the same tiles, so the same memory
    assert c.step_counts()["added"] == c.step_counts()["removed"] == 0
    assert c.metrics["execution.total_flops"]["delta"] == 0
    assert c.metrics["memory.total_bytes_including_gaps"]["delta"] == 0
