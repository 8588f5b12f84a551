"""Sharding: which IPU each ONNX node runs on (PopART's virtual graphs).

Manual: a node carrying PopART's ``__ipu_number`` attribute (what ``builder.virtualGraph(ipu)``
sets) runs on that IPU. Automatic (PopART ``VirtualGraphMode::Auto``): the nodes, in the model's
topological order, are cut into ``num_ipus`` contiguous groups of about equal memory: a node's
memory is the bytes of the host values it is first to use (its weights: initializers, and what
nodes folded on the host make, such as a ConstantOfShape's output) plus the bytes of its outputs
(activations, from ONNX shape inference); a folded node itself brings nothing. Contiguous groups keep the cut edges few (only
tensors crossing a cut move over IPU-Links) and make the groups pipeline stages in order.

``split="compute"`` balances the groups' simulated cycles instead (profiler.frontends.onnx.split
measures each node's cycles on the memory split, then cuts again), so pipeline stages take about
equal time where memory and compute differ (a CNN's convolutions hold little weight and do most of
the work; its fully connected layers the opposite).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import onnx
from onnx import helper

#: PopART's node attribute for the virtual graph (IPU) of a node (``builder.virtualGraph``).
IPU_ATTRIBUTE = "__ipu_number"


class ShardingError(ValueError):
    """A sharding request that cannot be met (one line)."""


def manual_ipus(model: onnx.ModelProto) -> list[int] | None:
    """Each node's ``__ipu_number``, None when no node has one; a node without one follows the node
    before it (PopART requires every node to have one in Manual mode; following is friendlier)."""
    found = False
    out, current = [], 0
    for node in model.graph.node:
        for a in node.attribute:
            if a.name == IPU_ATTRIBUTE:
                current, found = int(helper.get_attribute_value(a)), True
        out.append(current)
    return out if found else None


def node_bytes(model: onnx.ModelProto) -> np.ndarray:
    """Memory each node brings to its IPU: bytes of the host values it is first to read (weights) plus
    bytes of its outputs (activations).

    A host value is an initializer or the output of a node folded on the host: a node whose inputs
    are all host values (a Constant, a ConstantOfShape of a constant shape, a Reshape of a weight)
    runs at import, as PopART's constant folding runs it, so it brings nothing to a device and its
    outputs land, like an initializer, on the IPU of the first node that reads them.
    """
    shapes = _inferred(model)
    values = {name: _tensor_bytes(dims, elem) for name, (dims, elem) in shapes.items()}
    host = {t.name: _tensor_bytes(t.dims, t.data_type) for t in model.graph.initializer}
    for i in folded_nodes(model):
        for o in model.graph.node[i].output:
            if o:
                host[o] = values.get(o, 0)
    seen: set[str] = set()
    out = np.zeros(len(model.graph.node), dtype=np.float64)
    folded = set(folded_nodes(model))
    for i, node in enumerate(model.graph.node):
        if i in folded:
            continue
        weights = 0
        for name in node.input:
            if name in host and name not in seen:
                seen.add(name)
                weights += host[name]
        out[i] = weights + sum(values.get(o, 0) for o in node.output if o)
    return out


def _inferred(model: onnx.ModelProto) -> dict[str, tuple[list[int], int]]:
    """(dims, element type) of each value ONNX shape inference knows (unknown dimensions as 1)."""
    try:  # without the weights' data: inference serializes its input and output (4 copies of them)
        inferred = onnx.shape_inference.infer_shapes(light_copy(model, INFERENCE_FLOAT_DATA)[0], data_prop=True)
    except Exception:  # shapes are an estimate only; a model shape inference cannot handle still shards by weights
        inferred = model
    out = {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.output):
        tt = vi.type.tensor_type
        out[vi.name] = ([d.dim_value if d.HasField("dim_value") else 1 for d in tt.shape.dim], tt.elem_type)
    return out


def host_value_dims(model: onnx.ModelProto) -> dict[str, list[int]]:
    """The dims of each host value: initializers and the outputs of nodes folded on the host."""
    dims = {t.name: list(t.dims) for t in model.graph.initializer}
    shapes = _inferred(model)
    for i in folded_nodes(model):
        for o in model.graph.node[i].output:
            if o and o in shapes:
                dims[o] = shapes[o][0]
    return dims


def folded_nodes(model: onnx.ModelProto) -> list[int]:
    """Indices of the nodes whose every input is a host value (an initializer or a folded node's
    output): the importer folds them on the host (profiler.frontends.onnx.importer, ``on_host``)."""
    graph_inputs = {i.name for i in model.graph.input} - {t.name for t in model.graph.initializer}
    host = {t.name for t in model.graph.initializer}
    out = []
    for i, node in enumerate(model.graph.node):
        if all(not n or (n in host and n not in graph_inputs) for n in node.input):
            out.append(i)
            host.update(o for o in node.output if o)
    return out


def _tensor_bytes(dims: Iterable[int], elem_type: int) -> int:
    try:
        item = np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).itemsize
    except Exception:
        item = 4
    return int(np.prod([max(int(d), 0) for d in dims], dtype=np.int64)) * item


def balance(costs: np.ndarray, num_ipus: int) -> np.ndarray:
    """Contiguous groups of about equal total cost: item i goes to the IPU whose share of the total
    holds the middle of item i's cost (floor(num_ipus x midpoint / total)); never decreasing."""
    if num_ipus < 1:
        raise ShardingError(f"sharding: num_ipus must be >= 1, got {num_ipus}")
    costs = np.asarray(costs, dtype=np.float64)
    total = float(costs.sum())
    if total <= 0 or num_ipus == 1:
        return np.zeros(costs.size, dtype=np.int64)
    middle = np.cumsum(costs) - costs / 2
    return np.minimum((middle * num_ipus / total).astype(np.int64), num_ipus - 1)


