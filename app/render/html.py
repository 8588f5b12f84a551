"""Self-contained offline HTML pages: one report (``tilescope export REPORT --html out.html``,
the page an engineer attaches to a bug report) and a comparison (``tilescope diff A B --html``).

One file each: inline CSS, plotly.js inlined once (``include_plotlyjs=True``), no network access
needed to open it. The report page shows the Summary, Memory, Liveness, Operations and Execution
Trace as static figures and tables, with the same views, figures and formatting as the viewer.
The comparison page shows the parity check, the headline metrics, per-tile memory delta,
liveness of both reports with the delta, cycles per aligned step and the biggest changes of
variables, operations and steps. No Dash.
"""

from __future__ import annotations

import html
import math
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from app.comparison import figures as figs
from app.comparison.comparison import HEADLINE_METRICS, Comparison
from app.comparison.steps import STEP_DELTA_COLUMNS
from app.units import format_delta, format_metric
from report_format.reader import Report
from report_format.vocabulary import Layer

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
    d = m.get("delta")
    cls = "up" if d and d > 0 else ("down" if d and d < 0 else "")
    return f'<td class="{cls}">{html.escape(format_delta(name, d, m.get("ratio")))}</td>'


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
        f"<p>Program steps: {counts['same']:,} in both, {counts['added']:,} only in active, {counts['removed']:,} only in baseline. "
        f"{html.escape(c.peak_sentence())}.</p>",
        "<h2>Memory</h2>",
        *rendered["memory"],
        _table(c.memory_categories.reset_index(), left=("category",)),
        "<h2>Liveness</h2>",
        *rendered["liveness"],
        "<h2>Execution</h2>",
        _table(_percent_columns(c.runs[[col for col in RUN_COLUMNS if col in c.runs]]), left=("status",)),
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


#: Tile-axis columns and trace spans per row at most in the static page (as the viewer's level of detail).
REPORT_MAX_TILE_COLUMNS = 1500
REPORT_MAX_SPANS_PER_ROW = 1500


