"""Normalisation layers: batch, layer, instance, group, RMS, Lp, mean-variance normalisation and LRN."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from profiler import ops
from profiler.chip import cost_model
from profiler.poplar.tensor import Tensor

from ..builder import Builder, Value, at_least_1d
from ..errors import Unsupported
from .common import attrs, broadcast_per_channel, normalize_axis, pad_view, reduce, shape_of
from .registry import handles


@handles("BatchNormalization")
def _batch_norm(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    at = attrs(node)
    if at.get("training_mode", 0) or len([o for o in node.output if o]) > 1:
        raise Unsupported("training mode")
    x = b.device(inputs[0])
    scale, bias, mean, var = inputs[1:5]
    eps = float(at.get("epsilon", 1e-5))
    if x.rank < 2:
        raise Unsupported(f"rank {x.rank} input")
    if all(not isinstance(v, Tensor) for v in (scale, bias, mean, var)):
        # fold the statistics into one scale and shift per channel on the host
        a = np.asarray(scale, np.float64) / np.sqrt(np.asarray(var, np.float64) + eps)
        s = np.asarray(bias, np.float64) - np.asarray(mean, np.float64) * a
        dt = np.asarray(scale).dtype
        a = b.host(f"{node.name}/scale", broadcast_per_channel(a.astype(dt), x.rank))
        s = b.host(f"{node.name}/shift", broadcast_per_channel(s.astype(dt), x.rank))
        return [b.binary("add", b.binary("mul", x, a), s)]
    r = x.rank
    shp = (1, -1) + (1,) * (r - 2)

    def dev(v: Value) -> Tensor:
        return b.device(v, like=x.dtype).reshape(shp)

    inv = ops.unary(b.graph, "rsqrt", ops.add_scalar(b.graph, b.device(var, like=x.dtype), eps, b.prog), b.prog)
    a = b.binary("mul", dev(scale), inv.reshape(shp))
    y = b.binary("mul", b.binary("sub", x, dev(mean)), a)
    return [b.binary("add", y, dev(bias))]


@handles("LayerNormalization")
def _layer_norm(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    at = attrs(node)
    x = b.device(inputs[0])
    axis = normalize_axis(int(at.get("axis", -1)), x.rank)
    eps = float(at.get("epsilon", 1e-5))
    outer = int(np.prod(x.shape[:axis], dtype=np.int64))
    inner_shape = x.shape[axis:]
    inner = int(np.prod(inner_shape, dtype=np.int64))

    def param(v: Value | None) -> Tensor | None:
        if v is None:
            return None
        t = b.device(v, like=x.dtype)
        return (t.broadcast_to(inner_shape) if t.shape != inner_shape else t).reshape(inner)

    x2 = x.reshape(outer, inner)
    y, _, invstd = ops.layer_norm(b.graph, x2, param(inputs[1]), param(inputs[2] if len(inputs) > 2 else None),
                                  b.prog, eps=eps)  # fmt: skip
    stat_shape = x.shape[:axis] + (1,) * (x.rank - axis)
    outs: list[Any] = [y.reshape(x.shape)]
    if len(node.output) > 1 and node.output[1]:
        outs.append(ops.reduce_mean(b.graph, x2, [1], b.prog, keepdims=True).reshape(stat_shape))
    else:
        outs.append(None)
    outs.append(invstd.reshape(stat_shape))
    return outs


@handles("InstanceNormalization")
def _instance_norm(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    eps = float(attrs(node).get("epsilon", 1e-5))
    n, c = x.shape[:2]
    y, _, _ = ops.layer_norm(b.graph, x.reshape(n * c, -1), None, None, b.prog, eps=eps)
    y = y.reshape(x.shape)
    shp = (1, c) + (1,) * (x.rank - 2)
    scale = inputs[1].reshape(shp) if isinstance(inputs[1], Tensor) else np.asarray(inputs[1]).reshape(shp)
    bias = inputs[2].reshape(shp) if isinstance(inputs[2], Tensor) else np.asarray(inputs[2]).reshape(shp)
    return [b.binary("add", b.binary("mul", y, scale), bias)]


@handles("GroupNormalization")
def _group_norm(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    at = attrs(node)
    groups, eps = int(at["num_groups"]), float(at.get("epsilon", 1e-5))
    n, c = x.shape[:2]
    y, _, _ = ops.layer_norm(b.graph, x.reshape(n * groups, -1), None, None, b.prog, eps=eps)
    y = y.reshape(x.shape)
    shp = (1, c) + (1,) * (x.rank - 2)

    def per_channel(v: Value) -> Value:
        # opset 18 gives scale and bias per group, opset 21 per channel
        size = shape_of(v)[0] if shape_of(v) else 1
        if size == groups and groups != c:
            v = (
                v.reshape(groups, 1).broadcast(c // groups, 1)
                if isinstance(v, Tensor)
                else np.repeat(np.asarray(v), c // groups)
            )
        return v.reshape(shp) if isinstance(v, Tensor) else np.asarray(v).reshape(shp)

    return [b.binary("add", b.binary("mul", y, per_channel(inputs[1])), per_channel(inputs[2]))]


@handles("RMSNormalization")
def _rms_norm(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    """x / sqrt(mean(x^2) + eps) * scale over the axes from ``axis`` on."""
    x = b.device(inputs[0])
    at = attrs(node)
    axis = normalize_axis(int(at.get("axis", -1)), x.rank)
    eps = float(at.get("epsilon", 1e-5))
    ms = reduce(b, b.unary("square", x), list(range(axis, x.rank)), "mean", keepdims=True)
    inv = b.unary("rsqrt", ops.add_scalar(b.graph, at_least_1d(ms), eps, b.prog).reshape(ms.shape))
    return [b.binary("mul", b.binary("mul", x, inv), inputs[1])]


@handles("LpNormalization")
def _lp_norm(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    at = attrs(node)
    axis = normalize_axis(int(at.get("axis", -1)), x.rank)
    p = int(at.get("p", 2))
    if p == 1:
        norm = reduce(b, b.unary("abs", x), [axis], "add", keepdims=True)
    elif p == 2:
        norm = b.unary("sqrt", reduce(b, b.unary("square", x), [axis], "add", keepdims=True))
    else:
        raise Unsupported(f"p={p}")
    return [b.map("NormDivide", _safe_div, [x, norm], (cost_model.binary("divide"),))]


def _safe_div(x: np.ndarray, n: np.ndarray) -> np.ndarray:
    return np.where(n == 0, 0, x / np.where(n == 0, 1, n))  # a zero vector stays zero (onnx.reference)


@handles("MeanVarianceNormalization")
def _mvn(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    axes = [normalize_axis(int(a), x.rank) for a in attrs(node).get("axes", [0, 2, 3])]
    mean = reduce(b, x, axes, "mean", keepdims=True)
    d = b.binary("sub", x, mean)
    var = reduce(b, b.unary("square", d), axes, "mean", keepdims=True)
    std = b.unary("sqrt", var)
    return [b.binary("div", d, ops.add_scalar(b.graph, at_least_1d(std), 1e-9, b.prog).reshape(std.shape))]


def _pow_scalar(x: np.ndarray, p: float) -> np.ndarray:
    return np.power(x, p)


@handles("LRN")
def _lrn(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    at = attrs(node)
    x = b.device(inputs[0])
    size = int(at["size"])
    alpha, beta, bias = float(at.get("alpha", 1e-4)), float(at.get("beta", 0.75)), float(at.get("bias", 1.0))
    sq = b.unary("square", x)
    lo, hi = (size - 1) // 2, -(-(size - 1) // 2)
    pads = [(0, 0)] * x.rank
    pads[1] = (lo, hi)
    padded = pad_view(b, sq, pads, "constant", 0.0)
    c = x.shape[1]
    total: Tensor = padded.slice(0, c, 1)
    for j in range(1, size):
        total = b.binary("add", total, padded.slice(j, j + c, 1))
    t = ops.add_scalar(b.graph, ops.scale(b.graph, total, alpha / size, b.prog), bias, b.prog)
    d = b.map("PowScalar", _pow_scalar, [t], (cost_model.binary("power"),), p=beta)
    return [b.binary("div", x, d)]
