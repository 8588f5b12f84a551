"""The Operations Graph drawn with Cytoscape (dash-cytoscape): elements, style sheet and layout for
the nodes and edges of ``app.views.operations_graph.frontier``, and the colour legend.

The server places the nodes (app.figures.graph_layout: layered, left to right, wrapped into rows so
that a long chain of layers reads at the zoom that fits the panel); Cytoscape draws them at those
places (its preset layout), with open groups as boxes around their members, and zooms and pans in
the browser. Only the visible nodes are sent.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from dash import html

from app.figures.graph_layout import layout
from app.units import format_bytes, format_si
from app.views.operations_graph import ColourScale

#: What each measure is called in labels and the legend.
MEASURE_NAMES = {"cycles": "cycles", "flops": "FLOPs", "memory_bytes": "memory", "delta_cycles": "Δ cycles"}
#: The places come with the elements (``elements``); fit them to the panel, no animation (idle sooner).
LAYOUT = {"name": "preset", "fit": True, "padding": 24, "animate": False}
#: Label sizes in model units (px at zoom 1): the layout wraps the graph so that the zoom that fits
#: it keeps them legible. A character is ~0.62 of the font size wide (DejaVu Sans, Chromium's).
FONT_PX, OPEN_FONT_PX = 12, 13
CHAR_PX, LINE_PX = 0.62 * FONT_PX, 1.3 * FONT_PX


def format_value(measure: str, value: float) -> str:
    """A node's figure as its label shows it: '1.23 M cycles', '4.5 MiB', '+12.3 k cycles'."""
    if measure == "memory_bytes":
        return format_bytes(value)
    if measure == "delta_cycles":
        text = format_si(value, " cycles").replace("  ", " ")
        return text if value <= 0 else "+" + text
    unit = " FLOPs" if measure == "flops" else " cycles"
    return format_si(value, unit).replace("  ", " ")


def share_text(value: float, total: float) -> str:
    """A node's share of the layer: '31%', '<1%' (never '0%' for something that costs)."""
    pct = 100 * value / total
    return "<1%" if 0 < pct < 0.5 else f"{pct:.0f}%"


def short_value(measure: str, value: float) -> str:
    """A figure without its unit (the legend gives it): '175 k', '376.8 MiB', '+1.2 k'."""
    if measure == "memory_bytes":
        return format_bytes(value)
    text = format_si(value)
    return "+" + text if measure == "delta_cycles" and value > 0 else text


def _text_colour(rgb: str) -> str:
    """Black on a light fill, white on a dark one (relative luminance)."""
    if not rgb.startswith("rgb"):
        return "#222"
    r, g, b = (float(x) for x in rgb[rgb.index("(") + 1 : -1].split(","))
    return "#222" if 0.2126 * r + 0.7152 * g + 0.0722 * b > 140 else "#fff"


def elements(
    nodes: pd.DataFrame, edges: pd.DataFrame, values: np.ndarray, measure: str, scale: ColourScale, total: float
) -> list[dict[str, Any]]:
    """Cytoscape elements: one node per frontier node (an open group is a compound parent), one
    edge per frontier edge. ``values``: the measure of each node; ``total``: the layer's total, for
    each node's share."""
    colours = scale.colours(values)
    nodes_out: list[dict[str, Any]] = []
    for row, value, colour in zip(nodes.itertuples(index=False), values, colours, strict=True):
        share = f" · {share_text(value, total)}" if total > 0 and measure != "delta_cycles" and value > 0 else ""
        short = short_value(measure, value)  # the legend names the unit
        if row.expanded:
            label = f"▾ {row.label}"
        elif row.is_group:
            label = f"▸ {row.label}\n{short}{share}"
        else:
            label = f"{row.label}\n{short}{share}"
        lines = label.split("\n")
        data: dict[str, Any] = {
            "id": row.id,
            "label": label,
            # the box fits its label (Cytoscape's width: label is deprecated)
            "w": round(CHAR_PX * max(len(x) for x in lines) + 14),
            "h": round(LINE_PX * len(lines) + 10),
            "kind": "open" if row.expanded else ("group" if row.is_group else "op"),
            "colour": colour,
            "text": _text_colour(colour),
            "value": float(value),
            "title": row.title,
        }
        if row.parent:
            data["parent"] = row.parent
        nodes_out.append({"data": data, "classes": data["kind"]})
    links = list(zip(edges["source"], edges["target"], strict=True))
    placed = layout(
        [e["data"]["id"] for e in nodes_out],
        [e["data"].get("parent", "") for e in nodes_out],
        [
            (OPEN_FONT_PX * 0.62 * len(e["data"]["label"]) + 8, 0.0)
            if e["data"]["kind"] == "open"
            else (e["data"]["w"], e["data"]["h"])
            for e in nodes_out
        ],
        [e["data"]["kind"] == "open" for e in nodes_out],
        [int(x) for x in nodes["first"]],
        links,
    )
    for e in nodes_out:
        if e["data"]["id"] in placed.positions:
            x, y = placed.positions[e["data"]["id"]]
            e["position"] = {"x": round(x, 1), "y": round(y, 1)}
    out = nodes_out
    for (s, t), v in zip(links, edges["variables"], strict=True):
        edge: dict[str, Any] = {"data": {"id": f"{s}->{t}", "source": s, "target": t, "variables": int(v)}}
        if (s, t) in placed.far_edges:
            edge["classes"] = "far"  # a long edge (an input every layer reads): drawn lighter
        out.append(edge)
    return out


