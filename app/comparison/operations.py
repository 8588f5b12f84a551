"""Operations (debug contexts) of two reports matched by their path, with cycles, FLOPs and memory.

Each report's figures are those of the Operations page (``app.views.operations.operations``). With
``layer`` every figure is attributed to the nearest enclosing context of that layer instead of the
exact context.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from app.comparison.keys import context_paths
from app.views.model_names import of_contexts, with_model_name
from app.views.operations import OUTSIDE, OUTSIDE_ID, operations
from report_format.reader import Report

FIGURES = ("cycles", "flops", "memory_bytes", "variables", "steps")
NO_CONTEXT = OUTSIDE  # the key of work outside any operation


def operation_table(report: Report, layer: str | None = None, run: int | None = None) -> pd.DataFrame:
    """One row per operation of ``app.views.operations.operations`` (the Operations page's own
    table, so both count and measure operations the same way): debug_context_id, key (debug-context
    path), layer, name, op_type and FIGURES. Work outside any operation is one row keyed NO_CONTEXT."""
    ops = operations(report, layer, run)
    dc = report.debug_contexts()
    paths = context_paths(dc)
    layers = dc.set_index("debug_context_id")["layer"]
    idx = ops["op_id"].to_numpy()
    known = idx != OUTSIDE_ID
    out = pd.DataFrame(
        {
            "debug_context_id": idx,
            "key": np.where(known, paths.reindex(idx).to_numpy(dtype=object), NO_CONTEXT),
            "layer": np.where(known, layers.reindex(idx).to_numpy(dtype=object), ""),
            # named as the single-report pages name it: the model's name first (an ONNX node's
            # PopLibs operation 's3b0_b_conv_365 (conv)'; an ONNX node is its own name)
            "name": with_model_name(of_contexts(report, np.where(known, idx, -1)), ops["name"].to_numpy(dtype=object)),
            "op_type": ops["op_type"].to_numpy(dtype=object),
        }
    )
    for f in FIGURES:
        out[f] = ops[f].to_numpy(dtype=np.int64)
    out.attrs["cycles_source"] = ops.attrs.get("cycles_source")
    return out


def operation_comparison(baseline: pd.DataFrame, active: pd.DataFrame) -> pd.DataFrame:
    """Two operation tables matched by key: status (same, changed, added, removed), layer, name,
    op_type and for each figure ``baseline_<f>``, ``active_<f>``, ``delta_<f>``; biggest cycle
    change first, then biggest memory change."""
    b = baseline.set_index("key")
    a = active.set_index("key")
    idx = b.index.union(a.index, sort=False)
    in_b, in_a = idx.isin(b.index), idx.isin(a.index)
    out = pd.DataFrame({"key": idx.to_numpy(dtype=object)})
    for col in ("layer", "name", "op_type"):
        out[col] = a[col].reindex(idx).fillna(b[col].reindex(idx)).fillna("").to_numpy(dtype=object)
    changed = np.zeros(len(idx), dtype=bool)
    for f in FIGURES:
        vb = b[f].reindex(idx, fill_value=0).to_numpy(dtype=np.int64)
        va = a[f].reindex(idx, fill_value=0).to_numpy(dtype=np.int64)
        out[f"baseline_{f}"] = vb
        out[f"active_{f}"] = va
        out[f"delta_{f}"] = va - vb
        changed |= va != vb
    out.insert(
        1, "status", np.where(in_b & in_a, np.where(changed, "changed", "same"), np.where(in_b, "removed", "added"))
    )
    order = np.lexsort((-np.abs(out["delta_memory_bytes"].to_numpy()), -np.abs(out["delta_cycles"].to_numpy())))
    out = out.iloc[order].reset_index(drop=True)
    out.attrs["cycles_source"] = {
        "baseline": baseline.attrs.get("cycles_source"),
        "active": active.attrs.get("cycles_source"),
    }
    return out
