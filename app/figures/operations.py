"""Operations figures: cycles by tile of one operation, and the operations graph."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from app.figures.common import base_layout, colour_cap, empty_figure


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


def _colour_range(vals: np.ndarray, signed: bool) -> dict[str, float]:
    """cmin/cmax stopping at ``colour_cap`` when one operation dwarfs the rest (symmetric for a delta)."""
    cap = colour_cap(vals)
    if cap is None:
        return {}
    return {"cmin": -cap, "cmax": cap} if signed else {"cmin": 0.0, "cmax": cap}


def operations_graph_figure(nodes: pd.DataFrame, edges: pd.DataFrame, colour_by: str = "cycles") -> go.Figure:
    """Operations as a layered graph (``nodes.x``: data-flow depth, ``nodes.y``: slot in the layer),
    edges drawn source -> target, nodes coloured by ``colour_by``."""
    if nodes.empty:
        return empty_figure("No operations in this layer.")
    order = nodes["op_id"].tolist()
    pos = {op: (float(x), -float(y)) for op, x, y in zip(order, nodes["x"], nodes["y"], strict=True)}
    n = nodes.set_index("op_id")
    ex, ey = [], []
    for s, t in zip(edges["source"], edges["target"], strict=True):
        if s in pos and t in pos:
            ex += [pos[s][0], pos[t][0], None]
            ey += [pos[s][1], pos[t][1], None]
    fig = go.Figure(
        go.Scatter(x=ex, y=ey, mode="lines", line={"color": "#BBB", "width": 1}, hoverinfo="skip", showlegend=False)
    )
    xs = [pos[o][0] for o in order]
    ys = [pos[o][1] for o in order]
    vals = n.loc[order, colour_by].to_numpy(dtype=float)
    text = [
        f"{n.at[o, 'name']} ({n.at[o, 'op_type']})<br>cycles {n.at[o, 'cycles']:,}<br>"
        f"memory {n.at[o, 'memory_bytes']:,} B<br>FLOPs {n.at[o, 'flops']:,}"
        + (f"<br>Δ cycles vs baseline {n.at[o, 'delta_cycles']:+,.0f}" if "delta_cycles" in n.columns else "")
        for o in order
    ]
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=ys,
            mode="markers+text" if len(order) <= 60 else "markers",
            text=[n.at[o, "name"] for o in order],
            # alternate above/below by column so neighbours' labels do not run into each other
            textposition=["top center" if int(x) % 2 else "bottom center" for x in nodes["x"]],
            hovertext=text,
            hoverinfo="text",
            customdata=order,
            showlegend=False,
            marker={
                "size": 18,
                "color": vals,
                # a delta against the baseline is signed: blue faster / smaller, red slower / bigger
                "colorscale": "RdBu_r" if colour_by.startswith("delta_") else "YlOrRd",
                **({"cmid": 0} if colour_by.startswith("delta_") else {}),
                **_colour_range(vals, colour_by.startswith("delta_")),
                "showscale": True,
                "line": {"width": 1, "color": "#555"},
                "colorbar": {"title": colour_by.replace("delta_", "Δ ").replace("_", " ")},
            },
        )
    )
    # arrowheads show the direction of the data flow (annotations: one per edge, so only where
    # there are few enough edges for the browser to draw them quickly)
    drawn = [(s, t) for s, t in zip(edges["source"], edges["target"], strict=True) if s in pos and t in pos]
    if len(drawn) <= MAX_ARROWS:
        # all at once: add_annotation re-validates every annotation so far (quadratic)
        fig.update_layout(
            annotations=[
                {
                    "x": pos[t][0],
                    "y": pos[t][1],
                    "ax": pos[s][0],
                    "ay": pos[s][1],
                    "xref": "x",
                    "yref": "y",
                    "axref": "x",
                    "ayref": "y",
                    "text": "",
                    "showarrow": True,
                    "arrowhead": 2,
                    "arrowsize": 1.2,
                    "arrowwidth": 1,
                    "arrowcolor": "#888",
                    "standoff": 11,  # stop at the node's marker, not its centre
                    "startstandoff": 9,
                }
                for s, t in drawn
            ]
        )
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig = base_layout(fig, height=graph_height(nodes))
    fig.update_layout(height=None, autosize=True)  # the page sizes the graph (graph_height at least)
    return fig


#: Edges drawn with arrowheads at most (beyond that, lines only).
MAX_ARROWS = 400


def graph_height(nodes: pd.DataFrame) -> int:
    """Pixels the layered graph needs: about 60 per node of the tallest column."""
    return min(2400, max(360, 60 * (int(nodes["y"].max()) + 2))) if len(nodes) else 360