def report_html(report: Report, top: int = 40) -> str:
    """One report as a static page: Summary, Memory, Liveness, Operations, Execution Trace (the
    run the viewer opens on: the longest that computes)."""
    from app.figures.execution_trace import proportions_figure, timeline_figure
    from app.figures.liveness import liveness_figure
    from app.figures.memory import tile_memory_figure
    from app.units import format_bytes, format_count, format_flops, format_percent, graph_counts, plural
    from app.views import execution_trace as trace
    from app.views import liveness, memory, operations
    from app.views.runs import run_figures, run_table
    from app.views.summary import summary

    doc = summary(report)
    t, g, m, lv, ex = doc["target"], doc["graph"], doc["memory"], doc["liveness"], doc["execution"]
    plotly_inlined = False

    def plot(fig: go.Figure | dict) -> str:
        nonlocal plotly_inlined
        # the viewer's hot figures are plain dicts (app.figures.common.figure_dict): validate them here
        out = go.Figure(fig).to_html(
            full_html=False, include_plotlyjs=not plotly_inlined, config={"displaylogo": False}
        )
        plotly_inlined = True  # plotly.js once, with the first figure
        return out

    headline = {
        "Total memory (incl. gaps)": f"{format_bytes(m['total_bytes_including_gaps'])} of {format_bytes(t['total_memory'])}",
        "Fullest tile": f"{format_bytes(m['max_tile_bytes'])} (tile {m['max_tile']} of {format_bytes(m['bytes_per_tile'])})",
        "Out-of-memory tiles": format_count(m["out_of_memory_tiles"]),
        "Peak not-always-live": f"{format_bytes(lv['peak_not_always_live_bytes'])} at program step {lv['peak_step']}",
    }
    if ex["captured"]:
        headline.update(
            {
                "Total cycles": f"{format_count(ex['total_cycles'])} ({plural(ex['runs'], 'run')})",
                "Total FLOPs": format_flops(ex["total_flops"]),
                "Tile balance": f"{format_percent(ex['tile_balance'])} (all runs)",
            }
        )
    else:
        headline["Execution"] = "not captured"
    headline.update(
        {
            "Target": f"{t['name']}: {t['num_ipus']} IPU × {format_count(t['tiles_per_ipu'])} tiles, "
            f"{format_bytes(t['bytes_per_tile'])} per tile, {t['clock_hz'] / 1e9:.3g} GHz",
            "Graph": graph_counts(g),
        }
    )
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>tilescope report: {html.escape(report.path.name)}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>tilescope report: {html.escape(report.path.name)}</h1>",
        f"<div class='paths'><code>{html.escape(str(report.path))}</code> · format v{doc['format_version']} · "
        f"{html.escape(str(doc['producer'].get('name', '')))} {html.escape(str(doc['producer'].get('version', '')))}"
        f" · {html.escape(str(doc['created']))}</div>",
        "<h2>Summary</h2>",
        *(f"<p class='parity'>{html.escape(n)}</p>" for n in doc["notes"]),
        _key_table(headline),
    ]
    if ex["captured"]:
        runs = run_table(report)
        shown = runs[["run", "name", "steps", "cycles", "flops"]].assign(
            tile_balance=runs["tile_balance"].map(format_percent)
        )
        parts += ["<h3>Runs</h3>", _table(shown.rename(columns={"steps": "executed steps"}), left=("name",))]
    # memory: the viewer's first view (by category, gaps included, tiles by id)
    df = memory.tile_memory_breakdown(report, "category", True)
    binned, maxes, width = memory.bin_tiles(df, REPORT_MAX_TILE_COLUMNS)
    details = memory.tile_details(report, None)
    parts += [
        "<h2>Memory</h2>",
        plot(
            tile_memory_figure(
                binned, maxes, width, t["bytes_per_tile"], tiles_per_ipu=t["tiles_per_ipu"], show_max_memory=False
            )
        ),
        _table(details["regions"], left=("region",)),
        _table(details["categories"], left=("category", "always_live")),
        "<h2>Liveness</h2>",
        plot(liveness_figure(liveness.liveness_by_step(report))),
    ]
    layer = _first_layer(report)
    ops = operations.operations(report, layer, None)
    outside = ops.loc[ops["op_id"] == operations.OUTSIDE_ID, "cycles"]
    count = operations.count_sentence(
        operations.operation_count(ops), int(outside.iat[0]) if len(outside) else None, int(ops["cycles"].sum())
    )
    parts += [
        f"<h2>Operations ({html.escape(layer)} layer)</h2>",
        f"<p>{html.escape(count)}; the {min(top, len(ops))} with the most cycles. "
        f"Cycles: {html.escape(str(ops.attrs.get('cycles_source', '')))}.</p>",
        _table(
            ops.head(top)[["name", "op_type", "cycles", "flops", "memory_bytes", "code_bytes", "tiles", "steps"]],
            left=("name", "op_type"),
        ),
        "<h2>Execution Trace</h2>",
    ]
    if ex["captured"]:
        run = ex["opening_run"]
        length = trace.run_length(report, run)
        lod = trace.level_of_detail(trace.flat_spans(report, run), 0, max(length, 1), REPORT_MAX_SPANS_PER_ROW)
        s = trace.trace_summary(report, run)
        ipus = trace.ipu_table(report, run)
        for col in ("tile_balance", "tile_utilisation"):
            ipus[col] = ipus[col].map(format_percent)
        parts += [
            f"<p>Run {run} ({html.escape(run_figures(report, run)['name'])}, the longest that computes): "
            f"{format_count(s['cycles'])} cycles, {format_count(s['steps'])} executed steps, "
            f"{format_flops(s['flops'])}, tile balance {format_percent(s['tile_balance'])}, "
            f"tile utilisation {format_percent(s['tile_utilisation'])}. {html.escape(lod.detail)}.</p>",
            plot(
                timeline_figure(
                    lod.table, row_label="IPU", rows=list(range(t["num_ipus"])), x_range=(0, max(length, 1))
                )
            ),
            plot(proportions_figure(s)),
            "<h3>Per IPU</h3>",
            _table(ipus),
        ]
    else:
        parts.append("<p>No execution profile: " + html.escape(" ".join(doc["notes"]) or "not captured") + "</p>")
    parts.append("</body></html>")
    return "\n".join(parts)


def _percent_columns(df: pd.DataFrame) -> pd.DataFrame:
    """Tile balance as a percentage, as the viewer and the CLI show it."""
    from app.units import format_percent

    out = df.copy()
    for col in out.columns:
        if "tile_balance" in col:
            out[col] = out[col].map(format_percent)
    return out


def _first_layer(report: Report) -> str:
    """The layer the Operations page opens on (PopLibs when present)."""
    dc = report.debug_contexts()
    present = set(dc["layer"]) if len(dc) else set()
    return next((lay for lay in (Layer.POPLIBS, Layer.ONNX, Layer.USER) if lay in present), Layer.POPLIBS)


def _key_table(items: dict[str, str]) -> str:
    rows = "".join(
        f"<tr><th class='l'>{html.escape(k)}</th><td class='l'>{html.escape(v)}</td></tr>" for k, v in items.items()
    )
    return f"<table>{rows}</table>"
