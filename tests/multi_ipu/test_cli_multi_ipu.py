"""`tilescope run` with --ipus, --replicas, --pipeline: JSON figures, reports, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest

from profiler.frontends.onnx import examples
from report_format.reader import open_report
from tilescope.cli import main


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", "")


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    path = tmp_path / "gpt2.onnx"
    onnx.save(examples.gpt2_block(seq=8, hidden=32, heads=2), path)
    return path


def _run(capsys, *args: str) -> dict:  # type: ignore[no-untyped-def]
    assert main(["run", *args, "--target", "IPUModel", "--json", "--check"]) == 0
    return json.loads(capsys.readouterr().out)


def test_replicas_and_pipeline_in_the_json_and_the_report(model_file: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    one = _run(capsys, str(model_file))
    assert one["execution"]["samples_per_run"] == 1 and len(one["execution"]["ipu_utilisation"]) == 1
    doc = _run(capsys, str(model_file), "--ipus", "2", "--replicas", "2", "--pipeline", "--micro-batches", "3",
               "--report-dir", str(tmp_path / "r"))  # fmt: skip
    ex = doc["execution"]
    assert doc["check"]["passed"]  # every replica's every micro-batch against onnxruntime
    assert doc["target"]["num_replicas"] == 2 and doc["target"]["ipus_per_replica"] == 2
    assert doc["pipeline"] == {"enabled": True, "stages": 2, "micro_batches": 3}
    assert ex["samples_per_run"] == 1 * 2 * 3  # batch x replicas x micro-batches
    cycles = ex["cycles_per_run"][0]
    assert ex["samples_per_second"] == pytest.approx(6 * doc["target"]["clock_hz"] / cycles)
    assert len(ex["ipu_utilisation"]) == 2 and all(0 < u < 1 for u in ex["ipu_utilisation"])
    r = open_report(tmp_path / "r")
    assert (r.target_info.num_ipus, r.target_info.num_replicas) == (2, 2)
    assert r.pipeline_stages()["micro_batches"].tolist() == [3, 3]


def test_a_compute_split_from_the_command_line(model_file: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    doc = _run(capsys, str(model_file), "--ipus", "2", "--pipeline", "--split", "compute")
    assert doc["check"]["passed"] and doc["pipeline"]["stages"] == 2
    assert len(doc["execution"]["ipu_utilisation"]) == 2 and all(u > 0 for u in doc["execution"]["ipu_utilisation"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--pipeline"], "--pipeline needs --ipus 2 or more"),
        (["--micro-batches", "4"], "--micro-batches needs --pipeline"),
        (["--replicas", "0"], "--replicas must be >= 1"),
        (["--ipus", "300"], "at most 256 IPUs"),
    ],
)
def test_bad_multi_ipu_options_are_one_line_exit_2(model_file: Path, args, message, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["run", str(model_file), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("tilescope run: error:") and message in err[-1]


def test_an_unknown_split_is_a_usage_error(model_file: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SystemExit) as exc:  # argparse's own exit for a bad choice
        main(["run", str(model_file), "--ipus", "2", "--split", "flops"])
    assert exc.value.code == 2
    assert "argument --split: invalid choice: 'flops'" in capsys.readouterr().err.strip().splitlines()[-1]
