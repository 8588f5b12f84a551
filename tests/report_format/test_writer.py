"""The writer is atomic: a failed write leaves nothing that looks like a report."""

from __future__ import annotations

from pathlib import Path

import pytest

from report_format.errors import ReportError
from report_format.reader import open_report
from report_format.synthetic import synthetic_report
from report_format.writer import ReportWriter


def test_crash_inside_the_writer_leaves_no_report_and_no_temp(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), ReportWriter(tmp_path / "r") as w:
        w.write("runs", {"run": [0], "program_id": [0], "name": ["a"], "cycles": [1], "flops": [0], "steps": [1]})
        raise RuntimeError("simulated crash")
    assert list(tmp_path.iterdir()) == []


def test_replacing_a_report_is_all_or_nothing(tmp_path: Path) -> None:
    path = synthetic_report(tmp_path / "r", seed=1)
    before = open_report(path).runs()
    with pytest.raises(RuntimeError), ReportWriter(path) as w:
        w.write("runs", {"run": [0], "program_id": [0], "name": ["x"], "cycles": [5], "flops": [0], "steps": [1]})
        raise RuntimeError("crash while replacing")
    assert open_report(path).runs().equals(before)  # old report untouched
    synthetic_report(path, seed=2)
    assert not open_report(path).runs().equals(before)  # a finished write replaces it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r"]


def test_refuses_to_overwrite_a_directory_that_is_not_a_report(tmp_path: Path) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("precious")
    with pytest.raises(ReportError, match="refusing to overwrite"):
        ReportWriter(tmp_path / "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "precious"


def test_same_inputs_give_identical_tables(tmp_path: Path) -> None:
    a = open_report(synthetic_report(tmp_path / "a", seed=3))
    b = open_report(synthetic_report(tmp_path / "b", seed=3))
    for name, entry in a.manifest.tables.items():
        assert entry.sha256 == b.manifest.tables[name].sha256, name
