"""Comparisons, boolean and bitwise logic, and selection: Where, Trilu, IsNaN, IsInf."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from profiler.chip import cost_model

from ..builder import Builder
from ..errors import Unsupported
from .common import as_text, attrs, host_array, select
from .registry import handles


def _less(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    return a < c


def _greater(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    return a > c


def _equal(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    return a == c


def _less_equal(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    return a <= c


def _greater_equal(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    return a >= c


_COMPARE = {
    "Less": (_less, "less_than"), "Greater": (_greater, "greater_than"), "Equal": (_equal, "equal"),
    "LessOrEqual": (_less_equal, "less_than_equal"), "GreaterOrEqual": (_greater_equal, "greater_than_equal"),
}  # fmt: skip


@handles(*_COMPARE)
def _compare(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    ta, tc = b.pair(inputs[0], inputs[1])
    fn, cost = _COMPARE[node.op_type]
    cost_op = cost if ta.dtype.kind in "fiu" and ta.dtype != np.bool_ else "logical_and"
    return [b.map(node.op_type, fn, [ta, tc], (cost_model.binary(cost_op),), out_dtype="bool")]


@handles("Where")
def _where(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    cond, x, y = inputs
    tx, ty = b.pair(x, y)
    tcond = b.device(cond)
    # popops::Select costs about a binary op per element [INF]
    return [b.map("Select", select, [tx, ty, tcond], (cost_model.binary("maximum"),))]


@handles("Not")
def _not(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    return [b.map("LogicalNot", np.logical_not, [inputs[0]], (cost_model.unary("logical_not"),))]


def _and(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    return np.logical_and(a, c)


def _or(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    return np.logical_or(a, c)


def _xor(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    return np.logical_xor(a, c)


_LOGIC = {"And": (_and, "logical_and"), "Or": (_or, "logical_or"), "Xor": (_xor, "logical_or")}


@handles(*_LOGIC)
def _logic(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    ta, tc = b.pair(inputs[0], inputs[1])
    fn, cost = _LOGIC[node.op_type]
    return [b.map(node.op_type, fn, [ta, tc], (cost_model.binary(cost),), out_dtype="bool")]


def _bit_and(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    return np.bitwise_and(a, c)


def _bit_or(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    return np.bitwise_or(a, c)


def _bit_xor(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    return np.bitwise_xor(a, c)


def _shift_left(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    return np.left_shift(a, c)


def _shift_right(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    return np.right_shift(a, c)


_BITWISE = {"BitwiseAnd": _bit_and, "BitwiseOr": _bit_or, "BitwiseXor": _bit_xor}


@handles("BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitShift", "BitwiseNot")
def _bitwise(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    if node.op_type == "BitwiseNot":
        x = b.device(inputs[0])
        if x.dtype.kind not in "iu":
            raise Unsupported(f"element type {x.dtype.name}")
        return [b.map("BitwiseNot", np.invert, [x], (cost_model.unary("bitwise_not"),))]
    ta, tc = b.pair(inputs[0], inputs[1])
    if ta.dtype.kind not in "iu":
        raise Unsupported(f"element type {ta.dtype.name}")
    # 8/16/64-bit integers are computed as 32-bit on the device (as for every integer op): shifts
    # that overflow the narrow type would differ
    if node.op_type == "BitShift":
        left = as_text(attrs(node).get("direction"), "") == "LEFT"
        fn = _shift_left if left else _shift_right
        return [b.map("ShiftLeft" if left else "ShiftRight", fn, [ta, tc], (cost_model.binary("add"),))]
    # [NF] bitwise ops costed as integer ADD
    return [b.map(node.op_type, _BITWISE[node.op_type], [ta, tc], (cost_model.binary("add"),))]


def _is_nan(x: np.ndarray) -> np.ndarray:
    return np.isnan(x)


def _is_inf(x: np.ndarray, pos: int, neg: int) -> np.ndarray:
    return (np.isposinf(x) & bool(pos)) | (np.isneginf(x) & bool(neg))


@handles("IsNaN", "IsInf")
def _is_special(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    if node.op_type == "IsNaN":
        return [b.map("IsNaN", _is_nan, [x], (cost_model.binary("not_equal"),), out_dtype="bool")]
    at = attrs(node)
    pos, neg = int(at.get("detect_positive", 1)), int(at.get("detect_negative", 1))
    return [b.map("IsInf", _is_inf, [x], (cost_model.binary("equal"),), out_dtype="bool", pos=pos, neg=neg)]


@handles("Trilu")
def _trilu(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    k = 0 if len(inputs) < 2 or inputs[1] is None else int(host_array(inputs[1], "k").reshape(-1)[0])  # type: ignore[union-attr]
    n, m = x.shape[-2:]
    upper = int(attrs(node).get("upper", 1))
    keep = np.triu(np.ones((n, m), bool), k) if upper else np.tril(np.ones((n, m), bool), k)
    zero = np.zeros((), dtype=x.dtype)
    return [b.map("Select", select, [x, zero, keep], (cost_model.binary("maximum"),))]
