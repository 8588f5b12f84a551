"""Execution trace figures: the BSP timeline (flat: a row per IPU; flame: a row per program-tree
depth), drawn as horizontal SVG bars, one trace per step kind, and the tiles x steps cycles heatmap."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from app.figures import plain
from app.figures.common import (
    KIND_COLOURS,
    FigureDict,
    base_layout,
    colour_cap,
    empty_figure,
    empty_figure_dict,
    figure_dict,
)
from app.views.execution_trace import KINDS

#: Colours of a flame's frames that are not steps: the model's layers (blocks, name scopes) and its
#: operations (debug contexts); control nodes keep KIND_COLOURS["control"].
FRAME_COLOURS = {"layer": "#F5CBA7", "operation": "#A3E4D7"}
#: Legend order: the flame's frames outermost first, then the step kinds.
LEGEND_ORDER = ("control", "layer", "operation", *KINDS, "idle")
#: Kinds drawn pale, so their labels are dark.
_PALE = ("control", "sync", "other", "layer", "operation")


def _colour(kind: str) -> str:
    return FRAME_COLOURS.get(kind) or KIND_COLOURS.get(kind, "#999")


def _layout(height: int) -> dict[str, Any]:
    layout = plain.layout(height)
    layout["margin"]["t"] = 46  # room for the legend above the rows (automargin took it to 43)
    return layout


def timeline_dict(
    spans: pd.DataFrame,
    *,
    row_label: str,
    rows: list[int],
    x_range: tuple[int, int],
    row_names: dict[int, str] | None = None,
) -> dict[str, Any]:
    """The timeline as a plain plotly figure dict. ``spans`` columns: row, start, end, kind, label,
    step, steps, and optionally hover (a flame's: the span's cycles, self cycles and steps).

    One SVG bar trace per kind, each span a horizontal bar from its start (``base``) for its length,
    carrying ``customdata`` [row, step, cycle]: its row, its executed step (-1 for a bin or an
    enclosing frame) and the middle of its visible part. A click reads the clicked bar's own
    customdata, so it names the span under the pointer. Bars, not WebGL lines: in this GPU-less
    headless Chromium a WebGL timeline drew in 2-4x the time (docs/viewer.md, "Time in the
    browser"); and not SVG scatter markers, whose hover ties every marker within its radius of the
    pointer and so picked a neighbouring span."""
    if spans.empty:
        return plain.empty("No executed steps in this range.")
    data: list[dict[str, Any]] = []
    # rows tall enough for a readable label (PopVision's flame boxes); the figure grows instead
    height_px = max(24, min(34, 480 // max(len(rows), 1)))
    height = max(180, 100 + len(rows) * (height_px + 8))
    layout = _layout(height)
    band_px = (height - layout["margin"]["t"] - layout["margin"]["b"]) / max(max(rows) - min(rows) + 1, 1)
    bar_width = min(0.9, height_px / band_px)  # in rows: height_px of each row's band, as the lines had
    hover = spans["hover"].fillna(spans["label"]) if "hover" in spans else spans["label"]
    # one pixel (of ~1,500 across the plot) left blank at the end of every span at least 3 px long,
    # so neighbouring spans of one kind (a flame's layers, back-to-back compute steps) stay apart
    gap = (x_range[1] - x_range[0]) / 1500
    by_kind = spans.assign(_hover=hover.to_numpy()).groupby("kind", sort=False)
    for kind in sorted(by_kind.groups, key=lambda k: LEGEND_ORDER.index(k) if k in LEGEND_ORDER else len(LEGEND_ORDER)):
        g = by_kind.get_group(kind)
        start, end = g["start"].to_numpy(np.float64), g["end"].to_numpy(np.float64)
        drawn = np.where(end - start >= 3 * gap, end - gap, end) - start
        mid = (np.maximum(start, x_range[0]) + np.minimum(end, x_range[1])) // 2
        # a span of several steps (a flame's merged leaf, a bin) names no one step: the click finds
        # the step at its middle
        step = np.where(g["steps"].to_numpy() == 1, g["step"].to_numpy(), -1) if "steps" in g else g["step"].to_numpy()
        texts = [
            f"{h}<br>cycles {int(s):,}..{int(e):,} ({int(e - s):,})"
            for h, s, e in zip(g["_hover"], start, end, strict=True)
        ]
        data.append(
            {
                "type": "bar",
                "orientation": "h",
                "name": str(kind),
                "base": g["start"].to_numpy(np.int64),
                "x": np.round(drawn).astype(np.int64),  # whole cycles: a pixel is >= 100s of cycles
                "y": g["row"].to_numpy(),
                "width": bar_width,
                "marker": {"color": _colour(str(kind)), "line": {"width": 0}},
                "customdata": np.column_stack([g["row"].to_numpy(), step, mid]).astype(np.int64),
                "text": texts,
                "textposition": "none",  # the text is the hover's; names are drawn as annotations
                "hovertemplate": "%{text}<extra>" + str(kind) + "</extra>",
            }
        )
    names = row_names or {}
    layout.update(
        annotations=_labels(spans, x_range),
        yaxis={
            "tickvals": rows,
            "ticktext": [names.get(r, f"{row_label} {r}") for r in rows],
            # each row exactly one band of the plot
            "range": [max(rows) + 0.5, min(rows) - 0.5],
            "fixedrange": True,
            "showgrid": False,
            "zeroline": False,
        },
        xaxis={"title": {"text": "cycles"}, "range": list(x_range), "tickformat": ",d"},
        barmode="overlay",  # kinds share a row: no side-by-side offset
        dragmode="zoom",
        hovermode="closest",
    )
    return {"data": data, "layout": layout}


def timeline_figure(
    spans: pd.DataFrame,
    *,
    row_label: str,
    rows: list[int],
    x_range: tuple[int, int],
    row_names: dict[int, str] | None = None,
) -> go.Figure:
    """``timeline_dict`` as a go.Figure, for the HTML export (the page sends the dict)."""
    return go.Figure(timeline_dict(spans, row_label=row_label, rows=rows, x_range=x_range, row_names=row_names))


def tile_steps_cap(cycles: np.ndarray) -> tuple[float | None, str]:
    """(zmax, colourbar title) of the tiles x steps heatmap (``cycles``: tiles x steps): the scale
    stops at ``colour_cap`` of the steps' longest tile times (a long stream copy would otherwise leave
    every compute step near white; those cells show the top colour, hover gives their cycles)."""
    cap = colour_cap(cycles.max(axis=0)) if cycles.size else None
    return (cap, "cycles") if cap is None else (cap, f"cycles<br>(scale stops<br>at {cap:,.0f})")


def tile_steps_figure(cycles: np.ndarray, steps: np.ndarray, tile_starts: np.ndarray, tiles_per_bin: int) -> FigureDict:
    """Heatmap: tiles (rows) x executed steps (columns), colour = busy cycles of the tile. (No per-cell
    text: step names are on the timeline, and per-cell strings would multiply the figure's size.)
    A figure dict: it comes with every timeline."""
    if cycles.size == 0:
        return empty_figure_dict("No per-tile cycles in this range.", height=260)
    ylab = "tile" if tiles_per_bin == 1 else f"tile (busiest of each {tiles_per_bin})"
    zmax, title = tile_steps_cap(cycles)
    heatmap = {
        "type": "heatmap",
        "z": np.asarray(cycles).tolist(),
        "x": [str(s) for s in np.asarray(steps).tolist()],
        "y": np.asarray(tile_starts).tolist(),
        "colorscale": "Blues",
        "zmin": 0,
        "zmax": zmax,
        "colorbar": {"title": {"text": title}},
        "hovertemplate": "step %{x}, tile %{y}: %{z:,} cycles<extra></extra>",
    }
    layout = {
        "xaxis": {"title": {"text": "executed step"}, "type": "category", "nticks": 20},
        "yaxis": {"title": {"text": ylab}, "autorange": "reversed"},
        "margin": {"r": 140},  # the colour bar and its 3-line title (automargin took it to 134)
    }
    return figure_dict([heatmap], layout, title="Tiles x steps: cycles of each tile in each step (BSP)", height=360)


def proportions_figure(summary: dict[str, float | int]) -> go.Figure:
    kinds = [k.split(".", 1)[1] for k in summary if k.startswith("proportion.")]
    vals = [100 * float(summary[f"proportion.{k}"]) for k in kinds]
    fig = go.Figure(
        go.Bar(
            x=vals,
            y=kinds,
            orientation="h",
            marker_color=[KIND_COLOURS[k] for k in kinds],
            marker_line={"color": "#AAB7B8", "width": 1},  # the near-white "idle" bar stays visible
            text=[f"{v:.1f}%" for v in vals],
            textposition="outside",
            hovertemplate="%{y}: %{x:.1f}% of the IPUs' time<extra></extra>",
        )
    )
    # room right of 100 % for the labels, but ticks only up to 100 %
    fig.update_xaxes(title="% of the IPUs' time (run length x IPUs)", range=[0, 125], tickvals=[0, 25, 50, 75, 100])
    fig.update_yaxes(autorange="reversed")
    base_layout(fig, title="Cycle proportions", height=240)
    # the kinds' names ("global exchange") need 100 px: no automargin redraw (app.figures.plain.margin)
    return fig.update_layout(margin={"l": 104})


def _labels(spans: pd.DataFrame, x_range: tuple[int, int], max_labels: int = 80) -> list[dict[str, Any]]:
    """Names of the spans wide enough to hold text (as PopVision labels its flame boxes), as
    annotations (drawn above the bars; a bar's own text would be measured for every span)."""
    width = max(x_range[1] - x_range[0], 1)
    lo = np.maximum(spans["start"].to_numpy(np.float64), x_range[0])
    hi = np.minimum(spans["end"].to_numpy(np.float64), x_range[1])
    frac = (hi - lo) / width
    wide = np.flatnonzero(frac > 0.04)
    wide = wide[np.argsort(-frac[wide], kind="stable")][:max_labels]
    chars = np.maximum((frac[wide] * 150).astype(int), 4)  # ~150 characters across the plot
    labels = spans["label"].to_numpy()[wide]
    text = [str(lab) if len(str(lab)) <= c else str(lab)[: c - 1] + "…" for lab, c in zip(labels, chars, strict=True)]
    kinds = spans["kind"].to_numpy()[wide]
    rows = spans["row"].to_numpy()[wide]
    mids = (lo[wide] + hi[wide]) / 2
    return [
        {
            "x": float(x),
            "y": float(y),
            "text": t,
            "showarrow": False,
            "font": {"size": 10, "color": "#222" if k in _PALE else "white"},
        }
        for x, y, t, k in zip(mids, rows, text, kinds, strict=True)
    ]


def step_tile_split_figure(split: pd.DataFrame, title: str) -> go.Figure:
    """Per tile of one step: busy cycles (the step's kind colour) under waiting-for-sync cycles."""
    if split.empty:
        return empty_figure("No per-tile cycles for this step.", height=220)
    kind = str(split["kind"].iat[0])
    x = split["tile"].to_numpy()
    fig = go.Figure()
    fig.add_bar(
        x=x,
        y=split["busy"],
        name=f"{kind} (busy)",
        marker_color=KIND_COLOURS.get(kind, "#999"),
        marker_line_width=0,
        hovertemplate="tile %{x}: %{y:,} cycles busy<extra></extra>",
    )
    fig.add_bar(
        x=x,
        y=split["waiting"],
        name="waiting for the sync",
        marker_color=KIND_COLOURS["sync"],
        marker_line_width=0,
        hovertemplate="tile %{x}: %{y:,} cycles waiting<extra></extra>",
    )
    fig.update_layout(barmode="stack", bargap=0)
    tiles = int(split["tiles"].iat[0])
    fig.update_xaxes(title="tile" if tiles == 1 else f"tile (busiest of each {tiles})")
    fig.update_yaxes(title="cycles", tickformat=",d")
    return base_layout(fig, title=title, height=260)
