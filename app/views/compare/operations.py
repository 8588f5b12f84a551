"""Operations (debug contexts) of two reports matched by their path, with cycles, FLOPs and memory.

cycles: executed cycles of the operation's program steps (per executed step the slowest IPU's
cycles_to - cycles_from), summed over executions; a report without an execution profile uses the
compile-time ``programs.estimated_cycles`` (``cycles_source`` says which). flops: FLOPs of its
executed steps (estimated per step, summed over IPUs and executions). memory_bytes: bytes of the
variables it created. With ``layer`` every figure is attributed to the nearest enclosing context of
that layer instead of the exact context.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from app.views.compare.keys import context_of_layer, context_paths
from app.views.compare.steps import executed_steps
from report_format.reader import Report

FIGURES = ("cycles", "flops", "memory_bytes", "variables", "steps")
NO_CONTEXT = "(no debug context)"


def operation_table(report: Report, layer: str | None = None, run: int | None = None) -> pd.DataFrame:
    """One row per operation: key (debug-context path), layer, name, op_type and FIGURES. Work
    without a debug context is one row keyed NO_CONTEXT."""
    dc = report.debug_contexts()
    paths = context_paths(dc)
    to_op = context_of_layer(dc, layer) if layer else pd.Series(dc["debug_context_id"].to_numpy(), index=paths.index)

    def op_of(ids: np.ndarray) -> np.ndarray:
        return to_op.reindex(ids).fillna(-1).to_numpy(dtype=np.int64)

    prog = report.table("programs", ["program_id", "step", "debug_context_id", "estimated_cycles"]).to_pandas()
    prog["op"] = op_of(prog["debug_context_id"].to_numpy())
    if report.has_execution_profile:
        ex = executed_steps(report, run)
        per_prog = ex.groupby("program_id")[["cycles", "flops"]].sum()
        prog = prog.join(per_prog, on="program_id")
        prog[["cycles", "flops"]] = prog[["cycles", "flops"]].fillna(0)
        source = "executed (simulated)"
    else:
        prog["cycles"] = prog["estimated_cycles"]
        prog["flops"] = 0
        source = "compile-time estimate (no execution profile)"
    prog = prog[prog["step"] >= 0]  # control nodes own no cycles; their steps are counted
    prog["steps"] = 1
    g = prog.groupby("op")[["cycles", "flops", "steps"]].sum()
    var = report.table("variables", ["bytes", "debug_context_id"]).to_pandas()
    var["op"] = op_of(var["debug_context_id"].to_numpy())
    vg = var.groupby("op").agg(memory_bytes=("bytes", "sum"), variables=("bytes", "size"))
    out = g.join(vg, how="outer").fillna(0).astype(np.int64)
    ops = dc.set_index("debug_context_id")
    idx = out.index.to_numpy()
    known = np.isin(idx, ops.index.to_numpy())
    out["key"] = np.where(known, paths.reindex(idx).to_numpy(dtype=object), NO_CONTEXT)
    for col in ("layer", "name", "op_type"):
        out[col] = np.where(known, ops[col].reindex(idx).to_numpy(dtype=object), NO_CONTEXT if col == "name" else "")
    out.index.name = "debug_context_id"
    out = out.reset_index()
    out.attrs["cycles_source"] = source
    return out[["debug_context_id", "key", "layer", "name", "op_type", *FIGURES]]


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
