"""Atomic report writer.

Tables are written into a temporary directory beside the destination; ``commit`` fsyncs every
file, writes the manifest (row counts, sizes, sha256) last and renames the directory into
place. A crash before the rename leaves only a hidden ``.<name>.tmp-*`` directory, never a half
report that looks whole.

Whose files are whose (``report_format.ownership``): an existing destination is replaced only if it
is empty or is a tilescope report by its own manifest (format name and version). Replacing a report
removes only the files tilescope wrote there; anything else in it (a user's notes) is moved into
the new report and listed in ``ReportWriter.messages``. A non-empty directory that is not a
tilescope report is refused, so a project directory given by mistake loses nothing. Temporaries a
killed write left beside the destination are cleaned on the next write (only those tilescope can
prove it made, see ``ownership``). Every failure to write (a path under a regular file, a read-only
place, a full disk) is a one-line ``ReportError``.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import os
import signal
import stat
import tempfile
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import FrameType
from typing import Any, Final

import numpy as np
import pyarrow as pa

from report_format import ownership, schema
from report_format.errors import ReportError
from report_format.origin import Origin
from report_format.paths import path_problem

TableData = pa.Table | pa.RecordBatch | Mapping[str, Any]
_COMPRESSION: Final = "zstd"


def default_producer() -> dict[str, str]:
    try:
        from importlib.metadata import version

        ver = version("tilescope")
    except Exception:  # not installed (running from a checkout)
        ver = "0+unknown"
    return {"name": "tilescope", "version": ver}


_preloading: threading.Thread | None = None


def preload() -> None:
    """Start, on a daemon thread, the import pyarrow makes the first time it converts a column:
    pandas (``pyarrow.lib._pandas_api`` asks whether a column is one of its objects), ~0.5 s of a
    ResNet-50 report's write. Called when a run starts (``profiler.engine``), it overlaps the run's
    numpy work, which leaves the GIL free; the import is the same either way (Python's import locks
    make a second importer wait for the first)."""
    global _preloading
    if _preloading is not None:
        return

    def load() -> None:
        with contextlib.suppress(ImportError):  # pandas is optional to pyarrow
            import pandas  # noqa: F401

    _preloading = threading.Thread(target=load, name="tilescope-preload", daemon=True)
    _preloading.start()


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
        self._sink = _open_sink(path)
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


def _open_sink(path: Path) -> pa.NativeFile:
    """The file a table is written to (a seam for tests that simulate a full disk)."""
    return pa.OSFile(str(path), "wb")


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


def _problem(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


_DEFERRED = (signal.SIGINT, signal.SIGTERM)


class _Recorder:
    """The handler of SIGINT and SIGTERM while a block holds them: it notes each one. Once its block
    is over it acts as the handler it replaced (it is still in place only if putting the handlers
    back was cut short, see ``_signals_deferred``)."""

    def __init__(self, previous: dict[int, Any]) -> None:
        self.previous = previous
        self.held: list[int] = []
        self.over = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if not self.over:
            self.held.append(signum)
            return
        handler = self.previous[signum]
        if callable(handler):
            handler(signum, frame)
        else:  # SIG_DFL: the default action (SIGTERM ends the process)
            signal.signal(signum, handler)
            signal.raise_signal(signum)


def _own_handler(sig: int) -> Any:
    """The handler of ``sig``, seen through recorders whose block is over."""
    handler = signal.getsignal(sig)
    while isinstance(handler, _Recorder) and handler.over:
        handler = handler.previous[sig]
    return handler


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM until the block is done: making a marked temporary and swapping a
    report into place are short and must not stop half way (SIGKILL still can; ``ownership``
    cleans up after it). A signal that arrives meanwhile is raised again, with its own handler,
    when the block ends. In the main thread the handlers are swapped for a recorder (this also
    catches a signal that arrived just before but was not yet handled); elsewhere signals are blocked.

    A signal the process ignores stays ignored (a job started with nohup or in the background
    inherits SIGINT ignored), and a handler Python did not install is left alone (it could not be
    put back). Putting the handlers back can be cut short: ``signal.signal`` first runs the handlers
    of pending signals, so Ctrl+C landing once SIGINT's own handler is back raises before SIGTERM's
    is. The recorder left in place then acts as SIGTERM's handler (it would otherwise swallow SIGTERM
    for good), the next block puts the real one back, and what was held is raised all the same."""
    if threading.current_thread() is not threading.main_thread():
        try:
            mask = signal.pthread_sigmask(signal.SIG_BLOCK, _DEFERRED)
        except (AttributeError, OSError, ValueError):
            yield
            return
        try:
            yield
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a blocked signal is delivered here
        return
    previous: dict[int, Any] = {
        int(sig): h for sig in _DEFERRED if (h := _own_handler(sig)) is not None and h != signal.SIG_IGN
    }
    recorder = _Recorder(previous)
    try:
        for sig in previous:
            signal.signal(sig, recorder)
        yield
    finally:
        recorder.over = True
        try:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        finally:
            raised: BaseException | None = None
            for held in dict.fromkeys(recorder.held):
                try:
                    signal.raise_signal(held)
                except BaseException as exc:  # SIGINT's KeyboardInterrupt must not drop a held SIGTERM
                    raised = raised or exc
            if raised is not None:
                raise raised


