"""Comparison figures: pure functions from the comparison tables (``app.comparison``) to plotly
figures. No Dash, no Report: the viewer's Compare mode and the HTML export both call them.

Colours: baseline grey, active blue; an increase is red (costs more), a decrease green.
Long axes (tiles, steps) are reduced to at most ``max_points`` bins, keeping each bin's largest
increase and largest decrease, so a POD-size comparison never ships 20,000 bars to the browser.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.figures.common import WEBGL_ABOVE, bytes_axis, si_axes
from app.units import signed_bytes, with_minus

BASELINE = "#7F8C8D"
ACTIVE = "#0072B2"
UP = "#D55E00"
DOWN = "#009E73"


def _scatter(points: int) -> type[go.Scatter] | type[go.Scattergl]:
    """SVG for a few thousand points in all, WebGL beyond (a WebGL context costs more than it
    saves on small figures: ``app.figures.common.WEBGL_ABOVE``)."""
    return go.Scattergl if points > WEBGL_ABOVE else go.Scatter


def _layout(fig: go.Figure, title: str, height: int = 380) -> go.Figure:
    fig.update_layout(
        template="plotly_white",
        height=height,
        margin={"l": 70, "r": 20, "t": 50, "b": 50},
        title={"text": title, "x": 0.01, "font": {"size": 15}},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0.35},
        hoverlabel={"namelength": -1},
    )
    return si_axes(fig)


def _empty(title: str, message: str) -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text=message, showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5)
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return _layout(fig, title, height=220)


def _delta_area(fig: go.Figure, x: np.ndarray, y: np.ndarray, name: str, colour: str, hover: str, **where: int) -> None:
    """A signed series (grew / shrank) as one filled step path centred on each x, not a bar per x:
    plotly draws a bar as its own SVG element, and 2 x 2,000 of them took seconds in the browser
    (bench/viewer_browser.py, the Memory and Liveness compare tabs); a path is one element."""
    fig.add_trace(
        go.Scatter(
            x=x, y=y, name=name, mode="lines", fill="tozeroy", fillcolor=colour,
            line={"width": 0, "shape": "hvh", "color": colour}, hovertemplate=hover,
        ),
        **where,
    )  # fmt: skip


def bin_extremes(x: np.ndarray, delta: np.ndarray, max_points: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Reduce a long series to at most ``max_points`` bins: (first x of each bin, largest increase,
    largest decrease (<= 0), items per bin). With one item per bin the series is unchanged."""
    n = delta.size
    width = max(1, -(-n // max(1, max_points)))
    if width == 1:
        return x, np.maximum(delta, 0), np.minimum(delta, 0), 1
    starts = np.arange(0, n, width)
    up = np.maximum(np.maximum.reduceat(delta, starts), 0)
    down = np.minimum(np.minimum.reduceat(delta, starts), 0)
    return x[starts], up, down, width


def tile_memory_delta_figure(
    tiles: pd.DataFrame, column: str = "total_bytes_including_gaps", max_points: int = 2000, n_marked: int = 10
) -> go.Figure:
    """Per-tile memory delta (active - baseline) from ``memory.tile_memory_comparison``."""
    title = "Memory per tile: active - baseline"
    if tiles.empty:
        return _empty(title, "no tiles")
    delta = tiles[f"delta_{column}"].to_numpy(dtype=np.int64)
    x, up, down, width = bin_extremes(tiles["tile"].to_numpy(), delta, max_points)
    fig = go.Figure()
    _delta_area(fig, x, up, "grew", UP, "tile %{x}: %{y:+,} B<extra></extra>")
    _delta_area(fig, x, down, "shrank", DOWN, "tile %{x}: %{y:+,} B<extra></extra>")
    # the biggest changes as labelled markers, so a few outlier tiles stay visible among thousands
    top = np.argsort(-np.abs(delta), kind="stable")[:n_marked]
    top = top[delta[top] != 0]
    if top.size:
        fig.add_trace(
            go.Scatter(
                x=tiles["tile"].to_numpy()[top],
                y=delta[top],
                mode="markers",
                name=f"top {top.size} tiles",
                marker={
                    "color": np.where(delta[top] > 0, UP, DOWN),
                    "size": 8,
                    "line": {"width": 1, "color": "#1c2833"},
                },
                hovertemplate="tile %{x}: %{y:+,} B<extra></extra>",
            )
        )
    per = f" (largest change of every {width} tiles)" if width > 1 else ""
    fig.update_xaxes(title_text=f"tile{per}")
    fig.update_yaxes(title_text="delta bytes")
    bytes_axis(fig, min(float(down.min()), 0.0), max(float(up.max()), 0.0))
    return _layout(fig, title)


def tile_memory_overlay_figure(
    tiles: pd.DataFrame, column: str = "total_bytes_including_gaps", max_points: int = 2000
) -> go.Figure:
    """Bytes per tile of both reports as two lines (bins keep each bin's maximum)."""
    title = "Memory per tile"
    if tiles.empty:
        return _empty(title, "no tiles")
    fig = go.Figure()
    scatter = _scatter(2 * min(len(tiles), max_points))
    for side, colour in (("baseline", BASELINE), ("active", ACTIVE)):
        v = tiles[f"{side}_{column}"].to_numpy(dtype=np.int64)
        x, up, _, _ = bin_extremes(tiles["tile"].to_numpy(), v, max_points)
        fig.add_trace(scatter(x=x, y=up, mode="lines", name=side, line={"color": colour, "width": 1}))
    fig.update_xaxes(title_text="tile")
    fig.update_yaxes(title_text="bytes")
    bytes_axis(fig, 0, float(max(tiles[f"{side}_{column}"].max() for side in ("baseline", "active"))))
    return _layout(fig, title)


def category_delta_figure(categories: pd.DataFrame) -> go.Figure:
    """Bytes per memory category for both reports (``memory.category_comparison``)."""
    title = "Memory by category (all tiles)"
    if categories.empty:
        return _empty(title, "no memory")
    fig = go.Figure()
    names = list(categories.index)
    for side, colour in (("baseline", BASELINE), ("active", ACTIVE)):
        fig.add_bar(
            x=names,
            y=categories[side],
            name=side,
            marker_color=colour,
            hovertemplate="%{x}: %{y:,} B<extra>" + side + "</extra>",
        )
    fig.update_layout(barmode="group")
    fig.update_yaxes(title_text="bytes")
    bytes_axis(fig, 0, float(categories[["baseline", "active"]].to_numpy().max()))
    return _layout(fig, title)


def liveness_comparison_figure(liveness: pd.DataFrame, max_points: int = 2000) -> go.Figure:
    """Not-always-live bytes of both reports along the step alignment (top), and the delta at each
    aligned step (bottom). x is the aligned position, so the same step lines up in both curves; an
    added or removed step shows as a gap in the other report's curve."""
    title = "Liveness: not-always-live bytes per program step"
    if liveness.empty:
        return _empty(title, "no program steps")
    pos = np.arange(len(liveness))
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.65, 0.35], vertical_spacing=0.06)
    scatter = _scatter(2 * min(len(liveness), max_points))
    if len(liveness) > max_points:
        # level of detail: on a long alignment each curve shows its maximum per bin of steps, so
        # the figure stays small (the delta below is binned the same way)
        for side, colour in (("baseline", BASELINE), ("active", ACTIVE)):
            v = np.where(liveness[f"{side}_step"].to_numpy() >= 0, liveness[f"{side}_bytes"].to_numpy(), 0)
            x, top, _, width = bin_extremes(pos, v.astype(np.int64), max_points)
            fig.add_trace(
                scatter(
                    x=x,
                    y=top,
                    mode="lines",
                    name=side,
                    line={"color": colour, "width": 1.5, "shape": "hv"},
                    hovertemplate=side + f": max %{{y:,}} B in steps %{{x}}..+{width - 1}<extra></extra>",
                ),
                row=1,
                col=1,
            )
    else:
        _exact_liveness_curves(fig, liveness, pos, scatter)
    # the delta as filled SVG step areas (largest increase / decrease per bin on long axes): a
    # filled WebGL line renders badly across gaps
    x, up, down, _ = bin_extremes(pos, liveness["delta_bytes"].to_numpy(dtype=np.int64), max_points)
    for y, name, colour in ((up, "grew", UP), (down, "shrank", DOWN)):
        _delta_area(fig, x, y, name, colour, "delta %{y:+,} B<extra></extra>", row=2, col=1)
    fig.update_yaxes(title_text="bytes", row=1, col=1)
    fig.update_yaxes(title_text="delta bytes", row=2, col=1)
    drawn = [np.asarray(t.y, dtype=np.float64) for t in fig.data if t.yaxis in (None, "y")]
    bytes_axis(fig, 0, max(_top(y) for y in drawn), row=1, col=1)
    bytes_axis(fig, min(float(down.min()), 0.0), max(float(up.max()), 0.0), row=2, col=1)
    fig.update_xaxes(title_text="aligned program step", row=2, col=1)
    return _layout(fig, title, height=480)


