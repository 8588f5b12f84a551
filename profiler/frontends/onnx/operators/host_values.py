"""Ops whose results are host values (shapes, constants, ranges, identity matrices): never device work."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from profiler.poplar.tensor import Tensor

from ..builder import Builder
from ..errors import Unsupported
from .common import attrs, host_array, shape_of
from .registry import handles


@handles("Shape")
def _shape_op(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    shape = np.asarray(shape_of(inputs[0]), dtype=np.int64)
    at = attrs(node)
    start, end = at.get("start", 0), at.get("end")
    return [shape[start:end]]


@handles("Size")
def _size_op(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    return [np.asarray(int(np.prod(shape_of(inputs[0]))), dtype=np.int64)]


@handles("Constant")
def _constant(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    at = attrs(node)
    if "value" in at:
        return [numpy_helper.to_array(at["value"])]
    for key, dt in (("value_float", np.float32), ("value_floats", np.float32), ("value_int", np.int64),
                    ("value_ints", np.int64)):  # fmt: skip
        if key in at:
            return [np.asarray(at[key], dtype=dt)]
    raise Unsupported("Constant without a tensor value")


@handles("ConstantOfShape")
def _constant_of_shape(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    shape = [int(s) for s in host_array(inputs[0], "shape").reshape(-1)]  # type: ignore[union-attr]
    v = attrs(node).get("value")
    value = numpy_helper.to_array(v).reshape(-1) if v is not None else np.zeros(1, np.float32)
    return [np.full(shape, value[0], dtype=value.dtype)]


@handles("Range")
def _range(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    # Range of constants is folded at import; bounds computed on the device would give a shape
    # only known at run time, which a static graph cannot have
    raise Unsupported("start/limit/delta computed on the device (must be constant)")


@handles("EyeLike")
def _eye_like(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    """Depends only on the input's shape: a host constant."""
    shape = shape_of(inputs[0])
    at = attrs(node)
    dt = helper.tensor_dtype_to_np_dtype(int(at["dtype"])) if "dtype" in at else (
        inputs[0].dtype if isinstance(inputs[0], Tensor) else np.asarray(inputs[0]).dtype)  # fmt: skip
    return [np.eye(shape[0], shape[1], int(at.get("k", 0)), dtype=dt)]
