"""The sweep table: its writer (atomic, as the report writer is) and its reader.

A sweep directory (``tilescope sweep --out DIR``) holds ``sweep.arrow`` (``schema.SWEEP``, one row
per finished point), ``points/`` (a small JSON record per finished point: its options and the
report it made) and ``reports/`` (one report per point). This module knows only the table; which
points exist and how they are computed is the CLI's business.

The table is rewritten whole after every finished point: written to a temporary file beside it,
fsynced and renamed into place, so a reader (the viewer, a killed sweep's rerun) sees the previous
table or the next one, never half of one. A ``sweep.arrow`` tilescope did not write (no sweep
metadata) is never replaced.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from report_format import schema
from report_format.errors import ReportError
from report_format.writer import default_producer

#: Arrow schema-metadata key of the sweep table (as ``schema.METADATA_KEY`` is a report table's).
METADATA_KEY = "tilescope:sweep"


def _metadata(producer: Mapping[str, str]) -> dict[bytes, bytes]:
    doc = {
        "format": schema.SWEEP_FORMAT_NAME,
        "format_version": schema.SWEEP_FORMAT_VERSION,
        "producer": dict(producer),
    }
    return {METADATA_KEY.encode(): json.dumps(doc, sort_keys=True).encode()}


def _own_version(path: Path) -> int | None:
    """The sweep format version of ``path`` if tilescope wrote it (its metadata says so), else None."""
    try:
        with pa.memory_map(str(path)) as source:
            meta = pa.ipc.open_file(source).schema.metadata or {}
        doc = json.loads(meta[METADATA_KEY.encode()])
    except (pa.ArrowException, OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(doc, dict) or doc.get("format") != schema.SWEEP_FORMAT_NAME:
        return None
    version = doc.get("format_version")
    return version if isinstance(version, int) and not isinstance(version, bool) else None


def sweep_table(rows: Sequence[Mapping[str, Any]], producer: Mapping[str, str] | None = None) -> pa.Table:
    """``rows`` (dicts keyed by the sweep columns, all present) as the sweep table, sorted by point."""
    ordered = sorted(rows, key=lambda r: int(r["point"]))
    missing = [c for c in schema.SWEEP.column_names if ordered and c not in ordered[0]]
    if missing:
        raise ValueError(f"sweep rows lack column(s) {', '.join(missing)}")
    columns = {c.name: pa.array([r[c.name] for r in ordered], type=c.type) for c in schema.SWEEP.columns}
    return pa.table(columns, schema=schema.SWEEP.schema.with_metadata(_metadata(producer or default_producer())))


def write_sweep(directory: str | Path, rows: Sequence[Mapping[str, Any]]) -> Path:
    """Write ``rows`` as ``directory/sweep.arrow``, whole or not at all; ReportError (one line) if
    it cannot be written or a ``sweep.arrow`` there is not tilescope's."""
    out = Path(directory) / schema.SWEEP_FILE
    if (out.exists() or out.is_symlink()) and (out.is_symlink() or _own_version(out) is None):
        raise ReportError(out, "exists and is not a tilescope sweep table; refusing to replace it")
    table = sweep_table(rows)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    except OSError as exc:
        raise ReportError(out, f"cannot write here ({exc.strerror})") from None
    try:
        with os.fdopen(fd, "wb") as f:
            with pa.ipc.new_file(f, table.schema, options=pa.ipc.IpcWriteOptions(compression="zstd")) as w:
                w.write_table(table)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; a sweep is meant to be shared
        os.replace(tmp, out)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise ReportError(out, f"cannot write ({exc.strerror or exc})") from None
        raise
    return out


class Sweep:
    """An opened sweep directory: its table (validated on open) and the paths of its reports."""

    def __init__(self, directory: str | Path) -> None:
        self.path = Path(directory).absolute()
        file = self.path / schema.SWEEP_FILE
        if not file.is_file():
            raise ReportError(self.path, f"not a tilescope sweep (no {schema.SWEEP_FILE})")
        version = _own_version(file)
        if version is None:
            raise ReportError(file, "not a tilescope sweep table (no sweep metadata)")
        if version not in schema.SWEEP_SUPPORTED_VERSIONS:
            raise ReportError(file, f"sweep format version {version} is not supported (this tilescope reads "
                              f"{', '.join(map(str, schema.SWEEP_SUPPORTED_VERSIONS))})")  # fmt: skip
        try:
            with pa.memory_map(str(file)) as source:
                table = pa.ipc.open_file(source).read_all()
        except (pa.ArrowException, OSError) as exc:
            raise ReportError(file, f"unreadable sweep table ({exc})") from None
        want = schema.SWEEP.schema
        if table.schema.remove_metadata() != want.remove_metadata():
            raise ReportError(file, "the sweep table's columns are not those of its format version")
        self.table = table

    def sweep(self) -> pd.DataFrame:
        """The sweep table, one row per finished point, in point order."""
        return self.table.to_pandas()

    def report_path(self, relative: str) -> Path | None:
        """The absolute path of a row's ``report`` (None for a row without one)."""
        return self.path / relative if relative else None


def open_sweep(directory: str | Path) -> Sweep:
    """Open the sweep directory ``directory`` (ReportError, one line, if it is not one)."""
    return Sweep(directory)


def is_sweep(directory: str | Path) -> bool:
    """Whether ``directory`` holds a sweep table tilescope wrote."""
    file = Path(directory) / schema.SWEEP_FILE
    return file.is_file() and _own_version(file) is not None
