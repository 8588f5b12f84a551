"""Shared figure styling: one palette and layout so every page reads alike."""

from __future__ import annotations

import zlib
from functools import cache
from typing import Any

import numpy as np
import plotly.graph_objects as go

from app.figures import plain
from app.units import binary_ticks
from report_format.vocabulary import MemoryCategory, MemoryRegion

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
    "idle": "#F2F3F4",  # an IPU in no step: near the page's white
}
GAPS_COLOUR = "#D5D8DC"
#: Memory series, one fixed colour each, so a category reads the same in every report and page:
#: categories (libpva's names), regions and liveness. Names not listed get a colour from their
#: name (``series_colour``), never from their position in a legend.
SERIES_COLOURS = {
    # categories: code warm, state and data cool, stack dark blue, the rest neutral
    MemoryCategory.STACK: "#0072B2",
    MemoryCategory.VERTEX_CODE: "#009E73",
    MemoryCategory.INTERNAL_EXCHANGE_CODE: "#E69F00",
    MemoryCategory.HOST_EXCHANGE_CODE: "#F0E442",
    MemoryCategory.GLOBAL_EXCHANGE_CODE: "#EDC948",
    MemoryCategory.CONTROL_CODE: "#CC79A7",
    MemoryCategory.VERTEX_INSTANCE_STATE: "#56B4E9",
    MemoryCategory.VERTEX_FIELD_DATA: "#76B7B2",
    MemoryCategory.COPY_DESCRIPTOR: "#9C755F",
    MemoryCategory.VECTOR_LIST_DESCRIPTOR: "#B07AA1",
    MemoryCategory.INSTRUMENTATION_RESULTS: "#D55E00",
    MemoryCategory.VARIABLE: "#4E79A7",
    MemoryCategory.CONSTANT: "#59A14F",
    MemoryCategory.CONTROL_ID: "#BAB0AC",
    MemoryCategory.CONTROL_TABLE: "#FF9DA7",
    MemoryCategory.HOST_EXCHANGE_PACKET_HEADER: "#F28E2B",
    MemoryCategory.GLOBAL_EXCHANGE_PACKET_HEADER: "#E15759",
    "sharedCodeStorage": "#8CD17D",
    "sharedDataStorage": "#499894",
    "messageSize": "#86BCB6",
    "rearrangement": "#D4A6C8",
    "outputEdge": "#FABFD2",
    "multiple": "#79706E",
    "overlapped": "#000000",
    "gaps": GAPS_COLOUR,
    # regions
    MemoryRegion.NON_INTERLEAVED: "#0072B2",
    MemoryRegion.INTERLEAVED: "#E69F00",
    MemoryRegion.OVERFLOWED: "#C0392B",
    # liveness
    "always_live": "#0072B2",
    "not_always_live": "#E69F00",
}


def series_colour(name: str) -> str:
    """The fixed colour of a memory series (``SERIES_COLOURS``; other names by a hash of the name)."""
    return SERIES_COLOURS.get(name) or PALETTE[zlib.crc32(name.encode()) % len(PALETTE)]


#: A figure as plotly.js takes it: ``{"data": [trace dicts], "layout": {...}}``. dcc.Graph accepts it
#: as is; the hot figures (Memory, Execution Trace) are built this way because a ``go.Figure``
#: validates and deep-copies every property (~60-100 ms a request, most of a fresh request's CPU).
FigureDict = dict[str, Any]


