"""Layer norm in its decomposed form, as exporters write it before ONNX's LayerNormalization (opset 17):
torch.onnx at opsets 11-16 and tf2onnx spell ``nn.LayerNorm`` as

    m = ReduceMean(x, last axis)      d = Sub(x, m)        p = Pow(d, 2)  (or Mul(d, d))
    v = ReduceMean(p, last axis)      s = Sqrt(Add(v, eps))
    n = Div(d, s)  (or Mul(d, Reciprocal(s)))          y = Add(Mul(n, gamma), beta)   (affine optional)

Imported op by op that is 8-10 compute sets of elementwise and reduction vertices. popnn builds a layer
norm as one two-output statistics reduction, an inverse standard deviation and a whitening step
(popnn::layerNormStatistics / layerNormalise; profiler.ops.layer_norm), so each such chain is rewritten
to the LayerNormalization node it computes before the import, and costs exactly what that node costs.

A chain is rewritten only when it is exactly a layer norm over the last axis: every intermediate value
has no consumer outside the chain and is not a graph output, the reductions keep their dims, the square's
exponent is the constant 2 and epsilon a constant scalar. The affine part joins only when gamma and beta
are host values of shape [H] (the normalised axis' size); otherwise it stays as the model wrote it.
Anything else is left as it is and imported node by node (still correct, costed op by op).

The fused node keeps the nodes it replaced (attribute ``SOURCE``, a graph), so that a reference runtime
checking the simulated results runs the model as its exporter wrote it (``as_written``), not the rewrite.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper, numpy_helper

#: The fused node's attribute holding the chain it replaced (ignored by the LayerNormalization handler).
SOURCE = "tilescope_decomposed"


@dataclass
class _Graph:
    """What the matcher reads of a graph: producers, consumers, host constants and ranks."""

    producer: dict[str, int]
    consumers: dict[str, list[int]]
    outputs: set[str]
    constants: dict[str, onnx.TensorProto]
    ranks: dict[str, int]
    last_dims: dict[str, int]  # a value's last axis' size, where the graph's shapes give it
    nodes: list[onnx.NodeProto]

    def only_consumer(self, value: str) -> onnx.NodeProto | None:
        """The single node reading ``value`` (once), or None when it has several readers or is an output."""
        users = self.consumers.get(value, [])
        if len(users) != 1 or value in self.outputs:
            return None
        return self.nodes[users[0]]

    def scalar(self, value: str) -> float | None:
        """A constant's value when it holds one element (initializer or Constant node), else None."""
        t = self.constants.get(value)
        if t is None or int(np.prod(t.dims, dtype=np.int64)) != 1:
            return None
        try:
            return float(numpy_helper.to_array(t).reshape(()))
        except (ValueError, TypeError):  # held outside the model file: not read here
            return None

    def dims(self, value: str) -> list[int] | None:
        t = self.constants.get(value)
        return list(t.dims) if t is not None else None


def _read_graph(graph: onnx.GraphProto) -> _Graph:
    producer: dict[str, int] = {}
    consumers: dict[str, list[int]] = defaultdict(list)
    constants = {t.name: t for t in graph.initializer}
    for i, node in enumerate(graph.node):
        for o in node.output:
            if o:
                producer[o] = i
        for n in node.input:
            if n:
                consumers[n].append(i)
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            constants[node.output[0]] = node.attribute[0].t
    ranks, last_dims = {}, {}
    for vi in (*graph.input, *graph.value_info, *graph.output):
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape"):
            dims = vi.type.tensor_type.shape.dim
            ranks[vi.name] = len(dims)
            if dims and dims[-1].HasField("dim_value"):
                last_dims[vi.name] = dims[-1].dim_value
    outputs = {o.name for o in graph.output}
    return _Graph(producer, consumers, outputs, constants, ranks, last_dims, list(graph.node))


def _last_axis_mean(g: _Graph, node: onnx.NodeProto, x: str) -> bool:
    """``node`` is ReduceMean of ``x`` over its last axis only, keeping dims."""
    if node.op_type != "ReduceMean" or not node.input or node.input[0] != x:
        return False
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    if attrs.get("keepdims", 1) != 1 or attrs.get("noop_with_empty_axes", 0):
        return False
    if "axes" in attrs:
        axes = list(attrs["axes"])
    elif len(node.input) > 1 and node.input[1] in g.constants:  # opset 18: the axes are an input
        axes = [int(a) for a in numpy_helper.to_array(g.constants[node.input[1]]).reshape(-1)]
    else:
        return False
    if len(axes) != 1:
        return False
    return axes[0] == -1 or (x in g.ranks and axes[0] == g.ranks[x] - 1)


def _squares(g: _Graph, node: onnx.NodeProto, d: str) -> bool:
    """``node`` is d squared: Pow(d, 2) or Mul(d, d)."""
    if node.op_type == "Pow":
        return node.input[0] == d and g.scalar(node.input[1]) == 2.0
    return node.op_type == "Mul" and list(node.input) == [d, d]


def _per_feature(g: _Graph, x: str, gain: str, bias: str) -> bool:
    """gamma and beta are host vectors of one size, that of ``x``'s last axis where the shapes say it (a
    vector multiplies the last axis alone, as LayerNormalization's scale and bias do)."""
    h, gd, bd = g.last_dims.get(x), g.dims(gain), g.dims(bias)
    return gd is not None and len(gd) == 1 and gd == bd and (h is None or gd[0] == h)


def _other(node: onnx.NodeProto, value: str) -> str | None:
    """A binary node's input that is not ``value`` (None unless exactly one input is ``value``)."""
    a, b = node.input[0], node.input[1]
    if (a == value) == (b == value):
        return None
    return b if a == value else a


