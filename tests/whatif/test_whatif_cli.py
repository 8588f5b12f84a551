"""``tilescope whatif``: proposals listed from the report, a re-simulation checked against a direct
``tilescope run`` with the same options (the independent reference), and every refusal one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def tilescope(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "POPLAR_ENGINE_OPTIONS"}
    return subprocess.run([sys.executable, "-m", "tilescope", *args], cwd=ROOT, capture_output=True, text=True,
                          env={**env, "PYTHONPATH": str(ROOT)}, timeout=600)  # fmt: skip


def save_mlp(path: Path, seed: int = 0) -> Path:
    import onnx

    from profiler.frontends.onnx import examples

    onnx.save(examples.mlp(seed=seed), path)
    return path


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The MLP example at batch 4 on the IPU-Model target: host-I/O bound (its stream copies are over
    a third of the run), so the insight proposes batch 8."""
    out = tmp_path_factory.mktemp("whatif")
    model = save_mlp(out / "mlp.onnx")
    r = tilescope("run", str(model), "--target", "IPUModel", "--batch", "4", "--report-dir", str(out / "report"))
    assert r.returncode == 0, r.stderr
    return model, out / "report"


def test_run_records_the_model_its_hash_and_options(made: tuple[Path, Path]) -> None:
    import hashlib

    model, report = made
    origin = json.loads((report / "manifest.json").read_text())["origin"]
    assert origin["kind"] == "model" and origin["path"] == str(model)
    assert origin["sha256"] == hashlib.sha256(model.read_bytes()).hexdigest()
    assert origin["options"]["batch"] == 4 and origin["options"]["target"] == "IPUModel"
    assert origin["options"]["available_memory_proportion"] == 0.6  # PopLibs' default, as run used it


def test_listing_numbers_the_proposals(made: tuple[Path, Path]) -> None:
    r = tilescope("whatif", str(made[1]), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [(p["number"], p["change"]) for p in doc["proposals"]] == [(1, {"batch": 8})]
    assert doc["proposals"][0]["insight"].startswith("Host I/O bound")
    text = tilescope("whatif", str(made[1])).stdout
    assert "1. --batch 8" in text


@pytest.mark.slow
def test_whatif_measures_what_a_direct_run_with_the_change_gives(made: tuple[Path, Path], tmp_path: Path) -> None:
    from app.views.whatif import figures
    from report_format.reader import open_report

    model, report = made
    r = tilescope("whatif", str(report), "--apply", "1", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["whatif_report"] == f"{report}.whatif-1" and doc["change"] == {"batch": 8}
    direct = tilescope("run", str(model), "--target", "IPUModel", "--batch", "8", "--report-dir", str(tmp_path / "d"),
                       "--json")  # fmt: skip
    assert direct.returncode == 0, direct.stderr
    run = json.loads(direct.stdout)
    want = figures(open_report(tmp_path / "d"))
    before = figures(open_report(report))
    for key, row in doc["figures"].items():
        assert row["after"] == want[key], key
        assert row["measured_change"] == pytest.approx(want[key] - before[key]), key
    # and the report's figures are tilescope run's own
    assert doc["figures"]["cycles"]["after"] == run["execution"]["cycles_per_run"][0]
    assert doc["figures"]["max_tile_bytes"]["after"] == run["memory"]["max_tile_bytes"]
    assert doc["figures"]["samples_per_second"]["after"] == pytest.approx(run["execution"]["samples_per_second"])
    assert json.loads((Path(doc["whatif_report"]) / "manifest.json").read_text())["origin"]["options"]["batch"] == 8


def one_line_error(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


def test_a_gone_model_is_one_line(tmp_path: Path) -> None:
    model = save_mlp(tmp_path / "gone.onnx")
    assert tilescope("run", str(model), "--target", "IPUModel", "--batch", "4", "--report-dir", str(tmp_path / "r"),
                     ).returncode == 0  # fmt: skip
    model.unlink()
    line = one_line_error(tilescope("whatif", str(tmp_path / "r"), "--apply", "1"))
    assert line == f"tilescope whatif: error: the model this report was made from is gone: {model}"
    assert not (tmp_path / "r.whatif-1").exists()
    listing = tilescope("whatif", str(tmp_path / "r"))  # the list still shows, with the note
    assert listing.returncode == 0 and "is gone" in listing.stdout


@pytest.mark.slow
def test_a_changed_model_is_refused_unless_forced(tmp_path: Path) -> None:
    model = save_mlp(tmp_path / "m.onnx")
    assert tilescope("run", str(model), "--target", "IPUModel", "--batch", "4", "--report-dir", str(tmp_path / "r"),
                     ).returncode == 0  # fmt: skip
    save_mlp(model, seed=1)  # other weights: another hash
    line = one_line_error(tilescope("whatif", str(tmp_path / "r"), "--apply", "1"))
    assert "sha256 differs" in line and "--force" in line
    forced = tilescope("whatif", str(tmp_path / "r"), "--apply", "1", "--force", "--json")
    assert forced.returncode == 0, forced.stderr
    assert json.loads(forced.stdout)["figures"]["cycles"]["after"] > 0


def test_refusals_are_one_line(made: tuple[Path, Path], tmp_path: Path) -> None:
    from report_format.synthetic import synthetic_report

    report = made[1]
    assert "no such proposal" in one_line_error(tilescope("whatif", str(report), "--apply", "7"))
    assert "the report itself" in one_line_error(tilescope("whatif", str(report), "--apply", "1", "--out", str(report)))
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("mine")
    line = one_line_error(tilescope("whatif", str(report), "--apply", "1", "--out", str(theirs)))
    assert "not a tilescope report" in line or "not empty" in line, line
    assert (theirs / "notes.txt").read_text() == "mine" and len(list(theirs.iterdir())) == 1
    old = synthetic_report(tmp_path / "old", num_ipus=1, tiles_per_ipu=4)
    assert "records no origin" in one_line_error(tilescope("whatif", str(old), "--apply", "1"))


@pytest.mark.slow
def test_a_script_is_recorded_with_its_arguments_but_not_re_run(tmp_path: Path) -> None:
    import hashlib

    script = ROOT / "profiler" / "workloads" / "mlp.py"
    r = tilescope("run", "--report-dir", str(tmp_path / "r"), str(script), "--steps", "1")
    assert r.returncode == 0, r.stderr
    origin = json.loads((tmp_path / "r" / "mlp" / "manifest.json").read_text())["origin"]
    assert origin["kind"] == "script" and origin["path"] == str(script)
    assert origin["sha256"] == hashlib.sha256(script.read_bytes()).hexdigest()
    assert origin["arguments"] == ["--steps", "1"] and origin["options"] == {}
    line = one_line_error(tilescope("whatif", str(tmp_path / "r" / "mlp"), "--apply", "1"))
    assert "what-ifs re-run ONNX models only" in line
