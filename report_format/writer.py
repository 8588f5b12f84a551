"""Atomic report writer.

Tables are written into a temporary directory beside the destination; ``commit`` fsyncs every
file, writes the manifest (row counts, sizes, sha256) last and renames the directory into
place. A crash before the rename leaves only a hidden ``.<name>.tmp-*`` directory, never a half
report that looks whole. An existing destination is replaced only if it is empty or is itself a
tilescope report.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from report_format import schema
from report_format.errors import ReportError

TableData = pa.Table | pa.RecordBatch | Mapping[str, Any]
_COMPRESSION = "zstd"


def default_producer() -> dict[str, str]:
    try:
        from importlib.metadata import version

        ver = version("tilescope")
    except Exception:  # not installed (running from a checkout)
        ver = "0+unknown"
    return {"name": "tilescope", "version": ver}


def _list_array(values: Any, type_: pa.ListType) -> pa.Array:
    """Fast path for list columns given as a 2-D numpy array (e.g. tile cycles)."""
    arr = np.asarray(values)
    if arr.ndim == 2:
        n, width = arr.shape
        offsets = pa.array(np.arange(0, (n + 1) * width, width, dtype=np.int32), type=pa.int32())
        flat = pa.array(arr.reshape(-1).astype(type_.value_type.to_pandas_dtype(), copy=False))
        return pa.ListArray.from_arrays(offsets, flat, type=type_)
    return pa.array(list(values), type=type_)


def to_table(name: str, data: TableData) -> pa.Table:
    """Coerce ``data`` to table ``name``'s exact schema, naming any missing or extra column."""
    spec = schema.table_spec(name)
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    given = list(data.column_names) if isinstance(data, pa.Table) else list(data.keys())
    missing = [c for c in spec.column_names if c not in given]
    extra = [c for c in given if c not in spec.column_names]
    if missing or extra:
        raise ReportError(
            f"table {name}",
            f"columns do not match the schema: missing {missing or 'none'}, unexpected {extra or 'none'}",
        )
    arrays = []
    for col in spec.columns:
        values = data.column(col.name) if isinstance(data, pa.Table) else data[col.name]
        try:
            if isinstance(values, (pa.Array, pa.ChunkedArray)):
                arr = values.cast(col.type) if values.type != col.type else values
            elif pa.types.is_list(col.type):
                arr = _list_array(values, col.type)
            else:
                arr = pa.array(np.asarray(values) if not isinstance(values, list) else values, type=col.type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as exc:
            raise ReportError(f"table {name}", f"column {col.name}: {exc}") from None
        if arr.null_count:
            raise ReportError(f"table {name}", f"column {col.name} has {arr.null_count} null values")
        arrays.append(arr)
    lengths = {len(a) for a in arrays}
    if len(lengths) > 1:
        raise ReportError(f"table {name}", f"columns have different lengths {sorted(lengths)}")
    return pa.Table.from_arrays(arrays, schema=spec.schema)


class _TableFile:
    """One open Arrow IPC file; rows are buffered so batches hold exactly batch_rows rows."""

    def __init__(self, path: Path, name: str, producer: dict[str, str]) -> None:
        self.spec = schema.table_spec(name)
        self.path = path
        sch = self.spec.schema.with_metadata(schema.file_metadata(name, producer))
        self._sink = pa.OSFile(str(path), "wb")
        opts = pa.ipc.IpcWriteOptions(compression=_COMPRESSION)
        self._writer = pa.ipc.new_file(self._sink, sch, options=opts)
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self.rows = 0

    def append(self, table: pa.Table) -> None:
        self.rows += table.num_rows
        batch_rows = self.spec.batch_rows
        if batch_rows is None:
            for batch in table.combine_chunks().to_batches():
                self._writer.write_batch(batch)
            return
        self._pending.append(table)
        self._pending_rows += table.num_rows
        if self._pending_rows >= batch_rows:
            self._flush(final=False)

    def _flush(self, final: bool) -> None:
        if not self._pending:
            return
        merged = pa.concat_tables(self._pending).combine_chunks()
        batch_rows = self.spec.batch_rows or max(merged.num_rows, 1)
        full = (merged.num_rows // batch_rows) * batch_rows
        upto = merged.num_rows if final else full
        for start in range(0, upto, batch_rows):
            self._writer.write_batch(merged.slice(start, min(batch_rows, upto - start)).to_batches()[0])
        rest = merged.slice(upto)
        self._pending = [rest] if rest.num_rows else []
        self._pending_rows = rest.num_rows

    def close(self) -> None:
        self._flush(final=True)
        self._writer.close()
        self._sink.flush()
        fd = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self._sink.close()


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _check_destination(dest: Path) -> None:
    if dest.exists():
        if not dest.is_dir():
            raise ReportError(dest, "cannot write a report here: a file with this name exists")
        if any(dest.iterdir()) and not (dest / schema.MANIFEST_NAME).is_file():
            raise ReportError(dest, "refusing to overwrite: the directory is not empty and is not a tilescope report")


class ReportWriter:
    """Write one report directory atomically.

    Use as a context manager: leaving the block normally commits, an exception discards::

        with ReportWriter(path, engine="main") as w:
            w.write("target", {...})
            for chunk in chunks:
                w.append("tile_cycles", chunk)
            w.set_profile("execution", False, note="not captured: out of memory")
    """

    def __init__(self, directory: str | Path, *, engine: str = "", producer: dict[str, str] | None = None) -> None:
        self.destination = Path(directory).absolute()
        _check_destination(self.destination)
        self.destination.parent.mkdir(parents=True, exist_ok=True)
        self.producer = producer or default_producer()
        self.engine = engine
        self.profiles = {p: True for p in schema.PROFILES}
        self.notes: list[str] = []
        self.info: dict[str, Any] = {}
        self._tmp = Path(tempfile.mkdtemp(prefix=f".{self.destination.name}.tmp-", dir=self.destination.parent))
        self._files: dict[str, _TableFile] = {}
        self._done = False

    # -- content ---------------------------------------------------------------------------
    def _file(self, name: str) -> _TableFile:
        if self._done:
            raise ReportError(self.destination, "writer already committed or aborted")
        if name not in self._files:
            self._files[name] = _TableFile(self._tmp / f"{name}{schema.TABLE_SUFFIX}", name, self.producer)
        return self._files[name]

    def write(self, name: str, data: TableData) -> None:
        """Write a whole table (may be called once per table, or mixed with ``append``)."""
        self.append(name, data)

    def append(self, name: str, data: TableData) -> None:
        """Append rows to a table; large tables are streamed batch by batch."""
        self._file(name).append(to_table(name, data))

    def set_profile(self, profile: str, captured: bool, note: str = "") -> None:
        """Record whether a profile (graph / execution / debug_info) was captured, and why not."""
        if profile not in schema.PROFILES:
            raise ReportError(self.destination, f"unknown profile {profile!r}")
        self.profiles[profile] = captured
        if note:
            self.notes.append(note)

    # -- finishing ---------------------------------------------------------------------------
    def commit(self) -> Path:
        """Finish every table, write the manifest, and move the report into place."""
        if self._done:
            raise ReportError(self.destination, "writer already committed or aborted")
        try:
            for name in schema.TABLE_NAMES:  # tables never written are present and empty
                self._file(name)
            tables = {}
            for name in schema.TABLE_NAMES:
                tf = self._files[name]
                tf.close()
                tables[name] = {
                    "file": tf.path.name,
                    "rows": tf.rows,
                    "bytes": tf.path.stat().st_size,
                    "sha256": _sha256(tf.path),
                    "batch_rows": tf.spec.batch_rows,
                }
            manifest = {
                "format": schema.FORMAT_NAME,
                "format_version": schema.FORMAT_VERSION,
                "producer": self.producer,
                "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
                "engine": self.engine,
                "profiles": self.profiles,
                "notes": self.notes,
                "info": self.info,
                "tables": tables,
            }
            mpath = self._tmp / schema.MANIFEST_NAME
            with open(mpath, "w", encoding="utf-8") as f:
                json.dump(manifest, f, indent=1, sort_keys=True, default=_json_default)
                f.flush()
                os.fsync(f.fileno())
            _fsync_dir(self._tmp)
            self._move_into_place()
        except BaseException:
            self.abort()
            raise
        self._done = True
        return self.destination

    def _move_into_place(self) -> None:
        dest = self.destination
        _check_destination(dest)  # re-check: something may have appeared meanwhile
        old = None
        if dest.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old-", dir=dest.parent))
            os.rename(dest, old / "report")
        os.rename(self._tmp, dest)
        _fsync_dir(dest.parent)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)

    def abort(self) -> None:
        """Discard everything written so far."""
        for tf in self._files.values():
            try:
                tf._writer.close()
                tf._sink.close()
            except Exception:
                pass
        shutil.rmtree(self._tmp, ignore_errors=True)
        self._done = True

    def __enter__(self) -> ReportWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if self._done:
            return
        if exc_type is None:
            self.commit()
        else:
            self.abort()


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")
