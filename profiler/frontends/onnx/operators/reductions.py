"""Reductions and scans: ReduceX, ArgMax/ArgMin, TopK, CumSum, CumProd."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from profiler.chip import cost_model
from profiler.poplar.tensor import Tensor, concat

from ..builder import Builder
from ..errors import Unsupported
from .common import attrs, axes_input, host_array, normalize_axis, pad_view, reduce
from .registry import handles

_REDUCE = {"ReduceSum": ("add", 13), "ReduceMean": ("mean", 18), "ReduceMax": ("max", 18), "ReduceMin": ("min", 18)}


@handles(*_REDUCE)
def _reduce(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    kind, since = _REDUCE[node.op_type]
    at = attrs(node)
    axes = axes_input(b, node, inputs, since)
    if axes is not None and not axes:
        axes = None
    if axes is None and at.get("noop_with_empty_axes", 0):
        return [x]
    if x.numel() == 0:
        raise Unsupported("empty input")
    return [reduce(b, x, axes, kind, bool(at.get("keepdims", 1)))]


_REDUCE_MORE = {"ReduceL1": 18, "ReduceL2": 18, "ReduceSumSquare": 18, "ReduceLogSum": 18, "ReduceLogSumExp": 18}


@handles(*_REDUCE_MORE)
def _reduce_more(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    at = attrs(node)
    axes = axes_input(b, node, inputs, _REDUCE_MORE[node.op_type])
    if axes is not None and not axes:
        axes = None
    if axes is None and at.get("noop_with_empty_axes", 0):
        return [x]
    if x.numel() == 0:
        raise Unsupported("empty input")
    keep = bool(at.get("keepdims", 1))
    op = node.op_type
    if op == "ReduceLogSumExp":  # stable: max + log(sum(exp(x - max)))
        m = reduce(b, x, axes, "max", keepdims=True)
        s = reduce(b, b.unary("exp", b.binary("sub", x, m)), axes, "add", keepdims=True)
        y = b.binary("add", b.unary("log", s), m)
        if not keep:
            ax = {normalize_axis(a, x.rank) for a in axes} if axes is not None else set(range(x.rank))
            y = y.reshape([s for d, s in enumerate(y.shape) if d not in ax])
        return [y]
    pre = {"ReduceL1": "abs", "ReduceL2": "square", "ReduceSumSquare": "square"}.get(op)
    t = b.unary(pre, x) if pre and x.dtype.kind == "f" else x
    if pre == "square" and x.dtype.kind != "f":
        t = b.binary("mul", x, x)
    if pre == "abs" and x.dtype.kind != "f":
        raise Unsupported("integer input")
    y = reduce(b, t, axes, "add", keep)
    if op == "ReduceL2":
        y = b.unary("sqrt", y)
    elif op == "ReduceLogSum":
        y = b.unary("log", y)
    return [y]


@handles("ReduceProd")
def _reduce_prod(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    """A pairwise product tree over the reduced elements (moved last, padded with ones to a power of
    two): log2(n) elementwise multiplies, exact for integers too."""
    x = b.device(inputs[0])
    at = attrs(node)
    axes = axes_input(b, node, inputs, 18)
    if axes is not None and not axes:
        axes = None
    if axes is None and at.get("noop_with_empty_axes", 0):
        return [x]
    ax = sorted({normalize_axis(a, x.rank) for a in axes}) if axes is not None else list(range(x.rank))
    keep = [d for d in range(x.rank) if d not in ax]
    n = int(np.prod([x.shape[d] for d in ax], dtype=np.int64))
    if n == 0 or x.numel() == 0:
        raise Unsupported("empty input")
    y = x.transpose(*keep, *ax).reshape(-1, n)
    width = 1 << (n - 1).bit_length()
    if width > n:
        y = pad_view(b, y, [(0, 0), (0, width - n)], "constant", 1)
    while width > 1:
        width //= 2
        y = b.binary("mul", y.slice(0, width, 1), y.slice(width, 2 * width, 1))
    shape = (
        [1 if d in ax else x.shape[d] for d in range(x.rank)] if at.get("keepdims", 1) else [x.shape[d] for d in keep]
    )
    return [y.reshape(shape)]


def _first_index(x: np.ndarray, m: np.ndarray, iota: np.ndarray, miss: int) -> np.ndarray:
    return np.where(x == m, iota, miss)


def arg_extreme(b: Builder, x: Tensor, axis: int, largest: bool, last: bool) -> tuple[Tensor, Tensor]:
    """(extreme value keepdims, its index keepdims as int32) along ``axis``: a max/min reduction, then
    the lowest (or highest) position holding it, as a second min/max reduction of the positions."""
    m = reduce(b, x, [axis], "max" if largest else "min", keepdims=True)
    n = x.shape[axis]
    iota = np.arange(n, dtype=np.int32).reshape([n if d == axis else 1 for d in range(x.rank)])
    miss = -1 if last else n
    cand = b.map("ArgCandidates", _first_index, [x, m, iota], (cost_model.binary("equal"), cost_model.binary("maximum")),
                 out_dtype="int32", miss=miss)  # fmt: skip
    return m, reduce(b, cand, [axis], "max" if last else "min", keepdims=True)


@handles("ArgMax", "ArgMin")
def _arg(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    at = attrs(node)
    axis = normalize_axis(int(at.get("axis", 0)), x.rank)
    _, idx = arg_extreme(b, x, axis, node.op_type == "ArgMax", bool(at.get("select_last_index", 0)))
    if not at.get("keepdims", 1):
        idx = idx.reshape([s for d, s in enumerate(idx.shape) if d != axis])
    return [idx]


def _masked(x: np.ndarray, idx: np.ndarray, iota: np.ndarray, fill: float) -> np.ndarray:
    return np.where(iota == idx, fill, x)


@handles("TopK")
def _topk(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    at = attrs(node)
    axis = normalize_axis(int(at.get("axis", -1)), x.rank)
    k = int(at["k"]) if b.opset < 10 else int(host_array(inputs[1], "k").reshape(-1)[0])  # type: ignore[union-attr]
    largest = bool(at.get("largest", 1))
    if k > 64:
        raise Unsupported(f"k={k} > 64 (TopK runs k max-reductions)")
    if k == 0 or x.numel() == 0:
        raise Unsupported("empty tensors")
    n = x.shape[axis]
    iota = np.arange(n, dtype=np.int32).reshape([n if d == axis else 1 for d in range(x.rank)])
    fill = -np.inf if largest else np.inf
    if x.dtype.kind != "f":
        info = np.iinfo(x.dtype)
        fill = info.min if largest else info.max
    values, indices, cur = [], [], x
    for i in range(k):  # selection: the next extreme, then mask it out (ties: the lower index first)
        m, idx = arg_extreme(b, cur, axis, largest, False)
        values.append(m)
        indices.append(idx)
        if i + 1 < k:
            cur = b.map("TopKMask", _masked, [cur, idx, iota], (cost_model.binary("equal"), cost_model.binary("maximum")),
                        fill=fill)  # fmt: skip
    return [concat(values, axis) if k > 1 else values[0], concat(indices, axis) if k > 1 else indices[0]]


@handles("CumSum")
def _cumsum(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    axis = normalize_axis(int(host_array(inputs[1], "axis").reshape(-1)[0]), x.rank)  # type: ignore[union-attr]
    at = attrs(node)
    n = x.shape[axis]
    flip = tuple(slice(None, None, -1) if d == axis else slice(None) for d in range(x.rank))
    y: Tensor = x[flip] if at.get("reverse", 0) else x
    if at.get("exclusive", 0):
        pads = [(1, -1) if d == axis else (0, 0) for d in range(x.rank)]
        y = pad_view(b, y, pads, "constant", 0)
    # Hillis-Steele scan: log2(n) steps, each adds a copy shifted by 2^s (padding reads zeros)
    shift = 1
    while shift < n:
        pads = [(shift, -shift) if d == axis else (0, 0) for d in range(x.rank)]
        y = b.binary("add", y, pad_view(b, y, pads, "constant", 0))
        shift *= 2
    if at.get("reverse", 0):
        y = y[flip]
    return [y]


@handles("CumProd")
def _cumprod(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    """As CumSum: a log-step scan, multiplying (padding reads ones)."""
    x = b.device(inputs[0])
    axis = normalize_axis(int(host_array(inputs[1], "axis").reshape(-1)[0]), x.rank)  # type: ignore[union-attr]
    at = attrs(node)
    n = x.shape[axis]
    flip = tuple(slice(None, None, -1) if d == axis else slice(None) for d in range(x.rank))
    y: Tensor = x[flip] if at.get("reverse", 0) else x
    if at.get("exclusive", 0):
        y = pad_view(b, y, [(1, -1) if d == axis else (0, 0) for d in range(x.rank)], "constant", 1)
    shift = 1
    while shift < n:
        y = b.binary("mul", y, pad_view(b, y, [(shift, -shift) if d == axis else (0, 0) for d in range(x.rank)],
                                        "constant", 1))  # fmt: skip
        shift *= 2
    return [y[flip] if at.get("reverse", 0) else y]
