"""Human-readable numbers: bytes in binary units, cycles and FLOPs with SI prefixes."""

from __future__ import annotations

import math
from typing import Any


def format_bytes(n: float) -> str:
    """1536 -> '1.5 KiB'. Binary units, as PopVision shows memory."""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


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


def format_metric(name: str, value: Any) -> str:
    """A summary/diff metric's value, by its name: bytes for byte metrics, percentages for
    balance and utilisation, 4 significant digits for other floats, thousands separators for
    counts; '-' for missing or non-finite."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if any(p in name for p in PERCENT_METRICS):
        return format_percent(value)
    if "bytes" in name or name.startswith("memory.category."):
        return format_bytes(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    return format_count(value)
