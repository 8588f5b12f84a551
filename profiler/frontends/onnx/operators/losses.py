"""Losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (torch's nll_loss, cross_entropy)."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from profiler import ops
from profiler.chip import cost_model
from profiler.poplar.tensor import Tensor

from ..builder import Builder, Value, at_least_1d
from ..errors import Unsupported
from .common import as_text, attrs, reduce
from .indexing import gather_elements
from .registry import handles


def _not_equal_to(t: np.ndarray, value: int) -> np.ndarray:
    return t != value


def _zero_where_ignored(t: np.ndarray, value: int) -> np.ndarray:
    return np.where(t == value, 0, t)


def _take_rows(b: Builder, table: Value, idx: Tensor) -> Tensor:
    """table[idx] for a 1-D table and integer indices of any shape (popops MultiSlice)."""
    t = b.device(table)
    return ops.gather(b.graph, t.reshape(-1, 1), idx.reshape(-1), b.prog).reshape(idx.shape)


def nll_loss(b: Builder, logp: Tensor, target: Value, weight: Value | None, reduction: str,
             ignore: int | None) -> Tensor:  # fmt: skip
    """-logp[n, target[n, ...], ...] * weight[target], reduced as ONNX's NegativeLogLikelihoodLoss."""
    tg = b.device(target)
    if tg.dtype.kind not in "iu":
        raise Unsupported("non-integer target")
    if ignore is not None:
        valid = b.map(
            "NotEqual", _not_equal_to, [tg], (cost_model.binary("not_equal"),), out_dtype="bool", value=ignore
        )
        tg = b.map("IgnoreIndex", _zero_where_ignored, [tg], (cost_model.binary("maximum"),), value=ignore)
    # GatherElements on the class axis, with the target as a unit class dimension
    idx = tg.reshape(tg.shape[0], 1, *tg.shape[1:])
    picked = gather_elements(b, logp, idx, 1).reshape(tg.shape)
    w: Tensor | None = None
    if weight is not None:
        w = _take_rows(b, weight if isinstance(weight, Tensor) else np.asarray(weight).astype(logp.dtype), tg)
    if ignore is not None:
        mask = b.cast(valid, logp.dtype)
        w = mask if w is None else b.binary("mul", w, mask)
    loss = b.unary("neg", picked) if w is None else b.binary("mul", b.unary("neg", picked), w)
    if reduction == "none":
        return loss
    axes = list(range(loss.rank))
    total = reduce(b, loss, axes, "add", keepdims=False)
    if reduction == "sum":
        return total
    if reduction != "mean":
        raise Unsupported(f"reduction={reduction!r}")
    if w is None:
        return ops.scale(b.graph, at_least_1d(total), 1.0 / loss.numel(), b.prog).reshape(())
    return b.binary("div", total, reduce(b, w, axes, "add", keepdims=False))


@handles("NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss")
def _loss(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    at = attrs(node)
    x = b.device(inputs[0])
    reduction = as_text(at.get("reduction"), "mean")
    ignore = int(at["ignore_index"]) if "ignore_index" in at else None
    weight = inputs[2] if len(inputs) > 2 else None
    if node.op_type == "NegativeLogLikelihoodLoss":
        return [nll_loss(b, x, inputs[1], weight, reduction, ignore)]
    logp = ops.log_softmax(b.graph, x, b.prog, axis=1)
    outs: list[Any] = [nll_loss(b, logp, inputs[1], weight, reduction, ignore)]
    if len(node.output) > 1:
        outs.append(logp)
    return outs