@dataclass
class _Match:
    nodes: list[int]  # the chain's nodes, removed
    x: str
    eps: float
    out: str  # the value the LayerNormalization node writes
    gamma: str
    beta: str
    name: str


def _match(g: _Graph, i: int) -> _Match | None:
    """The decomposed layer norm whose first ReduceMean is node ``i``, or None."""
    mean = g.nodes[i]
    if mean.op_type != "ReduceMean" or not mean.input or not _last_axis_mean(g, mean, mean.input[0]):
        return None
    x, m = mean.input[0], mean.output[0]
    sub = g.only_consumer(m)
    if sub is None or sub.op_type != "Sub" or list(sub.input) != [x, m]:
        return None
    d = sub.output[0]
    readers = [g.nodes[k] for k in g.consumers.get(d, [])]
    if d in g.outputs or len(readers) != 2 and not (len(readers) == 3 and readers[0] is readers[1]):
        return None
    square = next((r for r in readers if _squares(g, r, d)), None)
    if square is None:
        return None
    scale = next((r for r in readers if r is not square), None)
    var_mean = g.only_consumer(square.output[0])
    if scale is None or var_mean is None or not _last_axis_mean(g, var_mean, square.output[0]):
        return None
    add_eps = g.only_consumer(var_mean.output[0])
    if add_eps is None or add_eps.op_type != "Add":
        return None
    eps_name = _other(add_eps, var_mean.output[0])
    eps = g.scalar(eps_name) if eps_name is not None else None
    sqrt = g.only_consumer(add_eps.output[0])
    if eps is None or sqrt is None or sqrt.op_type != "Sqrt":
        return None
    chain = [mean, sub, square, var_mean, add_eps, sqrt]
    s = sqrt.output[0]
    if scale.op_type == "Div" and list(scale.input) == [d, s]:
        chain.append(scale)
    elif scale.op_type == "Mul":  # d x Reciprocal(s)
        recip = g.only_consumer(s)
        if recip is None or recip.op_type != "Reciprocal" or _other(scale, d) != recip.output[0]:
            return None
        if g.only_consumer(recip.output[0]) is not scale:
            return None
        chain += [recip, scale]
    else:
        return None
    out, gamma, beta = chain[-1].output[0], "", ""
    mul = g.only_consumer(out)
    if mul is not None and mul.op_type == "Mul":
        gain = _other(mul, out)
        add = g.only_consumer(mul.output[0])
        bias = _other(add, mul.output[0]) if add is not None and add.op_type == "Add" else None
        if gain is not None and bias is not None and _per_feature(g, x, gain, bias):
            chain += [mul, add]
            out, gamma, beta = add.output[0], gain, bias
    ids = [g.producer[n.output[0]] for n in chain]
    return _Match(ids, x, eps, out, gamma, beta, _chain_name(mean.name, i))


def _chain_name(mean_name: str, i: int) -> str:
    """The fused node's name: the exporter's module scope ("/bert/.../LayerNorm/ReduceMean" gives
    "/bert/.../LayerNorm"), so Operations shows the model's own name for it."""
    if "/" in mean_name.strip("/"):
        return mean_name.rsplit("/", 1)[0]
    return f"{mean_name or f'node{i}'}_layer_norm"


def fuse_layer_norms(model: onnx.ModelProto) -> tuple[onnx.ModelProto, int]:
    """``model`` with each decomposed layer norm (module docstring) replaced, in place, by one
    LayerNormalization node at the chain's last node's position; the number replaced."""
    graph = model.graph
    if not any(n.op_type == "ReduceMean" for n in graph.node):
        return model, 0
    g = _read_graph(graph)
    matches = [m for i in range(len(g.nodes)) if (m := _match(g, i)) is not None]
    if not matches:
        return model, 0
    removed: set[int] = set()
    placed: dict[int, onnx.NodeProto] = {}
    for m in matches:
        if removed.intersection(m.nodes):
            continue
        removed.update(m.nodes)
        inputs = [m.x, m.gamma, m.beta] if m.gamma else [m.x]
        fused = helper.make_node("LayerNormalization", inputs, [m.out], name=m.name, axis=-1, epsilon=m.eps)
        source = [g.nodes[k] for k in sorted(m.nodes)]
        fused.attribute.append(helper.make_attribute(SOURCE, helper.make_graph(source, m.name, [], [])))
        placed[max(m.nodes)] = fused
    nodes = [placed.get(k, n) for k, n in enumerate(g.nodes) if k not in removed or k in placed]
    gone = {o for k in removed for o in g.nodes[k].output} - {n.output[0] for n in placed.values()}
    del graph.node[:]
    graph.node.extend(nodes)
    kept = [vi for vi in graph.value_info if vi.name not in gone]
    del graph.value_info[:]
    graph.value_info.extend(kept)
    return model, len(placed)


def has_rewrites(model: onnx.ModelProto) -> bool:
    """Whether ``fuse_layer_norms`` replaced a chain in ``model``."""
    return any(a.name == SOURCE for n in model.graph.node for a in n.attribute)


def as_written(model: onnx.ModelProto) -> None:
    """Put back, in place, the chains ``fuse_layer_norms`` replaced in ``model`` (a copy the caller owns)."""
    if not has_rewrites(model):
        return
    nodes: list[onnx.NodeProto] = []
    for n in model.graph.node:
        source = next((a.g for a in n.attribute if a.name == SOURCE), None)
        nodes.extend(source.node if source is not None else [n])
    kept = list(nodes)
    del model.graph.node[:]
    model.graph.node.extend(kept)
