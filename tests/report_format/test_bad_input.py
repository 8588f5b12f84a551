"""Every kind of bad input gives one ReportError line naming the file and the problem."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

from report_format import schema
from report_format.errors import ReportError
from report_format.reader import open_report
from tilescope.cli import main


def _copy(src: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "report"
    shutil.copytree(src, dst)
    return dst


def _edit_manifest(path: Path, fn: Callable[[dict], None]) -> None:
    m = json.loads((path / "manifest.json").read_text())
    fn(m)
    (path / "manifest.json").write_text(json.dumps(m))


def _rewrite_table(path: Path, name: str, table: pa.Table) -> None:
    """Replace a table file and fix up the manifest so only the content is wrong."""
    f = path / f"{name}.arrow"
    with pa.OSFile(str(f), "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table)
    _edit_manifest(path, lambda m: m["tables"][name].update(bytes=f.stat().st_size))


def _drop_column(path: Path) -> None:
    t = pa.ipc.open_file(pa.memory_map(str(path / "runs.arrow"))).read_all()
    _rewrite_table(path, "runs", t.drop_columns(["cycles"]))


def _foreign(path: Path) -> None:
    _rewrite_table(path, "runs", pa.table({"a": [1, 2, 3]}))


CASES: list[tuple[str, Callable[[Path], None], str]] = [
    ("no manifest", lambda p: (p / "manifest.json").unlink(), r"manifest\.json: missing"),
    (
        "truncated manifest",
        lambda p: (p / "manifest.json").write_text((p / "manifest.json").read_text()[:100]),
        r"manifest\.json: not valid JSON \(line",
    ),
    ("manifest not utf-8", lambda p: (p / "manifest.json").write_bytes(b"\xff\xfe\x00"), r"manifest\.json: not valid"),
    ("other json", lambda p: (p / "manifest.json").write_text('{"hello": 1}'), "not a tilescope report manifest"),
    (
        "future version",
        lambda p: _edit_manifest(p, lambda m: m.update(format_version=99)),
        "version 99 is newer than this tilescope reads",
    ),
    ("old version", lambda p: _edit_manifest(p, lambda m: m.update(format_version=0)), "version 0 is not supported"),
    (
        "table missing from manifest",
        lambda p: _edit_manifest(p, lambda m: m["tables"].pop("liveness")),
        "table 'liveness' is missing from the manifest",
    ),
    ("table file missing", lambda p: (p / "vertices.arrow").unlink(), r"vertices\.arrow: table file is missing"),
    (
        "truncated table",
        lambda p: (p / "programs.arrow").write_bytes((p / "programs.arrow").read_bytes()[:200]),
        r"programs\.arrow: file is 200 bytes but the manifest says",
    ),
    (
        "bytes that are not arrow",
        lambda p: _rewrite_bytes(p, "streams", b"not arrow at all" * 10),
        r"streams\.arrow: not a readable Arrow IPC file",
    ),
    ("foreign arrow file", _foreign, r"runs\.arrow: an Arrow file, but not a tilescope table"),
    ("missing column", _drop_column, r"runs\.arrow: .*column 'cycles' is missing|no 'tilescope:report'"),
]


def _rewrite_bytes(path: Path, name: str, data: bytes) -> None:
    (path / f"{name}.arrow").write_bytes(data)
    _edit_manifest(path, lambda m: m["tables"][name].update(bytes=len(data)))


@pytest.mark.parametrize("label,damage,message", CASES, ids=[c[0] for c in CASES])
def test_bad_report_gives_one_clear_line(
    small_report: Path,
    tmp_path: Path,
    label: str,
    damage: Callable[[Path], None],
    message: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = _copy(small_report, tmp_path)
    damage(path)
    with pytest.raises(ReportError, match=message) as info:
        open_report(path)
    assert "\n" not in str(info.value)
    # the CLI turns it into exit code 2 and one stderr line, no traceback
    assert main(["summary", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and str(path) in err


def test_missing_column_in_a_tilescope_table(small_report: Path, tmp_path: Path) -> None:
    """A tilescope table (with our metadata) that lacks a column: names the column."""
    path = _copy(small_report, tmp_path)
    t = pa.ipc.open_file(pa.memory_map(str(path / "runs.arrow"))).read_all()
    _rewrite_table(path, "runs", t.drop_columns(["cycles"]).replace_schema_metadata(t.schema.metadata))
    with pytest.raises(ReportError, match=r"runs\.arrow: column 'cycles' is missing"):
        open_report(path)


def test_wrong_column_type(small_report: Path, tmp_path: Path) -> None:
    path = _copy(small_report, tmp_path)
    t = pa.ipc.open_file(pa.memory_map(str(path / "runs.arrow"))).read_all()
    t = t.set_column(3, "cycles", t["cycles"].cast(pa.float64())).replace_schema_metadata(t.schema.metadata)
    _rewrite_table(path, "runs", t)
    with pytest.raises(ReportError, match="column 'cycles' has type double, expected int64"):
        open_report(path)


def test_modified_table_fails_its_checksum_when_read(small_report: Path, tmp_path: Path) -> None:
    path = _copy(small_report, tmp_path)
    t = pa.ipc.open_file(pa.memory_map(str(path / "runs.arrow"))).read_all()
    t = t.set_column(3, "cycles", pa.array([1, 2], pa.int64())).replace_schema_metadata(t.schema.metadata)
    _rewrite_table(path, "runs", t)
    # the structure is fine, but the content is not what was written; runs is small and read on
    # open (its step counts are checked against execution_steps), so it fails there
    with pytest.raises(ReportError, match="checksum mismatch"):
        open_report(path)


@pytest.mark.parametrize("make", ["missing", "file", "empty_dir", "arrow_file"])
def test_paths_that_are_not_reports(tmp_path: Path, small_report: Path, make: str) -> None:
    target = tmp_path / "x"
    if make == "file":
        target.write_text("hello")
    elif make == "empty_dir":
        target.mkdir()
    elif make == "arrow_file":
        target = small_report / "runs.arrow"
    expected = {
        "missing": "no such file",
        "file": "not a tilescope report",
        "empty_dir": "manifest.json: missing",
        "arrow_file": "not a tilescope report",
    }[make]
    with pytest.raises(ReportError, match=expected):
        open_report(target)


def test_every_table_is_required() -> None:
    assert len(schema.TABLE_NAMES) == len(set(schema.TABLE_NAMES)) >= 19
