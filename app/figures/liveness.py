"""Liveness figure: not-always-live bytes per program step, total or per IPU, peak marked."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from app.figures.common import PALETTE, FigureDict, binary_axis, empty_figure_dict, figure_dict, scatter_type
from app.figures.decimate import envelope_in, typed_array
from app.views.liveness import peak_step


def liveness_figure(
    by_step: pd.DataFrame,
    *,
    include_always_live: bool = False,
    per_ipu: bool = False,
    selected: list[int] | None = None,
    y_title: str | None = None,
    x_range: tuple[float, float] | None = None,
) -> FigureDict:
    """Not-always-live bytes per program step (or a line per IPU), the peak marked, ``selected``
    steps as vertical lines; ``y_title`` names the y axis (default: all tiles or per IPU);
    ``x_range`` (a zoom, in steps) draws that range at the screen's level of detail, None the whole.
    A figure dict (``figure_dict``): every step selection builds one."""
    if by_step.empty:
        return empty_figure_dict("No liveness in this report.")
    steps = by_step.index.to_numpy()
    extra = by_step["always_live"].to_numpy() if include_always_live else 0
    label = "always live + not always live" if include_always_live else "not always live"
    names = (by_step["type"] + " " + by_step["name"]).to_numpy()
    data: list[dict[str, Any]] = []
    tops: list[float] = []
    ipu_cols = [c for c in by_step.columns if c.startswith("ipu")] if per_ipu else []
    if per_ipu:
        n_ipus = len(ipu_cols)
        # whole bytes: an IPU's share of always-live memory is drawn to the byte
        lines = by_step[ipu_cols].to_numpy() + (
            np.rint(extra / n_ipus).astype(np.int64)[:, None] if include_always_live else 0
        )
        # each line keeps its own envelope (its minima and maxima per pixel column, its peak exact)
        kept = [envelope_in(steps, lines[:, i], x_range) for i in range(n_ipus)]
        kind = scatter_type(sum(k.size for k in kept))
        for i, c in enumerate(ipu_cols):
            at = kept[i]
            tops.append(float(lines[at, i].max(initial=0)))
            named = i == 0  # the step names ride on the first line only: the same for every line
            data.append({"type": kind, "x": typed_array(steps[at]), "y": typed_array(lines[at, i]),
                         "mode": "lines", "name": f"IPU {c[3:]}", "line": {"color": PALETTE[i % len(PALETTE)], "width": 1.5},
                         **({"customdata": names[at].tolist()} if named else {}),
                         "hovertemplate": "step %{x}: %{y:,.0f} B" + ("<br>%{customdata}" if named else "")
                         + "<extra>IPU " + c[3:] + "</extra>"})  # fmt: skip
        # the peak of the fullest IPU, on the lines drawn (not the all-IPU total): the first step
        # reaching it, which that line's envelope keeps
        at_step, col = np.unravel_index(int(lines.argmax()), lines.shape)
        peak, peak_y, where = int(at_step), int(lines[at_step, col]), f"IPU {ipu_cols[col][3:]}, "
    else:
        total = by_step["not_always_live"].to_numpy()
        # every pixel column's lowest and highest step of the range shown; the peak among them
        at = envelope_in(steps, total, x_range)
        y = (total + extra)[at]
        tops.append(float(y.max(initial=0.0)))
        data.append({"type": scatter_type(at.size), "x": typed_array(steps[at]), "y": typed_array(y),
                     "mode": "lines+markers" if at.size < 400 else "lines", "name": label,
                     "line": {"color": PALETTE[0], "width": 2}, "marker": {"size": 5}, "fill": "tozeroy",
                     "customdata": names[at].tolist(),
                     "hovertemplate": "step %{x}: %{y:,.0f} B<br>%{customdata}<extra></extra>"})  # fmt: skip
        peak = peak_step(by_step)  # the Summary's and the CLI's peak step (one definition)
        peak_y = int(total[peak] + (by_step["always_live"].iat[peak] if include_always_live else 0))
        where = ""
    tops.append(float(peak_y))
    data.append({"type": "scatter", "x": [int(steps[peak])], "y": [peak_y], "mode": "markers+text", "name": "peak",
                 "text": [f"peak: {where}step {int(steps[peak])}"], "textposition": "top center",
                 "marker": {"symbol": "triangle-down", "size": 12, "color": "#C0392B"},
                 "hovertemplate": "peak at step %{x}: %{y:,.0f} B<extra></extra>"})  # fmt: skip
    # selected steps: what plotly's add_vline draws
    shapes = [{"type": "line", "xref": "x", "yref": "y domain", "x0": s, "x1": s, "y0": 0, "y1": 1,
               "line": {"color": "#F39C12", "width": 2}} for s in selected or []]  # fmt: skip
    title = y_title or ("bytes per IPU" if per_ipu else "bytes (all tiles)")
    # zoomed: the range asked for, drawn as it is (the user's zoom); whole: plotly's autorange
    zoom = {"range": list(x_range), "autorange": False} if x_range is not None else {}
    layout = {
        "xaxis": {"title": {"text": "program step"}, **zoom},
        "yaxis": {"title": {"text": title}, "rangemode": "tozero", **binary_axis(0, max(tops))},
        "shapes": shapes,
        "clickmode": "event",
        "hovermode": "closest",
    }
    return figure_dict(data, layout, height=400)
