"""Self-contained offline HTML of a comparison (``tilescope diff A B --html out.html``).

One file: inline CSS, plotly.js inlined once (``include_plotlyjs=True``), no network access
needed to open it. It shows the parity check, the headline metrics, per-tile memory delta,
liveness of both reports with the delta, cycles per aligned step and the biggest changes of
variables, operations and steps. No Dash.
"""

from __future__ import annotations

import html
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from app.figures import compare as figs
from app.units import format_metric
from app.views.compare.comparison import HEADLINE_METRICS, Comparison
from app.views.compare.steps import STEP_DELTA_COLUMNS

_CSS = """
body { font-family: system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif; margin: 24px auto; max-width: 1200px;
       color: #1c2833; padding: 0 16px; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 17px; margin-top: 28px; border-bottom: 1px solid #d5d8dc; }
.paths { color: #566573; font-size: 13px; } .paths code { background: #f4f6f7; padding: 1px 4px; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0; }
th, td { border-bottom: 1px solid #e5e8e8; padding: 4px 10px; text-align: right; }
th { background: #f4f6f7; } td.l, th.l { text-align: left; max-width: 520px; overflow-wrap: break-word; }
.up { color: #c0392b; } .down { color: #1e8449; }
.parity li { color: #9a5b00; } .ok { color: #1e8449; }
.crossed { color: #c0392b; font-weight: 600; }
"""


RUN_COLUMNS = (
    "run",
    "status",
    "baseline_cycles",
    "active_cycles",
    "delta_cycles",
    "delta_flops",
    "baseline_tile_balance",
    "active_tile_balance",
)


_fmt = format_metric  # metric values look the same in the CLI, the HTML export and the viewer


def _delta_cell(name: str, m: dict[str, Any]) -> str:
    d, r = m.get("delta"), m.get("ratio")
    if d is None:
        return "<td>-</td>"
    cls = "up" if d > 0 else ("down" if d < 0 else "")
    text = _fmt(name, d)
    text = text if text.startswith("-") or d == 0 else "+" + text
    pct = f" ({(r - 1) * 100:+.2f}%)" if r is not None and d != 0 else ""
    return f'<td class="{cls}">{html.escape(text + pct)}</td>'


def headline_table(metrics: dict[str, dict[str, Any]], names: tuple[str, ...] = HEADLINE_METRICS) -> str:
    rows = ['<table><tr><th class="l">metric</th><th>baseline</th><th>active</th><th>delta</th></tr>']
    for k in names:
        if k not in metrics:
            continue
        m = metrics[k]
        rows.append(
            f'<tr><td class="l">{html.escape(k)}</td><td>{_fmt(k, m["baseline"])}</td>'
            f"<td>{_fmt(k, m['active'])}</td>{_delta_cell(k, m)}</tr>"
        )
    rows.append("</table>")
    return "".join(rows)


def _table(df: pd.DataFrame, left: tuple[str, ...] = ()) -> str:
    if df.empty:
        return "<p>none</p>"
    head = "".join(f'<th class="{"l" if c in left else ""}">{html.escape(str(c))}</th>' for c in df.columns)
    body = []
    for row in df.itertuples(index=False):
        cells = []
        for c, v in zip(df.columns, row, strict=True):
            if isinstance(v, float) and math.isnan(v):
                v = "-"
            elif isinstance(v, float) and v.is_integer():
                v = f"{int(v):,}"
            elif isinstance(v, float):
                v = f"{v:.4g}"
            elif isinstance(v, int) and not isinstance(v, bool):
                v = f"{v:,}"
            cells.append(f'<td class="{"l" if c in left else ""}">{html.escape(str(v))}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def _top(df: pd.DataFrame, by: str, cols: list[str], n: int) -> pd.DataFrame:
    if df.empty:
        return df
    d = df[by].abs()
    return df.loc[d[d > 0].sort_values(ascending=False, kind="stable").index[:n], cols]


def comparison_html(comparison: Comparison, top: int = 10) -> str:
    """The whole comparison page as one HTML string."""
    c = comparison
    b, a = c.baseline, c.active
    figures: list[tuple[str, go.Figure]] = [
        ("memory", figs.tile_memory_delta_figure(c.tile_memory)),
        ("memory", figs.category_delta_figure(c.memory_categories)),
        ("liveness", figs.liveness_comparison_figure(c.liveness)),
        ("execution", figs.step_cycles_delta_figure(c.steps)),
        ("variables", figs.top_delta_figure(c.variables, "name", "delta_bytes", "Biggest variable changes", top, "B")),
        (
            "operations",
            figs.top_delta_figure(
                c.operations, "key", "delta_cycles", "Biggest operation cycle changes", top, "cycles"
            ),
        ),
    ]
    rendered: dict[str, list[str]] = {}
    for i, (section, fig) in enumerate(figures):
        # plotly.js is inlined once, with the first figure; the file needs no network
        rendered.setdefault(section, []).append(
            fig.to_html(full_html=False, include_plotlyjs=(i == 0), config={"displaylogo": False})
        )
    parity = (
        "<ul class='parity'>" + "".join(f"<li>{html.escape(p)}</li>" for p in c.parity) + "</ul>"
        if c.parity
        else "<p class='ok'>Same target and engine options.</p>"
    )
    counts = c.step_counts()
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>tilescope comparison: {html.escape(a.path.name)} vs {html.escape(b.path.name)}</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>tilescope comparison</h1>",
        f"<div class='paths'>baseline <code>{html.escape(str(b.path))}</code> ({html.escape(b.target_info.name)})"
        f"<br>active <code>{html.escape(str(a.path))}</code> ({html.escape(a.target_info.name)})</div>",
        "<h2>Parity</h2>",
        parity,
        "<h2>Headline</h2>",
        headline_table(c.metrics),
        f"<p>Program steps: {counts['same']} aligned, {counts['added']} added, {counts['removed']} removed. "
        f"{html.escape(c.peak_sentence())}.</p>",
        "<h2>Memory</h2>",
        *rendered["memory"],
        _table(c.memory_categories.reset_index(), left=("category",)),
        "<h2>Liveness</h2>",
        *rendered["liveness"],
        "<h2>Execution</h2>",
        _table(c.runs[[col for col in RUN_COLUMNS if col in c.runs]], left=("status",)),
        *rendered["execution"],
        _table(
            _top(
                c.steps,
                "delta_cycles",
                STEP_DELTA_COLUMNS,
                top,
            ),
            left=("status", "type", "name"),
        ),
        "<h2>Variables</h2>",
        *rendered["variables"],
        _table(c.source_target.head(top + 1), left=("item", "kind", "status")),
        "<h2>Operations</h2>",
        *rendered["operations"],
        _table(
            _top(
                c.operations,
                "delta_cycles",
                [
                    "key",
                    "status",
                    "baseline_cycles",
                    "active_cycles",
                    "delta_cycles",
                    "delta_flops",
                    "delta_memory_bytes",
                ],
                top,
            ),
            left=("key", "status"),
        ),
        "</body></html>",
    ]
    return "\n".join(parts)


def write_comparison_html(comparison: Comparison, path: str | Path, top: int = 10) -> Path:
    """Write ``comparison_html`` to ``path`` (parent directories created)."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    text = comparison_html(comparison, top)
    # write-then-rename: never leave a half-written page behind
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; a page is meant to be shared
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out