#: What an automatic split balances over the IPUs (the module docstring).
SPLITS = ("memory", "compute")


def check_split(split: str) -> None:
    if split not in SPLITS:
        raise ShardingError(f"sharding: split must be one of {', '.join(SPLITS)}, got {split!r}")


def assign_ipus(model: onnx.ModelProto, num_ipus: int, costs: np.ndarray | None = None) -> list[int]:
    """Each node's IPU: the model's ``__ipu_number`` attributes if any, else contiguous groups
    balanced by ``costs`` per node (default: memory, ``node_bytes``)."""
    manual = manual_ipus(model)
    if manual is not None:
        bad = sorted({i for i in manual if not 0 <= i < num_ipus})
        if bad:
            raise ShardingError(f"sharding: the model puts nodes on IPU(s) {bad}, the target has {num_ipus} IPU(s)")
        return manual
    return balance(node_bytes(model) if costs is None else costs, num_ipus).tolist()


# Floating-point initializers of more than this many elements go into shape inference as their name,
# type and dims only: no shape depends on their values (shape-like inputs are integers, or a few
# floats: Resize scales, Range bounds)
INFERENCE_FLOAT_DATA = 64
_FLOAT_TYPES = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE, onnx.TensorProto.BFLOAT16)


def light_copy(model: onnx.ModelProto, elements: int) -> tuple[onnx.ModelProto, list[int]]:
    """A copy of ``model`` whose inline floating-point initializers of more than ``elements`` elements
    hold their name, type and dims only, and their indices. Copied field by field, so the weights'
    bytes are never copied (a whole copy then stripped held them twice for a moment: BERT-large's 1.3 GB)."""
    light = onnx.ModelProto()
    for fd, value in model.ListFields():
        if fd.name != "graph":
            _copy_field(light, fd, value)
    for fd, value in model.graph.ListFields():
        if fd.name != "initializer":
            _copy_field(light.graph, fd, value)
    stripped = []
    for i, t in enumerate(model.graph.initializer):
        inline = t.data_location != onnx.TensorProto.EXTERNAL
        if inline and t.data_type in _FLOAT_TYPES and int(np.prod(t.dims, dtype=np.int64)) > elements:
            light.graph.initializer.append(
                onnx.TensorProto(name=t.name, dims=t.dims, data_type=t.data_type, doc_string=t.doc_string)
            )
            stripped.append(i)
        else:
            light.graph.initializer.append(t)  # appending copies
    return light, stripped


def _copy_field(message: Any, fd: Any, value: Any) -> None:
    """Copy one set field (from ``ListFields``) into ``message``."""
    if fd.is_repeated:
        getattr(message, fd.name).extend(value)
    elif fd.type == fd.TYPE_MESSAGE:
        getattr(message, fd.name).CopyFrom(value)
    else:
        setattr(message, fd.name, value)
