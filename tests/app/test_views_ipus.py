"""Per-IPU views against the engine's own figures and the per-tile tables."""

from __future__ import annotations

import numpy as np
import pytest

from app.views import ipus
from app.views.summary import summary
from profiler import ipu_model
from profiler.frontends.onnx import Session, examples, import_model, random_inputs
from report_format.reader import open_report
from report_format.synthetic import synthetic_report


@pytest.fixture(scope="module")
def pipelined(tmp_path_factory):  # type: ignore[no-untyped-def]
    path = tmp_path_factory.mktemp("ipus") / "report"
    model = import_model(examples.gpt2_block(seq=8, hidden=32, heads=2, batch=1),
                         ipu_model(tiles_per_ipu=8, bytes_per_tile=1 << 20, num_ipus=3))  # fmt: skip
    s = Session(model, {"autoReport.all": "true", "autoReport.directory": str(path)}, micro_batches=3)
    s.run(random_inputs(model, rows=3))  # run 0 uploads the weights (no compute), run 1 infers
    s.engine.write_report()
    return open_report(path), s.engine


def test_ipu_execution_matches_the_engines_compute_cycles(pipelined):  # type: ignore[no-untyped-def]
    report, engine = pipelined
    ex = ipus.ipu_execution(report)
    assert ex["compute_cycles"].tolist() == engine.compute_cycles.tolist()
    # over the run that computes (run 1), as `tilescope run` gives it: not diluted by the weight upload
    np.testing.assert_allclose(ex["utilisation"], engine.compute_cycles / engine.last_run_cycles)
    assert int(report.df("runs")["cycles"].iat[1]) == engine.last_run_cycles
    assert (ex["global_exchange_bytes_out"] > 0).sum() >= 2  # stages 0 and 1 send to the next


def test_ipu_memory_sums_each_ipus_tiles(pipelined):  # type: ignore[no-untyped-def]
    report, _ = pipelined
    tm = report.tile_memory()
    mem = ipus.ipu_memory(report)
    per_ipu = tm.groupby(tm["tile"] // 8)["total_bytes_including_gaps"].sum()
    assert mem["bytes_including_gaps"].tolist() == per_ipu.tolist()
    assert mem["fullest_tile"].tolist() == [
        int(d.loc[d["total_bytes_including_gaps"].idxmax(), "tile"]) for _, d in tm.groupby(tm["tile"] // 8)
    ]


def test_multi_ipu_summary(pipelined):  # type: ignore[no-untyped-def]
    report, _ = pipelined
    mi = summary(report)["multi_ipu"]
    assert mi["pipeline_stages"] == 3 and mi["micro_batches"] == 3
    assert (mi["num_replicas"], mi["ipus_per_replica"], mi["total_ipus"]) == (1, 3, 3)
    assert mi["global_exchange_bytes"] == int(ipus.ipu_execution(report)["global_exchange_bytes_out"].sum())


def test_an_older_report_has_one_replica_and_no_pipeline(tmp_path):  # type: ignore[no-untyped-def]
    from pathlib import Path

    v2 = Path(__file__).resolve().parents[2] / "sample_reports" / "golden" / "v2" / "synthetic"
    mi = summary(open_report(v2))["multi_ipu"]
    assert mi["num_replicas"] == 1 and mi["pipeline_stages"] == 0 and mi["profiled_replica"] == 0
    fresh = open_report(synthetic_report(tmp_path / "s", num_ipus=2, tiles_per_ipu=16, seed=0))
    choices = ipus.ipu_choices(fresh)
    assert [c["value"] for c in choices] == [ipus.ALL_IPUS, 0, 1]


def test_the_headline_is_the_run_that_computes_and_the_weight_upload_is_apart(pipelined):  # type: ignore[no-untyped-def]
    """Summary, `tilescope summary` and per-IPU utilisation lead with the inference run, as `tilescope
    run` measures it; the weight upload (run 0: stream copies only) is its own figure."""
    from app.render.text import headline_line

    report, engine = pipelined
    h = summary(report)["execution"]["headline"]
    runs = report.df("runs")
    assert (h["run"], h["cycles"]) == (1, engine.last_run_cycles)
    assert h["data_only_runs"] == [0] and h["data_only_cycles"] == int(runs["cycles"].iat[0])
    assert f"{engine.last_run_cycles:,} cycles" in headline_line(h) and "run 0, data only" in headline_line(h)


def test_a_pipeline_that_mostly_waits_is_explained(pipelined):  # type: ignore[no-untyped-def]
    """The pipeline's sentence: the IPUs' mean compute share (the engine's own cycles), the fill and
    drain bound (S - 1) / (M + S - 1) = 2 / 5 for 3 stages over 3 micro-batches, and the stage whose busy
    cycles a micro-batch set the pace."""
    from app.views import insights

    report, engine = pipelined
    stages = report.pipeline_stages()
    busy = stages["busy_cycles"].to_numpy(dtype=float)
    mean_util = float(np.mean(engine.compute_cycles / engine.last_run_cycles))
    assert mean_util < insights.LOW_PIPELINE_UTILISATION  # a 3-IPU pipeline of 3 micro-batches mostly waits
    said = [h for h in insights.execution_hints(report) if h.startswith("The pipeline's")]
    assert len(said) == 1
    assert said[0].startswith(f"The pipeline's 3 IPUs compute {100 * mean_util:.1f}% of run 1 on average.")
    assert "Filling and draining 3 stages over 3 micro-batches explains at most 40.0% of idle time" in said[0]
    slow = busy.max() > insights.SLOW_STAGE_RATIO * np.median(busy)
    k = int(np.argmax(busy))
    assert (
        f"Stage {k} (IPU {int(stages['ipu'].iat[k])}) sets the pace: busy {int(busy[k]):,} cycles" in said[0]
    ) == slow


def test_a_report_without_a_pipeline_has_no_pipeline_sentence(tmp_path):  # type: ignore[no-untyped-def]
    from app.views import insights

    fresh = open_report(synthetic_report(tmp_path / "s", num_ipus=2, tiles_per_ipu=16, seed=0))
    assert insights.pipeline_insights(fresh, 1) == []
