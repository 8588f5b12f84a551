"""Activation functions: Gelu, the ReLU family, the fused elementwise activations, Softmax, LogSoftmax, Hardmax."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from profiler import ops
from profiler.chip import cost_model
from profiler.poplar.tensor import Tensor

from ..builder import Builder, at_least_1d
from ..errors import Unsupported
from .common import attrs, normalize_axis
from .reductions import arg_extreme
from .registry import handles


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))


@handles("Gelu")
def _gelu(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    if attrs(node).get("approximate", b"none") in (b"tanh", "tanh"):
        return [b.map("GeluTanh", _gelu_tanh, [inputs[0]], (cost_model.unary("gelu_erf"),))]
    x = b.device(inputs[0])
    return [ops.gelu(b.graph, at_least_1d(x), b.prog).reshape(x.shape)]


def _leaky(x: np.ndarray, alpha: float) -> np.ndarray:
    return np.where(x >= 0, x, x * alpha)


@handles("LeakyRelu")
def _leaky_relu(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    alpha = float(attrs(node).get("alpha", 0.01))
    return [
        b.map("LeakyRelu", _leaky, [inputs[0]], (cost_model.unary("relu"), cost_model.binary("multiply")), alpha=alpha)
    ]


def _prelu(x: np.ndarray, slope: np.ndarray) -> np.ndarray:
    return np.where(x < 0, x * slope, x)


def _hard_sigmoid(x: np.ndarray, alpha: float, beta: float) -> np.ndarray:
    return np.clip(x * alpha + beta, 0, 1)


def _hard_swish(x: np.ndarray) -> np.ndarray:
    return x * np.clip(x * (1.0 / 6.0) + 0.5, 0, 1)


def _selu(x: np.ndarray, alpha: float, gamma: float) -> np.ndarray:
    return np.where(x > 0, gamma * x, gamma * alpha * np.expm1(np.minimum(x, 0)))


def _elu(x: np.ndarray, alpha: float) -> np.ndarray:
    return np.where(x >= 0, x, alpha * np.expm1(np.minimum(x, 0)))


def _celu(x: np.ndarray, alpha: float) -> np.ndarray:
    return np.maximum(x, 0) + np.minimum(0, alpha * np.expm1(np.minimum(x, 0) / alpha))


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(0, x)  # log(1 + e^x) without overflow for large x


def _softsign(x: np.ndarray) -> np.ndarray:
    return x / (1 + np.abs(x))


def _thresholded_relu(x: np.ndarray, alpha: float) -> np.ndarray:
    return np.where(x > alpha, x, 0)


def _mish(x: np.ndarray) -> np.ndarray:
    return x * np.tanh(np.logaddexp(0, x))


# cost: the popops ops a fused vertex would perform, as the existing LeakyRelu/GeluTanh maps do [INF]
_EXP = (cost_model.unary("exponent"), cost_model.binary("maximum"), cost_model.binary("multiply"))


_ACTIVATIONS: dict[str, tuple[Any, tuple[cost_model.CostOp, ...], dict[str, float]]] = {
    "HardSigmoid": (_hard_sigmoid, (cost_model.binary("multiply"), cost_model.binary("add"), cost_model.binary("maximum"),
                                    cost_model.binary("minimum")), {"alpha": 0.2, "beta": 0.5}),
    "HardSwish": (_hard_swish, (cost_model.binary("multiply"), cost_model.binary("add"), cost_model.binary("maximum"),
                                cost_model.binary("minimum"), cost_model.binary("multiply")), {}),
    "Selu": (_selu, _EXP, {"alpha": 1.67326319217681884765625, "gamma": 1.05070102214813232421875}),
    "Elu": (_elu, _EXP, {"alpha": 1.0}),
    "Celu": (_celu, _EXP, {"alpha": 1.0}),
    "Softplus": (_softplus, (cost_model.unary("exponent"), cost_model.unary("logarithm"), cost_model.binary("add")), {}),
    "Softsign": (_softsign, (cost_model.unary("absolute"), cost_model.binary("add"), cost_model.binary("divide")), {}),
    "ThresholdedRelu": (_thresholded_relu, (cost_model.binary("greater_than"), cost_model.binary("multiply")), {"alpha": 1.0}),
    "Mish": (_mish, (cost_model.unary("exponent"), cost_model.unary("logarithm"), cost_model.unary("tanh"), cost_model.binary("multiply")), {}),
}  # fmt: skip


@handles(*_ACTIVATIONS)
def _activation(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    fn, cost, defaults = _ACTIVATIONS[node.op_type]
    x = b.device(inputs[0])
    if x.dtype.kind != "f":
        raise Unsupported(f"integer input ({x.dtype.name})")
    at = attrs(node)
    params = {k: float(at.get(k, v)) for k, v in defaults.items()}
    return [b.map(node.op_type, fn, [x], cost, **params)]


@handles("PRelu")
def _prelu_op(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x, slope = b.pair(inputs[0], inputs[1])
    if b.opset < 7 and slope.rank == 1 and x.rank > 2:  # opset 6: a per-channel slope lines up with axis 1
        slope = slope.reshape((1, -1) + (1,) * (x.rank - 2))
    return [b.map("PRelu", _prelu, [x, slope], (cost_model.binary("multiply"), cost_model.binary("maximum")))]


def _swish(x: np.ndarray, alpha: float) -> np.ndarray:
    return x * (0.5 * (np.tanh(0.5 * alpha * x) + 1.0))


def _shrink(x: np.ndarray, lambd: float, bias: float) -> np.ndarray:
    return np.where(x < -lambd, x + bias, np.where(x > lambd, x - bias, 0)).astype(x.dtype)


@handles("Swish", "Shrink")
def _swish_shrink(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    at = attrs(node)
    if node.op_type == "Swish":
        return [b.map("Swish", _swish, [inputs[0]], (cost_model.unary("sigmoid"), cost_model.binary("multiply")),
                      alpha=float(at.get("alpha", 1.0)))]  # fmt: skip
    return [b.map("Shrink", _shrink, [inputs[0]], (cost_model.binary("greater_than"), cost_model.binary("add")),
                  lambd=float(at.get("lambd", 0.5)), bias=float(at.get("bias", 0.0)))]  # fmt: skip


def _coerced(b: Builder, node: onnx.NodeProto, x: Tensor) -> tuple[Tensor, int]:
    """Softmax-like ops: opsets before 13 work on x flattened to 2-D at ``axis`` (default 1)."""
    if b.opset >= 13:
        return x, normalize_axis(int(attrs(node).get("axis", -1)), x.rank)
    axis = normalize_axis(int(attrs(node).get("axis", 1)), x.rank)
    outer = int(np.prod(x.shape[:axis], dtype=np.int64))
    return x.reshape(outer, -1), 1


@handles("Softmax", "LogSoftmax")
def _softmax(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    if x.dtype.kind != "f":
        raise Unsupported("integer input")
    xs, axis = _coerced(b, node, at_least_1d(x))
    fn = ops.softmax if node.op_type == "Softmax" else ops.log_softmax
    return [fn(b.graph, xs, b.prog, axis=axis).reshape(x.shape)]


def _hardmax_rows(x: np.ndarray, idx: np.ndarray, iota: np.ndarray) -> np.ndarray:
    return (iota == idx).astype(x.dtype)


@handles("Hardmax")
def _hardmax(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    if b.opset < 13:  # the input flattened to 2-D at axis (default 1), as Softmax before 13
        axis = normalize_axis(int(attrs(node).get("axis", 1)), x.rank)
        xs = x.reshape(int(np.prod(x.shape[:axis], dtype=np.int64)), -1)
        ax = 1
    else:
        ax = normalize_axis(int(attrs(node).get("axis", -1)), x.rank)
        xs = x
    _, idx = arg_extreme(b, xs, ax, True, False)
    n = xs.shape[ax]
    iota = np.arange(n, dtype=np.int32).reshape([n if d == ax else 1 for d in range(xs.rank)])
    y = b.map("Hardmax", _hardmax_rows, [xs, idx, iota], (cost_model.binary("equal"),))
    return [y.reshape(x.shape)]
