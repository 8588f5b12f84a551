"""Text renderers of the command line: ``tilescope summary`` and ``tilescope diff`` (and the JSON
document ``diff --json`` prints, which the diff text renders). The figures come from the views
(``app.views.summary``, ``app.comparison``); only the layout of lines is decided here."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from app.comparison.comparison import HEADLINE_METRICS
from app.units import (
    format_bytes,
    format_count,
    format_delta,
    format_flops,
    format_metric,
    format_percent,
    format_seconds,
    graph_counts,
    plural,
)


def summary_text(doc: dict[str, Any]) -> str:
    """``tilescope summary``: the headline figures of ``app.views.summary.summary``, a line each."""
    t, g, m, lv, ex = doc["target"], doc["graph"], doc["memory"], doc["liveness"], doc["execution"]
    lines = [
        f"report        {doc['report']}  (format v{doc['format_version']}, engine {doc['engine'] or '-'})",
        f"target        {t['name']} ({t['architecture']}): {t['num_ipus']} IPU x {format_count(t['tiles_per_ipu'])} tiles, "
        f"{format_bytes(t['bytes_per_tile'])}/tile, {t['clock_hz'] / 1e9:.3g} GHz",
        f"graph         {graph_counts(g)}",
        f"memory        {format_bytes(m['total_bytes_including_gaps'])} incl. gaps, "
        f"{format_bytes(m['total_bytes_excluding_gaps'])} excl. gaps; max tile {format_bytes(m['max_tile_bytes'])} "
        f"(tile {m['max_tile']}) of {format_bytes(m['bytes_per_tile'])}",
        f"out of memory {plural(m['out_of_memory_tiles'], 'tile')}",
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
    if ex["captured"] and ex.get("headline") and ex.get("only_run") is None:
        lines.append(headline_line(ex["headline"]))
    if ex["captured"]:
        lines.append(
            "execution     "
            + (
                plural(ex["runs"], "run") if ex.get("only_run") is None else f"run {ex['only_run']} of {ex['runs']}"
            )  # fmt: skip
            + f", {format_count(ex['total_cycles'])} cycles "
            f"({format_seconds(ex['total_seconds'])} at the target clock), {format_flops(ex['total_flops'])}, "
            f"tile balance {format_percent(ex['tile_balance'])}"
            + ("; ESTIMATED (compile-only: no values)" if ex.get("estimated") else "")
        )
        for i, (c, n, b) in enumerate(
            zip(ex["cycles_per_run"], ex["steps_per_run"], ex["tile_balance_per_run"], strict=True)
        ):
            lines.append(
                f"  run {i:<9} {format_count(c)} cycles, {format_count(n)} executed steps, tile balance {format_percent(b)}"
                + ("  (the viewer opens on it: the longest that computes)" if i == ex["opening_run"] else "")
            )
    else:
        lines.append("execution     not captured")
    for tr in doc["truncations"]:
        lines.append(f"truncated     {tr['kind']}: captured {tr['captured']} of {tr['total']} ({tr['reason']})")
    for note in doc["notes"]:
        lines.append(f"note          {note}")
    return "\n".join(lines)


def _side(report: Any) -> dict[str, Any]:
    t = report.target_info
    return {
        "path": str(report.path),
        "engine": report.manifest.engine,
        "target": {"name": t.name, "num_ipus": t.num_ipus, "tiles_per_ipu": t.tiles_per_ipu},
    }


def diff_document(comparison: Any, top: int, checks: list[dict[str, Any]]) -> dict[str, Any]:
    """The JSON document of a diff (also what the text output renders)."""
    metrics = {k: {f: _finite(v) for f, v in m.items()} for k, m in comparison.metrics.items()}
    return {
        "baseline": _side(comparison.baseline),
        "active": _side(comparison.active),
        "parity": comparison.parity,
        "run": comparison.run,  # executed figures (execution.total_*, steps, operations) of this run alone
        "headline": [k for k in HEADLINE_METRICS if k in metrics],
        "metrics": metrics,
        "liveness_peak": {**comparison.liveness_peaks, "sentence": comparison.peak_sentence()},
        "steps": comparison.step_counts(),
        "top": comparison.top_changes(top),
        "thresholds": [{k: _finite(v) for k, v in c.items()} for c in checks],
    }


def _finite(v: Any) -> Any:
    return None if isinstance(v, float) and not math.isfinite(v) else v


def json_default(v: Any) -> Any:
    """``json.dumps(default=...)`` for numpy scalars in a diff document."""
    if isinstance(v, np.generic):
        return v.item()
    raise TypeError(f"not JSON serialisable: {type(v).__name__}")


def _value(name: str, v: Any) -> str:
    return format_metric(name, v)


def _delta(name: str, m: dict[str, Any]) -> str:
    return format_delta(name, m["delta"], m["ratio"])


def diff_text(doc: dict[str, Any]) -> str:
    """``tilescope diff``: parity, headline deltas, step counts, the biggest changes and thresholds."""
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
    if doc.get("run") is not None:
        lines.append(f"executed figures (execution.total_*, tile balance, steps, operations): run {doc['run']} only")
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


def headline_line(h: dict[str, Any]) -> str:
    """The report's lead figures as the Summary page's cards give them: its opening run's, apart
    from the runs that only move data (``app.views.summary.headline``)."""
    data_only = h["data_only_runs"]
    rest = (
        f"; the weight upload apart (run{'' if len(data_only) == 1 else 's'} "
        f"{', '.join(map(str, data_only))}, data only: {format_count(h['data_only_cycles'])} cycles)"
        if data_only
        else ""
    )
    return (
        f"headline      run {h['run']} ({h['name']}): {format_count(h['cycles'])} cycles "
        f"({format_seconds(h['seconds'])}), tile balance {format_percent(h['tile_balance'])}{rest}"
    )
