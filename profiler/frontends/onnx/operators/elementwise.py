"""Elementwise arithmetic and math: unary and binary ops, variadic Sum/Max/Min/Mean, Clip, rounding, trigonometry, Mod, casts."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import onnx

from profiler import ops
from profiler.chip import cost_model
from profiler.chip.dtypes import is_float8
from profiler.poplar.tensor import Tensor

from ..builder import Builder, Value, at_least_1d, device_dtype, elem_np_dtype
from ..errors import Unsupported
from .common import attrs, shape_of
from .registry import handles

_UNARY = {
    "Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Erf": "erf", "Sqrt": "sqrt", "Exp": "exp", "Log": "log",
    "Neg": "neg", "Abs": "abs", "Reciprocal": "inv", "Sign": "sign",
}  # fmt: skip


@handles(*_UNARY)
def _unary(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    name = _UNARY[node.op_type]
    if x.dtype.kind != "f" and name in ("neg", "abs", "sign"):
        fn = {"neg": np.negative, "abs": np.abs, "sign": np.sign}[name]
        return [
            b.map(
                node.op_type, fn, [x], (cost_model.unary({"neg": "negate", "abs": "absolute", "sign": "signum"}[name]),)
            )
        ]
    if x.dtype.kind != "f":
        raise Unsupported(f"integer input ({x.dtype.name})")
    return [b.unary(name, x, in_place=True)]


def _clamp(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    return np.clip(x, lo, hi)


@handles("Clip")
def _clip(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    if b.opset < 11:
        a = attrs(node)
        lo: Value | None = np.float32(a.get("min", -np.inf))
        hi: Value | None = np.float32(a.get("max", np.inf))
    else:
        lo = inputs[1] if len(inputs) > 1 else None
        hi = inputs[2] if len(inputs) > 2 else None
    if not isinstance(lo, Tensor) and not isinstance(hi, Tensor):
        info = np.finfo if x.dtype.kind == "f" else np.iinfo
        lo_v = info(x.dtype).min if lo is None else np.asarray(lo).item()
        hi_v = info(x.dtype).max if hi is None else np.asarray(hi).item()
        return [
            b.map("Clamp", _clamp, [x], (cost_model.binary("maximum"), cost_model.binary("minimum")), lo=lo_v, hi=hi_v)
        ]
    y: Value = x
    if lo is not None:
        y = b.binary("max", y, lo)
    if hi is not None:
        y = b.binary("min", y, hi)
    return [y]


_BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Pow": "pow"}


@handles(*_BINARY)
def _binary(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    a, c = inputs[0], inputs[1]
    if node.op_type == "Pow":  # the exponent may have another type than the base
        base = b.device(a)
        if isinstance(c, Tensor):
            c = b.cast(c, base.dtype)
        else:
            c = np.asarray(c).astype(np.float32 if base.dtype.kind == "f" else np.int64)
        return [b.binary("pow", base, legacy_broadcast(b, node, base, c), in_place=True)]
    return [b.binary(_BINARY[node.op_type], a, legacy_broadcast(b, node, a, c), in_place=True)]


def legacy_broadcast(b: Builder, node: onnx.NodeProto, a: Value, c: Value) -> Value:
    """Opsets before 7: with broadcast=1, ``c`` lines up with ``a`` from ``axis`` (default: the suffix)."""
    at = attrs(node)
    if b.opset >= 7 or not at.get("broadcast", 0) or "axis" not in at:
        return c
    ra, rc = len(shape_of(a)), len(shape_of(c))
    axis = int(at["axis"]) % ra
    shape = tuple(shape_of(c)) + (1,) * (ra - axis - rc)
    return c.reshape(shape) if isinstance(c, Tensor) else np.reshape(c, shape)


@handles("Sum", "Max", "Min", "Mean")
def _variadic(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    name = {"Sum": "add", "Max": "max", "Min": "min", "Mean": "add"}[node.op_type]
    acc: Value = inputs[0]
    for x in inputs[1:]:
        acc = b.binary(name, acc, x)
    acc = b.device(acc)
    if node.op_type == "Mean" and len(inputs) > 1:
        acc = ops.scale(b.graph, at_least_1d(acc), 1.0 / len(inputs), b.prog).reshape(acc.shape)
    return [acc]


_ROUND = {"Floor": (np.floor, "floor"), "Ceil": (np.ceil, "ceil"), "Round": (np.round, "round")}


@handles(*_ROUND)
def _round(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    if x.dtype.kind != "f":
        return [x]  # integers are already whole
    fn, cost = _ROUND[node.op_type]  # np.round rounds halves to even, as ONNX Round does
    return [b.map(node.op_type, fn, [x], (cost_model.unary(cost),))]


def _sin(x: np.ndarray) -> np.ndarray:
    return np.sin(x)


def _cos(x: np.ndarray) -> np.ndarray:
    return np.cos(x)


@handles("Sin", "Cos")
def _trig(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    fn, cost = (_sin, "sin") if node.op_type == "Sin" else (_cos, "cos")
    return [b.map(node.op_type, fn, [inputs[0]], (cost_model.unary(cost),))]


_TRIG = {"Tan": np.tan, "Asin": np.arcsin, "Acos": np.arccos, "Atan": np.arctan, "Sinh": np.sinh,
         "Cosh": np.cosh, "Asinh": np.arcsinh, "Acosh": np.arccosh, "Atanh": np.arctanh}  # fmt: skip


@handles(*_TRIG)
def _trig_more(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    # costed as popops SIN (the reference's only transcendental figure of that kind) [INF]
    return [b.map(node.op_type, _TRIG[node.op_type], [inputs[0]], (cost_model.unary("sin"),))]


def _mod(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "f":  # fmod=0 on floats (the spec asks for fmod=1; its tests use both): Python's %
        return np.mod(a, c)
    safe = np.where(c == 0, 1, c)
    return np.mod(a, safe)  # the sign of the divisor, as Python's and ONNX's fmod=0


def _fmod(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    return np.fmod(a, c)  # the sign of the dividend (C's fmod)


@handles("Mod")
def _mod_op(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    ta, tc = b.pair(inputs[0], inputs[1])
    fmod = int(attrs(node).get("fmod", 0))
    fn = _fmod if fmod else _mod
    if ta.dtype.kind == "f":
        return [
            b.map(
                "Remainder",
                fn,
                [ta, tc],
                (cost_model.binary("divide"), cost_model.binary("multiply"), cost_model.binary("subtract")),
            )
        ]
    # integer remainder: the cost model has no integer divide; as integer multiply-subtract [INF]
    return [b.map("RemainderInt", fn, [ta, tc], (cost_model.binary("multiply"), cost_model.binary("subtract")))]


def _saturate(x: np.ndarray, limit: float) -> np.ndarray:
    return np.clip(x, -limit, limit)  # NaN stays NaN


def _to_float8(b: Builder, x: Tensor, to: np.dtype, saturate: bool) -> Tensor:
    """ONNX's Cast to FLOAT8E4M3FNUZ / FLOAT8E5M2FNUZ: round to nearest even; ``saturate`` (the
    default) clamps values past the format's largest, infinities included, to it (as onnx's own
    test_cast_FLOAT_to_FLOAT8E4M3FNUZ expects), else they become NaN (the formats have no infinity)."""
    dt = device_dtype(to, b.half)
    if not saturate:
        return b.cast(x, dt)
    limit = float(ml_dtypes.finfo(dt).max)
    return b.map("CastSaturate", _saturate, [x], (cost_model.CAST,), out_dtype=dt, limit=limit)


@handles("Cast")
def _cast(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    to = elem_np_dtype(int(attrs(node)["to"]))
    x = b.device(inputs[0])
    if is_float8(to):
        return [_to_float8(b, x, to, attrs(node).get("saturate", 1) == 1)]
    if to.itemsize == 1 and to.kind == "f":
        raise Unsupported("float8 casts")
    dt = device_dtype(to, b.half)
    return [b.cast(x, dt)]


@handles("CastLike")
def _cast_like(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    like = inputs[1]
    to = like.dtype if isinstance(like, Tensor) else np.asarray(like).dtype
    if attrs(node).get("saturate", 1) != 1 or to.itemsize == 1 and to.kind == "f" or is_float8(to):
        raise Unsupported("float8 casts")
    return [b.cast(b.device(inputs[0]), device_dtype(to, b.half))]
