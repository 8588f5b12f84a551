"""Exporter patterns recognised at import and built as one PopLibs operation.

Exporters at opset < 17 (torch.onnx at opset 11-16, tf2onnx, many Hugging Face exports) emit layer
normalisation decomposed over the last axis::

    m = ReduceMean(x); d = Sub(x, m); s = Pow(d, 2) | Mul(d, d); v = ReduceMean(s)
    q = Sqrt(Add(v, eps)); n = Div(d, q) | Mul(d, Reciprocal(q)); [Mul(n, gamma)]; [Add(., beta)]

PopART builds the same arithmetic op by op, but popnn's layer norm (popnn::layerNormalise: one
reduceMany for mean and mean square, poplin::InverseStdDeviation, whiten and normalise in place) is what
a PopLibs user writes for it, and what ONNX LayerNormalization maps to here (operators/normalization).
``layer_norms`` finds the chains that are exactly a layer norm over the last axis (no intermediate read
elsewhere, epsilon a scalar constant, gamma and beta 1-D or scalar initializers) and plans each as a
LayerNormalization node built at the chain's first node; the other nodes of the chain are not built.
The ONNX model itself is not changed, so ``--check`` still runs the reference on the exported graph.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .operators.common import attrs
from .shapes import holds_data


@dataclass
class Fusion:
    """One recognised chain: ``node`` (a LayerNormalization) is built at ``first``; ``skip`` are the
    chain's other node indices; ``axis`` is the reduction axis as the model gives it (checked against the
    input's rank when built: only the last axis fuses)."""

    first: int
    node: onnx.NodeProto
    axis: int
    skip: set[int] = field(default_factory=set)


def _scalar(name: str, consts: dict[str, np.ndarray]) -> float | None:
    v = consts.get(name)
    if v is None or v.size != 1:
        return None
    return float(v.reshape(-1)[0])


