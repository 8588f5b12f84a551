"""The insights view: where memory goes (top tiles, vertices, exchanges), out-of-memory tiles,
and plain-language hints."""

from __future__ import annotations

import pandas as pd

from app.units import format_bytes, format_percent
from app.views.runs import overall
from report_format.reader import Report
from report_format.vocabulary import MemoryCategory

#: A hint fires when exchange code is more than this share of all memory (an [I] threshold).
EXCHANGE_CODE_SHARE = 0.15
#: ... when the fullest tile holds more than this multiple of the mean tile.
MEMORY_IMBALANCE = 2.0
#: ... when the tile balance over all runs (app.views.runs, as Summary shows it) is below this.
LOW_TILE_BALANCE = 0.5


def top_tiles(report: Report, n: int = 10) -> pd.DataFrame:
    tm = report.tile_memory()
    bpt = report.target_info.bytes_per_tile
    top = tm.nlargest(n, "total_bytes_including_gaps")
    return pd.DataFrame(
        {
            "tile": top["tile"],
            "ipu": top["ipu"],
            "bytes": top["total_bytes_including_gaps"],
            "percent_of_tile": (100 * top["total_bytes_including_gaps"] / bpt).round(1),
            "always_live": top["always_live_bytes"],
            "not_always_live": top["not_always_live_bytes"],
        }
    ).reset_index(drop=True)


def over_memory_tiles(report: Report) -> pd.DataFrame:
    tm = report.tile_memory()
    bpt = report.target_info.bytes_per_tile
    oom = tm[(tm["total_bytes_including_gaps"] > bpt) | (tm["overflowed_bytes"] > 0)]
    return (
        oom[["tile", "ipu", "total_bytes_including_gaps", "overflowed_bytes"]]
        .sort_values("total_bytes_including_gaps", ascending=False)
        .reset_index(drop=True)
    )


def top_vertices(report: Report, n: int = 10) -> pd.DataFrame:
    """Codelets with the most memory: vertex state summed over tiles plus code on each tile using it."""
    v = report.table("vertices", ["tile", "codelet_id", "count", "state_bytes"]).to_pandas()
    cod = report.codelets().set_index("codelet_id")
    if v.empty:
        return pd.DataFrame(columns=["name", "count", "state_bytes", "code_bytes", "bytes"])
    g = v.groupby("codelet_id").agg(
        count=("count", "sum"), state_bytes=("state_bytes", "sum"), tiles=("tile", "nunique")
    )
    g["code_bytes"] = cod["code_bytes"].reindex(g.index).to_numpy() * g["tiles"]
    g["bytes"] = g["state_bytes"] + g["code_bytes"]
    g.insert(0, "name", cod["name"].reindex(g.index).to_numpy())
    return g.nlargest(n, "bytes").reset_index(drop=True)[["name", "count", "state_bytes", "code_bytes", "bytes"]]


def top_exchanges(report: Report, n: int = 10) -> pd.DataFrame:
    x = report.table("exchanges", ["program_id", "tile", "bytes_in", "bytes_out", "code_bytes"]).to_pandas()
    if x.empty:
        return pd.DataFrame(columns=["program_id", "type", "name", "code_bytes", "bytes_in", "bytes_out", "tiles"])
    g = x.groupby("program_id").agg(
        code_bytes=("code_bytes", "sum"),
        bytes_in=("bytes_in", "sum"),
        bytes_out=("bytes_out", "sum"),
        tiles=("tile", "nunique"),
    )
    p = report.programs().set_index("program_id")
    g.insert(0, "name", p["name"].reindex(g.index).to_numpy())
    g.insert(0, "type", p["type"].reindex(g.index).to_numpy())
    return g.nlargest(n, "code_bytes").reset_index()


def hints(report: Report) -> list[str]:
    """Plain sentences, each tied to a number in the report."""
    out: list[str] = []
    tm = report.tile_memory()
    bpt = report.target_info.bytes_per_tile
    incl = tm["total_bytes_including_gaps"].to_numpy()
    if incl.size == 0:
        return ["The report holds no tile memory."]
    oom = over_memory_tiles(report)
    if len(oom):
        worst = oom.iloc[0]
        out.append(
            f"{len(oom):,} tiles are out of memory; the worst, tile {int(worst['tile'])}, needs "
            f"{format_bytes(worst['total_bytes_including_gaps'])} of {format_bytes(bpt)}."
        )
    cat = report.table("tile_memory_by_category", ["category", "bytes"]).to_pandas()
    total = cat["bytes"].sum()
    if total:
        exch = cat.loc[
            cat["category"].isin(
                [
                    MemoryCategory.INTERNAL_EXCHANGE_CODE,
                    MemoryCategory.GLOBAL_EXCHANGE_CODE,
                    MemoryCategory.HOST_EXCHANGE_CODE,
                ]
            ),
            "bytes",
        ].sum()
        if exch / total > EXCHANGE_CODE_SHARE:
            out.append(
                f"Exchange code is {100 * exch / total:.0f}% of all memory ({format_bytes(exch)}): consider "
                "fewer, larger exchanges (e.g. re-mapping tensors so producers and consumers share tiles)."
            )
    mean = incl.mean()
    if mean and incl.max() > MEMORY_IMBALANCE * mean:
        t = int(tm["tile"].to_numpy()[incl.argmax()])
        out.append(
            f"Memory is unbalanced: tile {t} holds {format_bytes(incl.max())}, {incl.max() / mean:.1f}x the "
            f"mean tile ({format_bytes(mean)}); spreading its variables would lower the peak."
        )
    gaps = (tm["total_bytes_including_gaps"] - tm["total_bytes_excluding_gaps"]).to_numpy()
    if incl.sum() and gaps.sum() / incl.sum() > 0.05:
        out.append(f"Gaps between allocations are {100 * gaps.sum() / incl.sum():.0f}% of memory.")
    bal = overall(report, "tile_balance")  # the figure Summary and Execution Trace show
    if bal is not None and bal < LOW_TILE_BALANCE:
        out.append(
            f"Low tile balance: {format_percent(bal)} over all runs (cycle-weighted, Sync steps left out); "
            "the slowest tile sets each step's length."
        )
    if not out:
        out.append("No memory or balance problems stand out.")
    return out
