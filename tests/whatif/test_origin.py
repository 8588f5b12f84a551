"""A report's origin (manifest key ``origin``): written, read back, absent from old reports, checked."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from report_format.errors import ReportError
from report_format.manifest import read_manifest
from report_format.origin import file_sha256, make_origin
from report_format.writer import ReportWriter

GOLDEN = Path(__file__).resolve().parents[2] / "sample_reports" / "golden"


def test_file_sha256_matches_hashlib_across_chunks(tmp_path: Path) -> None:
    f = tmp_path / "m.onnx"
    data = bytes(range(256)) * 9000  # 2.2 MiB: more than one 1 MiB read
    f.write_bytes(data)
    assert file_sha256(f) == hashlib.sha256(data).hexdigest()


def test_origin_round_trips_through_the_manifest(tmp_path: Path) -> None:
    model = tmp_path / "model.onnx"
    model.write_bytes(b"not really onnx")
    origin = make_origin(
        "model", model, {"batch": 16, "available_memory_proportion": 0.3, "pipeline": True},
        {"autoReport.all": "true", "autoReport.directory": "/elsewhere", "debug.instrument": "true"},
    )  # fmt: skip
    with ReportWriter(tmp_path / "r") as w:
        w.origin = origin
    got = read_manifest(tmp_path / "r").origin
    assert got == origin
    assert got is not None
    assert got.sha256 == hashlib.sha256(b"not really onnx").hexdigest() and got.bytes == 15
    assert got.path == str(model.absolute())
    # the report's own directory is not part of how it was made
    assert got.engine_options == {"autoReport.all": "true", "debug.instrument": "true"}
    assert got.source_problem() == ""


def test_source_problem_says_gone_or_changed(tmp_path: Path) -> None:
    model = tmp_path / "model.onnx"
    model.write_bytes(b"abc")
    origin = make_origin("model", model)
    model.write_bytes(b"abd")  # same size, other content: the hash tells
    assert "changed since (sha256 differs)" in origin.source_problem()
    model.unlink()
    assert origin.source_problem() == f"the model this report was made from is gone: {model.absolute()}"


@pytest.mark.parametrize("version", ["v1", "v2", "v3"])
def test_reports_without_origin_still_open(version: str) -> None:
    from report_format.reader import open_report

    assert open_report(GOLDEN / version / "synthetic").manifest.origin is None


def test_a_malformed_origin_is_one_report_error(tmp_path: Path) -> None:
    with ReportWriter(tmp_path / "r"):
        pass  # every table present and empty
    m = tmp_path / "r" / "manifest.json"
    doc = json.loads(m.read_text())
    doc["origin"] = {"kind": "spreadsheet"}
    m.write_text(json.dumps(doc))
    with pytest.raises(ReportError, match="malformed manifest"):
        read_manifest(tmp_path / "r")