def _constants(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """Small initializers and Constant nodes' values by name (epsilon, exponent, axes); an initializer
    whose data is not loaded (compile-only, external) is left out."""
    out: dict[str, np.ndarray] = {}
    for t in model.graph.initializer:
        if np.prod(t.dims, dtype=np.int64) <= 16 and holds_data(t):
            out[t.name] = numpy_helper.to_array(t)
    for node in model.graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            out[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    return out


def _reduce_axes(node: onnx.NodeProto, consts: dict[str, np.ndarray]) -> list[int] | None:
    a = attrs(node)
    if int(a.get("keepdims", 1)) != 1:
        return None  # the broadcast back over the last axis needs the kept dimension
    if "axes" in a:
        return [int(x) for x in a["axes"]]
    if len(node.input) > 1 and node.input[1] in consts:  # opset 18: axes as an input
        return [int(x) for x in consts[node.input[1]].reshape(-1)]
    return None  # all axes (or computed axes): not a layer norm over one axis


def layer_norms(model: onnx.ModelProto) -> dict[int, Fusion]:
    """The decomposed layer norms of ``model``'s main graph, by the index of the node each is built at."""
    nodes = list(model.graph.node)
    consts = _constants(model)
    inits = {t.name: list(t.dims) for t in model.graph.initializer}
    producer = {o: i for i, n in enumerate(nodes) for o in n.output if o}
    readers: dict[str, list[int]] = {}
    for i, n in enumerate(nodes):
        for name in dict.fromkeys(x for x in n.input if x):
            readers.setdefault(name, []).append(i)
    pinned = {v.name for v in model.graph.output}  # a graph output is read outside the chain
    for n in nodes:
        for a in n.attribute:
            for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                pinned |= {x for sn in sub.node for x in sn.input}

    def only_reader(value: str, op_types: tuple[str, ...]) -> int | None:
        """The single node reading ``value`` when it is one of ``op_types`` (else None)."""
        r = readers.get(value, [])
        if value in pinned or len(r) != 1 or nodes[r[0]].op_type not in op_types:
            return None
        return r[0]

    def other(node: onnx.NodeProto, value: str) -> str | None:
        """The input of a two-input node that is not ``value`` (None if both or neither are)."""
        ins = list(node.input)
        if len(ins) != 2 or Counter(ins)[value] != 1:
            return None
        return ins[1] if ins[0] == value else ins[0]

    def affine(value: str) -> str | None:
        """A 1-D or scalar initializer (gamma or beta: the handler broadcasts it over the last axis)."""
        return value if value in inits and len(inits[value]) <= 1 else None

    found: dict[int, Fusion] = {}
    for i0, mean_node in enumerate(nodes):
        if mean_node.op_type != "ReduceMean":
            continue
        axes = _reduce_axes(mean_node, consts)
        if axes is None or len(axes) != 1:
            continue
        x, m = mean_node.input[0], mean_node.output[0]
        i_sub = only_reader(m, ("Sub",))
        if i_sub is None or list(nodes[i_sub].input) != [x, m]:
            continue
        d = nodes[i_sub].output[0]
        r_d = readers.get(d, [])
        if d in pinned or len(r_d) != 2:
            continue
        sq = [j for j in r_d if _is_square(nodes[j], d, consts)]
        if len(sq) != 1:
            continue
        i_sq, i_scale = sq[0], next(j for j in r_d if j != sq[0])
        i_var = only_reader(nodes[i_sq].output[0], ("ReduceMean",))
        if i_var is None or _reduce_axes(nodes[i_var], consts) != axes:
            continue
        i_add = only_reader(nodes[i_var].output[0], ("Add",))
        eps_name = None if i_add is None else other(nodes[i_add], nodes[i_var].output[0])
        eps = None if eps_name is None else _scalar(eps_name, consts)
        if i_add is None or eps is None:
            continue
        i_sqrt = only_reader(nodes[i_add].output[0], ("Sqrt",))
        if i_sqrt is None:
            continue
        q = nodes[i_sqrt].output[0]
        chain = [i0, i_sub, i_sq, i_var, i_add, i_sqrt]
        scale = nodes[i_scale]
        if scale.op_type == "Div" and list(scale.input) == [d, q]:
            if only_reader(q, ("Div",)) is None:
                continue
        elif scale.op_type == "Mul":
            i_rec = only_reader(q, ("Reciprocal",))
            if i_rec is None or other(scale, d) != nodes[i_rec].output[0]:
                continue
            if only_reader(nodes[i_rec].output[0], ("Mul",)) is None:
                continue
            chain.append(i_rec)
        else:
            continue
        chain.append(i_scale)
        y, gamma, beta = scale.output[0], "", ""
        i_g = only_reader(y, ("Mul",))
        if i_g is not None and (g := affine(other(nodes[i_g], y) or "")):
            gamma, y = g, nodes[i_g].output[0]
            chain.append(i_g)
        i_b = only_reader(y, ("Add",))
        if i_b is not None and (bt := affine(other(nodes[i_b], y) or "")):
            beta, y = bt, nodes[i_b].output[0]
            chain.append(i_b)
        if any(producer.get(v, -1) > i0 for v in (gamma, beta) if v):
            continue  # gamma and beta must exist where the fused node is built
        if beta and not gamma:
            continue  # a shift without a scale: not an exporter's pattern
        inputs = [x, gamma, beta]  # "" for an absent scale or shift: the handler then applies none
        name = (nodes[chain[-1]].name or f"LayerNorm_{i0}") + "/fused"
        ln = helper.make_node("LayerNormalization", inputs, [y], name=name, axis=axes[0], epsilon=eps)
        found[i0] = Fusion(i0, ln, axes[0], set(chain[1:]))
    return found


def _is_square(node: onnx.NodeProto, d: str, consts: dict[str, np.ndarray]) -> bool:
    if node.op_type == "Mul":
        return list(node.input) == [d, d]
    if node.op_type == "Pow" and len(node.input) == 2 and node.input[0] == d:
        return _scalar(node.input[1], consts) == 2.0
    return False
