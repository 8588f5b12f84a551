"""Print the headline figures of a report: target, graph, memory, liveness, execution.

The same figures the viewer's Summary page shows. With --json the output is a JSON object whose
keys (e.g. memory.max_tile_bytes, execution.total_cycles) are stable for scripts and CI.
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


def run(args: argparse.Namespace) -> int:
    from app.views.summary import summary
    from report_format.reader import open_report

    report = open_report(args.report)
    if args.verify:
        report.verify()
    doc = summary(report)
    if args.json:
        print(json.dumps(doc, indent=2, sort_keys=True))
    else:
        print(render_text(doc))
    return 0


def render_text(doc: dict) -> str:
    from app.units import format_bytes, format_count, format_percent, format_si

    t, g, m, lv, ex = doc["target"], doc["graph"], doc["memory"], doc["liveness"], doc["execution"]
    lines = [
        f"report        {doc['report']}  (format v{doc['format_version']}, engine {doc['engine'] or '-'})",
        f"target        {t['name']} ({t['architecture']}): {t['num_ipus']} IPU x {format_count(t['tiles_per_ipu'])} tiles, "
        f"{format_bytes(t['bytes_per_tile'])}/tile, {t['clock_hz'] / 1e9:.3g} GHz",
        f"graph         {format_count(g['variables'])} variables, {format_count(g['compute_sets'])} compute sets, "
        f"{format_count(g['vertices'])} vertices, {format_count(g['program_steps'])} program steps",
        f"memory        {format_bytes(m['total_bytes_including_gaps'])} incl. gaps, "
        f"{format_bytes(m['total_bytes_excluding_gaps'])} excl. gaps; max tile {format_bytes(m['max_tile_bytes'])} "
        f"(tile {m['max_tile']}) of {format_bytes(m['bytes_per_tile'])}",
        f"out of memory {m['out_of_memory_tiles']} tiles",
        f"liveness      peak not-always-live {format_bytes(lv['peak_not_always_live_bytes'])} at step {lv['peak_step']}",
    ]
    mi = doc.get("multi_ipu")
    if mi and mi["total_ipus"] > 1:  # replication, pipeline and inter-IPU traffic (several IPUs only)
        pipe = f"{mi['pipeline_stages']} pipeline stages x {mi['micro_batches']} micro-batches" if mi[
            "pipeline_stages"] else "not pipelined"  # fmt: skip
        lines.append(
            f"multi-IPU     {mi['num_replicas']} replica(s) x {mi['ipus_per_replica']} IPU(s) (profiled replica "
            f"{mi['profiled_replica']}); {pipe}; global exchange {format_bytes(mi['global_exchange_bytes'])}"
        )
    if ex["captured"]:
        lines.append(
            f"execution     {ex['runs']} runs, {format_count(ex['total_cycles'])} cycles "
            f"({ex['total_seconds'] * 1e3:.4g} ms at the target clock), {format_si(ex['total_flops'], 'FLOP')}, "
            f"tile balance {format_percent(ex['tile_balance'])}"
        )
        for i, (c, n, b) in enumerate(
            zip(ex["cycles_per_run"], ex["steps_per_run"], ex["tile_balance_per_run"], strict=True)
        ):
            lines.append(
                f"  run {i:<9} {format_count(c)} cycles, {format_count(n)} executed steps, tile balance {format_percent(b)}"
                + ("  (longest: the viewer opens on it)" if i == ex["longest_run"] else "")
            )
    else:
        lines.append("execution     not captured")
    for tr in doc["truncations"]:
        lines.append(f"truncated     {tr['kind']}: captured {tr['captured']} of {tr['total']} ({tr['reason']})")
    for note in doc["notes"]:
        lines.append(f"note          {note}")
    return "\n".join(lines)
