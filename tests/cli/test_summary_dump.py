"""`tilescope summary` and `dump` on real reports; figures checked against the raw tables."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from app.views.summary import REQUIRED_KEYS, flatten
from tilescope.cli import main


def _raw(path: Path, table: str) -> pa.Table:
    return pa.ipc.open_file(pa.memory_map(str(path / f"{table}.arrow"))).read_all()


def test_summary_json_keys_and_values(small_report: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["summary", str(small_report), "--json"]) == 0
    flat = flatten(json.loads(capsys.readouterr().out))
    missing = [k for k in REQUIRED_KEYS if k not in flat]
    assert not missing
    # independent computation from the raw Arrow files
    tm = _raw(small_report, "tile_memory").to_pandas()
    incl = tm["total_bytes_including_gaps"].to_numpy()
    assert flat["memory.total_bytes_including_gaps"] == incl.sum()
    assert flat["memory.total_bytes_excluding_gaps"] == tm["total_bytes_excluding_gaps"].sum()
    assert flat["memory.max_tile_bytes"] == incl.max()
    assert flat["memory.out_of_memory_tiles"] == int((incl > flat["target.bytes_per_tile"]).sum()) == 2
    lv = _raw(small_report, "liveness").to_pandas().groupby("step")["not_always_live_bytes"].sum()
    assert flat["liveness.peak_not_always_live_bytes"] == lv.max()
    assert flat["liveness.peak_step"] == lv.idxmax()
    # total cycles = sum over runs of the slowest IPU's end of the last step
    steps = _raw(small_report, "execution_steps").to_pandas()
    assert flat["execution.total_cycles"] == steps.groupby("run")["cycles_to"].max().sum()
    assert flat["execution.total_flops"] == steps["flops"].sum()
    assert flat["execution.runs"] == 2
    assert flat["target.num_ipus"] == 2 and flat["target.tiles_per_ipu"] == 16


def test_summary_text(small_report: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["summary", str(small_report), "--verify"]) == 0
    out = capsys.readouterr().out
    assert "2 IPU x 16 tiles" in out and "out of memory 2 tiles" in out and "2 runs" in out


def test_dump_lists_tables_and_prints_csv_and_json(small_report: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dump", str(small_report)]) == 0
    listing = capsys.readouterr().out
    assert "tile_cycles" in listing and "liveness_intervals" in listing
    assert main(["dump", str(small_report), "tile_cycles", "--limit", "3"]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert rows[0] == ["run", "step", "ipu", "cycles"] and len(rows) == 4
    first = np.array(json.loads(rows[1][3]))
    np.testing.assert_array_equal(first, _raw(small_report, "tile_cycles")["cycles"][0].as_py())
    assert main(["dump", str(small_report), "runs", "--format", "json"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [r["run"] for r in lines] == [0, 1]


def test_dump_unknown_table_is_exit_2(small_report: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dump", str(small_report), "nope"]) == 2
    assert "unknown table 'nope'" in capsys.readouterr().err


def test_help_lists_verbs(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "summary" in out and "dump" in out and "Exit codes" in out


def test_summary_prints_the_insights_pages_sentences(small_report: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Computed once (app.views.insights.hints): the text's insights lines and --json's list are the viewer's."""
    from app.views.insights import hints
    from report_format.reader import open_report

    said = hints(open_report(small_report))
    assert said and said[0].startswith("2 tiles are out of memory")
    assert main(["summary", str(small_report)]) == 0
    lines = capsys.readouterr().out.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("insights      "))
    assert [line[14:] for line in lines[first : first + len(said)]] == said
    assert main(["summary", str(small_report), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["insights"] == said
