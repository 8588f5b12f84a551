"""Golden reports of every supported format version stay readable, value for value.

Each golden report under sample_reports/golden/v<N>/ was written once and committed. The
synthetic one records its generator arguments; regenerating it now must give the same table
contents, so a change to the writer or the generator that alters data is caught here too.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.views.summary import REQUIRED_KEYS, flatten, summary
from report_format import schema
from report_format.reader import open_report
from report_format.synthetic import synthetic_report
from tilescope.cli import main

GOLDEN = Path(__file__).resolve().parents[2] / "sample_reports" / "golden"
REPORTS = sorted(p.parent for p in GOLDEN.glob("v*/*/manifest.json"))


def test_there_is_a_golden_report_for_every_supported_version() -> None:
    versions = {int(p.parent.name[1:]) for p in REPORTS}
    assert set(schema.SUPPORTED_VERSIONS) <= versions


@pytest.mark.parametrize("path", REPORTS, ids=[f"{p.parent.name}/{p.name}" for p in REPORTS])
def test_golden_report_reads_completely(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = open_report(path)
    report.verify()
    assert report.format_version == int(path.parent.name[1:])
    flat = flatten(summary(report))
    assert all(k in flat for k in REQUIRED_KEYS)
    assert main(["summary", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["format_version"] == report.format_version


@pytest.mark.parametrize("version", schema.SUPPORTED_VERSIONS)
def test_golden_synthetic_regenerates_identically(tmp_path: Path, version: int) -> None:
    """Every table an old version holds still reads value for value; newer tables read empty."""
    golden = open_report(GOLDEN / f"v{version}" / "synthetic")
    args = golden.manifest.info["synthetic"]
    fresh = open_report(synthetic_report(tmp_path / "again", **args))
    for name in schema.table_names(version):
        assert fresh.table(name).equals(golden.table(name)), name
    for name in set(schema.TABLE_NAMES) - set(schema.table_names(version)):
        assert golden.table(name).num_rows == 0 and golden.table(name).schema.equals(fresh.table(name).schema)
    t = golden.target()
    assert (t.num_ipus, t.tiles_per_ipu, t.num_tiles) == (2, 16, 32)
    assert summary(golden)["memory"]["out_of_memory_tiles"] == 2
