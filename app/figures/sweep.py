"""The sweep's Pareto plot: samples/s against peak tile memory, one marker per point, coloured by an option."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from app.figures.common import PALETTE, base_layout, bytes_axis, empty_figure
from app.units import format_bytes


def sweep_figure(df: pd.DataFrame, colour_by: str) -> go.Figure:
    """``df`` is ``app.views.sweep.sweep_points``: fitting points coloured by ``colour_by`` (one trace
    per value, so the legend names them), the Pareto front joined by a line, and the points that did
    not fit as crosses on the x axis at the memory their report shows. ``customdata`` is the point index."""
    has_memory = df[df["max_tile_bytes"] >= 0]
    if has_memory.empty:
        return empty_figure("No point has a report yet")
    fig = go.Figure()
    fits = has_memory[np.isfinite(has_memory["samples_per_second"])]
    for i, (value, part) in enumerate(fits.groupby(fits[colour_by].astype(str), sort=True)):
        fig.add_trace(
            go.Scatter(
                x=part["max_tile_bytes"], y=part["samples_per_second"], mode="markers", name=f"{colour_by} {value}",
                marker={"size": 11, "color": PALETTE[i % len(PALETTE)], "line": {"width": 1, "color": "white"}},
                customdata=part["point"].tolist(), text=[_hover(r) for r in part.to_dict("records")],
                hovertemplate="%{text}<extra></extra>",
            )
        )  # fmt: skip
    front = fits[fits["pareto"]].sort_values("max_tile_bytes")
    if len(front) > 1:
        fig.add_trace(
            go.Scatter(x=front["max_tile_bytes"], y=front["samples_per_second"], mode="lines", name="Pareto front",
                       line={"color": "#888", "dash": "dot", "shape": "hv"}, hoverinfo="skip")
        )  # fmt: skip
    no = has_memory[~np.isfinite(has_memory["samples_per_second"])]
    if len(no):
        fig.add_trace(
            go.Scatter(
                x=no["max_tile_bytes"], y=np.zeros(len(no)), mode="markers", name="did not fit / failed",
                marker={"symbol": "x", "size": 11, "color": "#C0392B"}, customdata=no["point"].tolist(),
                text=[_hover(r) for r in no.to_dict("records")], hovertemplate="%{text}<extra></extra>",
            )
        )  # fmt: skip
    base_layout(fig, height=460)
    fig.update_xaxes(title="peak tile memory (including gaps)")
    fig.update_yaxes(title="samples/s (simulated)", rangemode="tozero")
    lo, hi = 0.0, float(has_memory["max_tile_bytes"].max()) * 1.05
    fig.update_xaxes(range=[lo, hi])
    return bytes_axis(fig, lo, hi, axis="x")


def _hover(r: dict[str, Any]) -> str:
    sps = f"{r['samples_per_second']:,.1f} samples/s" if np.isfinite(r["samples_per_second"]) else r["status"]
    return f"<b>{r['name']}</b><br>{sps}<br>peak tile {format_bytes(r['max_tile_bytes'])}<br>click to open its report"
