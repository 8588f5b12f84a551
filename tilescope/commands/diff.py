"""Compare two reports: configuration parity, headline deltas and the biggest changes.

BASELINE is the reference run, ACTIVE the new one; every delta is active - baseline. Program steps
are aligned on the program tree (inserted or removed steps do not shift the rest), operations by
debug-context path, variables by name, tiles by id, runs by index.

--fail-if guards a CI pipeline: exit 1 when any threshold is crossed, e.g.
  --fail-if "execution.total_cycles>+5%"      more than 5% slower
  --fail-if "memory.max_tile_bytes>600000"     the fullest tile needs more than 600000 bytes
  --fail-if "memory.out_of_memory_tiles>0"     any tile out of memory
  --fail-if "execution.total_flops<-1%"        FLOPs dropped by more than 1%
  --fail-if "liveness.peak_not_always_live_bytes>+65536"   peak liveness grew by more than 64 KiB
Metric names are those of `tilescope summary --json` (flattened with dots) plus
memory.category.<category>, memory.tile_balance and execution.tile_balance.
"""

from __future__ import annotations

import argparse
import json
import sys

from tilescope.outputs import FORCE_HELP

HELP = "compare two reports (text, --json, --html); --fail-if for CI"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("baseline", help="baseline report directory (the reference)")
    p.add_argument("active", help="active report directory (the one being judged)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.add_argument(
        "--top", type=int, default=10, metavar="N", help="list the N biggest changes of each kind (default 10)"
    )
    p.add_argument(
        "--fail-if",
        action="append",
        default=[],
        metavar="EXPR",
        help='exit 1 if crossed, e.g. "execution.total_cycles>+5%%" (repeatable)',
    )
    p.add_argument("--html", metavar="OUT.html", help="also write a self-contained offline HTML comparison")
    p.add_argument("--force", action="store_true", help=FORCE_HELP)
    p.add_argument(
        "--run",
        type=int,
        default=None,
        help="compare executed figures of this run only: execution.total_cycles, total_flops and tile_balance, "
        "program steps and operations (default: all runs); both reports must have it",
    )
    p.add_argument(
        "--layer", default=None, help="attribute operations to this debug-context layer (e.g. poplibs, onnx, user)"
    )


def run(args: argparse.Namespace) -> int:
    from app.comparison.comparison import Comparison
    from app.comparison.thresholds import ThresholdError, check_thresholds, parse_threshold
    from app.render.text import diff_document, diff_text, json_default
    from report_format.reader import open_report
    from tilescope.errors import CommandError

    if args.top < 0:
        raise CommandError(f"--top must be 0 or more, not {args.top}")
    if args.html:
        from tilescope.outputs import check_output_file

        check_output_file(
            args.html, "--html", follow_symlinks=args.force
        )  # before the comparison: a bad path is one line at once
    baseline = open_report(args.baseline)
    active = open_report(args.active)
    if args.run is not None:
        for side, report in (("baseline", baseline), ("active", active)):
            runs = report.table("runs", ["run"])["run"].to_pylist()
            if args.run not in runs:
                raise CommandError(f"--run {args.run}: the {side} report has no run {args.run} (its runs: {runs})")
    if args.layer is not None:
        layers = sorted(set(baseline.debug_contexts()["layer"]) | set(active.debug_contexts()["layer"]))
        if args.layer not in layers:
            raise CommandError(
                f"--layer {args.layer}: neither report has debug contexts of that layer (they have: {', '.join(layers) or 'none'})"
            )
    comparison = Comparison(baseline, active, run=args.run, layer=args.layer)
    metrics = comparison.metrics
    try:
        thresholds = [parse_threshold(expr, metrics) for expr in args.fail_if]
    except ThresholdError as exc:
        raise CommandError(str(exc)) from None
    checks = check_thresholds(thresholds, metrics)
    doc = diff_document(comparison, args.top, checks)
    if args.html:
        from app.render.html import comparison_html
        from tilescope.outputs import write_atomically

        page = comparison_html(comparison, args.top or 10).encode("utf-8")
        write_atomically(args.html, "--html", lambda f: f.write(page), follow_symlinks=args.force)
    if args.json:
        print(json.dumps(doc, indent=2, sort_keys=False, allow_nan=False, default=json_default))
    else:
        print(diff_text(doc))
        if args.html:
            print(f"\nwrote {args.html}")
    crossed = [c for c in checks if c["crossed"]]
    if crossed:
        for c in crossed:
            print(f"tilescope diff: threshold crossed: {c['message']}", file=sys.stderr)
        return 1
    return 0
