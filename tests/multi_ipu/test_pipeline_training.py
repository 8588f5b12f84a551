"""Pipelined training: PopART's 1F1B schedule, stashes, gradient accumulation, one weight update."""

import numpy as np
import pytest

from profiler.multi_ipu.pipeline_training import TrainingPipeline, cycle_work, cycles, stash_depth
from profiler.workloads import pipelined_mlp
from report_format.reader import open_report

SIZES = {"batch": 4, "inputs": 12, "width": 16, "classes": 5, "tiles": 4}


def test_stash_depth_is_twice_the_ipus_to_the_end_plus_one_and_none_on_the_last():
    # PopART pipeline.cpp: "a stash size of 2*(IPUs to end) + 1, except for the last IPU"
    assert [stash_depth(s, 4) for s in range(4)] == [7, 5, 3, 0]


def test_the_schedule_is_fill_1f1b_main_and_drain():
    # S = 2 stages, M = 3 micro-batches: P = 3 pipeline stages (fwd 0, fwd+loss+bwd 1, bwd 0),
    # M + P - 1 = 5 cycles; pipeline stage p works in cycles p..p+M-1
    assert cycles(2, 3) == 5
    work = [cycle_work(c, 2, 3) for c in range(5)]
    assert work == [
        ([0], []),  # fill: stage 0 forward of micro-batch 0
        ([0, 1], [1]),  # stage 1 forward + loss + backward of micro-batch 0
        ([0, 1], [0, 1]),  # main: every pipeline stage busy (stage 0: forward 2, backward 0)
        ([1], [0, 1]),  # drain
        ([], [0]),
    ]


def _numpy_step(w: pipelined_mlp.Workload) -> tuple[dict[str, np.ndarray], float]:
    """An independent reference: one SGD step of the dense stack over the whole batch."""
    (x, y), = w.info["batches"]  # fmt: skip
    n = len(w.info["dims"]) - 1
    ws = {k: v.astype(np.float64) for k, v in w.initial.items()}
    acts = [x.astype(np.float64)]
    for s in range(n):
        z = acts[-1] @ ws[f"w{s}"] + ws[f"b{s}"]
        acts.append(np.maximum(z, 0) if s < n - 1 else z)
    z = acts[-1]
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    loss = float(-np.log(p[np.arange(len(y)), y]).mean())
    dz = p.copy()
    dz[np.arange(len(y)), y] -= 1
    dz /= len(y)  # mean over the whole batch
    out = {}
    for s in reversed(range(n)):
        out[f"w{s}"] = ws[f"w{s}"] - w.info["lr"] * acts[s].T @ dz
        out[f"b{s}"] = ws[f"b{s}"] - w.info["lr"] * dz.sum(axis=0)
        dz = (dz @ ws[f"w{s}"].T) * (acts[s] > 0)
    return out, loss


