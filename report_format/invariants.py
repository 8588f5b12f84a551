"""Cross-table invariants of a report (SPEC.md states them table by table).

A table copied in from another report, with the manifest updated to match, passes every per-file
check (schema, checksum, row count); only the relations between tables tell it apart: a target
of 2 IPUs x 16 tiles beside a 1,472-row tile table. Two levels:

* ``check_on_open``: from the manifest's row counts, the one-row ``target`` and small ``runs``
  tables, and one id column of ``programs``, ``variables`` and ``liveness_intervals`` (the keys
  the other tables join on); milliseconds whatever the report's size, so ``open_report`` runs it
  every time.
* ``check_all``: reads the tables and checks every key (tile ids, IPU ids, program ids, variable
  ids, the per-tile memory sums, the width of every tile_cycles row); ``summary --verify``.

Each failure is a ``ReportError`` naming the table and the relation broken.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from report_format.errors import ReportError
from report_format.manifest import Manifest, TargetInfo


class Report(Protocol):
    """What the checks read of an open report (``report_format.reader.Report``)."""

    path: Path
    manifest: Manifest

    @property
    def target_info(self) -> TargetInfo: ...

    def table(self, name: str, columns: list[str] | None = None) -> pa.Table: ...

    def num_rows(self, name: str) -> int: ...


# Tables whose ``tile`` column holds global tile ids.
TILE_KEYED = ("tile_memory", "tile_memory_by_category", "variable_placements", "vertices", "exchanges")


def _fail(report: Report, table: str, problem: str) -> None:
    where = report.path / report.manifest.tables[table].file if table in report.manifest.tables else report.path
    raise ReportError(where, f"inconsistent with the rest of the report: {problem}")


def check_on_open(report: Report) -> None:
    """The cheap invariants (see the module docstring)."""
    if report.num_rows("target") == 0:  # nothing to relate the tables to (reading the target says so)
        return
    t = report.target_info  # also checks: exactly one row
    if min(t.num_ipus, t.tiles_per_ipu, t.num_replicas, t.bytes_per_tile) < 1:
        _fail(report, "target", "num_ipus, tiles_per_ipu, num_replicas and bytes_per_tile must be positive")
    if t.num_tiles != t.num_ipus * t.tiles_per_ipu:
        _fail(report, "target", f"num_tiles {t.num_tiles} != num_ipus {t.num_ipus} x tiles_per_ipu {t.tiles_per_ipu}")
    if t.bytes_per_ipu != t.bytes_per_tile * t.tiles_per_ipu or t.total_memory != t.bytes_per_ipu * t.num_ipus:
        _fail(report, "target", "bytes_per_ipu / total_memory do not follow from bytes_per_tile and the tile counts")
    # An empty table is one not captured (hand-made and partial reports leave tables empty);
    # a table with rows must agree with the target and the runs.
    rows = report.num_rows("tile_memory")
    if rows and rows != t.num_tiles:
        _fail(
            report,
            "tile_memory",
            f"{rows:,} rows, but the target has {t.num_ipus} IPUs x {t.tiles_per_ipu:,} tiles = {t.num_tiles:,}",
        )
    steps = int(np.asarray(report.table("runs", ["steps"]).column(0)).sum()) if report.num_rows("runs") else 0
    expected = steps * t.num_ipus
    for name in ("execution_steps", "tile_cycles"):
        if report.num_rows(name) and report.num_rows(name) != expected:
            _fail(
                report,
                name,
                f"{report.num_rows(name):,} rows, but runs hold {steps:,} executed steps x {t.num_ipus} IPUs = {expected:,}",
            )
    if report.num_rows("liveness") % t.num_ipus:
        _fail(
            report, "liveness", f"{report.num_rows('liveness')} rows is not a whole number of steps x {t.num_ipus} IPUs"
        )
    # programs and variables: the ids other tables key on (one int column each: milliseconds)
    if report.num_rows("programs") and report.num_rows("liveness"):
        steps = int((np.asarray(report.table("programs", ["step"]).column(0)) >= 0).sum())
        if steps * t.num_ipus != report.num_rows("liveness"):
            _fail(
                report,
                "programs",
                f"{steps:,} program steps, but liveness holds {report.num_rows('liveness'):,} rows "
                f"= steps x {t.num_ipus} IPUs",
            )
    if report.num_rows("variables"):
        ids = report.table("variables", ["variable_id"]).column(0)
        n = report.num_rows("variables")
        if pc.min(ids).as_py() != 0 or pc.max(ids).as_py() != n - 1:
            _fail(report, "variables", f"variable ids are not 0..{n - 1} for its {n:,} rows")
        if report.num_rows("liveness_intervals"):
            top = pc.max(report.table("liveness_intervals", ["variable_id"]).column(0)).as_py()
            if top >= n:
                _fail(report, "variables", f"{n:,} variables, but liveness_intervals names variable {top}")


def _in_range(report: Report, table: str, column: str, upper: int, what: str) -> None:
    if not report.num_rows(table):
        return
    values = report.table(table, [column]).column(0)
    lo, hi = pc.min(values).as_py(), pc.max(values).as_py()
    if lo < 0 or hi >= upper:
        _fail(report, table, f"{column} runs {lo}..{hi}, outside {what} 0..{upper - 1}")


def _ids_exist(report: Report, table: str, column: str, key_table: str, key: str, allow_none: bool = False) -> None:
    if not report.num_rows(table) or not report.num_rows(key_table):  # empty: not captured
        return
    values = report.table(table, [column]).column(0)
    if allow_none:
        values = pc.filter(values, pc.not_equal(values, pa.scalar(-1)))
    known = report.table(key_table, [key]).column(0)
    missing = pc.filter(values, pc.invert(pc.is_in(values, value_set=known.combine_chunks())))
    if len(missing):
        _fail(
            report, table, f"{column} {missing[0].as_py()} is not in {key_table}.{key} ({len(missing):,} rows like it)"
        )


def check_all(report: Report) -> None:
    """Every invariant, reading the tables (``summary --verify``)."""
    check_on_open(report)
    t = report.target_info
    for name in TILE_KEYED:
        _in_range(report, name, "tile", t.num_tiles, f"the target's {t.num_tiles:,} tiles")
    for name in ("execution_steps", "tile_cycles", "liveness"):
        _in_range(report, name, "ipu", t.num_ipus, f"the target's {t.num_ipus} IPUs")
    if report.num_rows("tile_memory"):
        tiles = np.asarray(report.table("tile_memory", ["tile"]).column(0))
        if not np.array_equal(np.sort(tiles), np.arange(t.num_tiles)):
            _fail(report, "tile_memory", "does not hold each tile of the target exactly once")
        if report.num_rows("tile_memory_by_category"):
            cat = report.table("tile_memory_by_category", ["tile", "bytes"])
            by_tile = np.bincount(
                np.asarray(cat.column(0)), weights=np.asarray(cat.column(1), dtype=np.float64), minlength=t.num_tiles
            )
            mem = report.table("tile_memory", ["tile", "total_bytes_excluding_gaps"])
            total = np.zeros(t.num_tiles)
            total[np.asarray(mem.column(0))] = np.asarray(mem.column(1), dtype=np.float64)
            bad = np.flatnonzero(by_tile != total)
            if bad.size:
                _fail(
                    report,
                    "tile_memory_by_category",
                    f"tile {int(bad[0])}: categories sum to {int(by_tile[bad[0]]):,} bytes, "
                    f"tile_memory says {int(total[bad[0]]):,} ({bad.size:,} tiles like it)",
                )
    _ids_exist(report, "execution_steps", "program_id", "programs", "program_id")
    _ids_exist(report, "runs", "program_id", "programs", "program_id", allow_none=True)
    _ids_exist(report, "variable_placements", "variable_id", "variables", "variable_id")
    if report.num_rows("variable_placements") and report.num_rows("variables"):
        # each placed variable's pieces add up to its size (a variables table from another report does not)
        placed = report.table("variable_placements", ["variable_id", "bytes"])
        v = report.table("variables", ["variable_id", "bytes"])
        ids, size = np.asarray(v.column(0)), np.asarray(v.column(1), dtype=np.int64)
        by_var = np.bincount(np.asarray(placed.column(0)), weights=np.asarray(placed.column(1), np.float64),
                             minlength=int(ids.max()) + 1)  # fmt: skip
        has = np.bincount(np.asarray(placed.column(0)), minlength=by_var.size) > 0
        bad = np.flatnonzero(has[ids] & (by_var[ids] != size))
        if bad.size:
            i = int(ids[bad[0]])
            _fail(report, "variables", f"variable {i} is {int(size[bad[0]]):,} bytes, its placements "
                  f"{int(by_var[i]):,} ({bad.size:,} variables like it)")  # fmt: skip
    _ids_exist(report, "liveness_intervals", "variable_id", "variables", "variable_id")
    _ids_exist(report, "program_variables", "variable_id", "variables", "variable_id")
    _ids_exist(report, "vertices", "compute_set_id", "compute_sets", "compute_set_id")
    _ids_exist(report, "vertices", "codelet_id", "codelets", "codelet_id")
    if report.num_rows("tile_cycles"):
        lengths = pc.list_value_length(report.table("tile_cycles", ["cycles"]).column(0))
        lo, hi = pc.min(lengths).as_py(), pc.max(lengths).as_py()
        if lo != t.tiles_per_ipu or hi != t.tiles_per_ipu:
            _fail(report, "tile_cycles", f"rows hold {lo}..{hi} cycles, the target has {t.tiles_per_ipu} tiles per IPU")