def _exact_liveness_curves(
    fig: go.Figure, liveness: pd.DataFrame, pos: np.ndarray, scatter: type[go.Scatter] | type[go.Scattergl]
) -> None:
    """One point per aligned step, absent steps as gaps, the step's name on hover."""
    text = (liveness["type"].astype(str) + " " + liveness["name"].astype(str)).to_numpy()
    for side, colour in (("baseline", BASELINE), ("active", ACTIVE)):
        present = liveness[f"{side}_step"].to_numpy() >= 0
        y = np.where(present, liveness[f"{side}_bytes"].to_numpy(dtype=np.float64), np.nan)
        fig.add_trace(
            scatter(
                x=pos,
                y=y,
                mode="lines",
                name=side,
                line={"color": colour, "width": 1.5, "shape": "hv"},
                customdata=np.stack([liveness[f"{side}_step"].to_numpy(), text], axis=1),
                hovertemplate=side + " step %{customdata[0]}: %{y:,} B<br>%{customdata[1]}<extra></extra>",
            ),
            row=1,
            col=1,
        )


def step_cycles_delta_figure(steps: pd.DataFrame, max_points: int = 2000) -> go.Figure:
    """Executed cycles per aligned program step: active - baseline (``steps.step_comparison``)."""
    title = "Cycles per program step: active - baseline"
    if steps.empty or "delta_cycles" not in steps:
        return _empty(title, "no program steps")
    delta = steps["delta_cycles"].to_numpy(dtype=np.int64)
    x, up, down, width = bin_extremes(np.arange(len(steps)), delta, max_points)
    fig = go.Figure()
    _delta_area(fig, x, up, "slower", UP, "position %{x}: %{y:+,} cycles<extra></extra>")
    _delta_area(fig, x, down, "faster", DOWN, "position %{x}: %{y:+,} cycles<extra></extra>")
    fig.update_xaxes(title_text="aligned program step" + (f" (largest change of every {width})" if width > 1 else ""))
    fig.update_yaxes(title_text="delta cycles")
    return _layout(fig, title)


