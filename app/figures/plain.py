"""Figures as plain dicts (``{"data": [...], "layout": {...}}``, given to dcc.Graph as they are):
building a go.Figure validates every property, tens of ms a request on a large figure, while the
browser needs only the JSON. ``layout`` gives ``app.figures.common.base_layout``'s settings."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import plotly.io as pio


def margin(title: str | None) -> dict[str, int]:
    """Margins wide enough for what plotly's automargin would add on the viewer's usual figures (y
    ticks such as "512 MiB" or a bar chart's step kinds, x ticks with an axis title, a horizontal
    legend above the plot, a title above that): measured in Chromium at 1600 px (s23: the pushes
    went to l 80-100, b 53, t 43-48). Automargin only widens a margin, and each widening redraws the
    whole figure: 200-2,000 ms in the bench's browser for the memory, liveness and trace figures,
    against 70-95 ms with no redraw. A longer label still widens it (and pays the redraw)."""
    return {"l": 86, "r": 44, "t": 72 if title else 50, "b": 56}


@lru_cache(maxsize=1)
def template() -> dict[str, Any]:
    """plotly_white as JSON, resolved once: the browser needs the template itself, not its name."""
    return pio.templates["plotly_white"].to_plotly_json()


def layout(height: int, title: str | None = None) -> dict[str, Any]:
    """``base_layout``'s layout as a dict: template, height, margins, upright toolbar, a title above
    the legend above the plot, whole trace names on hover."""
    out: dict[str, Any] = {
        "template": template(),
        "height": height,
        # the toolbar stands upright in the right margin, so it never covers a legend entry or data
        "margin": margin(title),
        "modebar": {"orientation": "v"},
        "legend": {"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0},
        "hoverlabel": {"namelength": -1},
    }
    if title:
        out["title"] = {"text": title, "x": 0.01, "font": {"size": 15}}
    return out


def empty(message: str, height: int = 300) -> dict[str, Any]:
    """A figure that only says ``message`` (``app.figures.common.empty_figure`` as a dict)."""
    out = layout(height)
    out.update(
        annotations=[
            {
                "text": message,
                "showarrow": False,
                "xref": "paper",
                "yref": "paper",
                "x": 0.5,
                "y": 0.5,
                "font": {"size": 14},
            }
        ],
        xaxis={"visible": False},
        yaxis={"visible": False},
    )
    return {"data": [], "layout": out}
