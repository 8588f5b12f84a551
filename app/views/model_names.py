"""The model's own names of program steps: on a report of an ONNX model, each step's enclosing ONNX
node (``s3b0_b_conv_365``), so Liveness and the Execution Trace name a step as the model does, with
the PopLibs op beneath it, instead of the op alone ("matmul" for every convolution)."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pandas as pd

from app.views.operations import op_of_context
from report_format.reader import Report
from report_format.vocabulary import Layer


@lru_cache(maxsize=8)
def of_programs(report: Report) -> pd.Series:
    """Program id -> the name of the ONNX node enclosing its debug context ("" where none: a report
    of no ONNX model, or a step outside every node)."""
    p = report.programs()[["program_id", "debug_context_id"]]
    named = of_contexts(report, p["debug_context_id"].to_numpy(dtype=np.int64))
    return pd.Series(named, index=p["program_id"].to_numpy(), name="model_name")


def of_contexts(report: Report, ctx: np.ndarray) -> np.ndarray:
    """For each debug context id in ``ctx``, the name of the ONNX node enclosing it (itself
    included; "" for none, or -1: work outside every operation)."""
    dc = report.debug_contexts().sort_values("debug_context_id")
    names = dc["name"].astype(str).to_numpy(dtype=object)
    node = op_of_context(report, Layer.ONNX)  # context -> its ONNX node's context, or -1
    ctx = np.asarray(ctx, dtype=np.int64)
    ok = (ctx >= 0) & (ctx < len(node))
    owner = np.where(ok, node[np.clip(ctx, 0, max(len(node) - 1, 0))] if len(node) else -1, -1)
    return np.where(owner >= 0, names[np.maximum(owner, 0)] if len(names) else "", "").astype(object)


def with_model_name(
    model: pd.Series | np.ndarray, op: pd.Series | np.ndarray, kind: pd.Series | np.ndarray | None = None
) -> np.ndarray:
    """``"<model name> (<op>)"`` where the model names the step, else the op alone; no repeat when
    both are the same name (a step the model and PopLibs both call ``relu_3``). With ``kind`` (the
    program type, as the trace shows it) inside the same brackets: ``"x (matmul, OnTileExecute)"``,
    ``"in (StreamCopyMid)"`` - one format for Liveness and the trace."""
    m = np.asarray(model, dtype=object).astype(str)
    o = np.asarray(op, dtype=object).astype(str)
    both = (m != "") & (m != o)
    if kind is None:
        return np.where(both, np.char.add(np.char.add(m, " ("), np.char.add(o, ")")), o).astype(object)
    k = np.asarray(kind, dtype=object).astype(str)
    inner = np.where(both, np.char.add(np.char.add(o, ", "), k), k)
    head = np.where(both, m, o)
    return np.char.add(np.char.add(head, " ("), np.char.add(inner, ")")).astype(object)
