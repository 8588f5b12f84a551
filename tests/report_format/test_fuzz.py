"""Property: damaging bytes of a valid report never escapes as anything but ReportError."""

from __future__ import annotations

import shutil
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from report_format import schema
from report_format.errors import ReportError
from report_format.reader import open_report

FILES = [schema.MANIFEST_NAME] + [f"{n}{schema.TABLE_SUFFIX}" for n in schema.TABLE_NAMES]


def _read_everything(path: Path) -> None:
    report = open_report(path)
    report.verify()
    report.target()
    for run in report.runs()["run"]:
        report.tile_cycles(int(run), 0)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    file=st.sampled_from(FILES),
    edits=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(1, 255)), min_size=1, max_size=4),
    truncate=st.one_of(st.none(), st.floats(0, 1, exclude_max=True)),
)
def test_flipped_or_truncated_bytes(small_report: Path, tmp_path_factory, file: str, edits, truncate) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "r"
    shutil.copytree(small_report, path)
    f = path / file
    data = bytearray(f.read_bytes())
    for pos, xor in edits:
        data[int(pos * len(data))] ^= xor
    if truncate is not None:
        data = data[: int(truncate * len(data))]
    f.write_bytes(bytes(data))
    try:
        _read_everything(path)  # either the data is still valid...
    except ReportError as exc:  # ...or the format's own error, one line
        assert "\n" not in str(exc)
