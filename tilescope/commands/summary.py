"""Print the headline figures of a report: target, graph, memory, liveness, execution.

The same figures the viewer's Summary page shows, then the Insights page's sentences (one
computation, app.views.insights). With --json the output is a JSON object whose keys (e.g.
memory.max_tile_bytes, execution.total_cycles) are stable for scripts and CI; ``insights`` is the
list of those sentences.
"""

from __future__ import annotations

import argparse
import json

HELP = "headline figures of a report (text, or --json for scripts and CI)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("report", help="report directory (holds manifest.json)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.add_argument(
        "--verify", action="store_true", help="also read every table fully: checksums and cross-table invariants"
    )
    p.add_argument(
        "--run",
        type=int,
        default=None,
        help="execution totals (total_cycles, total_flops, tile_balance, ...) of this run alone (default: all runs)",
    )


def run(args: argparse.Namespace) -> int:
    from app.render.text import summary_text
    from app.views.insights import hints
    from app.views.summary import summary
    from report_format.reader import open_report

    report = open_report(args.report)
    if args.verify:
        report.verify()
    doc = summary(report, args.run)
    said = hints(report)
    if args.json:
        print(json.dumps({**doc, "insights": said}, indent=2, sort_keys=True))
    else:
        print(summary_text(doc))
        print("\n".join(f"{'insights' if i == 0 else '':<14}{h}" for i, h in enumerate(said)))
    return 0
