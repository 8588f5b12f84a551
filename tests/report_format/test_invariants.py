"""Cross-table invariants: a table copied in from another report (manifest updated to match, so
every per-file check passes) is found on open when cheap, and by ``summary --verify`` otherwise."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from report_format.errors import ReportError
from report_format.reader import open_report
from report_format.synthetic import synthetic_report
from tilescope.cli import main


def _transplant(
    path: Path, name: str, source: Path | None = None, edit: Callable[[pa.Table], pa.Table] | None = None
) -> None:
    """Replace table ``name`` of ``path`` (from ``source``, or edited) and update the manifest the
    way a careful hand would: rows, bytes and sha256 all match the new file."""
    src = (source or path) / f"{name}.arrow"
    table = pa.ipc.open_file(pa.memory_map(str(src))).read_all()
    if edit is not None:
        table = edit(table).replace_schema_metadata(table.schema.metadata)
    dst = path / f"{name}.arrow"
    with pa.OSFile(str(dst), "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table)
    doc = json.loads((path / "manifest.json").read_text())
    doc["tables"][name].update(
        rows=table.num_rows, bytes=dst.stat().st_size, sha256=hashlib.sha256(dst.read_bytes()).hexdigest()
    )
    (path / "manifest.json").write_text(json.dumps(doc))


@pytest.fixture
def report(small_report: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "r"
    shutil.copytree(small_report, dst)
    return dst


def test_a_tile_table_from_a_bigger_target_is_refused_on_open(report: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    big = synthetic_report(tmp_path / "big", num_ipus=1, tiles_per_ipu=1472)
    _transplant(report, "tile_memory", big)
    with pytest.raises(
        ReportError, match=r"tile_memory.arrow: .*1,472 rows, but the target has 2 IPUs x 16 tiles = 32"
    ):
        open_report(report)
    assert main(["summary", str(report)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "inconsistent with the rest of the report" in err


def test_execution_steps_must_match_the_runs(report: Path) -> None:
    _transplant(report, "execution_steps", edit=lambda t: t.slice(0, t.num_rows - 2))
    with pytest.raises(ReportError, match=r"execution_steps.arrow: .*rows, but runs hold .* executed steps x 2 IPUs"):
        open_report(report)


def _bump_one_category_row(t: pa.Table) -> pa.Table:
    b = np.asarray(t["bytes"]).copy()
    b[0] += 8
    return t.set_column(t.schema.get_field_index("bytes"), "bytes", pa.array(b))


@pytest.mark.parametrize(
    ("name", "edit", "expect"),
    [
        ("tile_memory_by_category", _bump_one_category_row, r"categories sum to .* tile_memory says"),
        (
            "variable_placements",
            lambda t: t.set_column(1, "tile", pc.add(t["tile"], pa.scalar(1000, pa.int32()))),
            r"tile runs .* outside the target's 32 tiles",
        ),
        (
            "execution_steps",
            lambda t: t.set_column(2, "program_id", pc.add(t["program_id"], pa.scalar(10**6, pa.int32()))),
            r"program_id \d+ is not in programs.program_id",
        ),
    ],
)
def test_deeper_invariants_are_checked_by_verify(report: Path, name: str, edit, expect: str, capsys) -> None:  # type: ignore[no-untyped-def]
    _transplant(report, name, edit=edit)
    open_report(report)  # cheap checks pass: these need the tables read
    with pytest.raises(ReportError, match=expect):
        open_report(report).verify()
    assert main(["summary", str(report), "--verify"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_a_consistent_report_passes_every_check(report: Path) -> None:
    open_report(report).verify()


def test_a_programs_table_from_another_report_is_refused_on_open(report: Path, tmp_path: Path) -> None:
    # the small report's 2-IPU liveness rows against a program tree with another number of steps
    other = synthetic_report(tmp_path / "other", num_ipus=2, tiles_per_ipu=16, program_steps=23)
    _transplant(report, "programs", other)
    with pytest.raises(ReportError, match=r"programs.arrow: .*program steps, but liveness holds .* IPUs"):
        open_report(report)


def test_variables_whose_sizes_their_placements_contradict_fail_verify(report: Path) -> None:
    def grown(t: pa.Table) -> pa.Table:  # another report's variables: same ids, other sizes
        return t.set_column(t.schema.get_field_index("bytes"), "bytes", pc.add(t["bytes"], pa.scalar(4, pa.int64())))

    _transplant(report, "variables", edit=grown)
    open_report(report)  # ids and counts still tie: only the placements tell
    with pytest.raises(ReportError, match=r"variables.arrow: .*variable \d+ is .* bytes, its placements"):
        open_report(report).verify()


def test_variable_ids_must_be_the_rows(report: Path) -> None:
    shifted = lambda t: t.set_column(0, "variable_id", pc.add(t["variable_id"], pa.scalar(5, pa.int32())))  # noqa: E731
    _transplant(report, "variables", edit=shifted)
    with pytest.raises(ReportError, match=r"variable ids are not 0\.\."):
        open_report(report)
