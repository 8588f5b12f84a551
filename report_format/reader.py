"""Report reader: validates up front, then loads lazily from memory-mapped Arrow files.

``open_report(path)`` checks the manifest, the format version, that every table file exists
with the size the manifest records, and that each file's schema (columns, types, metadata) is
the one this version defines. Table *data* is read only when a query asks for it; a whole-table
read also checks the file's sha256. Every failure is a ``ReportError`` with one line naming the
file and the problem.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import fields
from functools import cached_property
from pathlib import Path
from typing import cast

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from report_format import invariants, schema
from report_format.errors import ReportError
from report_format.manifest import TableEntry, TargetInfo, read_manifest, require
from report_format.vocabulary import Provenance

# Errors Arrow, the OS and the JSON parser raise on damaged input; wrapped into ReportError.
_DAMAGE = (pa.ArrowException, OSError, ValueError, KeyError, TypeError, IndexError, UnicodeDecodeError, OverflowError)


class Report:
    """An opened report. Queries are named after libpva's nouns and return pandas or numpy."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).absolute()
        self.manifest = read_manifest(self.path)
        self._readers: dict[str, pa.ipc.RecordBatchFileReader] = {}
        self._cache: dict[str, pa.Table] = {}
        self._projections: dict[tuple[str, tuple[str, ...]], pa.Table] = {}
        self._verified: set[str] = set()
        for name in self.manifest.tables:
            self._open_table(name)
        invariants.check_on_open(self)  # a table copied in from another report stops here

    # -- validation and raw access ----------------------------------------------------------
    def _file(self, name: str) -> Path:
        return self.path / self.manifest.tables[name].file

    def _open_table(self, name: str) -> pa.ipc.RecordBatchFileReader:
        if name in self._readers:
            return self._readers[name]
        spec = schema.table_spec(name)
        entry = self.manifest.tables[name]
        fpath = self._file(name)
        if not fpath.is_file():
            raise ReportError(fpath, f"table file is missing (table {name})")
        size = fpath.stat().st_size
        if size != entry.bytes:
            raise ReportError(fpath, f"file is {size} bytes but the manifest says {entry.bytes}: truncated or replaced")
        try:
            reader = pa.ipc.open_file(pa.memory_map(str(fpath), "r"))
        except _DAMAGE as exc:
            raise ReportError(fpath, f"not a readable Arrow IPC file ({_short(exc)})") from None
        meta = reader.schema.metadata or {}
        raw = meta.get(schema.METADATA_KEY.encode())
        if raw is None:
            raise ReportError(fpath, f"an Arrow file, but not a tilescope table (no '{schema.METADATA_KEY}' metadata)")
        try:
            info = json.loads(raw.decode("utf-8"))
            ok = isinstance(info, dict)
        except (ValueError, UnicodeDecodeError):
            ok = False
        require(ok, fpath, f"'{schema.METADATA_KEY}' metadata is not a JSON object")
        require(info.get("table") == name, fpath, f"holds table {info.get('table')!r}, expected {name!r}")
        require(
            info.get("format_version") == self.manifest.format_version,
            fpath,
            f"table format version {info.get('format_version')!r} differs from the manifest's {self.manifest.format_version}",
        )
        for col in spec.columns:
            idx = reader.schema.get_field_index(col.name)
            if idx < 0:
                raise ReportError(fpath, f"column {col.name!r} is missing")
            if reader.schema.field(idx).type != col.type:
                raise ReportError(
                    fpath, f"column {col.name!r} has type {reader.schema.field(idx).type}, expected {col.type}"
                )
        extra = [n for n in reader.schema.names if n not in spec.column_names]
        require(not extra, fpath, f"unexpected columns {extra}")
        self._readers[name] = reader
        return reader

    def table(self, name: str, columns: list[str] | None = None) -> pa.Table:
        """The table (whole, or only ``columns``, decompressing just those). The file's sha256 is
        checked on its first read; row counts are checked against the manifest."""
        if name in self._cache:
            table = self._cache[name]
            return table.select(columns) if columns else table
        if name not in self.manifest.tables:  # a table newer than this report's format version
            self._cache[name] = schema.table_spec(name).schema.empty_table()
            return self.table(name, columns)
        fpath = self._file(name)
        entry = self.manifest.tables[name]
        if name not in self._verified:
            if _sha256(fpath) != entry.sha256:
                raise ReportError(fpath, "checksum mismatch: the file is damaged or was modified after writing")
            self._verified.add(name)
        if columns:
            unknown = [c for c in columns if c not in schema.table_spec(name).column_names]
            if unknown:
                raise ReportError(fpath, f"no columns {unknown} in table {name}")
            key = (name, tuple(columns))
            if key not in self._projections:
                self._projections[key] = self._read(name, fpath, entry, columns)
            return self._projections[key]
        self._cache[name] = self._read(name, fpath, entry, None)
        return self._cache[name]

    def _read(self, name: str, fpath: Path, entry: TableEntry, columns: list[str] | None) -> pa.Table:
        try:
            source = pa.memory_map(str(fpath), "r")
            if columns:
                names = self._open_table(name).schema.names
                opts = pa.ipc.IpcReadOptions(included_fields=[names.index(c) for c in columns])
                table = pa.ipc.open_file(source, options=opts).read_all().select(columns)  # caller's order
            else:
                table = self._open_table(name).read_all()
        except _DAMAGE as exc:
            raise ReportError(fpath, f"damaged table data ({_short(exc)})") from None
        if table.num_rows != entry.rows:
            raise ReportError(fpath, f"holds {table.num_rows} rows but the manifest says {entry.rows}")
        return table

    def df(self, name: str, columns: list[str] | None = None) -> pd.DataFrame:
        """The table as a pandas DataFrame."""
        return self.table(name, columns).to_pandas()

    def num_rows(self, name: str) -> int:
        entry = self.manifest.tables.get(name)
        return entry.rows if entry else 0

    def verify(self) -> None:
        """Read every table completely, checking checksums and row counts, then every
        cross-table invariant (``report_format.invariants``)."""
        for name in self.manifest.tables:
            self._verified.discard(name)
            self.table(name)
            self._cache.pop(name, None)
        invariants.check_all(self)

    # -- report-level facts -----------------------------------------------------------------
    @property
    def format_version(self) -> int:
        return self.manifest.format_version

    @property
    def profiles(self) -> dict[str, bool]:
        return self.manifest.profiles

    @property
    def has_execution_profile(self) -> bool:
        return self.manifest.profiles["execution"] and self.num_rows("runs") > 0

    @property
    def notes(self) -> list[str]:
        return self.manifest.notes

    def files(self) -> list[tuple[str, int]]:
        """(file name, bytes) of every file of the report."""
        out = [(schema.MANIFEST_NAME, (self.path / schema.MANIFEST_NAME).stat().st_size)]
        out += [(e.file, e.bytes) for e in self.manifest.tables.values()]
        return out

    @cached_property
    def target_info(self) -> TargetInfo:
        return self.target()

    # -- typed queries (libpva nouns) -------------------------------------------------------
    def target(self) -> TargetInfo:
        t = self.table("target")
        if t.num_rows != 1:
            raise ReportError(self._file("target"), f"must hold exactly one row, holds {t.num_rows}")
        row = {k: v[0] for k, v in t.to_pydict().items()}
        return TargetInfo(**{f.name: row[f.name] for f in fields(TargetInfo)})

    def engine_options(self) -> pd.DataFrame:
        return self.df("engine_options")

    def tile_memory(self) -> pd.DataFrame:
        return self.df("tile_memory")

    def tile_memory_by_category(self, tiles: list[int] | None = None) -> pd.DataFrame:
        return self._rows_for_tiles("tile_memory_by_category", tiles)

    def variables(self) -> pd.DataFrame:
        return self.df("variables")

    def variable_placements(self, tiles: list[int] | None = None) -> pd.DataFrame:
        return self._rows_for_tiles("variable_placements", tiles)

    def programs(self) -> pd.DataFrame:
        return self.df("programs")

    def replicas(self) -> pd.DataFrame:
        """Data-parallel replicas and which one the report profiles (empty before format 3)."""
        return self.df("replicas")

    def pipeline_stages(self) -> pd.DataFrame:
        """Stages of pipelined programs: stage, IPU, micro-batches, cycles (empty if none, or before format 3)."""
        return self.df("pipeline_stages")

    def program_variables(self) -> pd.DataFrame:
        """Reads and writes of each program step (empty for format-1 reports)."""
        return self.df("program_variables")

    def compute_sets(self) -> pd.DataFrame:
        return self.df("compute_sets")

    def codelets(self) -> pd.DataFrame:
        return self.df("codelets")

    def vertices(self, tiles: list[int] | None = None) -> pd.DataFrame:
        return self._rows_for_tiles("vertices", tiles)

    def exchanges(self, tiles: list[int] | None = None) -> pd.DataFrame:
        return self._rows_for_tiles("exchanges", tiles)

    def streams(self) -> pd.DataFrame:
        return self.df("streams")

    def liveness(self) -> pd.DataFrame:
        return self.df("liveness")

    def liveness_intervals(self) -> pd.DataFrame:
        return self.df("liveness_intervals")

    def debug_contexts(self) -> pd.DataFrame:
        return self.df("debug_contexts")

    def runs(self) -> pd.DataFrame:
        return self.df("runs")

    def execution_steps(self, run: int | None = None) -> pd.DataFrame:
        t = self.table("execution_steps")
        if run is not None:
            t = t.filter(pc.equal(t["run"], pa.scalar(run)))
        return t.to_pandas()

    @property
    def estimated_runs(self) -> list[int]:
        """Runs whose cycles are estimated (a compile-only profile), not simulated; older reports have none."""
        t = self.table("run_provenance")
        runs = t["run"].to_numpy().astype(np.int64)
        estimated = np.asarray(t["provenance"].to_pylist(), dtype=object) == Provenance.ESTIMATED.value
        return runs[estimated].tolist() if len(runs) else []

    def data_dependent_programs(self) -> pd.DataFrame:
        """Program-tree nodes whose cycles depend on data, and why (program_id, reason)."""
        return self.df("data_dependent_programs")

    def truncations(self) -> pd.DataFrame:
        return self.df("truncations")

    def _rows_for_tiles(self, name: str, tiles: list[int] | None) -> pd.DataFrame:
        t = self.table(name)
        if tiles is not None:
            t = t.filter(pc.is_in(t["tile"], value_set=pa.array(tiles, type=pa.int32())))
        return t.to_pandas()

    # -- per-tile cycles: random access by step ---------------------------------------------
    def _tile_cycles_rows(self, first_row: int, last_row: int) -> np.ndarray:
        """Rows [first_row, last_row) of tile_cycles as an (n, tiles_per_ipu) int32 array."""
        entry = self.manifest.tables["tile_cycles"]
        fpath = self._file("tile_cycles")
        width = self.target_info.tiles_per_ipu
        if not (0 <= first_row <= last_row <= entry.rows):
            raise ReportError(fpath, f"rows {first_row}..{last_row} out of range (table has {entry.rows} rows)")
        batch_rows = entry.batch_rows or max(entry.rows, 1)
        reader = self._open_table("tile_cycles")
        out = np.empty((last_row - first_row, width), dtype=np.int32)
        row = first_row
        try:
            while row < last_row:
                b = row // batch_rows
                if b >= reader.num_record_batches:
                    raise ReportError(fpath, f"batch {b} is missing (file has {reader.num_record_batches} batches)")
                batch = reader.get_batch(b)
                start = row - b * batch_rows
                take = min(last_row - row, batch.num_rows - start)
                if take <= 0:
                    raise ReportError(fpath, f"batch {b} holds {batch.num_rows} rows; expected {batch_rows}")
                col = cast(pa.ListArray, batch.column(3))  # list<int32>: its type is checked on open
                # Fast path: a whole batch's values are contiguous (rows have fixed width).
                col = col if (start == 0 and take == batch.num_rows) else col.slice(start, take)
                values = col.flatten().to_numpy(zero_copy_only=False)
                if values.size != take * width:
                    raise ReportError(fpath, f"a row's cycles do not hold tiles_per_ipu={width} values")
                out[row - first_row : row - first_row + take] = values.reshape(take, width)
                row += take
        except ReportError:
            raise
        except _DAMAGE as exc:
            raise ReportError(fpath, f"damaged table data ({_short(exc)})") from None
        return out

    def _run_row_offset(self, run: int) -> int:
        runs = self.table("runs", ["run", "steps"]).to_pydict()
        offset = 0
        for r, steps in zip(runs["run"], runs["steps"], strict=True):
            if r == run:
                return offset
            offset += steps * self.target_info.num_ipus
        raise ReportError(self.path, f"no run {run} in this report (runs: {runs['run']})")

    def tile_cycles(self, run: int, step: int, ipu: int | None = None) -> np.ndarray:
        """Cycles of each tile in one executed step: shape (num_ipus, tiles_per_ipu), or
        (tiles_per_ipu,) when ``ipu`` is given. Reads only the batch holding that step."""
        return self.tile_cycles_range(run, step, step + 1, ipu)[0]

    def tile_cycles_range(self, run: int, first_step: int, last_step: int, ipu: int | None = None) -> np.ndarray:
        """Cycles of steps [first_step, last_step): shape (steps, num_ipus, tiles_per_ipu),
        or (steps, tiles_per_ipu) when ``ipu`` is given."""
        n_ipus = self.target_info.num_ipus
        base = self._run_row_offset(run)
        rows = self._tile_cycles_rows(base + first_step * n_ipus, base + last_step * n_ipus)
        rows = rows.reshape(last_step - first_step, n_ipus, -1)
        return rows if ipu is None else rows[:, ipu, :]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 22), b""):
                h.update(chunk)
    except OSError as exc:
        raise ReportError(path, f"cannot read ({exc.strerror})") from None
    return h.hexdigest()


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def open_report(path: str | Path) -> Report:
    """Open and validate a report directory; raises ReportError with one line on any problem."""
    try:
        return Report(path)
    except ReportError:
        raise
    except _DAMAGE as exc:
        raise ReportError(path, f"cannot read report ({_short(exc)})") from None
