"""`tilescope sweep`'s parts without Dask: the grid, one point computed in this process, its record
and reuse, the sweep table's writer and reader, the Pareto front."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from app.views.summary import summary
from app.views.sweep import best_within, pareto_front
from report_format import schema
from report_format.errors import ReportError
from report_format.reader import open_report
from report_format.sweep import open_sweep, write_sweep
from tilescope.cli import main
from tilescope.errors import CommandError
from tilescope.sweep import grid
from tilescope.sweep.point import empty_row, finished, model_digest, run_point


def _spec(model: Path, sweep: Path, pt: grid.Point) -> dict:
    return {"sweep": str(sweep), "model": str(model), "model_sha256": model_digest(model), "index": pt.index,
            "name": pt.name, "argv": pt.argv, "options": pt.options, "script": False}  # fmt: skip


def test_the_grid_is_every_combination_parsed_by_run() -> None:
    pts = grid.points(
        {"batch": "1,8", "dtype": "float32,float16", "ipus": "1,2", "target": None}, ["--runs", "2"], True
    )
    assert len(pts) == 8
    assert [p.values for p in pts[:2]] == [{"batch": "1", "dtype": "float32", "ipus": "1"},
                                          {"batch": "1", "dtype": "float32", "ipus": "2"}]  # fmt: skip
    # --pipeline only where there are stages to pipeline; run's parser filled micro-batches (2 x ipus)
    assert "--pipeline" not in pts[0].argv and pts[1].argv[-1] == "--pipeline"
    assert pts[1].options["micro_batches"] is None and pts[1].options["pipeline"] is True
    assert pts[0].options["runs"] == 2 and pts[0].options["batch"] == 1 and pts[0].options["target"] == "GC200"
    assert pts[0].label == "b1-float32-ipus1"
    assert len({p.name for p in pts}) == 8 and len({p.key() for p in pts}) == 8


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"batch": "1,,8"}, "--batch '1,,8': an empty value"),
        ({"batch": "8,8"}, "--batch '8,8': 8 is given twice"),
        ({"dtype": "float32,float64"}, "argument --dtype: invalid choice: 'float64'"),
        ({"available_memory_proportion": "0.5,1.5"}, "must be in (0, 1], got 1.5 (at the point --available-memory-proportion 1.5)"),
        ({"batch": ",".join(map(str, range(1, 40))), "ipus": ",".join(map(str, range(1, 40)))}, "the grid has 1,521 points"),
    ],
)  # fmt: skip
def test_a_bad_grid_is_one_line(values: dict, message: str) -> None:
    with pytest.raises(CommandError) as err:
        grid.points(values, [], False)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_bad_input_exits_2_before_anything_is_written(mlp_file: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "s"
    assert main(["sweep", str(mlp_file), "--target", "GC200,Nope", "--out", str(out)]) == 2
    assert "unknown target 'Nope'" in capsys.readouterr().err and not out.exists()
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "mine.txt").write_text("keep")
    assert main(["sweep", str(mlp_file), "--out", str(tmp_path / "notes")]) == 2
    assert "not a sweep" in capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "notes").iterdir()) == ["mine.txt"]


def test_a_point_reads_its_figures_with_the_summary_view(mlp_file: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    pt = grid.points({"batch": "4"}, [], False)[0]
    row = run_point(_spec(mlp_file, tmp_path / "s", pt))
    assert row["status"] == "ok" and row["fits"] and row["reason"] == ""
    report = open_report(tmp_path / "s" / row["report"])
    doc = summary(report)
    assert row["cycles"] == doc["execution"]["headline"]["cycles"]
    assert row["max_tile_bytes"] == doc["memory"]["max_tile_bytes"]
    assert row["total_bytes"] == doc["memory"]["total_bytes_including_gaps"]
    assert row["tile_balance"] == doc["execution"]["headline"]["tile_balance"]
    assert row["report_created"] == report.manifest.created
    # samples/s is tilescope run's figure for the same options
    assert main(["run", str(mlp_file), "--batch", "4", "--json"]) == 0
    ran = json.loads(capsys.readouterr().out)
    assert row["samples_per_second"] == pytest.approx(ran["execution"]["samples_per_second"], rel=1e-12)
    assert row["batch"] == 4 and row["dtype"] == "float32" and math.isnan(row["available_memory_proportion"])
    # the record beside the report makes it reusable, by its options
    done = finished(tmp_path / "s", model_digest(mlp_file))
    assert list(done) == [pt.key()] and done[pt.key()]["report_created"] == row["report_created"]
    assert finished(tmp_path / "s", "another model's digest") == {}


def test_a_point_that_does_not_fit_or_cannot_run_is_a_row(mlp_file: Path, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import onnx

    from profiler.chip.targets import ipu_model
    from profiler.frontends.onnx import examples

    bad = tmp_path / "bad.onnx"
    m = examples.mlp((4, 2))
    m.graph.node[0].op_type = "Unique"
    onnx.save(m, bad)
    pt = grid.points({}, [], False)[0]
    row = run_point(_spec(bad, tmp_path / "s", pt))
    assert row["status"] == "failed" and "unsupported ONNX operator(s): Unique" in row["reason"]
    assert row["report"] == "" and row["cycles"] == -1 and not row["fits"]
    assert finished(tmp_path / "s", model_digest(bad)) == {}  # recorded, but a rerun tries it again

    monkeypatch.setattr(
        "profiler.chip.targets.get_target", lambda name, ipus=1: ipu_model(tiles_per_ipu=2, bytes_per_tile=4096)
    )
    row = run_point(_spec(mlp_file, tmp_path / "s", pt))
    assert row["status"] == "out_of_memory" and row["reason"].startswith("out of memory on 2 tile(s)")
    assert not row["fits"] and math.isnan(row["samples_per_second"]) and row["cycles"] == -1
    assert row["max_tile_bytes"] > 4096  # the memory the report shows


def test_a_record_whose_report_changed_or_is_damaged_is_not_reused(mlp_file: Path, tmp_path: Path) -> None:
    pt = grid.points({}, [], False)[0]
    sweep = tmp_path / "s"
    row = run_point(_spec(mlp_file, sweep, pt))
    digest = model_digest(mlp_file)
    manifest = sweep / row["report"] / "manifest.json"
    doc = json.loads(manifest.read_text())
    doc["created"] = "2001-01-01T00:00:00+00:00"  # another report at the same path
    manifest.write_text(json.dumps(doc))
    assert finished(sweep, digest) == {}
    doc["created"] = row["report_created"]
    manifest.write_text(json.dumps(doc))
    assert list(finished(sweep, digest)) == [pt.key()]
    table = next(p for p in (sweep / row["report"]).glob("*.arrow") if p.stat().st_size > 0)
    table.write_bytes(table.read_bytes()[:-10])  # a truncated table file
    assert finished(sweep, digest) == {}


def _row(point: int, sps: float, peak: int) -> dict:
    spec = {"index": point, "name": f"p{point}", "argv": [], "options": {"batch": point}}
    return empty_row(spec) | {"status": "ok", "fits": True, "samples_per_second": sps, "max_tile_bytes": peak}


def test_the_sweep_table_round_trips_and_is_written_whole(tmp_path: Path) -> None:
    rows = [_row(1, 20.0, 300), _row(0, 10.0, 100)]
    path = write_sweep(tmp_path, rows)
    assert path.name == schema.SWEEP_FILE and not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    df = open_sweep(tmp_path).sweep()
    assert df["point"].tolist() == [0, 1] and df["samples_per_second"].tolist() == [10.0, 20.0]
    assert df["batch"].tolist() == [0, 1] and df["status"].tolist() == ["ok", "ok"]
    meta = json.loads(pa.ipc.open_file(path).schema.metadata[b"tilescope:sweep"])
    assert meta["format"] == "tilescope.sweep" and meta["format_version"] == schema.SWEEP_FORMAT_VERSION


def test_a_sweep_table_tilescope_did_not_write_is_never_replaced(tmp_path: Path) -> None:
    (tmp_path / schema.SWEEP_FILE).write_bytes(b"somebody's data")
    with pytest.raises(ReportError, match="not a tilescope sweep table"):
        write_sweep(tmp_path, [_row(0, 1.0, 1)])
    assert (tmp_path / schema.SWEEP_FILE).read_bytes() == b"somebody's data"
    with pytest.raises(ReportError, match="no sweep metadata"):
        open_sweep(tmp_path)
    with pytest.raises(ReportError, match="not a tilescope sweep"):
        open_sweep(tmp_path / "elsewhere")


def test_pareto_front_by_hand() -> None:
    # (samples/s, peak bytes): b beats a (faster, same memory); c is faster but bigger; d did not fit
    sps = np.array([10.0, 20.0, 30.0, np.nan, 20.0])
    peak = np.array([100, 100, 300, 50, 100])
    assert pareto_front(sps, peak).tolist() == [False, True, True, False, True]  # equal points both stay
    import pandas as pd

    df = pd.DataFrame({"samples_per_second": sps, "max_tile_bytes": peak})
    assert best_within(df, 200)["samples_per_second"] == 20.0
    assert best_within(df, 400)["samples_per_second"] == 30.0
    assert best_within(df, 60) is None


def test_a_workload_script_point_is_its_first_report(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import sys

    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))
    script = Path(__file__).resolve().parents[2] / "profiler" / "workloads" / "mlp.py"
    spec = {"sweep": str(tmp_path / "s"), "model": str(script), "model_sha256": model_digest(script), "index": 0,
            "name": "mlp", "argv": ["--batch", "4"], "options": {"script_args": ["--batch", "4"]}, "script": True}  # fmt: skip
    row = run_point(spec)
    assert row["status"] == "ok" and row["report"].startswith("reports/mlp")
    doc = summary(open_report(tmp_path / "s" / row["report"]))
    assert row["cycles"] == doc["execution"]["headline"]["cycles"] and math.isnan(row["samples_per_second"])
    spec["argv"] = ["--batch", "0"]  # a script that refuses its arguments (its argparse exits 2): a failed row
    spec["name"] = "refused"
    assert run_point(spec)["status"] == "failed"


def test_a_script_grid_is_the_scripts_own_arguments() -> None:
    pts = grid.script_points({"batch": "4,8", "dtype": None, "ipus": "1"})
    assert [p.argv for p in pts] == [["--batch", "4", "--ipus", "1"], ["--batch", "8", "--ipus", "1"]]
    assert [p.label for p in pts] == ["b4", "b8"] and pts[0].key() != pts[1].key()
