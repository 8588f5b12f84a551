"""Insights in compare mode: the hints of both reports side by side, those that appeared in the
active report and those that went away."""

from __future__ import annotations

from typing import Any

import dash_bootstrap_components as dbc
from dash import Input, Output, callback, html

from app import ids
from app.comparison.pages import baselines
from app.comparison.pages.components import frame, shown, unavailable
from app.views.insights import hints


def section() -> html.Div:
    return html.Div(id=ids.COMPARE_INSIGHTS)


def _topic(hint: str) -> str:
    """What a hint is about (its words before the first number or colon), to pair it across reports."""
    return hint.split(":")[0].split(" tile ")[0].strip()


@callback(Output(ids.COMPARE_INSIGHTS, "children"), Input(shown("insights"), "data"), prevent_initial_call=True)
def render(key: str | None) -> Any:
    blocked = unavailable(key)
    if blocked is not None:
        return blocked
    c = baselines.comparison(key)
    before, after = hints(c.baseline), hints(c.active)
    topics_before, topics_after = {_topic(h) for h in before}, {_topic(h) for h in after}

    def listed(items: list[str], others: set[str], mark: str) -> html.Ul:
        return html.Ul(
            [
                html.Li([html.Span(mark, className="badge bg-secondary me-1") if _topic(h) not in others else None, h])
                for h in items
            ],
            className="small",
        )

    return frame(
        key,
        "hints",
        dbc.Row(
            [
                dbc.Col([html.H6("Baseline"), listed(before, topics_after, "gone in active")], lg=6),
                dbc.Col([html.H6("Active"), listed(after, topics_before, "new")], lg=6),
            ],
            id=ids.COMPARE_INSIGHTS_HINTS,
        ),
    )
