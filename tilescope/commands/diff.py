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
import math
import sys
from typing import Any

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
    p.add_argument(
        "--run", type=int, default=None, help="compare executed figures of this run only (default: all runs)"
    )
    p.add_argument(
        "--layer", default=None, help="attribute operations to this debug-context layer (e.g. poplibs, onnx, user)"
    )


def run(args: argparse.Namespace) -> int:
    from app.views.compare.comparison import Comparison
    from app.views.compare.thresholds import ThresholdError, check_thresholds, parse_threshold
    from report_format.reader import open_report
    from tilescope.cli import CommandError

    if args.top < 0:
        raise CommandError(f"--top must be 0 or more, not {args.top}")
    if args.html:
        from tilescope.outputs import check_output_file

        check_output_file(args.html, "--html")  # before the comparison: a bad path is one line at once
    baseline = open_report(args.baseline)
    active = open_report(args.active)
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
        from app.export_html import comparison_html
        from tilescope.outputs import write_atomically

        page = comparison_html(comparison, args.top or 10).encode("utf-8")
        write_atomically(args.html, "--html", lambda f: f.write(page))
    if args.json:
        print(json.dumps(doc, indent=2, sort_keys=False, allow_nan=False, default=_json_default))
    else:
        print(render_text(doc))
        if args.html:
            print(f"\nwrote {args.html}")
    crossed = [c for c in checks if c["crossed"]]
    if crossed:
        for c in crossed:
            print(f"tilescope diff: threshold crossed: {c['message']}", file=sys.stderr)
        return 1
    return 0


def _side(report: Any) -> dict[str, Any]:
    t = report.target_info
    return {
        "path": str(report.path),
        "engine": report.manifest.engine,
        "target": {"name": t.name, "num_ipus": t.num_ipus, "tiles_per_ipu": t.tiles_per_ipu},
    }


def diff_document(comparison: Any, top: int, checks: list[dict[str, Any]]) -> dict[str, Any]:
    """The JSON document of a diff (also what the text output renders)."""
    from app.views.compare.comparison import HEADLINE_METRICS

    metrics = {k: {f: _finite(v) for f, v in m.items()} for k, m in comparison.metrics.items()}
    return {
        "baseline": _side(comparison.baseline),
        "active": _side(comparison.active),
        "parity": comparison.parity,
        "headline": [k for k in HEADLINE_METRICS if k in metrics],
        "metrics": metrics,
        "liveness_peak": {**comparison.liveness_peaks, "sentence": comparison.peak_sentence()},
        "steps": comparison.step_counts(),
        "top": comparison.top_changes(top),
        "thresholds": [{k: _finite(v) for k, v in c.items()} for c in checks],
    }


def _finite(v: Any) -> Any:
    return None if isinstance(v, float) and not math.isfinite(v) else v


def _json_default(v: Any) -> Any:
    import numpy as np

    if isinstance(v, np.generic):
        return v.item()
    raise TypeError(f"not JSON serialisable: {type(v).__name__}")


def _value(name: str, v: Any) -> str:
    from app.units import format_metric

    return format_metric(name, v)


def _delta(name: str, m: dict[str, Any]) -> str:
    d, r = m["delta"], m["ratio"]
    if d is None:
        return "-"
    text = _value(name, d)
    text = text if text.startswith("-") or d == 0 else f"+{text}"
    if r is not None and d != 0:
        text += f" ({(r - 1) * 100:+.2f}%)"
    return text


def render_text(doc: dict[str, Any]) -> str:
    b, a = doc["baseline"], doc["active"]
    lines = [
        f"baseline  {b['path']}  ({b['target']['name']}, engine {b['engine'] or '-'})",
        f"active    {a['path']}  ({a['target']['name']}, engine {a['engine'] or '-'})",
        "",
    ]
    if doc["parity"]:
        lines.append("parity: the runs were set up differently, so deltas are not only due to the program:")
        lines += [f"  - {p}" for p in doc["parity"]]
    else:
        lines.append("parity: same target and engine options")
    lines.append("")
    width = max((len(k) for k in doc["headline"]), default=10)
    lines.append(f"{'metric':<{width}}  {'baseline':>18}  {'active':>18}  delta")
    for k in doc["headline"]:
        m = doc["metrics"][k]
        lines.append(f"{k:<{width}}  {_value(k, m['baseline']):>18}  {_value(k, m['active']):>18}  {_delta(k, m)}")
    s = doc["steps"]
    lines += [
        "",
        f"program steps: {s['same']:,} in both, {s['added']:,} only in active, {s['removed']:,} only in baseline",
        doc["liveness_peak"]["sentence"],
    ]
    top = doc["top"]
    sections = (
        (
            "tiles (memory incl. gaps)",
            "tiles",
            lambda r: f"tile {r['tile']} (ipu {r['ipu']})",
            "delta_total_bytes_including_gaps",
            True,
        ),
        ("variables", "variables", lambda r: f"{r['name']} [{r['status']}]", "delta_bytes", True),
        (
            "operations by cycles",
            "operations_by_cycles",
            lambda r: f"{r['key']} [{r['status']}]",
            "delta_cycles",
            False,
        ),
        (
            "operations by memory",
            "operations_by_memory",
            lambda r: f"{r['key']} [{r['status']}]",
            "delta_memory_bytes",
            True,
        ),
        ("program steps by cycles", "steps_by_cycles", _step_label, "delta_cycles", False),
    )
    for title, key, label, col, is_bytes in sections:
        rows = top.get(key, [])
        if not rows:
            continue
        lines += ["", f"top changes: {title}"]
        for r in rows:
            v = r[col]
            shown = _value("bytes" if is_bytes else "", v)
            lines.append(f"  {shown if v < 0 else '+' + shown:>14}  {label(r)}")
    if top.get("steps_added_removed"):
        lines += ["", "program steps added / removed"]
        lines += [f"  {r['status']:<8} {_step_label(r)}" for r in top["steps_added_removed"]]
    if doc["thresholds"]:
        lines += ["", "thresholds"]
        lines += [f"  {'CROSSED' if c['crossed'] else 'ok':<8} {c['message']}" for c in doc["thresholds"]]
    return "\n".join(lines)


def _step_label(r: dict[str, Any]) -> str:
    bs, as_ = r["baseline_step"], r["active_step"]
    if bs < 0:
        where = f"active step {as_}"
    elif as_ < 0:
        where = f"baseline step {bs}"
    else:
        where = f"step {bs}" if bs == as_ else f"step {bs} -> {as_}"
    return f"{where} {r['type']} {r['name']}"
