"""Named numeric metrics of a report and their deltas between two reports.

The names are those of ``tilescope summary --json`` flattened with dots (``app.views.summary``),
so a metric means the same in ``summary`` and ``diff``; numeric lists become ``name.<index>``
(``execution.cycles_per_run.0``). A few comparison figures are added under the same prefixes:
``memory.category.<category>`` (bytes over all tiles). Tile balance and the per-run figures are
those of the summary (``app.views.runs``), so the diff shows what the viewer shows.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from app.views.summary import flatten, summary
from report_format.reader import Report, open_report


def _numeric(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def numeric_metrics(doc: dict[str, Any]) -> dict[str, float | int]:
    """The numeric leaves of a summary document, flattened (lists expanded by index)."""
    out: dict[str, float | int] = {}
    for k, v in flatten(doc).items():
        if _numeric(v):
            out[k] = v.item() if isinstance(v, np.generic) else v
        elif isinstance(v, list) and v and all(_numeric(x) for x in v):
            for i, x in enumerate(v):
                out[f"{k}.{i}"] = x
    return out


def metric_values(
    report: Report, categories: dict[str, int] | None = None, run: int | None = None
) -> dict[str, float | int]:
    """Every metric of one report (execution totals of run ``run`` alone when given). ``categories``
    (bytes per memory category) may be passed when already computed."""
    # summary() reads whole tables (vertices: millions of rows on a POD) into the report's cache;
    # a throwaway Report keeps that cache from living as long as the comparison does
    out = numeric_metrics(summary(open_report(report.path), run))
    if categories is None:
        from app.comparison.memory import category_bytes

        categories = category_bytes(report).to_dict()
    for cat, n in categories.items():
        if cat != "gaps":
            out[f"memory.category.{cat}"] = int(n)
    return out


def metric_deltas(baseline: dict[str, float | int], active: dict[str, float | int]) -> dict[str, dict[str, Any]]:
    """For every metric of either side: baseline, active, delta (active - baseline) and ratio
    (active / baseline, None when baseline is 0); a metric missing on one side has None there."""
    out: dict[str, dict[str, Any]] = {}
    for name in sorted(set(baseline) | set(active)):
        b, a = baseline.get(name), active.get(name)
        delta = a - b if a is not None and b is not None else None
        ratio = a / b if a is not None and b not in (None, 0) else None
        out[name] = {"baseline": b, "active": a, "delta": delta, "ratio": ratio}
    return out
