"""`tilescope export --trace`: Chrome trace events that match the report's steps and tile cycles."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.tile_list import parse_tile_list
from report_format.reader import open_report
from tilescope.cli import main


def test_trace_events_match_steps_and_tiles(small_report: Path, tmp_path: Path) -> None:
    out = tmp_path / "trace.json"
    assert main(["export", str(small_report), "--trace", str(out), "--run", "1", "--tiles", "3,20"]) == 0
    doc = json.loads(out.read_text())
    report = open_report(small_report)
    clock = report.target().clock_hz
    steps = report.execution_steps(1)
    bsp = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["tid"] == 0]
    assert len(bsp) == len(steps)  # one event per executed step per IPU
    last = max(bsp, key=lambda e: e["ts"] + e["dur"])
    assert last["ts"] + last["dur"] == pytest.approx(report.runs()["cycles"][1] / clock * 1e6)
    tile20 = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["tid"] == 21]
    cycles = report.tile_cycles_range(1, 0, len(steps) // 2)[:, 1, 4]  # tile 20 = IPU 1, tile 4
    assert [e["args"]["cycles"] for e in tile20] == [int(c) for c in cycles if c > 0]
    assert all(e["pid"] == 1 for e in tile20)


def test_export_errors_are_one_line(small_report: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(small_report), "--trace", str(tmp_path / "t.json"), "--tiles", "5-2"]) == 2
    assert "runs backwards" in capsys.readouterr().err
    assert main(["export", str(small_report), "--trace", str(tmp_path / "t.json"), "--run", "9"]) == 2
    assert "no run 9" in capsys.readouterr().err
    assert not (tmp_path / "t.json").exists()


@pytest.mark.parametrize(
    "text,expected",
    [("0-3, 7", [0, 1, 2, 3, 7]), ("5", [5]), ("2,2,1", [1, 2]), ("", [])],
)
def test_parse_tile_list(text: str, expected: list[int]) -> None:
    assert parse_tile_list(text, 16) == expected


@pytest.mark.parametrize("text,message", [("x", "not a tile number"), ("3-1", "backwards"), ("0-16", "outside")])
def test_parse_tile_list_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_tile_list(text, 16)


def test_trace_defaults_to_the_opening_run_and_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.app.small_report import write_small_report

    report = write_small_report(tmp_path / "report")  # run 1 is longer than run 0
    out = tmp_path / "trace.json"
    assert main(["export", str(report), "--trace", str(out)]) == 0
    said = capsys.readouterr().out
    assert "run 1 (" in said and "the longest that computes; 2 runs" in said
    steps = open_report(report).execution_steps(1)
    assert len([e for e in json.loads(out.read_text())["traceEvents"] if e["ph"] == "X" and e["tid"] == 0]) == len(
        steps
    )


@pytest.mark.slow  # ~6 s at load 4: builds and runs an MLP that does not fit
def test_trace_of_an_out_of_memory_report_says_why_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from profiler import OutOfMemoryError
    from profiler.workloads import mlp

    w = mlp.build(hidden=20000, tiles=4)
    with pytest.raises(OutOfMemoryError):
        w.run(1, options={"autoReport.all": "true", "autoReport.directory": str(tmp_path)})
    assert main(["export", str(tmp_path / "mlp"), "--trace", str(tmp_path / "t.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert "nothing to export" in err and err.count("out of memory on 4 tile(s)") == 1, err
