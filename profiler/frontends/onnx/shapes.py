"""Compile-only import: which initializers keep their values, and folding nodes by shape alone.

A compile-only profile needs every tensor's shape and type, and values only where they decide a
shape (a Reshape target, Slice bounds, a ConstantOfShape's shape, Range bounds): small integer
tensors held in the model file itself. So an initializer keeps its value when it is held inline
and has at most ``VALUE_LIMIT`` elements; any other becomes a shape-only placeholder
(profiler.poplar.shape_only), and a node that would fold on the host from one gets its outputs'
shapes and types from ONNX shape inference instead of running. Shape-computing subgraphs (Shape ->
Gather -> Concat -> Reshape) still fold with values: they start from device tensors' shapes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference

from profiler.poplar.shape_only import is_placeholder, placeholder

from .builder import elem_np_dtype
from .errors import FrontendError

#: Elements an initializer may have and keep its value in a compile-only import: the bound the batch
#: tracing reads literal shape targets under (model._constants), far above any shape's length, far
#: below any weight matrix's (a 64 x 64 one has 4,096: the smallest kept whole).
VALUE_LIMIT = 4096


#: The fields of a TensorProto that hold its data in the model file.
DATA_FIELDS = ("raw_data", "float_data", "int32_data", "int64_data", "double_data", "uint64_data", "string_data")


def holds_data(t: onnx.TensorProto) -> bool:
    """Whether ``t`` holds its data in the model file (not external, not dropped by a compile-only load)."""
    if t.data_location == onnx.TensorProto.EXTERNAL:
        return False
    return int(np.prod(t.dims, dtype=np.int64)) == 0 or any(len(getattr(t, f)) for f in DATA_FIELDS)


def keeps_value(t: onnx.TensorProto) -> bool:
    """Whether a compile-only import reads initializer ``t``'s values (small and in the model file)."""
    return holds_data(t) and int(np.prod(t.dims, dtype=np.int64)) <= VALUE_LIMIT


def shape_of(t: onnx.TensorProto) -> np.ndarray:
    """Initializer ``t`` as a shape-only placeholder of its declared dims and type (its data unread)."""
    return placeholder(tuple(t.dims), elem_np_dtype(t.data_type))


def fold_shapes(node: onnx.NodeProto, inputs: list[Any], opset: int) -> list[np.ndarray | None]:
    """The outputs of ``node`` (all inputs host values, some placeholders) as placeholders of the
    shapes and types ONNX shape inference gives them; FrontendError when it cannot tell one."""
    feeds = [(name, v) for name, v in zip(node.input, inputs, strict=True) if name]
    graph_inputs, inits = [], []
    for name, v in feeds:
        arr = np.asarray(v)
        if is_placeholder(arr):
            graph_inputs.append(
                helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(arr.dtype), arr.shape)
            )
        else:  # a real value may decide a shape (axes, a target shape): inference reads it
            inits.append(numpy_helper.from_array(arr, name))
    outs = [helper.make_empty_tensor_value_info(o) for o in node.output if o]
    graph = helper.make_graph([node], "fold_shapes", graph_inputs, outs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    name = node.name or node.op_type
    try:
        inferred = shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    except Exception as exc:
        raise FrontendError(
            f"node {name!r} ({node.op_type}): a compile-only import cannot infer its output shapes without its "
            f"inputs' values ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
        ) from None
    types = {vi.name: vi.type.tensor_type for vi in [*inferred.graph.output, *inferred.graph.value_info]}
    result: list[np.ndarray | None] = []
    for o in node.output:
        if not o:
            result.append(None)
            continue
        tt = types.get(o)
        dims = list(tt.shape.dim) if tt is not None and tt.HasField("shape") else None
        if tt is None or not tt.elem_type or dims is None or any(not d.HasField("dim_value") for d in dims):
            raise FrontendError(
                f"node {name!r} ({node.op_type}): its output {o!r} has a shape that depends on values a "
                "compile-only import does not load; profile it with values"
            )
        shape = tuple(int(d.dim_value) for d in dims)
        dtype = elem_np_dtype(tt.elem_type)
        numel = int(np.prod(shape, dtype=np.int64))
        result.append(placeholder(shape, dtype) if numel > 1 else np.zeros(shape, dtype))
    return result
