"""A report's manifest: read and validated before any table (format, version, tables, checksums).

Separate from ``reader`` so cross-table checks (``invariants``) can name a report's manifest and
target without the reader that opens it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from report_format import schema
from report_format.errors import ReportError
from report_format.origin import Origin, origin_of


@dataclass(frozen=True)
class TargetInfo:
    """The ``target`` table's single row (libpva ``compilation.target``)."""

    name: str
    type: str
    architecture: str
    num_ipus: int
    tiles_per_ipu: int
    num_tiles: int
    bytes_per_tile: int
    bytes_per_ipu: int
    total_memory: int
    clock_hz: float
    num_replicas: int
    ipus_per_replica: int
    num_worker_contexts: int
    exchange_bytes_per_cycle: float
    interleaved_memory_start: int
    fp16_flops_per_cycle: float
    fp32_flops_per_cycle: float


@dataclass(frozen=True)
class TableEntry:
    file: str
    rows: int
    bytes: int
    sha256: str
    batch_rows: int | None


@dataclass(frozen=True)
class Manifest:
    format_version: int
    producer: dict[str, str]
    created: str
    engine: str
    profiles: dict[str, bool]
    notes: list[str]
    info: dict[str, Any]
    tables: dict[str, TableEntry]
    #: How the report was made (model or script, its hash, the run options); None when the report
    #: does not say (written before the key existed, or by an engine driven outside ``tilescope run``).
    origin: Origin | None = None


def require(cond: bool, where: Path, problem: str) -> None:
    if not cond:
        raise ReportError(where, problem)


def read_manifest(path: Path) -> Manifest:
    """Parse and check ``manifest.json`` of the report directory ``path``."""
    mpath = path / schema.MANIFEST_NAME
    if not path.exists():
        swapped = sorted(path.parent.glob(f".{path.name}.old-*/report")) if path.parent.is_dir() else []
        if swapped:  # a write killed in the instant its previous report was swapped out
            raise ReportError(
                path,
                f"no such file or directory; an interrupted write left the previous report in {swapped[0]} "
                "(the next write to this path restores it)",
            )
        raise ReportError(path, "no such file or directory")
    if not path.is_dir():
        raise ReportError(path, "not a tilescope report (a report is a directory holding manifest.json)")
    if not mpath.is_file():
        inside = sorted(d for d in path.iterdir() if (d / schema.MANIFEST_NAME).is_file())
        if inside:  # e.g. autoReport.directory of a named engine, which writes into <directory>/<name>
            names = ", ".join(str(d) for d in inside[:5]) + (f" and {len(inside) - 5} more" if len(inside) > 5 else "")
            raise ReportError(path, f"not a report itself, but it holds {len(inside)}: {names} (a named engine "
                              "writes into a sub-directory named after it); open one of those")  # fmt: skip
        if mpath.exists():  # a FIFO or a device: never opened (reading one could block forever)
            raise ReportError(mpath, "not a regular file: not a tilescope report")
        raise ReportError(mpath, "missing: not a tilescope report, or its writing did not finish")
    try:
        doc = json.loads(mpath.read_bytes().decode("utf-8"))
    except json.JSONDecodeError as exc:
        raise ReportError(mpath, f"not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}") from None
    except UnicodeDecodeError:
        raise ReportError(mpath, "not valid UTF-8 text") from None
    except RecursionError:  # thousands of nested '[': Python's parser recurses per level
        raise ReportError(mpath, "nested too deeply to be a tilescope manifest") from None
    require(isinstance(doc, dict), mpath, "not a JSON object")
    require(
        doc.get("format") == schema.FORMAT_NAME,
        mpath,
        f"not a tilescope report manifest (format is {doc.get('format')!r})",
    )
    version = doc.get("format_version")
    require(
        isinstance(version, int) and not isinstance(version, bool),
        mpath,
        f"format_version {version!r} is not an integer",
    )
    if version not in schema.SUPPORTED_VERSIONS:
        newest = max(schema.SUPPORTED_VERSIONS)
        if version > newest:
            raise ReportError(
                mpath,
                f"report format version {version} is newer than this tilescope reads ({newest}); upgrade tilescope",
            )
        raise ReportError(
            mpath, f"report format version {version} is not supported (supported: {list(schema.SUPPORTED_VERSIONS)})"
        )
    try:
        tables_doc = doc["tables"]
        require(isinstance(tables_doc, dict), mpath, "'tables' is not an object")
        tables: dict[str, TableEntry] = {}
        for name in schema.table_names(version):
            require(name in tables_doc, mpath, f"table {name!r} is missing from the manifest")
            t = tables_doc[name]
            entry = TableEntry(str(t["file"]), int(t["rows"]), int(t["bytes"]), str(t["sha256"]), t.get("batch_rows"))
            require(
                entry.file == f"{name}{schema.TABLE_SUFFIX}",
                mpath,
                f"table {name!r} has unexpected file {entry.file!r}",
            )
            require(entry.rows >= 0 and entry.bytes >= 0, mpath, f"table {name!r} has negative rows or bytes")
            tables[name] = entry
        profiles = {p: bool(doc.get("profiles", {}).get(p, False)) for p in schema.PROFILES}
        return Manifest(
            format_version=version,
            producer=dict(doc.get("producer", {})),
            created=str(doc.get("created", "")),
            engine=str(doc.get("engine", "")),
            profiles=profiles,
            notes=[str(n) for n in doc.get("notes", [])],
            info=dict(doc.get("info", {})),
            tables=tables,
            origin=origin_of(doc.get("origin")),
        )
    except ReportError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ReportError(mpath, f"malformed manifest: {type(exc).__name__}: {exc}") from None
