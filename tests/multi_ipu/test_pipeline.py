"""Pipelining: stages on IPUs working on different micro-batches at once."""

import numpy as np
import pytest

from profiler import Engine, Graph, Repeat, Sequence, ipu_model, ops
from profiler.frontends.onnx import Session, examples, import_model, random_inputs
from profiler.multi_ipu.pipeline import Pipeline, schedule_length
from report_format.reader import open_report

C = 164  # a Neg over 4 floats on each of 4 tiles (the OnTileExecute step below, pinned here)


def _chain(stages: int) -> tuple[Graph, Sequence]:
    """x on IPU 0, then one Neg per IPU, each reading the previous IPU's result (16 floats)."""
    g = Graph(ipu_model(tiles_per_ipu=4, num_ipus=stages, ipu_link_bytes_per_cycle=8.0))
    body = Sequence()
    with g.virtual_graph(0):
        x = g.add_variable("float", [16], "x")
        g.map_linearly(x)
        g.create_host_write("x", x)
    h = x
    for s in range(stages):
        with g.virtual_graph(s):
            h = ops.unary(g, "neg", h, body)
    g.create_host_read("y", h)
    return g, body


def _run(g: Graph, prog, options: dict | None = None) -> Engine:  # type: ignore[no-untyped-def]
    e = Engine(g, [prog], options)
    e.load()
    e.write_tensor("x", np.arange(16, dtype=np.float32))
    e.run(0)
    return e


def test_balanced_stages_take_stages_plus_micro_batches_minus_one_stage_times():
    assert schedule_length([100] * 4, 6) == (4 + 6 - 1) * 100
    assert schedule_length([100] * 1, 6) == 600
    assert schedule_length([50, 100], 3) == 50 + 3 * 100  # the slowest stage sets the pace


def test_a_4_stage_pipeline_has_the_hand_worked_schedule():
    g, body = _chain(4)
    M = 6
    e = _run(g, Pipeline(body, M))
    steps = e.compiled.steps
    assert [s.type for s in steps] == ["OnTileExecute"] + ["Sync", "GlobalExchange", "OnTileExecute"] * 3
    assert int(steps[0].cost.tile_cycles.max()) == C
    # between stages: external sync ceil(15 ns x 1.33 GHz x (1 + 4 // 4) x 2) = 80, then 64 bytes over
    # the links, ceil(64 / 8) + 64 = 72: X = 152 cycles, spent by both IPUs of the exchange (the
    # receiver no earlier than its sender reaches it)
    assert int(steps[1].cost.tile_cycles.max()) == 80 and int(steps[2].cost.tile_cycles.max()) == 72
    X = 80 + 72
    # micro-batch 0 passes through: C + X + C + X + C + X + C = 4 x 164 + 3 x 152 = 1112 (fill);
    # the middle IPUs then each spend X (in) + C + X (out) = 468 per micro-batch, which sets the pace
    assert e.last_run_cycles == (4 * C + 3 * X) + (M - 1) * (C + 2 * X) == 3452
    # without pipelining every exchange holds all IPUs: each micro-batch takes the whole 1112 after
    # the previous one's last exchange, minus the C that IPU 0 overlaps: 1112 + 5 x 948 = 5852
    flat = _run(g, Repeat(M, body))
    assert flat.last_run_cycles == 1112 + (M - 1) * (1112 - C) == 5852
    np.testing.assert_array_equal(e.read_tensor("y"), flat.read_tensor("y"))
    np.testing.assert_array_equal(e.read_tensor("y"), np.arange(16, dtype=np.float32))  # four negations


def test_the_report_shows_stages_overlapping_across_ipus(tmp_path):
    g, body = _chain(4)
    e = _run(g, Pipeline(body, 3), {"autoReport.all": "true", "autoReport.directory": str(tmp_path / "p")})
    r = open_report(e.write_report())
    stages = r.pipeline_stages()
    assert stages["stage"].tolist() == [0, 1, 2, 3] and stages["ipu"].tolist() == [0, 1, 2, 3]
    assert stages["micro_batches"].tolist() == [3] * 4 and stages["compute_cycles"].tolist() == [C] * 4
    assert stages["busy_cycles"].tolist() == [C + 152, C + 2 * 152, C + 2 * 152, C + 152]
    steps = r.df("execution_steps")
    compute = steps[steps["cycles_to"] - steps["cycles_from"] == C]
    spans = {ipu: list(zip(d["cycles_from"], d["cycles_to"], strict=True)) for ipu, d in compute.groupby("ipu")}
    # IPU 0 computes micro-batch 1 (from 316 = C + X) while IPU 1 computes micro-batch 0 (316..480)
    assert spans[0][1] == (316, 480) and spans[1][0] == (316, 480)


def test_pipeline_rejects_no_micro_batches():
    with pytest.raises(ValueError, match="micro-batches must be an integer >= 1"):
        Pipeline(Sequence(), 0)


def test_a_pipelined_onnx_transformer_equals_one_ipu():
    model = examples.gpt2_block(seq=8, hidden=32, heads=2, batch=1)
    single = Session(import_model(model, ipu_model(tiles_per_ipu=8, bytes_per_tile=1 << 20)))
    piped = Session(import_model(model, ipu_model(tiles_per_ipu=8, bytes_per_tile=1 << 20, num_ipus=4)),
                    micro_batches=5)  # fmt: skip
    assert sorted(set(piped.model.info["node_ipus"])) == [0, 1, 2, 3]
    x = random_inputs(piped.model, rows=5)
    got = piped.run(x)["output"]
    want = np.concatenate([single.run({"input": part})["output"] for part in np.split(x["input"], 5)])
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    # 5 micro-batches pipelined beat 5 runs of the sharded model one after another
    sharded = Session(import_model(model, ipu_model(tiles_per_ipu=8, bytes_per_tile=1 << 20, num_ipus=4)))
    sharded.run({"input": x["input"][:1]})
    assert piped.cycles[0] < 5 * sharded.cycles[0]
