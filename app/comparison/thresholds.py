"""Regression thresholds on metric deltas (``tilescope diff --fail-if``), for CI.

An expression is ``METRIC OP VALUE`` with OP one of ``>``, ``>=``, ``<``, ``<=``; VALUE is

- ``+5%``, ``-10%`` or ``5%``: the relative change (active - baseline) / baseline, in percent;
- ``+1000`` or ``-1000`` (signed): the absolute change active - baseline;
- ``600000`` (unsigned): the active value itself.

The threshold is *crossed* when the left side compares true, e.g. ``execution.total_cycles>+5%``
is crossed when active is more than 5% slower; ``execution.total_flops<-1%`` when FLOPs dropped by
more than 1%. A relative change from a baseline of 0 is +inf (or -inf, or 0 if still 0).
"""

from __future__ import annotations

import difflib
import math
import operator
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
}
_EXPR = re.compile(
    r"^\s*(?P<metric>[A-Za-z0-9_.\[\]-]+?)\s*(?P<op>>=|<=|>|<)\s*(?P<value>[+-]?[0-9][0-9_.eE+-]*)(?P<pct>%?)\s*$"
)


class ThresholdError(ValueError):
    """A malformed expression or an unknown metric; the message is one line."""


@dataclass(frozen=True)
class Threshold:
    text: str
    metric: str
    op: str
    value: float
    mode: str  # "relative" (percent change), "delta" (signed change) or "value" (active value)

    def measure(self, m: dict[str, Any]) -> float | None:
        """The quantity compared with ``value`` for one metric's deltas (None if not comparable)."""
        b, a = m.get("baseline"), m.get("active")
        if a is None or (self.mode != "value" and b is None):
            return None
        if self.mode == "value":
            return float(a)
        if self.mode == "delta":
            return float(a - b)
        if b == 0:
            return 0.0 if a == 0 else math.copysign(math.inf, a)
        return (a - b) / abs(b) * 100.0

    def describe(self, measured: float | None) -> str:
        what = {"relative": "change", "delta": "change", "value": "value"}[self.mode]
        if measured is None:
            return f"{self.text}: cannot check, {self.metric} is missing in one report"
        shown = (
            f"{measured:+.2f}%"
            if self.mode == "relative"
            else (f"{measured:+,g}" if self.mode == "delta" else f"{measured:,g}")
        )
        return f"{self.text}: {what} {shown}"


def parse_threshold(text: str, known: Iterable[str]) -> Threshold:
    """Parse one expression; raise ThresholdError naming it (and close metric names if unknown)."""
    m = _EXPR.match(text)
    if not m:
        raise ThresholdError(
            f"malformed --fail-if {text!r}: expected METRIC>VALUE or METRIC<VALUE, VALUE like 600000, +1000 or +5%"
        )
    metric, op, raw, pct = m["metric"], m["op"], m["value"], m["pct"]
    try:
        value = float(raw.replace("_", ""))
    except ValueError:
        raise ThresholdError(f"malformed --fail-if {text!r}: {raw!r} is not a number") from None
    if not math.isfinite(value):  # '1e999999' overflows to inf as 'inf' would: neither can be crossed usefully
        raise ThresholdError(f"malformed --fail-if {text!r}: {raw!r} is not a finite number")
    known = list(known)
    if metric not in known:
        close = difflib.get_close_matches(metric, known, n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else "; `tilescope summary --json` lists the metrics"
        raise ThresholdError(f"unknown metric {metric!r} in --fail-if {text!r}{hint}")
    mode = "relative" if pct else ("delta" if raw[0] in "+-" else "value")
    return Threshold(text=text.strip(), metric=metric, op=op, value=value, mode=mode)


def check_thresholds(thresholds: list[Threshold], metrics: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Evaluate each threshold; one dict per threshold: expression, metric, measured, crossed,
    message. A threshold that cannot be evaluated (metric missing on one side) counts as crossed."""
    out = []
    for t in thresholds:
        measured = t.measure(metrics[t.metric])
        crossed = True if measured is None else _OPS[t.op](measured, t.value)
        out.append(
            {
                "expression": t.text,
                "metric": t.metric,
                "mode": t.mode,
                "measured": measured,
                "crossed": bool(crossed),
                "message": t.describe(measured),
            }
        )
    return out
