"""Serialised matmuls for sharding: a MatMul or Gemm whose weights alone are more than an IPU's share
of the model is cut along its output channels into parts, so that the memory split can put the parts
on consecutive IPUs (PopART's ``serializeMatMul`` in its "output_channels" mode: the matmul becomes k
matmuls over k slices of the weights, their results concatenated). A whole node is the split's unit,
and without this one large layer - VGG's first fully connected layer, 411 MB of its 575 MB of
weights - decides the split alone.

The slices are ``Slice`` nodes of host values (initializers or what nodes folded on the host make),
so they fold on the host too and each part's weights land where the part runs.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import helper, numpy_helper

from profiler.multi_ipu import sharding

#: The operators cut: their second input is the [K, N] weight ([N, K] for a Gemm with transB).
SERIALISED = ("MatMul", "Gemm")


def serialize_large_matmuls(
    model: onnx.ModelProto, num_ipus: int, opset: int, in_place: bool = False
) -> onnx.ModelProto:
    """``model`` with each MatMul / Gemm whose memory (sharding.node_bytes) exceeds an IPU's share of
    the model's total cut into ceil(its bytes / share) parts along the output channels; ``model``
    itself when none is (or for one IPU, or a manual placement). ``in_place``: ``model``'s nodes are
    replaced rather than the model copied (the importer's own copy: a copy would hold the weights twice)."""
    if num_ipus < 2 or sharding.manual_ipus(model) is not None:
        return model
    costs = sharding.node_bytes(model)
    share = float(costs.sum()) / num_ipus
    host = sharding.host_value_dims(model)
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []
    changed = False
    for i, node in enumerate(model.graph.node):
        parts = _parts(node, costs[i], share, host, opset)
        if parts is None:
            nodes.append(node)
            continue
        nodes.extend(_serialised(node, parts, host, inits, i, opset))
        changed = True
    if not changed:
        return model
    if in_place:
        kept = onnx.GraphProto()
        kept.node.extend(nodes)  # copied out before the model's own are cleared
        out = model
    else:
        out = onnx.ModelProto()
        out.CopyFrom(model)
        kept = onnx.GraphProto()
        kept.node.extend(nodes)
    del out.graph.node[:]
    out.graph.node.extend(kept.node)
    out.graph.initializer.extend(inits)
    return out


def _parts(node: onnx.NodeProto, cost: float, share: float, host: dict[str, list[int]], opset: int) -> int | None:
    """How many parts ``node`` is cut into, None to keep it whole."""
    if node.op_type not in SERIALISED or cost <= share or len(node.input) < 2:
        return None
    if node.op_type == "MatMul" and opset < 11:  # its results join on the last axis: Concat's axis -1
        return None
    dims = host.get(node.input[1])
    if dims is None or len(dims) != 2:  # a weight on the device already, or batched: left whole
        return None
    if node.op_type == "Gemm" and len(node.input) > 2 and node.input[2] and node.input[2] not in host:
        return None  # a bias computed on the device: left whole
    n = dims[0] if _trans_b(node) else dims[1]
    k = min(math.ceil(cost / share), n)
    return k if k > 1 else None


def _trans_b(node: onnx.NodeProto) -> bool:
    return any(a.name == "transB" and helper.get_attribute_value(a) for a in node.attribute)


def _serialised(
    node: onnx.NodeProto, k: int, host: dict[str, list[int]], inits: list[onnx.TensorProto], index: int, opset: int
) -> list[onnx.NodeProto]:
    """``node`` as k nodes over slices of its weight (and of its bias, when that runs along the output
    channels), then a Concat of their results under the node's output name."""
    name = node.name or f"{node.op_type}_{index}"
    w = node.input[1]
    w_axis = 0 if _trans_b(node) else 1
    n = host[w][w_axis]
    bias = node.input[2] if node.op_type == "Gemm" and len(node.input) > 2 and node.input[2] else ""
    bias_dims = host.get(bias, [])
    bias_sliced = bool(bias) and bool(bias_dims) and bias_dims[-1] == n and n > 1
    edges = np.linspace(0, n, k + 1).round().astype(np.int64)
    out: list[onnx.NodeProto] = []
    results = []
    for j in range(k):
        part = f"{name}/serial{j}"

        def sliced(value: str, axis: int, part: str = part, j: int = j) -> str:
            bounds = (int(edges[j]), int(edges[j + 1]), axis)
            where = {"name": f"{part}/slice {value}"}
            if opset < 10:  # Slice-1: the bounds are attributes
                out.append(helper.make_node("Slice", [value], [f"{part}/{value}"], **where,
                                            starts=[bounds[0]], ends=[bounds[1]], axes=[axis]))  # fmt: skip
                return f"{part}/{value}"
            names = [f"{part}/{value}/{what}" for what in ("starts", "ends", "axes")]
            for nm, v in zip(names, bounds, strict=True):
                inits.append(numpy_helper.from_array(np.array([v], np.int64), nm))
            out.append(helper.make_node("Slice", [value, *names], [f"{part}/{value}"], **where))
            return f"{part}/{value}"

        inputs = [node.input[0], sliced(w, w_axis)]
        if bias:
            inputs.append(sliced(bias, len(bias_dims) - 1) if bias_sliced else bias)
        results.append(f"{part}/out")
        copy = helper.make_node(node.op_type, inputs, [results[-1]], name=part)
        copy.attribute.extend(node.attribute)
        out.append(copy)
    axis = 1 if node.op_type == "Gemm" else -1  # a Gemm's result is [M, N]
    out.append(helper.make_node("Concat", results, [node.output[0]], name=f"{name}/concat", axis=axis))
    return out