@pytest.mark.parametrize(("stages", "micro_batches", "layers_per_stage"), [(4, 6, 1), (3, 2, 1), (2, 5, 2)])
def test_pipelined_training_equals_one_unpipelined_step_over_the_whole_batch(stages, micro_batches, layers_per_stage):
    piped = pipelined_mlp.build(stages, micro_batches, **SIZES, layers_per_stage=layers_per_stage)
    flat = pipelined_mlp.build(1, micro_batches, **SIZES, pipelined=False, layers_per_stage=stages * layers_per_stage)
    e, f = piped.run(1), flat.run(1)
    assert e.graph.target.num_ipus == stages and f.graph.target.num_ipus == 1
    want, loss = _numpy_step(piped)
    for s in range(stages * layers_per_stage):
        np.testing.assert_allclose(e.read_tensor(f"w{s}"), f.read_tensor(f"w{s}"), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(e.read_tensor(f"w{s}"), want[f"w{s}"], rtol=1e-4, atol=1e-6)
    # one loss per micro-batch; their mean is the whole batch's (equal micro-batches)
    assert len(piped.losses) == micro_batches and len(flat.losses) == 1
    assert np.mean(piped.losses) == pytest.approx(loss, rel=1e-5)
    assert flat.losses[0] == pytest.approx(loss, rel=1e-5)


def test_a_second_step_continues_from_the_updated_weights():
    piped = pipelined_mlp.build(3, 4, **SIZES)
    flat = pipelined_mlp.build(1, 4, **SIZES, pipelined=False, layers_per_stage=3)
    e, f = piped.run(2), flat.run(2)
    assert len(piped.info["batches"]) == 2
    np.testing.assert_allclose(e.read_tensor("w0"), f.read_tensor("w0"), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.mean(piped.losses[4:]), flat.losses[1], rtol=1e-5)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    path = tmp_path_factory.mktemp("train") / "r"
    w = pipelined_mlp.build(3, 4, **SIZES)
    e = w.run(1, {"autoReport.all": "true", "autoReport.directory": str(path)})
    return e, open_report(e.write_report())


def test_the_stashes_are_memory_of_their_stage_ipu_live_through_the_pipeline(report):
    e, r = report
    tpi = e.graph.target.tiles_per_ipu
    variables = r.df("variables").set_index("name")
    # stage 0 keeps 2 x (3 - 1) + 1 = 5 micro-batches of its input (4 x 12 floats) and its output
    # (4 x 16 floats); stage 1 keeps 3 of 4 x 16 floats each; the last stage keeps none
    assert variables.at["stage 0 stash of x", "bytes"] == 5 * 4 * 12 * 4 == 960
    assert variables.at["stage 1 stash of stage 1 input", "bytes"] == 3 * 4 * 16 * 4
    assert variables.at["stage 1 stash of relu", "bytes"] == 3 * 4 * 16 * 4
    assert not any(n.startswith("stage 2 stash") for n in variables.index)
    places = r.df("variable_placements")
    for name, ipu in (("stage 0 stash of x", 0), ("stage 1 stash of stage 1 input", 1), ("stage 1 stash of relu", 1)):
        on = places[places["variable_id"] == variables.at[name, "variable_id"]]
        assert set(on["tile"] // tpi) == {ipu} and on["bytes"].sum() == variables.at[name, "bytes"]
    # not always live: live from the first stash of a run to its last restore (the drain)
    assert not variables.loc[["stage 0 stash of x", "stage 1 stash of relu"], "always_live"].any()
    live = r.df("liveness_intervals")
    span = live[live["variable_id"] == variables.at["stage 0 stash of x", "variable_id"]]
    assert int(span["last_step"].max() - span["first_step"].min()) > 10


def test_the_report_shows_forward_and_backward_overlapping_across_ipus(report):
    e, r = report
    stages = r.pipeline_stages()
    assert stages["stage"].tolist() == [0, 1, 2] and stages["ipu"].tolist() == [0, 1, 2]
    assert stages["micro_batches"].tolist() == [4] * 3
    assert (stages["compute_cycles"] > 0).all()
    steps = r.df("execution_steps")
    programs = r.df("programs").set_index("program_id")
    steps["type"] = programs["type"].reindex(steps["program_id"]).to_numpy()
    run = steps[(steps["run"] == steps["run"].max()) & (steps["type"] == "OnTileExecute")]
    spans = {ipu: d[["cycles_from", "cycles_to"]].to_numpy() for ipu, d in run.groupby("ipu")}

    def overlap(a: np.ndarray, b: np.ndarray) -> bool:
        return bool(((a[:, None, 0] < b[None, :, 1]) & (b[None, :, 0] < a[:, None, 1])).any())

    assert overlap(spans[0], spans[1]) and overlap(spans[1], spans[2])
    # overlapping beats running the same schedule with every IPU held together
    assert e.last_run_cycles < sum(int(d[:, 1].max() - d[:, 0].min()) for d in spans.values())


def test_training_pipeline_rejects_one_stage():
    w = pipelined_mlp.build(2, 2, **SIZES)
    with pytest.raises(ValueError, match="2 or more stages"):
        TrainingPipeline(w.graph, [], 2, w.programs[0])
