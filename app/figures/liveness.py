"""Liveness figure: not-always-live bytes per program step, total or per IPU, peak marked."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from app.figures.common import PALETTE, base_layout, bytes_axis, empty_figure


def liveness_figure(
    by_step: pd.DataFrame,
    *,
    include_always_live: bool = False,
    per_ipu: bool = False,
    selected: list[int] | None = None,
) -> go.Figure:
    if by_step.empty:
        return empty_figure("No liveness in this report.")
    steps = by_step.index.to_numpy()
    extra = by_step["always_live"].to_numpy() if include_always_live else 0
    label = "always live + not always live" if include_always_live else "not always live"
    custom = (by_step["type"] + " " + by_step["name"]).to_numpy()
    fig = go.Figure()
    if per_ipu:
        ipu_cols = [c for c in by_step.columns if c.startswith("ipu")]
        n_ipus = len(ipu_cols)
        for i, c in enumerate(ipu_cols):
            fig.add_trace(
                go.Scattergl(
                    x=steps,
                    y=by_step[c].to_numpy() + (extra / n_ipus if include_always_live else 0),
                    mode="lines",
                    name=f"IPU {c[3:]}",
                    line={"color": PALETTE[i % len(PALETTE)], "width": 1.5},
                    customdata=custom,
                    hovertemplate="step %{x}: %{y:,.0f} B<br>%{customdata}<extra>IPU " + c[3:] + "</extra>",
                )
            )
    else:
        fig.add_trace(
            go.Scattergl(
                x=steps,
                y=by_step["not_always_live"].to_numpy() + extra,
                mode="lines+markers" if len(steps) < 400 else "lines",
                name=label,
                line={"color": PALETTE[0], "width": 2},
                marker={"size": 5},
                fill="tozeroy",
                customdata=custom,
                hovertemplate="step %{x}: %{y:,.0f} B<br>%{customdata}<extra></extra>",
            )
        )
    if per_ipu and ipu_cols:  # the peak of the fullest IPU, on the lines drawn (not the all-IPU total)
        lines = by_step[ipu_cols].to_numpy() + ((extra / n_ipus)[:, None] if include_always_live else 0)
        at, col = np.unravel_index(int(lines.argmax()), lines.shape)
        peak, peak_y, where = int(at), int(lines[at, col]), f"IPU {ipu_cols[col][3:]}, "
    else:
        peak = int(by_step["not_always_live"].to_numpy().argmax())
        peak_y = int(
            by_step["not_always_live"].iat[peak] + (by_step["always_live"].iat[peak] if include_always_live else 0)
        )
        where = ""
    fig.add_trace(
        go.Scatter(
            x=[steps[peak]],
            y=[peak_y],
            mode="markers+text",
            name="peak",
            text=[f"peak: {where}step {steps[peak]}"],
            textposition="top center",
            marker={"symbol": "triangle-down", "size": 12, "color": "#C0392B"},
            hovertemplate="peak at step %{x}: %{y:,.0f} B<extra></extra>",
        )
    )
    for s in selected or []:
        fig.add_vline(x=s, line_color="#F39C12", line_width=2)
    fig.update_xaxes(title="program step")
    fig.update_yaxes(title="bytes per IPU" if per_ipu else "bytes (all tiles)", rangemode="tozero")
    bytes_axis(fig, 0, max(float(np.nanmax(np.asarray(t.y, dtype=np.float64), initial=0.0)) for t in fig.data))
    fig.update_layout(clickmode="event", hovermode="closest")
    return base_layout(fig, height=400)