def _common_layout(title: str | None, height: int) -> dict[str, Any]:
    """The layout every figure shares (``base_layout`` sets the same on a ``go.Figure``)."""
    return {
        "height": height,
        # the toolbar stands upright in the right margin, so it never covers a legend entry or data
        # a title sits above the legend (which stands just above the plot), never on it
        "margin": plain.margin(title),  # room for automargin's usual needs: no redraw
        "modebar": {"orientation": "v"},
        "title": {"text": title, "x": 0.01, "font": {"size": 15}} if title else None,
        "legend": {"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0},
        "hoverlabel": {"namelength": -1},
    }


def base_layout(fig: go.Figure, *, title: str | None = None, height: int = 420) -> go.Figure:
    fig.update_layout(template="plotly_white", **_common_layout(title, height))
    return si_axes(fig)


@cache
def _template() -> dict[str, Any]:
    """plotly_white as plotly.js needs it (a dict; the name alone means nothing in the browser),
    built once: expanding it is what a ``go.Figure`` pays on every ``update_layout(template=...)``.
    Shared by every figure dict, so never modified."""
    import plotly.io as pio

    return pio.templates["plotly_white"].to_plotly_json()


def figure_dict(
    data: list[dict[str, Any]],
    layout: dict[str, Any] | None = None,
    *,
    title: str | None = None,
    height: int = 420,
) -> FigureDict:
    """A plain-dict figure with the common look (``base_layout``'s): the template, margins, legend,
    SI prefixes on both axes. ``layout`` is merged over that, one level deep into dict values
    (``{"margin": {"t": 30}}`` changes only the top margin). Traces are dicts whose arrays are
    already lists (``ndarray.tolist()``): nothing here validates or copies them."""
    out = {"template": _template(), **_common_layout(title, height)}
    out["xaxis"] = {"exponentformat": "SI"}
    out["yaxis"] = {"exponentformat": "SI"}
    for key, value in (layout or {}).items():
        old = out.get(key)
        out[key] = {**old, **value} if isinstance(old, dict) and isinstance(value, dict) else value
    return {"data": data, "layout": out}


#: Scatter figures with more points than this draw with WebGL ("scattergl"), fewer with SVG: a WebGL
#: context costs ~200 ms to create in Chromium without a GPU (the browser bench's headless
#: Chromium, profiled with CDP on the ResNet-50 Execution Trace) and tens of ms with one, while SVG
#: draws a few thousand points in a fraction of that.
WEBGL_ABOVE = 5000


def scatter_type(points: int, webgl_above: int = WEBGL_ABOVE) -> str:
    """The plotly trace type for a scatter figure of ``points`` points in all."""
    return "scattergl" if points > webgl_above else "scatter"


def binary_axis(lo: float, hi: float) -> dict[str, Any]:
    """The axis properties of a bytes axis over [lo, hi] for a figure dict (``bytes_axis``'s ticks)."""
    vals, labels = binary_ticks(lo, hi)
    return {"tickmode": "array", "tickvals": vals, "ticktext": labels}


def si_axes(fig: go.Figure) -> go.Figure:
    """Axis ticks with SI prefixes ("1.5G"), not plotly's default "1.5B" for billions, which on a
    bytes axis reads as 1.5 bytes."""
    fig.update_xaxes(exponentformat="SI")
    fig.update_yaxes(exponentformat="SI")
    return fig


def bytes_axis(fig: go.Figure, lo: float, hi: float, axis: str = "y", **where: int) -> go.Figure:
    """Give a bytes axis binary ticks over [lo, hi] (``app.units.binary_ticks``: 128 MiB, 256 MiB,
    ...), as every total on the page is in binary units; ``where`` picks a subplot (row=, col=).
    ``si_axes`` leaves other axes (cycles, steps) with SI prefixes."""
    vals, labels = binary_ticks(lo, hi)
    update = fig.update_yaxes if axis == "y" else fig.update_xaxes
    update(tickmode="array", tickvals=vals, ticktext=labels, **where)
    return fig


def empty_figure(message: str, height: int = 300) -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text=message, showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5, font={"size": 14})
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return base_layout(fig, height=height)


def empty_figure_dict(message: str, height: int = 300) -> FigureDict:
    """``empty_figure`` as a figure dict (cheap on every fresh request that finds nothing)."""
    note = {"text": message, "showarrow": False, "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5}
    return figure_dict(
        [],
        {"annotations": [{**note, "font": {"size": 14}}], "xaxis": {"visible": False}, "yaxis": {"visible": False}},
        height=height,
    )


#: A colour scale stops at this percentile of its values when the largest exceeds it by CAP_FACTOR:
#: one outlier (a long stream copy, a huge operation) must not leave every other mark the same pale colour.
CAP_PERCENTILE = 95.0
CAP_FACTOR = 2.0


def colour_cap(values: np.ndarray) -> float | None:
    """Where a colour scale over ``values`` (magnitudes; zeros ignored) stops: the CAP_PERCENTILE
    when the largest exceeds it by CAP_FACTOR, else None (the data's own maximum). Marks above the
    cap show the top colour; hover gives their exact value."""
    v = np.abs(np.asarray(values, dtype=np.float64))
    v = v[np.isfinite(v) & (v > 0)]
    if v.size == 0:
        return None
    cap = float(np.percentile(v, CAP_PERCENTILE))
    return cap if float(v.max()) > CAP_FACTOR * cap else None
