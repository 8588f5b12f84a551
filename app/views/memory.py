"""The memory view: memory of every tile, split by category / region / liveness, and what the
selected tiles hold (details, compute sets, vertices, exchanges, variables).

Every function is pure (Report -> DataFrame). Per-tile series are keyed by the global tile id.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from app.views import tables
from app.views.grouped import sums_and_tiles
from report_format.reader import Report
from report_format.vocabulary import MemoryRegion

BREAKDOWNS = ("category", "region", "liveness")
GAPS = "gaps"


@lru_cache(maxsize=32)
def tile_memory_breakdown(report: Report, by: str = "category", include_gaps: bool = True) -> pd.DataFrame:
    """One row per tile (index: tile id), one column per series of the breakdown, bytes.

    With ``include_gaps`` a ``gaps`` column adds the bytes between allocations, so a row sums to
    total_bytes_including_gaps; without it a row sums to total_bytes_excluding_gaps.
    """
    if by not in BREAKDOWNS:
        raise ValueError(f"breakdown {by!r} is not one of {BREAKDOWNS}")
    tm = report.tile_memory().set_index("tile").sort_index()
    if by == "category":
        cat = report.table("tile_memory_by_category", ["tile", "category", "bytes"]).to_pandas()
        out = cat.pivot_table(index="tile", columns="category", values="bytes", aggfunc="sum", fill_value=0)
        out = out.reindex(tm.index, fill_value=0)
        out = out[out.sum().sort_values(ascending=False).index]  # biggest category at the bottom of the stack
        out.columns = list(out.columns)
    elif by == "region":
        out = pd.DataFrame(
            {
                MemoryRegion.NON_INTERLEAVED: tm["non_interleaved_bytes_excluding_gaps"],
                MemoryRegion.INTERLEAVED: tm["interleaved_bytes_excluding_gaps"],
                MemoryRegion.OVERFLOWED: tm["overflowed_bytes"],
            }
        )
    else:
        out = pd.DataFrame({"always_live": tm["always_live_bytes"], "not_always_live": tm["not_always_live_bytes"]})
    if include_gaps:
        out[GAPS] = tm["total_bytes_including_gaps"] - tm["total_bytes_excluding_gaps"]
    out = out.loc[:, (out != 0).any(axis=0)] if len(out) else out
    out.index.name = "tile"
    return out.astype(np.int64)


def bin_tiles(df: pd.DataFrame, max_columns: int = 2000) -> tuple[pd.DataFrame, np.ndarray, int]:
    """Level of detail for the tile axis: at most ``max_columns`` columns.

    Returns (per-bin mean of each series, per-bin max of the row total, tiles per bin). With one
    tile per bin the means are the tiles' own values and the max equals the total.
    """
    n = len(df)
    width = max(1, -(-n // max_columns))
    if width == 1:
        return df, df.sum(axis=1).to_numpy(), 1
    values = df.to_numpy(dtype=np.float64)
    bins = n // width
    pad = bins * width < n
    groups = np.arange(n) // width
    counts = np.bincount(groups)
    sums = np.zeros((bins + pad, values.shape[1]))
    np.add.at(sums, groups, values)
    means = sums / counts[:, None]
    totals = values.sum(axis=1)
    maxes = np.full(bins + pad, -np.inf)
    np.maximum.at(maxes, groups, totals)
    first_tile = df.index.to_numpy()[::width]
    binned = pd.DataFrame(means, columns=df.columns, index=pd.Index(first_tile, name="tile"))
    return binned, maxes, width


def order_tiles(df: pd.DataFrame, order: str) -> pd.DataFrame:
    """'tile' keeps tile id order; 'sorted' puts the fullest tile first."""
    if order == "sorted":
        return df.iloc[np.argsort(-df.sum(axis=1).to_numpy(), kind="stable")]
    return df


def tile_details(report: Report, tiles: list[int] | None) -> dict[str, pd.DataFrame]:
    """Details tab: bytes by region (including and excluding gaps) and by category, summed over ``tiles``
    (None: all tiles)."""
    tm = report.tile_memory()
    if tiles is not None:
        tm = tm[tm["tile"].isin(tiles)]
    regions = pd.DataFrame(
        {
            "region": [MemoryRegion.NON_INTERLEAVED, MemoryRegion.INTERLEAVED, MemoryRegion.OVERFLOWED, "total"],
            "including_gaps": [
                tm["non_interleaved_bytes_including_gaps"].sum(),
                tm["interleaved_bytes_including_gaps"].sum(),
                tm["overflowed_bytes"].sum(),
                tm["total_bytes_including_gaps"].sum(),
            ],
            "excluding_gaps": [
                tm["non_interleaved_bytes_excluding_gaps"].sum(),
                tm["interleaved_bytes_excluding_gaps"].sum(),
                tm["overflowed_bytes"].sum(),
                tm["total_bytes_excluding_gaps"].sum(),
            ],
        }
    )
    cat = report.tile_memory_by_category(tiles)
    by_cat = (
        cat.groupby(["category", "always_live"], as_index=False)["bytes"].sum().sort_values("bytes", ascending=False)
    )
    return {"regions": regions, "categories": by_cat.reset_index(drop=True)}


def _tile_rows(report: Report, table: str, columns: list[str], tiles: list[int] | None) -> dict[str, np.ndarray]:
    """``columns`` of a per-tile table's rows on ``tiles`` (all rows for None) as numpy arrays: on a
    POD16 report the vertex and exchange tables hold millions of rows, whose whole conversion to
    pandas took seconds on every visit to the tab."""
    t = report.table(table, columns)
    if tiles is not None:
        t = t.filter(pc.is_in(t["tile"], value_set=pa.array(tiles, type=pa.int32())))
    return {c: t.column(c).to_numpy() for c in columns}


def tile_compute_sets(report: Report, tiles: list[int] | None) -> pd.DataFrame:
    """Compute Sets tab: compute sets with vertices on the selected tiles."""
    v = _tile_rows(report, "vertices", ["compute_set_id", "tile", "count", "state_bytes", "flops", "cycles"], tiles)
    if v["tile"].size == 0:
        return pd.DataFrame(columns=["compute_set_id", "name", "vertices", "state_bytes", "cycles", "flops", "tiles"])
    g = sums_and_tiles(
        v["compute_set_id"],
        v["tile"],
        sums={"vertices": v["count"], "state_bytes": v["state_bytes"], "flops": v["flops"]},
        maxes={"cycles": v["cycles"]},
        index_name="compute_set_id",
    )[["vertices", "state_bytes", "cycles", "flops", "tiles"]]
    cs = report.compute_sets().set_index("compute_set_id")["name"]
    g.insert(0, "name", cs.reindex(g.index).to_numpy())
    return g.reset_index().sort_values("state_bytes", ascending=False, kind="stable").reset_index(drop=True)


def tile_vertices(report: Report, tiles: list[int] | None) -> pd.DataFrame:
    """Vertices tab: per codelet on the selected tiles, instances, state bytes and code bytes
    (a codelet's code is stored once on every tile that uses it)."""
    v = _tile_rows(report, "vertices", ["codelet_id", "tile", "count", "state_bytes"], tiles)
    cod = report.codelets().set_index("codelet_id")
    if v["tile"].size == 0:
        return pd.DataFrame(columns=["codelet_id", "name", "count", "state_bytes", "code_bytes", "tiles"])
    g = sums_and_tiles(
        v["codelet_id"],
        v["tile"],
        sums={"count": v["count"], "state_bytes": v["state_bytes"]},
        index_name="codelet_id",
    )
    g["code_bytes"] = cod["code_bytes"].reindex(g.index).to_numpy() * g["tiles"]
    g.insert(0, "name", cod["name"].reindex(g.index).to_numpy())
    return g.reset_index().sort_values("state_bytes", ascending=False, kind="stable").reset_index(drop=True)


def tile_exchanges(report: Report, tiles: list[int] | None) -> pd.DataFrame:
    """Exchanges tab: exchange and stream-copy steps touching the selected tiles."""
    x = _tile_rows(report, "exchanges", ["program_id", "tile", "bytes_in", "bytes_out", "code_bytes"], tiles)
    cols = ["program_id", "type", "name", "bytes_in", "bytes_out", "code_bytes", "tiles"]
    if x["tile"].size == 0:
        return pd.DataFrame(columns=cols)
    g = sums_and_tiles(
        x["program_id"],
        x["tile"],
        sums={c: x[c] for c in ("bytes_in", "bytes_out", "code_bytes")},
        index_name="program_id",
    )
    p = report.programs().set_index("program_id")
    g["type"] = p["type"].reindex(g.index).to_numpy()
    g["name"] = p["name"].reindex(g.index).to_numpy()
    return g.reset_index()[cols].sort_values("code_bytes", ascending=False, kind="stable").reset_index(drop=True)


def tile_variables(report: Report, tiles: list[int] | None) -> pd.DataFrame:
    """Variables tab: variables with bytes on the selected tiles (bytes = on those tiles)."""
    cols = [
        "variable_id",
        "name",
        "bytes",
        "total_bytes",
        "tiles",
        "region",
        "always_live",
        "category",
        "dtype",
        "shape",
    ]
    pl = report.table("variable_placements", ["variable_id", "tile", "bytes", "region"])
    if tiles is not None:
        pl = pl.filter(pc.is_in(pl["tile"], value_set=pa.array(tiles, type=pa.int32())))
    if pl.num_rows == 0:
        return pd.DataFrame(columns=cols)
    # (variable_id, tile) is the table's key, so rows per variable = its tiles; numpy keeps the
    # all-tiles case (~10^6 placements) fast.
    vid = pl["variable_id"].to_numpy()
    ids, first, counts = np.unique(vid, return_index=True, return_counts=True)
    sums = np.bincount(np.searchsorted(ids, vid), weights=pl["bytes"].to_numpy(), minlength=len(ids))
    region = pc.take(pl["region"], pa.array(first)).to_pylist()
    g = pd.DataFrame({"variable_id": ids, "bytes": sums.astype(np.int64), "tiles": counts, "region": region})
    g = g.set_index("variable_id")
    var = tables.variables(report).reindex(g.index)
    for col in ("name", "always_live", "category", "dtype", "shape"):
        g[col] = var[col].to_numpy()
    g["total_bytes"] = var["bytes"].to_numpy()
    return g.reset_index()[cols].sort_values("bytes", ascending=False, kind="stable").reset_index(drop=True)


def variable_bytes_by_tile(report: Report, variable_ids: list[int]) -> pd.DataFrame:
    """Variables graph: bytes of each chosen variable on each tile (columns: variable_id, name, tile, bytes)."""
    pl = report.table("variable_placements", ["variable_id", "tile", "bytes"])
    pl = pl.filter(pc.is_in(pl["variable_id"], value_set=pa.array(variable_ids, type=pa.int32()))).to_pandas()
    names = report.variables().set_index("variable_id")["name"]
    pl["name"] = names.reindex(pl["variable_id"]).to_numpy()
    return pl.sort_values(["variable_id", "tile"]).reset_index(drop=True)


def tile_memory_map(report: Report, tile: int) -> pd.DataFrame:
    """The variables on one tile by address (offset, bytes, region), lowest address first.
    Only variables have addresses in the report; code, stacks and other always-live data do not."""
    pl = report.variable_placements([tile])
    var = tables.variables(report).reindex(pl["variable_id"])
    out = pl.assign(
        name=var["name"].to_numpy(), always_live=var["always_live"].to_numpy(), end=pl["offset"] + pl["bytes"]
    )
    return (
        out[["variable_id", "name", "offset", "end", "bytes", "region", "always_live"]]
        .sort_values("offset", kind="stable")
        .reset_index(drop=True)
    )


#: The die's floor plan, as far as the reference gives it. /work/shared/reference/ipu_model.md §6
#: ("Micro-level", from the Citadel microbenchmark paper via summaries): "tiles are arranged in
#: columns and islands". The counts are ASSUMED, not sourced: islands of 4 tiles and columns of 16
#: islands (64 tiles), which divide the documented tile counts exactly (Mk2 GC200 / Bow / C600: 1472
#: tiles = 23 columns; Mk1 GC2: 1216 = 19 columns; ipu_model.md's "Tiles per IPU" row). The report
#: holds no physical tile id, so software tile ids are laid out column by column in order; PopVision
#: reads the real (permuted) id from the device (seeds/002: its tile 201 is physical tile 522).
TILES_PER_ISLAND = 4
ISLANDS_PER_COLUMN = 16


def tiles_per_column(tiles_per_ipu: int) -> int:
    """Tiles in one column of the die: 64 when the IPU's tiles fill whole 64-tile columns (every
    real IPU); a small IPU-Model target gets columns of whole islands, about as tall as there are
    columns (4 tiles: one column; 16 tiles: four columns of one island)."""
    full = TILES_PER_ISLAND * ISLANDS_PER_COLUMN
    if tiles_per_ipu >= full and tiles_per_ipu % full == 0:
        return full
    side = int(np.ceil(np.sqrt(max(tiles_per_ipu, 1))))
    return TILES_PER_ISLAND * max(1, -(-side // TILES_PER_ISLAND))


def physical_position(tile_in_ipu: np.ndarray, tiles_per_ipu: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(column, island in the column, tile in the island) of each tile of an IPU (see TILES_PER_ISLAND)."""
    t = np.asarray(tile_in_ipu, dtype=np.int64)
    per_col = tiles_per_column(tiles_per_ipu)
    slot = t % per_col
    return t // per_col, slot // TILES_PER_ISLAND, slot % TILES_PER_ISLAND


def tile_map(report: Report, include_gaps: bool = True, layout: str = "software") -> pd.DataFrame:
    """Tile map: total bytes per tile with a grid position (row, col) in its IPU's panel.

    ``layout`` "software": tiles in software order, in rows of ``ceil(sqrt(tiles_per_ipu))``.
    "physical": the die's floor plan (``physical_position``): a column of the die per grid column,
    its tiles top to bottom with an empty row between islands; also columns ``column``, ``island``
    and ``in_island`` for the hover."""
    tm = report.tile_memory()
    t = report.target_info
    col = "total_bytes_including_gaps" if include_gaps else "total_bytes_excluding_gaps"
    tile_in_ipu = tm["tile_in_ipu"].to_numpy()
    out = pd.DataFrame({"tile": tm["tile"], "ipu": tm["ipu"], "tile_in_ipu": tile_in_ipu, "bytes": tm[col]})
    if layout == "physical":
        column, island, in_island = physical_position(tile_in_ipu, t.tiles_per_ipu)
        # one empty row between two islands, so the islands show as blocks
        return out.assign(
            row=island * (TILES_PER_ISLAND + 1) + in_island,
            col=column,
            column=column,
            island=island,
            in_island=in_island,
        )
    width = int(np.ceil(np.sqrt(t.tiles_per_ipu)))
    return out.assign(row=tile_in_ipu // width, col=tile_in_ipu % width)
