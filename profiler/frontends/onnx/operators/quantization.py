"""Quantisation: QuantizeLinear and DequantizeLinear (int8/uint8 QDQ models)."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import helper

from profiler.chip import cost_model
from profiler.poplar.tensor import Tensor

from ..builder import Builder, Value, device_dtype
from ..errors import Unsupported
from .common import attrs, normalize_axis, shape_of
from .registry import handles


def _quantize(x: np.ndarray, scale: np.ndarray, zp: np.ndarray, lo: int, hi: int) -> np.ndarray:
    return np.clip(np.round(x / scale) + zp, lo, hi)  # np.round: halves to even, as ONNX


def _dequantize(x: np.ndarray, scale: np.ndarray, zp: np.ndarray) -> np.ndarray:
    return (x.astype(np.float32) - zp.astype(np.float32)) * scale


def _qparam(v: Value | None, rank: int, axis: int, default: float, dtype: np.dtype) -> Value:
    """A scale or zero point: a scalar, or per-axis values shaped to broadcast along ``axis``."""
    if v is None:
        return np.asarray(default, dtype=dtype)
    shape = shape_of(v)
    if len(shape) == 1 and shape[0] > 1:
        full = [1] * rank
        full[normalize_axis(axis, rank)] = shape[0]
        return v.reshape(full) if isinstance(v, Tensor) else np.asarray(v).reshape(full)
    if len(shape) > 1:
        raise Unsupported("blocked quantization")
    return v


@handles("QuantizeLinear", "DequantizeLinear")
def _qdq(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    at = attrs(node)
    axis = int(at.get("axis", 1))  # only used by per-axis scales
    zp_in = inputs[2] if len(inputs) > 2 else None
    if at.get("block_size", 0):
        raise Unsupported("blocked quantization")
    if node.op_type == "DequantizeLinear":
        if x.dtype.kind == "f":
            raise Unsupported("float8 input")
        scale = _qparam(inputs[1], x.rank, axis, 1.0, np.dtype(np.float32))
        zp = _qparam(zp_in, x.rank, axis, 0, np.dtype(np.int32))
        if isinstance(zp, np.ndarray):
            zp = zp.astype(np.int32)
        out_dt = scale.dtype if isinstance(scale, Tensor) else np.asarray(scale).dtype
        return [b.map("Dequantize", _dequantize, [x, scale, b.device(zp, like=np.dtype(np.int32))],
                      (cost_model.binary("subtract"), cost_model.binary("multiply")), out_dtype=device_dtype(out_dt, b.half))]  # fmt: skip
    if "output_dtype" in at and int(at["output_dtype"]):
        target = np.dtype(helper.tensor_dtype_to_np_dtype(int(at["output_dtype"])))
    elif isinstance(zp_in, Tensor):  # its ONNX type (the output's) is not known from a device tensor
        raise Unsupported("zero point computed on the device (must be constant)")
    elif zp_in is not None:
        target = np.asarray(zp_in).dtype
    else:
        target = np.dtype(np.uint8)
    if target not in (np.dtype(np.uint8), np.dtype(np.int8), np.dtype(np.uint16), np.dtype(np.int16)):
        raise Unsupported(f"quantizing to {target.name}")
    info = np.iinfo(target)
    scale = _qparam(inputs[1], x.rank, axis, 1.0, np.dtype(np.float32))
    zp = _qparam(zp_in, x.rank, axis, 0, np.dtype(np.int32))
    zp = b.device(zp.astype(np.float32) if isinstance(zp, np.ndarray) else zp, like=x.dtype)
    return [b.map("Quantize", _quantize, [x, scale, zp], (cost_model.binary("divide"), cost_model.unary("round"), cost_model.binary("add")),
                  out_dtype=device_dtype(target, b.half), lo=int(info.min), hi=int(info.max))]  # fmt: skip
