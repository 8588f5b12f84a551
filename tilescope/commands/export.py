"""Export a report for other tools.

--trace writes the execution trace of one run as Chrome trace-event JSON, which Perfetto
(ui.perfetto.dev, also offline) and chrome://tracing open: one process per IPU with its BSP step
timeline, plus one thread per tile you name with --tiles. Timestamps are microseconds at the
target clock; each event's args keep the exact cycles.
"""

from __future__ import annotations

import argparse
import json

HELP = "export a report's execution trace as Chrome/Perfetto trace JSON"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("report", help="report directory (holds manifest.json)")
    p.add_argument("--trace", metavar="OUT.json", required=True, help="write Chrome/Perfetto trace-event JSON here")
    p.add_argument("--run", type=int, default=0, help="which captured run (default 0)")
    p.add_argument(
        "--tiles", default="", metavar="LIST", help='also one thread per tile, e.g. "0-3,100" (keep it short)'
    )


def run(args: argparse.Namespace) -> int:
    from app.tile_list import parse_tile_list
    from app.views.trace_events import report_to_trace_events
    from report_format.reader import open_report
    from tilescope.cli import CommandError
    from tilescope.outputs import check_output_file, write_atomically

    check_output_file(args.trace, "--trace")  # before any work: a bad path is one line at once
    report = open_report(args.report)
    if not report.has_execution_profile:
        why = "; ".join(report.notes) or "the report has no execution profile"
        raise CommandError(f"{args.report}: nothing to export: {why}")
    try:
        tiles = parse_tile_list(args.tiles, report.target_info.num_tiles) if args.tiles else None
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    doc = report_to_trace_events(report, args.run, tiles)
    # write-then-rename: never leave a half-written JSON behind
    out = write_atomically(args.trace, "--trace", lambda f: f.write(json.dumps(doc, separators=(",", ":")).encode()))
    print(f"wrote {out} ({len(doc['traceEvents']):,} events, run {args.run}); open it in https://ui.perfetto.dev")
    return 0
