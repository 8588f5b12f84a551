"""Shared figure styling: one palette and layout so every page reads alike."""

from __future__ import annotations

import plotly.graph_objects as go

#: Qualitative palette for stacked series (colour-blind friendly, Okabe-Ito then Tableau).
PALETTE = (
    "#0072B2",
    "#E69F00",
    "#009E73",
    "#CC79A7",
    "#56B4E9",
    "#D55E00",
    "#F0E442",
    "#000000",
    "#4E79A7",
    "#F28E2B",
    "#59A14F",
    "#B07AA1",
    "#76B7B2",
    "#EDC948",
    "#FF9DA7",
    "#9C755F",
    "#BAB0AC",
)
#: Execution trace step kinds, coloured as PopVision users expect: compute, exchange, sync, streams.
KIND_COLOURS = {
    "compute": "#2E86C1",
    "exchange": "#F39C12",
    "global exchange": "#C0392B",
    "stream copy": "#8E44AD",
    "sync": "#95A5A6",
    "other": "#D5D8DC",
    "control": "#ABB2B9",
}
GAPS_COLOUR = "#D5D8DC"


def base_layout(fig: go.Figure, *, title: str | None = None, height: int = 420) -> go.Figure:
    fig.update_layout(
        template="plotly_white",
        height=height,
        margin={"l": 60, "r": 20, "t": 40 if title else 20, "b": 50},
        title={"text": title, "x": 0.01, "font": {"size": 15}} if title else None,
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0},
        hoverlabel={"namelength": -1},
    )
    return fig


def empty_figure(message: str, height: int = 300) -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text=message, showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5, font={"size": 14})
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return base_layout(fig, height=height)
