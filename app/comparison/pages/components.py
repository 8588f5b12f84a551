"""Layout pieces shared by the compare sections: the section frame, signed deltas and the headline
deltas table (baseline / active / delta / ratio)."""

from __future__ import annotations

import math
from typing import Any

import dash_bootstrap_components as dbc
from dash import ALL, Input, Output, State, callback, dcc, html

from app import ids
from app.comparison.figures import DOWN, UP
from app.comparison.pages import baselines
from app.grid import short_header  # noqa: F401 - compare tables' headers, re-exported
from app.units import format_metric  # one formatting of metric values for the CLI, HTML and app

#: Figures of the compare sections: no logo, same as the pages.
GRAPH_CONFIG = {"displaylogo": False}


def frame(key: str, title: str, *children: Any) -> html.Div:
    """A compare section: a tinted block headed "Compare: <title> (vs <baseline>)"."""
    return html.Div(
        [
            html.H5(
                [
                    html.Span("Compare: ", className="text-info"),
                    title,
                    html.Span(f"  vs baseline {baselines.label(key)}", className="text-muted small"),
                ],
                className="mb-2",
            ),
            *children,
        ],
        className="border border-info rounded p-3 mb-3 bg-light",
    )


def unavailable(key: str | None) -> Any:
    """None when compare is on and the baseline opens; else what to show (nothing when off)."""
    if not key:
        return html.Div()
    if not baselines.is_allowed(key):
        return dbc.Alert(f"not an allowed baseline: {key}", color="danger")
    error = baselines.load_error(key)
    return dbc.Alert(error, color="danger") if error else None


def signed(name: str, delta: float | None) -> str:
    """A delta with its sign, formatted like the metric (bytes, counts, ratios)."""
    if delta is None or (isinstance(delta, float) and not math.isfinite(delta)):
        return "-"
    text = format_metric(name, delta)
    return text if text.startswith("-") or delta == 0 else "+" + text


def ratio_text(ratio: float | None, delta: float | None) -> str:
    if ratio is None or not math.isfinite(ratio):
        return "-"
    return f"×{ratio:.4g}" + (f" ({(ratio - 1) * 100:+.2f}%)" if delta else "")


def delta_style(delta: float | None, name: str = "") -> dict[str, str]:
    """Red where the change costs more, green where it costs less; a higher balance is better and
    FLOPs are work done, not cost (bold, uncoloured)."""
    if not delta:
        return {}
    if "flops" in name:
        return {"fontWeight": "600"}
    worse = delta < 0 if "balance" in name else delta > 0
    return {"color": UP if worse else DOWN, "fontWeight": "600"}


def delta_table(metrics: dict[str, dict[str, Any]], names: dict[str, str], table_id: str | None = None) -> html.Table:
    """metric / baseline / active / delta / ratio for ``names`` (metric name -> label), in order."""
    head = html.Tr(
        [
            html.Th(h, className="text-end text-nowrap" if i else "")
            for i, h in enumerate(("metric", "baseline", "active", "delta", "ratio"))
        ]
    )
    rows = []
    for name, lab in names.items():
        m = metrics.get(name)
        if m is None:
            continue
        rows.append(
            html.Tr(
                [
                    html.Td(lab, title=name),
                    html.Td(format_metric(name, m["baseline"]), className="text-end text-nowrap"),
                    html.Td(format_metric(name, m["active"]), className="text-end text-nowrap"),
                    html.Td(
                        signed(name, m["delta"]), className="text-end text-nowrap", style=delta_style(m["delta"], name)
                    ),
                    html.Td(ratio_text(m["ratio"], m["delta"]), className="text-end text-nowrap"),
                ]
            )
        )
    kwargs = {"id": table_id} if table_id else {}
    return html.Table([html.Thead(head), html.Tbody(rows)], className="table table-sm w-auto mb-2", **kwargs)


def graph(figure: Any, graph_id: str | None = None) -> dcc.Graph:
    kwargs = {"id": graph_id} if graph_id else {}
    return dcc.Graph(figure=figure, config=GRAPH_CONFIG, **kwargs)


def page_title(title: str, section_id: str) -> html.Div:
    """A page's title with a link down to its compare section, shown while compare is on: the page's
    own view comes first, the comparison below it."""
    return html.Div(
        [
            html.H3(title, className="mb-0 me-3"),
            html.A(
                "↓ comparison with the baseline",
                id={"type": ids.COMPARE_JUMP, "section": section_id},
                href=f"#{section_id}",
                className="small",
                style={"display": "none"},
            ),
        ],
        className="d-flex align-items-baseline mb-2",
    )


@callback(
    Output({"type": ids.COMPARE_JUMP, "section": ALL}, "style"),
    Input(ids.COMPARE_BASELINE, "data"),
    State({"type": ids.COMPARE_JUMP, "section": ALL}, "id"),
)
def show_jump(key: str | None, links: list[Any]) -> list[dict[str, str]]:
    return [{} if key else {"display": "none"} for _ in links]