STYLESHEET: list[dict[str, Any]] = [
    {
        "selector": "node",
        "style": {
            "label": "data(label)",
            "background-color": "data(colour)",
            "color": "data(text)",
            "shape": "round-rectangle",
            "text-wrap": "wrap",
            "text-max-width": "160px",
            "text-valign": "center",
            "text-halign": "center",
            "font-size": f"{FONT_PX}px",
            "width": "data(w)",
            "height": "data(h)",
            "border-width": 1,
            "border-color": "#666",
            "min-zoomed-font-size": 6,
        },
    },
    {"selector": ".group", "style": {"border-width": 2, "border-color": "#333", "font-weight": "bold"}},
    {
        "selector": ".open",
        "style": {
            "background-color": "#F7F7F7",
            "background-opacity": 0.6,
            "border-style": "dashed",
            "border-color": "#888",
            "color": "#333",
            "text-valign": "top",
            "text-halign": "center",
            "text-events": "yes",  # a click on the '▾ name' label above the box closes it too
            "font-size": f"{OPEN_FONT_PX}px",
            "font-weight": "bold",
            "padding": "10px",
        },
    },
    {"selector": "node:selected", "style": {"border-width": 3, "border-color": "#1F77B4"}},
    {
        "selector": "edge",
        "style": {
            "width": 1.2,
            "line-color": "#A0A0A0",
            "target-arrow-color": "#A0A0A0",
            "target-arrow-shape": "triangle",
            "arrow-scale": 0.8,
            "curve-style": "bezier",
        },
    },
    {"selector": "edge.far", "style": {"opacity": 0.25, "width": 0.8}},
]


def legend(scale: ColourScale, measure: str) -> html.Div:
    """The colour scale as a gradient bar with its ticks (log scale; a delta's symmetric log)."""
    ticks = scale.ticks()
    stops = np.linspace(0, 1, 11)
    if scale.signed:
        grad = scale.colours(np.interp(stops, [0, 0.5, 1], [-scale.hi, 0, scale.hi]))
    else:
        grad = scale.colours(np.exp(np.interp(stops, [0, 1], [np.log(scale.lo), np.log(scale.hi)])))
    pos = scale.position(np.array(ticks, dtype=np.float64))
    marks = [
        html.Span(
            short_value(measure, t).replace(" ", ""),
            style={"position": "absolute", "left": f"{100 * p:.1f}%", "transform": "translateX(-50%)"},
            className="small text-nowrap",
        )
        for t, p in zip(ticks, pos, strict=True)
        if np.isfinite(p)
    ]
    how = (
        "Δ cycles, active − baseline: green costs less, red more (symmetric log scale)"
        if scale.signed
        else f"{MEASURE_NAMES[measure]} (log scale; grey: none)"
    )
    return html.Div(
        [
            html.Div(how, className="small text-muted"),
            html.Div(  # the ticks hang half outside the bar's ends: keep them inside the panel
                [
                    html.Div(
                        style={
                            "height": "12px",
                            "background": f"linear-gradient(to right, {', '.join(grad)})",
                            "border": "1px solid #999",
                        }
                    ),
                    html.Div(marks, style={"position": "relative", "height": "1.3em"}),
                ],
                style={"margin": "0 18px"},
            ),
        ],
        className="mb-2",
    )
