"""Whether two report directories hold the same tables, table by table (Arrow contents, not bytes).

A speed or memory change to the simulator must leave every report table as it was: run the same
command on the old and the new code into two report directories and compare them here. Every
``*.arrow`` file under the first directory (sub-reports included) is read and compared with its
namesake in the second: schema (with metadata), row count, then each column. The manifests are not
compared (they hold the write time and host-measured seconds), nor the ``autoReport.directory``
row of ``engine_options`` (each report names its own directory).

    python bench/same_tables.py /tmp/before /tmp/after      # exit 0: identical; 1: a table differs
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc


def _read(path: Path) -> pa.Table:
    with pa.memory_map(str(path)) as source:
        return ipc.open_file(source).read_all()


def _without_own_directory(t: pa.Table) -> pa.Table:
    """``engine_options`` without its ``autoReport.directory`` row: each report names its own."""
    import pyarrow.compute as pc

    return t.filter(pc.not_equal(t["name"], pa.scalar("autoReport.directory")))


def table_differences(a: pa.Table, b: pa.Table) -> list[str]:
    """What differs between two tables: schema, row count, or the names of the columns that differ."""
    if not a.schema.equals(b.schema, check_metadata=True):
        return [f"schema: {a.schema} != {b.schema}"]
    if a.num_rows != b.num_rows:
        return [f"rows: {a.num_rows:,} != {b.num_rows:,}"]
    return [f"column {name!r}" for name in a.column_names if not a[name].equals(b[name])]


def compare_dirs(a: Path, b: Path) -> tuple[int, list[str]]:
    """(tables compared, one line per difference) between the report trees ``a`` and ``b``."""
    problems: list[str] = []
    names_a = {p.relative_to(a) for p in a.rglob("*.arrow")}
    names_b = {p.relative_to(b) for p in b.rglob("*.arrow")}
    problems += [f"{rel}: only in {a}" for rel in sorted(names_a - names_b)]
    problems += [f"{rel}: only in {b}" for rel in sorted(names_b - names_a)]
    compared = 0
    for rel in sorted(names_a & names_b):
        compared += 1
        ta, tb = _read(a / rel), _read(b / rel)
        if rel.stem == "engine_options":
            ta, tb = _without_own_directory(ta), _without_own_directory(tb)
        problems += [f"{rel}: {d}" for d in table_differences(ta, tb)]
    return compared, problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    args = ap.parse_args(argv)
    compared, problems = compare_dirs(args.before, args.after)
    for line in problems:
        print(line)
    print(f"{compared} tables compared, {len(problems)} differences")
    return 1 if problems or compared == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
