"""Configuration parity of two reports, checked before any figure is compared.

Differences are returned as sentences, baseline value first (``"different target: GC200 vs
Bow"``). An empty list means the two runs were set up alike, so their deltas come from the
program itself (XProf's diff guide makes this the first step: reference/peers.md §2.3).
"""

from __future__ import annotations

from report_format.reader import Report

#: Target fields that change what a report's figures mean (memory, cycles, FLOP rates).
TARGET_FIELDS = (
    "type",
    "architecture",
    "num_ipus",
    "tiles_per_ipu",
    "bytes_per_tile",
    "clock_hz",
    "num_replicas",
    "ipus_per_replica",
    "num_worker_contexts",
    "exchange_bytes_per_cycle",
    "fp16_flops_per_cycle",
    "fp32_flops_per_cycle",
)
#: Engine options that only say where the report goes, not what was run.
IGNORED_OPTIONS = frozenset({"autoReport.directory"})


def _fmt(v: object) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def target_parity(baseline: Report, active: Report) -> list[str]:
    b, a = baseline.target_info, active.target_info
    out = []
    if b.name != a.name:
        out.append(f"different target: {b.name} vs {a.name}")
    for f in TARGET_FIELDS:
        vb, va = getattr(b, f), getattr(a, f)
        if vb != va:
            out.append(f"target {f}: {_fmt(vb)} vs {_fmt(va)}")
    return out


def option_parity(baseline: Report, active: Report) -> list[str]:
    ob = dict(zip(*baseline.table("engine_options", ["name", "value"]).to_pydict().values(), strict=True))
    oa = dict(zip(*active.table("engine_options", ["name", "value"]).to_pydict().values(), strict=True))
    out = []
    for name in sorted(set(ob) | set(oa)):
        if name in IGNORED_OPTIONS:
            continue
        if name not in oa:
            out.append(f"engine option {name}: {ob[name]} in baseline, not set in active")
        elif name not in ob:
            out.append(f"engine option {name}: not set in baseline, {oa[name]} in active")
        elif ob[name] != oa[name]:
            out.append(f"engine option {name}: {ob[name]} vs {oa[name]}")
    return out


def capture_parity(baseline: Report, active: Report) -> list[str]:
    """Profiles captured, truncation and format: what makes some figures incomparable."""
    out = []
    if baseline.format_version != active.format_version:
        out.append(f"report format version: {baseline.format_version} vs {active.format_version}")
    for profile in sorted(baseline.profiles):
        pb, pa_ = baseline.profiles[profile], active.profiles.get(profile, False)
        if pb != pa_:
            which = "baseline" if pb else "active"
            out.append(f"{profile} profile captured in {which} only: its figures are compared against nothing")
    rb = baseline.num_rows("runs")
    ra = active.num_rows("runs")
    if rb != ra:
        out.append(f"captured runs: {rb} vs {ra} (runs are compared by index)")
    tb = {(t["kind"], t["captured"], t["total"]) for t in baseline.table("truncations").to_pylist()}
    ta = {(t["kind"], t["captured"], t["total"]) for t in active.table("truncations").to_pylist()}
    for kind, cap, tot in sorted(tb - ta):
        out.append(f"baseline truncated {kind}: captured {cap} of {tot}")
    for kind, cap, tot in sorted(ta - tb):
        out.append(f"active truncated {kind}: captured {cap} of {tot}")
    return out


def parity(baseline: Report, active: Report) -> list[str]:
    """Every configuration difference, as sentences (empty when the setups match)."""
    return target_parity(baseline, active) + option_parity(baseline, active) + capture_parity(baseline, active)