def top_delta_figure(table: pd.DataFrame, label: str, delta: str, title: str, n: int = 20, unit: str = "") -> go.Figure:
    """Horizontal bars of the ``n`` biggest changes of ``delta`` in ``table`` labelled by ``label``."""
    if table.empty:
        return _empty(title, "nothing to compare")
    d = table[delta].to_numpy(dtype=np.float64)
    keep = np.flatnonzero(d != 0)
    keep = keep[np.argsort(-np.abs(d[keep]), kind="stable")][:n][::-1]
    if keep.size == 0:
        return _empty(title, "no change")
    labels = table[label].astype(str).to_numpy()[keep]
    if "status" in table:
        labels = [
            f"{lab} [{s}]" if s in ("added", "removed") else lab
            for lab, s in zip(labels, table["status"].to_numpy()[keep], strict=True)
        ]
    # a bar per row at its own position: shortened names can coincide (ONNX paths differ in their
    # first part only), and bars sharing a category would be drawn on top of one another
    fig = go.Figure(
        go.Bar(
            x=d[keep],
            y=np.arange(keep.size),
            orientation="h",
            marker_color=np.where(d[keep] > 0, UP, DOWN),
            customdata=labels,
            hovertemplate="%{customdata}<br>%{x:+,} " + unit + "<extra></extra>",
            # every bar's value written beside it: one big change must not leave the others unreadable
            text=[signed_bytes(v) if unit == "B" else with_minus(f"{v:+,.0f}") for v in d[keep]],
            textposition="auto",  # inside a long bar, beside a short one
        )
    )
    fig.update_xaxes(title_text="active - baseline " + ("bytes" if unit == "B" else unit).strip())
    fig.update_yaxes(tickmode="array", tickvals=np.arange(keep.size), ticktext=[_short(lab) for lab in labels])
    if unit == "B":
        bytes_axis(fig, min(float(d[keep].min()), 0.0), max(float(d[keep].max()), 0.0), axis="x")
    return _layout(fig, title, height=max(260, 28 * keep.size + 100))


def _short(label: str, keep: int = 60) -> str:
    """A long operation path shortened in its middle, so both the model's name (first) and the
    operation (last) stay: 'onnx:s3b0_b_conv_365(Conv) > … > poplibs:conv matmul(MatMul)'."""
    if len(label) <= keep:
        return label
    head = keep * 2 // 5
    return label[:head] + "…" + label[-(keep - head - 1) :]


def _top(y: np.ndarray) -> float:
    """The largest finite value of a curve (0 for none: an absent report's gaps are NaN)."""
    return float(np.nanmax(y, initial=0.0))
