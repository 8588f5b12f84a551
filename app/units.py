"""Human-readable numbers, one function per unit so every page, axis, export and the CLI agree:
bytes in binary units (KiB, MiB: as PopVision shows memory; on axes too, ``binary_ticks``),
cycles with SI prefixes, FLOPs as "FLOPs" (``format_flops``), changes of a percentage in
percentage points (``format_pp``), counts with their noun pluralised (``plural``)."""

from __future__ import annotations

import math
import re
from typing import Any


def format_bytes(n: float) -> str:
    """1536 -> '1.5 KiB'. Binary units, as PopVision shows memory."""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


#: Binary byte units, each 1024 times the one before.
BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def binary_ticks(lo: float, hi: float, target: int = 6) -> tuple[list[float], list[str]]:
    """Tick values and labels for a bytes axis spanning [lo, hi]: a power-of-two step giving about
    ``target`` ticks (never fewer than target / 2), labelled in the binary unit of the largest
    tick: (0, 501.6 MiB) -> 0, 128 MiB, ..., 512 MiB. Plotly's own ticks are decimal ("500M"),
    which puts a 501.6 MiB peak above a "500M" line."""
    lo, hi = float(min(lo, hi)), float(max(lo, hi))
    span = hi - lo if hi > lo else max(abs(hi), 1.0)
    step = 2.0 ** math.ceil(math.log2(max(span / target, 1.0)))
    if span / step < target / 2 and step > 1:
        step /= 2
    first, last = math.floor(lo / step), math.ceil(hi / step)
    vals = [k * step for k in range(first, last + 1)]
    top = max(abs(v) for v in vals) or 1.0
    power = min(int(math.log2(top) // 10), len(BYTE_UNITS) - 1) if top >= 1 else 0
    scale = 1024.0**power
    decimals = 0
    while decimals < 4 and round(step / scale, decimals) != step / scale:
        decimals += 1
    # a negative tick (a delta axis) with the minus sign, as plotly.js writes its own ticks
    labels = ["0" if v == 0 else with_minus(f"{_trim(f'{v / scale:,.{decimals}f}')} {BYTE_UNITS[power]}") for v in vals]
    return vals, labels


def _trim(number: str) -> str:
    """'1.50' -> '1.5', '2.00' -> '2' (ticks read as short as they are exact)."""
    return number.rstrip("0").rstrip(".") if "." in number else number


def plural(n: float, noun: str, nouns: str | None = None) -> str:
    """A count with its noun: (1, 'sample') -> '1 sample', (1234, 'compute set') -> '1,234 compute
    sets'; ``nouns`` for an irregular plural ('vertex', 'vertices')."""
    many = nouns if nouns is not None else noun + "s"
    return f"{n:,}" + " " + (noun if n == 1 else many)


def graph_counts(g: dict[str, Any]) -> str:
    """A summary's graph line: '12 variables, 1 compute set, 30 vertices, 40 program steps'."""
    return ", ".join(
        (
            plural(g["variables"], "variable"),
            plural(g["compute_sets"], "compute set"),
            plural(g["vertices"], "vertex", "vertices"),
            plural(g["program_steps"], "program step"),
        )
    )


def format_flops(n: float) -> str:
    """FLOPs as every page, grid and the CLI show them: 4 -> '4 FLOPs', 1 -> '1 FLOP',
    2_843_000_000 -> '2.84 GFLOPs' (3 significant digits, SI prefix)."""
    text = format_si(n)
    return text + (" FLOP" if float(n) == 1 else (" FLOPs" if text[-1].isdigit() else "FLOPs"))


def format_si(n: float, unit: str = "") -> str:
    """1_234_000 -> '1.23 M'. For cycles and FLOPs."""
    n = float(n)
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {prefix}{unit}".rstrip()
    return f"{n:.0f} {unit}".rstrip()


def format_count(n: int) -> str:
    """1234567 -> '1,234,567'."""
    return f"{int(n):,}"


def format_seconds(t: float) -> str:
    """Simulated time in the unit that reads best: 3.692e-05 -> '36.92 µs', 0.1258 -> '125.8 ms'."""
    t = float(t)
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(t) >= scale or unit == "µs":
            return f"{t / scale:.4g} {unit}"
    raise AssertionError("unreachable")


def format_rate(x: float) -> str:
    """A ratio such as FLOPs per cycle: 26104.3 -> '26,104', 3.217 -> '3.22' (never '2.61e+04')."""
    x = float(x)
    if not math.isfinite(x):
        return "-"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


#: Metrics that are fractions shown as percentages (tile balance, utilisation), wherever they show.
PERCENT_METRICS = ("tile_balance", "tile_utilisation")


def format_percent(value: float | None) -> str:
    """A fraction as every page, the CLI and the exports show it: 0.5094 -> '50.9%'."""
    if value is None or not math.isfinite(float(value)):
        return "-"
    return f"{100 * float(value):.1f}%"


#: The sign of a negative change, in text as in the grids (d3-format writes U+2212, the minus sign).
MINUS = "\u2212"


def with_minus(text: str) -> str:
    """``text`` with each hyphen-minus before a number written as the minus sign: '-1.5 KiB (-2.00%)'
    -> '−1.5 KiB (−2.00%)', so a sentence's changes read like the grids' columns beside it."""
    return re.sub(r"-(?=[\d.])", MINUS, text)


def signed_bytes(delta: float) -> str:
    """A change of bytes with its sign: 1536 -> '+1.5 KiB', -1536 -> '−1.5 KiB', 0 -> '0 B'."""
    return with_minus(("+" if delta > 0 else "") + format_bytes(delta))


def format_pp(delta: float | None) -> str:
    """A change of a fraction shown as a percentage, in percentage points: 0.079 -> '+7.9 pp'
    (a tile balance going from 75% to 82.9% has grown 7.9 points, not 7.9%)."""
    if delta is None or not math.isfinite(float(delta)):
        return "-"
    return with_minus(f"{100 * float(delta):+.1f} pp")


def format_metric(name: str, value: Any) -> str:
    """A summary/diff metric's value, by its name: bytes for byte metrics, percentages for
    balance and utilisation, FLOPs with SI prefixes, 4 significant digits for other floats, thousands separators for
    counts; '-' for missing or non-finite."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if any(p in name for p in PERCENT_METRICS):
        return format_percent(value)
    if "bytes" in name or name.startswith("memory.category."):
        return format_bytes(value)
    if "flops" in name:  # as the cards and grids show FLOPs: 3 significant digits, SI prefix
        return format_flops(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    return format_count(value)


def format_delta(name: str, delta: Any, ratio: float | None = None) -> str:
    """A metric's change, as the viewer, the CLI and the HTML export show it: signed, in the
    metric's unit, with the relative change where it means something ('+1.5 MiB (+10.55%)');
    a percentage metric changes by percentage points ('+7.9 pp'), with no relative change beside
    it (a percent of a percent reads as the same unit)."""
    if delta is None or (isinstance(delta, float) and not math.isfinite(delta)):
        return "-"
    if any(p in name for p in PERCENT_METRICS):
        return format_pp(delta)
    text = format_metric(name, delta)
    text = text if text.startswith("-") or delta == 0 else "+" + text
    if ratio is not None and math.isfinite(ratio) and delta != 0:
        text += f" ({(ratio - 1) * 100:+.2f}%)"
    return with_minus(text)
