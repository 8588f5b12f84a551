"""Memory figures: total memory by tile (stacked, with the max-memory line), variables graph, tile map."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from app.figures import plain
from app.figures.common import (
    PALETTE,
    FigureDict,
    base_layout,
    binary_axis,
    bytes_axis,
    empty_figure,
    empty_figure_dict,
    figure_dict,
    scatter_type,
    series_colour,
)
from app.units import format_bytes
from report_format.schema import MEMORY_REGIONS


def tile_memory_figure(
    binned: pd.DataFrame,
    bin_max: np.ndarray,
    tiles_per_bin: int,
    bytes_per_tile: int,
    *,
    show_max_memory: bool = True,
    selected: list[int] | None = None,
    sorted_order: bool = False,
    tiles_per_ipu: int | None = None,
    bars_up_to: int = 600,
) -> FigureDict:
    """Bytes per tile stacked by series (or per bin of ``tiles_per_bin`` tiles: the mean of the bin,
    with a line for the fullest tile of each bin). x is the tile id, or the rank when sorted.

    Up to ``bars_up_to`` columns are bars; beyond that, stacked step areas (one path per series
    instead of one rectangle per tile and series), which the browser draws many times faster.
    A figure dict (``figure_dict``): every fresh Memory request builds one."""
    if binned.empty:
        return empty_figure_dict("No tile memory in this report.")
    top = max(float(binned.sum(axis=1).max()), float(np.max(bin_max)) if len(bin_max) else 0.0)
    axis_top = max(top, bytes_per_tile) if show_max_memory else top
    binned, merged = merge_thin_series(binned, axis_top, PLOT_PX)
    x = np.arange(len(binned)) if sorted_order else binned.index.to_numpy()
    tiles = binned.index.to_numpy()
    x_list, tiles_list = x.tolist(), tiles.tolist()  # once, shared by every series
    tile = "customdata" if sorted_order else "x"
    areas = len(binned) > bars_up_to
    data: list[dict[str, Any]] = []
    for col in binned.columns:
        colour = OTHER_COLOUR if col == OTHER else series_colour(str(col))
        what = f"{len(merged)} series under a pixel ({', '.join(merged)})" if col == OTHER else col
        trace: dict[str, Any] = {
            "x": x_list,
            "y": binned[col].to_numpy().tolist(),
            "name": f"other ({len(merged)} series under 1 px)" if col == OTHER else str(col),
            "hovertemplate": f"{what}: %{{y:,.0f}} B<br>tile %{{{tile}}}<extra></extra>",
        }
        if sorted_order:  # x is the rank: each series carries its tiles (in tile order x is the tile)
            trace["customdata"] = tiles_list
        if areas:
            trace.update(type="scatter", stackgroup="memory", mode="lines", fillcolor=colour,
                         line={"width": 0, "shape": "hvh", "color": colour})  # fmt: skip
        else:
            trace.update(type="bar", marker={"color": colour, "line": {"width": 0}})
        data.append(trace)
    if tiles_per_bin > 1:
        data.append(
            {
                "type": scatter_type(len(x_list)),
                "x": x_list,
                "y": np.asarray(bin_max).tolist(),
                "mode": "lines",
                "name": f"fullest tile of each {tiles_per_bin}",
                "line": {"color": "rgba(40,40,40,0.55)", "width": 1, "shape": "hvh"},
                "hovertemplate": "fullest tile: %{y:,.0f} B<extra></extra>",
            }
        )
    shapes: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    if show_max_memory:  # what plotly's add_hline(annotation_position="top left") makes
        shapes.append({"type": "line", "xref": "x domain", "yref": "y", "x0": 0, "x1": 1, "y0": bytes_per_tile,
                       "y1": bytes_per_tile, "line": {"dash": "dash", "color": "#C0392B"}})  # fmt: skip
        annotations.append({"text": f"max memory per tile ({format_bytes(bytes_per_tile)})", "showarrow": False,
                            "x": 0, "xanchor": "left", "xref": "x domain", "y": bytes_per_tile,
                            "yanchor": "bottom", "yref": "y"})  # fmt: skip
    if tiles_per_ipu and not sorted_order and tiles[-1] >= tiles_per_ipu:
        # IPU boundaries, as PopVision's x axis; only those inside the tiles shown (one IPU selected)
        for ipu in range(int(tiles[0]) // tiles_per_ipu + 1, int(tiles[-1]) // tiles_per_ipu + 1):
            at = ipu * tiles_per_ipu - 0.5 * tiles_per_bin
            shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": at, "x1": at, "y0": 0, "y1": 1,
                           "line": {"dash": "dot", "color": "#888", "width": 1}})  # fmt: skip
    if selected:
        # a selected tile among 1,472 is under a pixel wide: draw each range at least 0.5% of the
        # axis wide, outlined, so it can be seen
        span = float(x[-1] - x[0]) + 1 if len(x) else 1.0
        least = span / 200
        for x0, x1 in _selected_ranges(x, tiles, np.unique(np.asarray(selected)), tiles_per_bin)[:200]:
            if x1 - x0 < least:
                mid = (x0 + x1) / 2
                x0, x1 = mid - least / 2, mid + least / 2
            shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": x0, "x1": x1, "y0": 0, "y1": 1,
                           "fillcolor": "#F1C40F", "opacity": 0.45, "line": {"color": "#9A7D0A", "width": 1.5},
                           "layer": "above"})  # fmt: skip
    xlabel = "tiles, fullest first" if sorted_order else "tile"
    if tiles_per_bin > 1:
        xlabel += f" (each column: mean of {tiles_per_bin} tiles)"
    yaxis = {"title": {"text": "bytes"}, **binary_axis(0, axis_top)}
    layout = {
        "barmode": "stack",
        "bargap": 0,
        "clickmode": "event+select",
        "dragmode": "select",
        "selectdirection": "h",
        "hovermode": "x" if areas else "closest",
        "shapes": shapes,
        "annotations": annotations,
        "xaxis": {"title": {"text": xlabel}},
        "yaxis": yaxis,
    }
    return figure_dict(data, layout, height=HEIGHT)


#: The tile memory figure's height, and its plot's (less the top and bottom margins of
#: ``common.figure_dict``: ``plain.margin``).
HEIGHT = 430
PLOT_PX = HEIGHT - plain.margin(None)["t"] - plain.margin(None)["b"]
#: The series that stands for the series too thin to see, and its colour.
OTHER = "(other)"
OTHER_COLOUR = "#999999"


def merge_thin_series(binned: pd.DataFrame, axis_top: float, plot_px: float) -> tuple[pd.DataFrame, list[str]]:
    """Series under one pixel tall on every column (at ``plot_px`` pixels for ``axis_top`` bytes)
    summed into one series ``OTHER``, when there are two or more of them: the eye cannot tell them
    apart, and each series costs the browser a filled path to stack and draw (13 categories on
    1,472 tiles made the Memory page's heaviest render). Returns the frame and the merged names."""
    if axis_top <= 0 or binned.shape[1] < 3:
        return binned, []
    tallest_px = binned.max(axis=0).to_numpy(dtype=np.float64) / axis_top * plot_px
    thin = [str(c) for c, px in zip(binned.columns, tallest_px, strict=True) if px < 1.0]
    if len(thin) < 2:
        return binned, []
    out = binned.drop(columns=thin)
    out[OTHER] = binned[thin].sum(axis=1)
    return out, thin


def _selected_ranges(x: np.ndarray, tiles: np.ndarray, sel: np.ndarray, width: int) -> list[tuple[float, float]]:
    """x ranges to highlight: columns holding a selected tile, merged where adjacent.
    A column starting at tile t holds tiles t..t+width-1."""
    idx = np.searchsorted(sel, tiles)
    first_at_or_after = sel[np.minimum(idx, len(sel) - 1)]
    hit = (idx < len(sel)) & (first_at_or_after >= tiles) & (first_at_or_after < tiles + width)
    cols = np.flatnonzero(hit)
    if not len(cols):
        return []
    breaks = np.flatnonzero(np.diff(cols) > 1)
    starts = np.r_[cols[0], cols[breaks + 1]]
    ends = np.r_[cols[breaks], cols[-1]]
    step = width if len(x) < 2 else float(x[1] - x[0]) if x[1] > x[0] else 1.0
    return [(float(x[a]) - step / 2, float(x[b]) + step / 2) for a, b in zip(starts, ends, strict=True)]


def variables_figure(by_tile: pd.DataFrame, num_tiles: int | None = None) -> go.Figure:
    """Bytes of each chosen variable on each tile (x spans every tile of the device)."""
    if by_tile.empty:
        return empty_figure("Pick variables in the table (tick boxes) to plot their bytes across tiles.", height=260)
    fig = go.Figure()
    for i, (vid, g) in enumerate(by_tile.groupby("variable_id", sort=True)):
        fig.add_trace(
            go.Scattergl(
                x=g["tile"],
                y=g["bytes"],
                mode="markers",
                name=f"{g['name'].iat[0]} (#{vid})",
                showlegend=True,
                marker={"color": PALETTE[i % len(PALETTE)], "size": 5},
                hovertemplate="tile %{x}: %{y:,} B<extra></extra>",
            )
        )
    fig.update_xaxes(title="tile", range=[-0.5, num_tiles - 0.5] if num_tiles else None)
    fig.update_yaxes(title="bytes on the tile", rangemode="tozero")
    bytes_axis(fig, 0, float(by_tile["bytes"].max()))
    return base_layout(fig, title="Variables graph", height=300)


#: Panels per row of the tile map, and the gap between panels (share of the figure).
MAP_COLUMNS = 4
MAP_GAP = 0.03


def tile_map_figure(tm: pd.DataFrame, bytes_per_tile: int, layout: str = "software") -> dict[str, Any]:
    """One heatmap panel per IPU (up to 16), coloured by bytes (or by rank, ``by_rank``), as a plain
    figure dict. ``tm`` is ``app.views.memory.tile_map``'s table for ``layout``: "software" (tiles
    in software order, row by row) or "physical" (the die's columns and islands; hover gives each
    tile's column, island and place in it)."""
    if tm.empty:
        return plain.empty("No tile memory in this report.")
    ipus = sorted(tm["ipu"].unique())
    cols = min(len(ipus), MAP_COLUMNS)
    rows = -(-len(ipus) // cols)
    # the scale follows the data (tiles often use a few % of their memory: a scale up to the
    # capacity would paint every tile the same); the capacity is a marked tick when in range
    full = max(int(tm["bytes"].max()), 1)
    typical = float(np.percentile(tm["bytes"], 99))
    # a few outliers (out-of-memory tiles) would darken every other tile: then the scale tops just
    # above the 99th percentile and the outliers show in its top colour
    zmax = int(1.25 * typical) if full > 2 * typical > 0 else full
    ticks = [zmax * f for f in (0, 0.25, 0.5, 0.75, 1.0)]
    labels = [format_bytes(v) for v in ticks]
    if zmax < full:
        labels[-1] = f"≥ {labels[-1]} (to {format_bytes(full)})"
    if bytes_per_tile <= zmax:
        ticks.append(bytes_per_tile)
        labels.append(f"capacity {format_bytes(bytes_per_tile)}")
    colorbar: dict[str, Any] = {
        "title": {
            "text": f"bytes<br>(capacity<br>{format_bytes(bytes_per_tile)})" if bytes_per_tile > zmax else "bytes"
        },
        "tickvals": ticks,
        "ticktext": labels,
    }
    values = tm["bytes"].to_numpy(np.float64)
    colour, zmin = values, 0.0
    scale_note = "the scale follows the tiles' bytes"
    if by_rank(values, zmax):
        # most tiles hold nearly the same bytes (ResNet-50: half of them within 1.4% of each other): a
        # linear scale paints them one colour, so the colour is the tile's rank, and the bar gives
        # the bytes at its quartiles (exact bytes on hover)
        colour, zmax, zmin = percentile_rank(values), 100, 0.0
        q = np.percentile(values, RANK_TICKS)
        colorbar = {
            "title": {"text": "bytes<br>(by rank)"},
            "tickvals": list(RANK_TICKS),
            "ticktext": [f"{name} {format_bytes(v)}" for name, v in zip(RANK_NAMES, q, strict=True)],
        }
        scale_note = f"coloured by rank: the middle half of the tiles hold {format_bytes(q[1])} to {format_bytes(q[3])}"
    physical = layout == "physical"
    # the die's places in the hover of a few IPUs' panels; a POD's 16 small panels say tile and bytes
    detail = len(ipus) <= DETAILED_IPUS
    data: list[dict[str, Any]] = []
    fig_layout: dict[str, Any] = {}
    width = (1.0 - MAP_GAP * (cols - 1)) / cols
    height = (1.0 - 0.08 * (rows - 1)) / rows
    for k, ipu in enumerate(ipus):
        on = (tm["ipu"] == ipu).to_numpy()
        g = tm[on]
        nr, nc = int(g["row"].max()) + 1, int(g["col"].max()) + 1
        r, c = g["row"].to_numpy(), g["col"].to_numpy()
        z = np.full((nr, nc), np.nan)
        # a rank to 0.1 of a percentile, bytes whole: a POD16's 23,552 tiles in full precision were
        # a third of the figure
        z[r, c] = np.round(colour[on], 1)
        axis = "" if k == 0 else str(k + 1)
        data.append(
            {
                "type": "heatmap",
                "z": z,
                # numbers per tile, worded once by the template (a sentence per tile made the
                # POD16's physical map 3 MB)
                "customdata": _hover_data(g, values[on], physical and detail, (nr, nc)),
                "zmin": zmin,
                "zmax": zmax,
                "colorscale": "Viridis",
                "showscale": k == 0,
                "colorbar": colorbar,
                "hovertemplate": _hover_template(int(ipu), physical and detail),
                "xgap": 2 if physical else 0,  # the die's columns drawn apart
                "xaxis": f"x{axis}",
                "yaxis": f"y{axis}",
            }
        )
        x0 = (k % cols) * (width + MAP_GAP)
        y1 = 1.0 - (k // cols) * (height + 0.08)
        fig_layout[f"xaxis{axis}"] = {"domain": [x0, x0 + width], "showticklabels": False, "showgrid": False,
                                      "zeroline": False, "anchor": f"y{axis}"}  # fmt: skip
        fig_layout[f"yaxis{axis}"] = {"domain": [y1 - height, y1], "showticklabels": False, "showgrid": False,
                                      "zeroline": False, "autorange": "reversed", "anchor": f"x{axis}"}  # fmt: skip
        if physical:
            fig_layout[f"xaxis{axis}"].update(showticklabels=True, title={"text": "column"}, dtick=max(1, nc // 12))
            fig_layout[f"yaxis{axis}"].update(title={"text": "islands of 4 tiles, top to bottom"})
        fig_layout.setdefault("annotations", []).append(
            {
                "text": f"IPU {ipu}",
                "showarrow": False,
                "xref": "paper",
                "yref": "paper",
                "x": x0 + width / 2,
                "y": y1,
                "yanchor": "bottom",
                "font": {"size": 13},
            }  # fmt: skip
        )
    order = (
        "tiles as laid out on the die: columns of islands of 4, an assumed floor plan"
        if physical
        else "tiles in software order"
    )
    base = plain.layout(
        (560 if physical else 260) * rows + 60,
        title=f"Tile map ({order}, one panel per IPU; {scale_note}; "
        f"fullest {format_bytes(full)}, capacity {format_bytes(bytes_per_tile)})",
    )
    base.update(fig_layout)
    base["margin"] = {**base.get("margin", {}), "r": 110}  # room for the colour bar's labels beside the toolbar
    return {"data": data, "layout": base}


#: Up to this many IPUs in one tile map, a tile's hover gives its place on the die too.
DETAILED_IPUS = 4


def _hover_data(g: pd.DataFrame, values: np.ndarray, physical: bool, shape: tuple[int, int]) -> np.ndarray:
    """Each grid cell's numbers for its hover (``_hover_template``), whole numbers (short in JSON):
    tile, bytes, KiB; on the physical layout also the tile in its IPU, the die column, island and
    place in it. An empty cell (a gap between islands) holds zeros and no colour: no hover shows."""
    cols = [g["tile"].to_numpy(), values, np.round(values / 1024)]
    if physical:
        cols += [g[c].to_numpy() for c in ("tile_in_ipu", "column", "island", "in_island")]
    out = np.zeros((*shape, len(cols)), dtype=np.int64)
    out[g["row"].to_numpy(), g["col"].to_numpy()] = np.stack(cols, axis=1)
    return out


def _hover_template(ipu: int, physical: bool) -> str:
    """The hover of a tile, from its ``_hover_data``: its id, its place on the die (physical) and
    its bytes (binary KiB, as every byte figure)."""
    size = "%{customdata[1]:,} B (%{customdata[2]:,} KiB)"
    if not physical:
        return f"tile %{{customdata[0]}} (IPU {ipu}): {size}<extra></extra>"
    return (
        f"tile %{{customdata[0]}} (tile %{{customdata[3]}} of IPU {ipu})<br>die column %{{customdata[4]}}, "
        f"island %{{customdata[5]}}, tile %{{customdata[6]}} of the island<br>{size}<extra></extra>"
    )


#: Percentiles marked on a rank colour bar, and their names (quartiles: ticks closer than a quarter
#: of the bar overlap their labels).
RANK_TICKS = (0.0, 25.0, 50.0, 75.0, 100.0)
RANK_NAMES = ("min", "p25", "median", "p75", "max")
#: The tile map colours by rank when the middle half of the tiles spans less than this share of the
#: linear scale (their colours would be indistinguishable).
RANK_BELOW = 0.10


def by_rank(values: np.ndarray, zmax: float) -> bool:
    """Whether a tile map over ``values`` reads better by rank: the middle half of the tiles differ,
    but by less than RANK_BELOW of the linear scale's top ``zmax`` (all equal: nothing to spread)."""
    if values.size < 4 or zmax <= 0:
        return False
    q25, q75 = np.percentile(values, (25, 75))
    return 0 < q75 - q25 < RANK_BELOW * zmax


def percentile_rank(values: np.ndarray) -> np.ndarray:
    """Each value's percentile rank, 0 (smallest) to 100 (largest); equal values share a rank."""
    ordered = np.sort(values)
    below = np.searchsorted(ordered, values, side="left")
    return 100.0 * below / max(values.size - 1, 1)


def split_at_regions(placed: pd.DataFrame, interleaved_start: int, bytes_per_tile: int) -> pd.DataFrame:
    """Placements (region, offset, bytes, end, ...) drawn as bars: one that crosses the start of
    interleaved memory or the end of the tile becomes one bar per region it lies in, each in that
    region's row, so a row never runs past its region (``bar_offset``/``bar_bytes``; ``part`` says
    which part of the variable a bar is, for the hover; ``offset``/``bytes`` stay the variable's)."""
    cuts = (0, min(interleaved_start, bytes_per_tile), bytes_per_tile, np.iinfo(np.int64).max)
    pieces = []
    start, end = placed["offset"].to_numpy(np.int64), placed["end"].to_numpy(np.int64)
    for region, lo, hi in zip(MEMORY_REGIONS, cuts[:-1], cuts[1:], strict=True):
        a, b = np.maximum(start, lo), np.minimum(end, hi)
        inside = b > a
        if not inside.any():
            continue
        part = placed[inside].assign(region=region, bar_offset=a[inside], bar_bytes=(b - a)[inside])
        whole = (a == start) & (b == end)
        part["part"] = np.where(whole[inside], "", f" (the part in {region.replace('_', '-')} memory)")
        pieces.append(part)
    return pd.concat(pieces, ignore_index=True)


def tile_memory_map_figure(placed: pd.DataFrame, tile: int, bytes_per_tile: int, interleaved_start: int) -> go.Figure:
    """Address map of one tile: a bar per variable from its offset, one row per region."""
    if placed.empty:
        return empty_figure(f"Tile {tile} holds no variables.", height=200)
    placed = split_at_regions(placed, interleaved_start, bytes_per_tile)
    fig = go.Figure()
    for live, colour, label in (
        (True, series_colour("always_live"), "always live"),
        (False, series_colour("not_always_live"), "not always live"),
    ):
        g = placed[placed["always_live"] == live]
        if g.empty:
            continue
        fig.add_bar(
            y=g["region"],
            x=g["bar_bytes"],
            base=g["bar_offset"],
            orientation="h",
            name=label,
            marker_color=colour,
            marker_line={"width": 0.5, "color": "white"},
            customdata=g[["name", "offset", "bytes", "part"]].to_numpy(),
            hovertemplate="%{customdata[0]}<br>offset %{customdata[1]:,}, %{customdata[2]:,} B%{customdata[3]}"
            "<extra></extra>",
        )
    fig.add_vline(
        x=interleaved_start,
        line_dash="dot",
        line_color="#555",
        annotation_text="interleaved memory starts",
        annotation_position="top",
    )
    fig.add_vline(
        x=bytes_per_tile,
        line_dash="dash",
        line_color="#C0392B",
        annotation_text="end of tile memory",
        annotation_position="top left",
    )
    fig.update_layout(barmode="overlay")
    end = max(bytes_per_tile, int(placed["end"].max()))
    fig.update_xaxes(title="address on the tile (bytes)", range=[0, end * 1.02])
    bytes_axis(fig, 0, end, axis="x")
    return base_layout(fig, title=f"Tile {tile} memory map (variables by address)", height=240)
