"""Operations figures: cycles by tile of one operation (the Operations Graph is app.figures.operations_graph)."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from app.figures.common import base_layout, empty_figure


def operation_tile_cycles_figure(by_tile: pd.DataFrame, name: str) -> go.Figure:
    if by_tile.empty:
        return empty_figure(f"{name}: no vertices, so no cycles by tile.", height=260)
    fig = go.Figure(
        go.Scattergl(
            x=by_tile["tile"],
            y=by_tile["cycles"],
            mode="markers",
            marker={"size": 4, "color": "#2E86C1"},
            hovertemplate="tile %{x}: %{y:,} cycles<extra></extra>",
        )
    )
    fig.update_xaxes(title="tile")
    fig.update_yaxes(title="estimated cycles (all vertices)", tickformat="~s", rangemode="tozero")
    return base_layout(fig, title=f"{name}: estimated cycles by tile", height=280)
