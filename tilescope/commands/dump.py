"""Print a report's raw tables, for debugging the format.

Without TABLE, lists the tables with their row counts and sizes. With TABLE, prints its rows as
CSV (default) or JSON lines. List columns (shape, cycles) print as JSON arrays.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys

HELP = "raw tables of a report (CSV or JSON), for debugging the format"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("report", help="report directory (holds manifest.json)")
    p.add_argument("table", nargs="?", help="table name; omit to list the tables")
    p.add_argument("--format", choices=("csv", "json"), default="csv", help="output format (default csv)")
    p.add_argument("--limit", type=int, default=None, metavar="N", help="print at most N rows")


def run(args: argparse.Namespace) -> int:
    from report_format import schema
    from report_format.reader import open_report
    from tilescope.errors import CommandError

    if args.limit is not None and args.limit < 0:
        raise CommandError(f"--limit must be 0 or more, not {args.limit}")
    report = open_report(args.report)
    if args.table is None:
        out = sys.stdout
        out.write(f"{'table':<26} {'rows':>12} {'bytes':>14}  profile\n")
        for name, entry in report.manifest.tables.items():
            out.write(f"{name:<26} {entry.rows:>12,} {entry.bytes:>14,}  {schema.TABLES[name].profile}\n")
        return 0
    if args.table not in schema.TABLES:
        raise CommandError(f"unknown table {args.table!r}; tables are: {', '.join(schema.TABLE_NAMES)}")
    table = report.table(args.table)
    if args.limit is not None:
        table = table.slice(0, min(args.limit, table.num_rows))  # any N: Arrow's offsets are int64
    rows = table.to_pylist()
    if args.format == "json":
        for row in rows:
            sys.stdout.write(json.dumps(row) + "\n")
    else:
        w = csv.writer(sys.stdout, lineterminator="\n")
        w.writerow(table.column_names)
        for row in rows:
            w.writerow([json.dumps(v) if isinstance(v, list) else v for v in row.values()])
    return 0
