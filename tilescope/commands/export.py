"""Export a report for other tools and for people.

--html writes one self-contained page (no network needed to open it): the Summary, Memory,
Liveness, Operations and Execution Trace as static figures and tables, the page to attach to a bug
report. --trace writes the execution trace of one run as Chrome trace-event JSON, which Perfetto
(ui.perfetto.dev, also offline) and chrome://tracing open: one process per IPU with its BSP step
timeline, plus one thread per tile you name with --tiles. Timestamps are microseconds at the
target clock; each event's args keep the exact cycles.
"""

from __future__ import annotations

import argparse
import json

from tilescope.outputs import FORCE_HELP

HELP = "export a report as one offline HTML page (--html) or Chrome/Perfetto trace JSON (--trace)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("report", help="report directory (holds manifest.json)")
    p.add_argument("--html", metavar="OUT.html", help="write a self-contained HTML page of the report here")
    p.add_argument("--trace", metavar="OUT.json", help="write Chrome/Perfetto trace-event JSON here")
    p.add_argument("--force", action="store_true", help=FORCE_HELP)
    p.add_argument(
        "--run",
        type=int,
        default=None,
        help="which captured run (default: the one the viewer opens on, the longest that computes: not the weight upload)",
    )
    p.add_argument(
        "--tiles", default="", metavar="LIST", help='also one thread per tile, e.g. "0-3,100" (keep it short)'
    )


def run(args: argparse.Namespace) -> int:
    from app.tile_list import parse_tile_list
    from app.views.trace_events import report_to_trace_events
    from report_format.reader import open_report
    from tilescope.errors import CommandError
    from tilescope.outputs import check_output_file, write_atomically

    for option, out_path in (("--trace", args.trace), ("--html", args.html)):
        if out_path:  # before any work: a bad path is one line at once
            check_output_file(out_path, option, follow_symlinks=args.force)
    report = open_report(args.report)
    if not args.html and not args.trace:
        raise CommandError("say what to write: --html OUT.html and/or --trace OUT.json")
    if args.html:
        from app.render.html import report_html

        page = report_html(report).encode("utf-8")
        out = write_atomically(args.html, "--html", lambda f: f.write(page), follow_symlinks=args.force)
        print(f"wrote {out}: Summary, Memory, Liveness, Operations, Execution Trace (opens offline)")
    if not args.trace:
        return 0
    if not report.has_execution_profile:
        from app.views.summary import distinct_notes  # the summary's rule: a note another contains says nothing new

        why = "; ".join(distinct_notes(report.notes)) or "the report has no execution profile"
        raise CommandError(f"{args.report}: nothing to export: {why}")
    try:
        tiles = parse_tile_list(args.tiles, report.target_info.num_tiles) if args.tiles else None
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    from app.views.runs import opening_run

    run_id = opening_run(report) if args.run is None else args.run
    doc = report_to_trace_events(report, run_id, tiles)
    # write-then-rename: never leave a half-written JSON behind
    trace = json.dumps(doc, separators=(",", ":")).encode()
    out = write_atomically(args.trace, "--trace", lambda f: f.write(trace), follow_symlinks=args.force)
    runs = report.runs().set_index("run")
    name = runs.at[run_id, "name"] if run_id in runs.index else ""
    which = "the longest that computes" if args.run is None else "as asked"
    print(
        f"wrote {out}: run {run_id} ({name}, {which}; {len(runs)} runs, --run N for another), "
        f"{len(doc['traceEvents']):,} events; open it in https://ui.perfetto.dev"
    )
    return 0