def _umask() -> int:
    """The process's umask (read from /proc where it can be, without setting it: other threads may
    be creating files meanwhile)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _check_path_text(path: str | Path) -> None:
    problem = path_problem(path)
    if problem:
        raise ReportError(Path(os.fspath(path).replace("\x00", "\\0")), f"cannot write a report here: {problem}")


def check_writable(path: str | Path) -> None:
    """Raise ReportError unless a directory could be created at ``path``: its nearest existing
    ancestor must be a directory this process can create entries in (tried, not guessed from
    permission bits, which do not stop root and do not know read-only mounts)."""
    _check_path_text(path)
    dest = Path(path).absolute()
    ancestor = dest.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        if ancestor.is_symlink():
            raise ReportError(dest, f"cannot write a report here: {ancestor} is a broken symbolic link")
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise ReportError(dest, f"cannot write a report here: {ancestor} is a file, not a directory")
    try:
        with _signals_deferred():  # Ctrl+C here must not leave the probe behind
            probe = tempfile.mkdtemp(prefix=f".tilescope-probe-{os.getpid()}-", dir=ancestor)
            os.rmdir(probe)
        _remove_stale_probes(ancestor)
    except OSError as exc:
        raise ReportError(dest, f"cannot write a report here: {ancestor}: {_problem(exc)}") from None


def _remove_stale_probes(directory: Path) -> None:
    """Empty probe directories of processes killed while probing (rmdir removes only empty ones)."""
    for entry in os.scandir(directory):
        pid = entry.name.split("-")[2] if entry.name.startswith(".tilescope-probe-") else ""
        if pid.isdigit() and ownership.process_gone(int(pid)):
            with contextlib.suppress(OSError):
                os.rmdir(entry.path)


def check_destination(path: str | Path) -> dict[str, Any] | None:
    """Raise ReportError unless a report can be written at ``path`` without losing anybody's
    files. Returns the manifest of the tilescope report that would be replaced (None if there is none)."""
    _check_path_text(path)
    dest = Path(path).absolute()
    if dest.is_symlink():  # the swap would replace the link by a directory and leave its target behind
        raise ReportError(
            dest, f"cannot write a report here: a symbolic link (to {os.readlink(dest)}); give the directory itself"
        )
    if dest.exists():
        if not dest.is_dir():
            raise ReportError(dest, "cannot write a report here: a file with this name exists")
        manifest = ownership.read_own_manifest(dest)
        try:
            with os.scandir(dest) as entries:  # closed at once: no ResourceWarning on a re-run
                empty = not any(entries)
        except OSError as exc:
            raise ReportError(dest, f"cannot write a report here: {_problem(exc)}") from None
        if manifest is None and not empty:
            what = (
                "its manifest.json is not a tilescope report manifest"
                if (dest / schema.MANIFEST_NAME).exists()
                else "it is not a tilescope report"
            )
            raise ReportError(
                dest, f"refusing to overwrite: the directory is not empty and {what}; choose a new or empty directory"
            )
        check_writable(dest)  # replacing it means creating and renaming entries beside it
        return manifest
    check_writable(dest)
    return None


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
        check_destination(self.destination)
        self.producer = producer or default_producer()
        self.engine = engine
        self.profiles = {p: True for p in schema.PROFILES}
        self.notes: list[str] = []
        self.info: dict[str, Any] = {}
        #: The manifest's ``origin`` (report_format.origin), when the caller knows how the report was made.
        self.origin: Origin | None = None
        #: One line per thing the writer did beyond writing (files kept, stale temporaries cleaned).
        self.messages: list[str] = []
        self._files: dict[str, _TableFile] = {}
        self._done = False
        self._tmp: Path | None = None
        try:
            self.destination.parent.mkdir(parents=True, exist_ok=True)
            with _signals_deferred():
                self.messages += ownership.clean_stale(self.destination)
                self._tmp = Path(
                    tempfile.mkdtemp(prefix=ownership.temp_prefix(self.destination, "tmp"), dir=self.destination.parent)
                )
                ownership.write_marker(self._tmp, self.destination, "new")
        except OSError as exc:
            self.abort()
            raise ReportError(self.destination, f"cannot write the report: {_problem(exc)}") from None
        except BaseException:  # e.g. Ctrl+C held during the block above, delivered at its end
            self.abort()
            raise

    # -- content ---------------------------------------------------------------------------
    def _directory(self) -> Path:
        """The temporary directory the report is written in, until it is committed or aborted."""
        if self._done or self._tmp is None:
            raise ReportError(self.destination, "writer already committed or aborted")
        return self._tmp

    def _file(self, name: str) -> _TableFile:
        tmp = self._directory()
        if name not in self._files:
            self._files[name] = _TableFile(tmp / f"{name}{schema.TABLE_SUFFIX}", name, self.producer)
        return self._files[name]

    def write(self, name: str, data: TableData) -> None:
        """Write a whole table (may be called once per table, or mixed with ``append``)."""
        self.append(name, data)

    def append(self, name: str, data: TableData) -> None:
        """Append rows to a table; large tables are streamed batch by batch."""
        table = to_table(name, data)
        try:
            self._file(name).append(table)
        except OSError as exc:  # e.g. the disk is full: nothing half-written stays behind
            self.abort()
            raise ReportError(self.destination, f"cannot write the report: {_problem(exc)}") from None

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
        tmp = self._directory()
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
            if self.origin is not None:  # optional: absent in reports whose maker did not say
                manifest["origin"] = self.origin.to_json()
            mpath = tmp / schema.MANIFEST_NAME
            with open(mpath, "w", encoding="utf-8") as f:
                json.dump(manifest, f, indent=1, sort_keys=True, default=_json_default)
                f.flush()
                os.fsync(f.fileno())
            _fsync_dir(tmp)
            with _signals_deferred():
                self._move_into_place()
        except OSError as exc:  # a full disk, a directory made read-only meanwhile...
            self.abort()
            raise ReportError(self.destination, f"cannot write the report: {_problem(exc)}") from None
        except BaseException:
            self.abort()
            raise
        self._done = True
        return self.destination

    def _move_into_place(self) -> None:
        dest, tmp = self.destination, self._tmp
        assert tmp is not None
        previous = check_destination(dest)  # re-check: something may have appeared meanwhile
        # mkdtemp made the directory 0700; a report is shared like any file: the umask's mode for a
        # new one, the previous directory's own mode (a user's chmod) for a rewrite
        os.chmod(tmp, stat.S_IMODE(dest.stat().st_mode) if dest.is_dir() else 0o777 & ~_umask())
        if not dest.exists():
            os.rename(tmp, dest)
            self._tmp = None
            (dest / ownership.MARKER).unlink()
            _fsync_dir(dest.parent)
            return
        # Swap: the previous report (or empty directory) goes aside under a marked name, so a kill
        # at any point leaves either it or the new report whole, and the next write can finish the job.
        old = Path(tempfile.mkdtemp(prefix=ownership.temp_prefix(dest, "old"), dir=dest.parent))
        ownership.write_marker(old, dest, "old")
        os.rename(dest, old / "report")
        try:
            os.rename(tmp, dest)
        except BaseException:  # an OSError, or Ctrl+C landing between the two renames
            os.rename(old / "report", dest)  # put the previous report back
            ownership.remove_owned(old, {ownership.MARKER})
            raise
        self._tmp = None
        (dest / ownership.MARKER).unlink()
        _fsync_dir(dest.parent)
        # Files the user kept in the previous report move into the new one; then only tilescope's
        # own files of the previous report are removed (never a recursive delete).
        kept = []
        for name in ownership.foreign_entries(old / "report", previous or {}):
            if not (dest / name).exists() and not (dest / name).is_symlink():  # never over the new report's files
                os.rename(old / "report" / name, dest / name)
                kept.append(name)
        if kept:
            self.messages.append(
                f"kept {len(kept)} {'entry' if len(kept) == 1 else 'entries'} tilescope did not write in {dest}: "
                + ", ".join(kept)
            )
        left = ownership.remove_owned(old / "report", ownership.owned_files(previous or {}))
        left = left or ownership.remove_owned(old, {ownership.MARKER})
        if left:
            self.messages.append(f"could not tidy {old}: it still holds {', '.join(left)}")
        _fsync_dir(dest.parent)

    def abort(self) -> None:
        """Discard everything written so far (only the temporary directory this writer made)."""
        for tf in self._files.values():
            try:
                tf._writer.close()
                tf._sink.close()
            except Exception:
                pass
        if self._tmp is not None and self._tmp.is_dir():
            with contextlib.suppress(OSError):  # only the files this writer makes: never a recursive delete
                # every name a table file can have: one interrupted while opening is not in _files yet
                ownership.remove_owned(self._tmp, ownership.OWN_NAMES)
        self._tmp = None
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
