"""Every fabricated report (the synthetic reports, the tests' hand-made ones) is a spec written by
one fabricator, ``report_format.fabricate.write_report``, through one builder,
``report_format.builder.ReportBuilder``: a column added to the schema is added once, and every
fabricated report still writes, with the column's default."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from report_format import schema
from report_format.builder import with_defaults
from report_format.errors import ReportError

ROOT = Path(__file__).resolve().parents[2]
SPECS = ("report_format/synthetic.py", "tests/app/small_report.py", "tests/compare/compare_builders.py")


def test_every_fabricated_report_is_a_spec_written_by_the_one_fabricator() -> None:
    assert "ReportBuilder(" in (ROOT / "report_format/fabricate.py").read_text()
    for path in SPECS:
        text = (ROOT / path).read_text()
        assert "write_report(" in text and "ReportBuilder(" not in text and "ReportWriter(" not in text, path


def test_a_new_column_needs_no_change_in_any_fabricator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from report_format.synthetic import synthetic_report
    from tests.app.small_report import write_small_report
    from tests.compare.compare_builders import Spec, build_report, mlp_steps

    spec = schema.TABLES["tile_memory"]
    later = schema.Column("reserved_bytes", pa.int64(), "bytes", "estimated", "a column added later")
    monkeypatch.setitem(schema.TABLES, "tile_memory", dataclasses.replace(spec, columns=(*spec.columns, later)))
    reports = [
        synthetic_report(tmp_path / "synthetic", num_ipus=1, tiles_per_ipu=8, executed_steps=10, variables=20),
        write_small_report(tmp_path / "small"),
        build_report(tmp_path / "compare", Spec(mlp_steps())),
    ]
    for report in reports:
        table = ipc.open_file(Path(report) / "tile_memory.arrow").read_all()
        assert table.num_rows > 0 and set(table["reserved_bytes"].to_pylist()) == {0}


def test_defaults_fill_only_what_is_left_out() -> None:
    runs = with_defaults("runs", {"run": [0, 1], "cycles": [10, 20]})
    assert list(runs["cycles"]) == [10, 20] and list(runs["name"]) == ["", ""] and list(runs["flops"]) == [0, 0]
    with pytest.raises(ReportError, match="no columns given"):
        with_defaults("runs", {})
