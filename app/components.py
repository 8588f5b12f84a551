"""Small layout helpers shared by pages."""

from __future__ import annotations

from typing import Any

import dash_bootstrap_components as dbc
import numpy as np
from dash import html

from app import state
from app.units import format_rate
from app.views import ipus


def stat_card(label: str, value: str, hint: str | None = None, *, alarm: bool = False, share: bool = False) -> dbc.Col:
    """A headline number; ``alarm`` draws it in red (e.g. tiles out of memory). With ``share``, wide
    screens give a row's cards equal shares of it (so seven fit on one row), not a sixth each."""
    return dbc.Col(
        dbc.Card(
            dbc.CardBody(
                [
                    html.Div(label, className="text-muted small"),
                    html.Div(
                        value,
                        # a long exact count ("83,634,810") in the smaller size; lines break at spaces only,
                        # never inside a number (Bootstrap's cards break long words anywhere)
                        className=("fs-5" if len(value) <= 9 else "fs-6")
                        + " fw-semibold"
                        + (" text-danger" if alarm else ""),
                        style={"overflowWrap": "normal", "wordBreak": "keep-all"},
                    ),
                    html.Div(hint, className="text-muted small") if hint else None,
                ]
            ),
            className="h-100" + (" border-danger" if alarm else ""),
        ),
        xs=6,
        md=3,
        xl=True if share else 2,
        className="mb-2",
    )


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, (int, np.integer)):
        return f"{int(v):,}"
    if isinstance(v, (float, np.floating)):
        return format_rate(float(v))  # thousands separators, never an exponent
    return str(v)


def key_values(items: dict[str, Any]) -> html.Table:
    """A two-column table; keys with underscores read as words, numbers get thousands separators."""
    return html.Table(
        html.Tbody(
            [
                html.Tr([html.Th(str(k).replace("_", " "), className="pe-3 fw-normal text-muted"), html.Td(_value(v))])
                for k, v in items.items()
            ]
        ),
        className="table table-sm w-auto mb-2",
    )


def no_execution_profile(page: str) -> dbc.Alert:
    """Why a page that needs the execution profile is empty, in the report's own words."""
    from app.views.summary import distinct_notes

    notes = distinct_notes(state.report().notes)
    reason = " ".join(notes) if notes else "The report was written without an execution profile."
    return dbc.Alert(
        [
            html.Strong(f"{page} needs an execution profile, and this report has none. "),
            reason,
            html.Br(),
            "Memory, Liveness, Program Tree and Operations (with compile-time estimates) still apply.",
        ],
        color="warning",
    )


def provenance_note(report: Any) -> dbc.Alert | None:
    """Says an execution profile is estimated (compile-only) and which steps' cycles depend on data;
    None when there is nothing to say."""
    from app.views.provenance import estimated, note

    text = note(report)
    if not text:
        return None
    return dbc.Alert(text, color="info" if estimated(report) else "light", className="py-2 small", id="provenance-note")


def section(title: str, *children: Any) -> html.Div:
    return html.Div([html.H5(title, className="mt-3"), *children])


def ipu_selector(component_id: str, class_name: str = "") -> dbc.Col:
    """The IPU selector of the Memory, Liveness and Execution Trace pages (one control, one word):
    "All IPUs" or one IPU of the report; hidden when the report has one IPU."""
    report = state.report()
    return dbc.Col(
        dbc.InputGroup(
            [
                dbc.InputGroupText("IPU"),
                dbc.Select(id=component_id, value=str(ipus.ALL_IPUS),
                           options=[{"label": o["label"], "value": str(o["value"])} for o in ipus.ipu_choices(report)]),
            ],
            size="sm",
        ),
        md=2,
        className=class_name,
        style={"display": "none"} if report.target_info.num_ipus < 2 else {},
    )  # fmt: skip
