"""Memory of two reports: totals and categories summed over tiles, and the per-tile delta (tiles
matched by id; a tile present on one side only, as with a different target, counts 0 on the other)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from report_format.reader import Report
from report_format.vocabulary import MemoryRegion

TILE_COLUMNS = ("total_bytes_including_gaps", "always_live_bytes", "not_always_live_bytes", "overflowed_bytes")


def side_by_side(baseline: pd.Series, active: pd.Series, name: str) -> pd.DataFrame:
    """Two series with the same meaning -> baseline, active, delta, ratio (NaN when baseline is 0),
    indexed by the union of their labels (a missing label counts 0)."""
    idx = baseline.index.union(active.index, sort=False)
    b = baseline.reindex(idx, fill_value=0).astype(np.int64)
    a = active.reindex(idx, fill_value=0).astype(np.int64)
    out = pd.DataFrame({"baseline": b, "active": a, "delta": a - b})
    out["ratio"] = np.where(b != 0, a / b.where(b != 0, 1), np.nan)
    out.index.name = name
    return out


def category_bytes(report: Report) -> pd.Series:
    """Bytes (excluding gaps) per memory category summed over tiles, plus ``gaps``."""
    cat = report.table("tile_memory_by_category", ["category", "bytes"]).to_pandas()
    s = cat.groupby("category", sort=True)["bytes"].sum()
    tm = report.table("tile_memory", ["total_bytes_including_gaps", "total_bytes_excluding_gaps"])
    gaps = int(tm["total_bytes_including_gaps"].to_numpy().sum() - tm["total_bytes_excluding_gaps"].to_numpy().sum())
    return pd.concat([s, pd.Series({"gaps": gaps})]).astype(np.int64)


def category_comparison(baseline: Report, active: Report) -> pd.DataFrame:
    """Per memory category (and gaps): baseline, active, delta, ratio; biggest change first."""
    out = side_by_side(category_bytes(baseline), category_bytes(active), "category")
    return out.iloc[np.argsort(-np.abs(out["delta"].to_numpy()), kind="stable")]


def region_bytes(report: Report) -> pd.Series:
    tm = report.tile_memory()
    return pd.Series(
        {
            "total_including_gaps": tm["total_bytes_including_gaps"].sum(),
            "total_excluding_gaps": tm["total_bytes_excluding_gaps"].sum(),
            "always_live": tm["always_live_bytes"].sum(),
            "not_always_live": tm["not_always_live_bytes"].sum(),
            "non_interleaved_including_gaps": tm["non_interleaved_bytes_including_gaps"].sum(),
            "interleaved_including_gaps": tm["interleaved_bytes_including_gaps"].sum(),
            MemoryRegion.OVERFLOWED: tm["overflowed_bytes"].sum(),
        }
    ).astype(np.int64)


def total_comparison(baseline: Report, active: Report) -> pd.DataFrame:
    """Totals over tiles (including / excluding gaps, always-live, regions): baseline, active, delta, ratio."""
    return side_by_side(region_bytes(baseline), region_bytes(active), "total")


def tile_memory_comparison(baseline: Report, active: Report) -> pd.DataFrame:
    """One row per tile id of either report: ipu, tile_in_ipu, and for each of TILE_COLUMNS
    ``baseline_<c>``, ``active_<c>``, ``delta_<c>``; ``present`` says both / baseline / active."""
    cols = ["tile", "ipu", "tile_in_ipu", *TILE_COLUMNS]
    b = baseline.table("tile_memory", cols).to_pandas().set_index("tile")
    a = active.table("tile_memory", cols).to_pandas().set_index("tile")
    idx = b.index.union(a.index)
    in_b, in_a = idx.isin(b.index), idx.isin(a.index)
    out = pd.DataFrame(index=idx)
    out["ipu"] = a["ipu"].reindex(idx).fillna(b["ipu"].reindex(idx)).astype(np.int64)
    out["tile_in_ipu"] = a["tile_in_ipu"].reindex(idx).fillna(b["tile_in_ipu"].reindex(idx)).astype(np.int64)
    out["present"] = np.where(in_b & in_a, "both", np.where(in_b, "baseline", "active"))
    for c in TILE_COLUMNS:
        vb = b[c].reindex(idx, fill_value=0).to_numpy(dtype=np.int64)
        va = a[c].reindex(idx, fill_value=0).to_numpy(dtype=np.int64)
        out[f"baseline_{c}"] = vb
        out[f"active_{c}"] = va
        out[f"delta_{c}"] = va - vb
    out.index.name = "tile"
    return out.reset_index()
