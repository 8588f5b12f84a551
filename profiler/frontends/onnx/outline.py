"""Outlining: a run of identical blocks of nodes, such as a transformer's layers, built once as a
function that every block calls (``import_model(outline=True)``).

PopART can "identify and extract repeated parts of computational graph into subgraphs"
(graphcore/popart ``SessionOptions::enableOutlining``, default true). A call copies its inputs into
the subgraph's input tensors, clones of the first caller's, and copies the subgraph's outputs out
(popart ``willow/include/popart/popx/op/callx.hpp``: ``copyInput``, ``copyOutput``). So the blocks
share one body's code (exchange and control code above all), its vertex state and its temporaries;
each call pays on-tile copies of its weights and activations.

Off by default: PopART weighs what the copies cost (``enableOutliningCopyCostPruning``, default
true), and a measured PopART BERT-large profile (graphcore/popliner tests/test_popart_bert_inf.py)
keeps every layer's own vertex state (1.05 MB) and control code (1.35 MB), calling shared bodies
only for pieces such as the layer norms (its ``Call(1254)``, ``Call(1255)``). Whole-block outlining
is the bound on what sharing can save. This module finds the run (``find_repeat``) and builds it
(``build_repeat``, from the importer).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from profiler.poplar.graph import Graph
from profiler.poplar.layout import Affine
from profiler.poplar.programs import Call, Copy, WriteUndef
from profiler.poplar.programs import Sequence as Prog
from profiler.poplar.tensor import Tensor
from report_format.vocabulary import ControlType

from .builder import LAYER, Builder, CreatedWeight, Value
from .operators import HANDLERS

# a block must hold at least one of these: outlining a run of cheap elementwise nodes saves little
# code and costs a copy per input (PopART weighs each op's subgraph value; matmuls weigh most)
HEAVY_OPS = frozenset({"MatMul", "Gemm", "Conv", "ConvTranspose"})
MAX_INPUTS = 8  # inputs compared per node; more are compared as a hash of their names


@dataclass(frozen=True)
class Repeat:
    """``count`` consecutive blocks of ``period`` nodes each, the first starting at node ``start``."""

    start: int
    period: int
    count: int

    @property
    def end(self) -> int:
        return self.start + self.period * self.count

    def block(self, j: int) -> range:
        first = self.start + j * self.period
        return range(first, first + self.period)


EMPTY, ACTIVATION, INITIALIZER = 0, 1, 2


@dataclass
class _Inputs:
    """Per node: its own signature (type, attributes, arity) as an id; per input slot, its kind and,
    for a node's output, the producer (``source``, node x 16 + output) and how far back it is
    (``distance``); for an initializer, an id of its class (a weight by shape and type, a small
    constant by value)."""

    local: np.ndarray
    kind: np.ndarray
    source: np.ndarray
    distance: np.ndarray
    init: np.ndarray


def _inputs(model: onnx.ModelProto, small: int) -> _Inputs:
    nodes = model.graph.node
    n = len(nodes)
    producer: dict[str, tuple[int, int]] = {}
    for i, nd in enumerate(nodes):
        for o, name in enumerate(nd.output):
            if name:
                producer[name] = (i, o)
    inits = {t.name: t for t in model.graph.initializer}
    ids: dict[object, int] = {}

    def code(key: object) -> int:
        return ids.setdefault(key, len(ids))

    local = np.empty(n, dtype=np.int64)
    kind = np.full((n, MAX_INPUTS), EMPTY, dtype=np.int8)
    source = np.full((n, MAX_INPUTS), -1, dtype=np.int64)
    distance = np.full((n, MAX_INPUTS), -1, dtype=np.int64)
    init = np.full((n, MAX_INPUTS), -1, dtype=np.int64)
    floats = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE)
    for i, nd in enumerate(nodes):
        attrs = tuple(sorted((a.name, a.SerializeToString()) for a in nd.attribute))
        local[i] = code(("node", nd.op_type, nd.domain, attrs, len(nd.input), len(nd.output)))
        if len(nd.input) > MAX_INPUTS:  # rare: the rest compared by name
            local[i] = code((int(local[i]), tuple(nd.input[MAX_INPUTS:])))
        for k, name in enumerate(nd.input[:MAX_INPUTS]):
            if not name:
                continue
            t = inits.get(name)
            if t is None:
                kind[i, k] = ACTIVATION
                if name in producer:
                    q, o = producer[name]
                    source[i, k], distance[i, k] = q * 16 + o, (i - q) * 16 + o
                else:  # a graph input
                    source[i, k], distance[i, k] = -2 - code(("input", name)), -2 - i
                continue
            kind[i, k] = INITIALIZER
            if t.data_type in floats and int(np.prod(t.dims)) > small:  # a weight: each block its own
                init[i, k] = code(("weight", tuple(t.dims), t.data_type))
            else:  # a constant (shapes, scalars): the blocks must hold the same value
                arr = numpy_helper.to_array(t)
                init[i, k] = code(("const", arr.shape, arr.dtype.str, arr.tobytes()))
    return _Inputs(local, kind, source, distance, init)


def _canonical(x: _Inputs, first: int, period: int, count: int) -> np.ndarray:
    """Each node of ``count`` blocks from ``first`` as its block sees it, one row per node: its
    signature, then per input slot its kind and either the producer's distance (made inside the
    block) or the initializer's class (an activation made outside is a parameter: any matches)."""
    sl = slice(first, first + period * count)
    block_start = first + (np.arange(period * count) // period) * period
    inside = (x.kind[sl] == ACTIVATION) & (x.source[sl] >= 0) & (x.source[sl] // 16 >= block_start[:, None])
    what = np.where(inside, x.distance[sl], np.where(x.kind[sl] == INITIALIZER, x.init[sl], -1))
    outside = (x.kind[sl] == ACTIVATION) & ~inside
    return np.concatenate([x.local[sl, None], x.kind[sl] + 3 * outside, what], axis=1)


def find_repeat(model: onnx.ModelProto, small: int) -> Repeat | None:
    """The run of identical consecutive blocks that saves the most nodes (each block with a matmul or
    convolution), or None. Blocks are identical when their nodes match one for one: same type and
    attributes; each input made in the block by the node the same distance back, or made outside
    it (a parameter, copied in by each call), or a weight of the same shape and type, or a constant
    of the same value. ``small``: initializers up to this many elements are constants."""
    nodes = model.graph.node
    n = len(nodes)
    if n < 4:
        return None
    x = _inputs(model, small)
    heavy = np.concatenate([[0], np.cumsum([nd.op_type in HEAVY_OPS for nd in nodes])])
    activation = x.kind == ACTIVATION
    # candidates, loosely: runs where node i matches node i + p with any two activations matching
    candidates = []
    for p in range(2, n // 2 + 1):
        same = (
            (x.kind[:-p] == x.kind[p:])
            & ((x.distance[:-p] == x.distance[p:]) | (activation[:-p] & activation[p:]))
            & (x.init[:-p] == x.init[p:])
        )
        eq = (x.local[:-p] == x.local[p:]) & same.all(axis=1)
        padded = np.concatenate([[False], eq, [False]])
        edges = np.flatnonzero(padded[1:] != padded[:-1])
        for s, e in zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True):
            if e - s >= p:
                candidates.append((p * ((e - s) // p), p, s, e))
    candidates.sort(key=lambda c: (-c[0], c[1]))
    best: tuple[int, int, int, int] | None = None  # (saved nodes, -period, -start, count)
    for bound, p, s, e in candidates:
        if best is not None and bound < best[0]:
            break
        for first in range(s, min(s + p, e)):  # every alignment of blocks in the run
            most = (e + p - first) // p
            if most < 2:
                break
            canon = _canonical(x, first, p, most).reshape(most, p, -1)
            same_as_first = (canon == canon[0]).all(axis=(1, 2))
            count = most if same_as_first.all() else int(np.argmin(same_as_first))
            if count < 2 or heavy[first + p] == heavy[first]:
                continue
            key = (p * (count - 1), -p, -first, count)
            if best is None or key > best:
                best = key
    if best is None:
        return None
    _, neg_p, neg_first, count = best
    return Repeat(-neg_first, -neg_p, count)


def _like(g: Graph, t: Tensor, name: str) -> Tensor:
    """A new variable shaped and mapped as ``t`` (a clone when ``t`` is all of one variable)."""
    c = g.clone(t, name)
    if c is None:
        c = g.add_variable(t.dtype, list(t.shape), name)
        g.set_tile_mapping(c, g.tile_of(t))
    return c


def build_repeat(
    b: Builder,
    model: onnx.ModelProto,
    rep: Repeat,
    build_node: Callable[[int], tuple[list[Any], bool]],
    progress: Callable[[int, int], None] | None = None,
) -> None:
    """Build the blocks of ``rep``: the first block's device nodes into a function's body, run on
    parameters (clones of its outside inputs and working copies of its weights), then per block the
    copies in, the call and the copies out. A block whose host values differ from the first's (a
    constant, a shape) is built inline instead, as the importer builds any node."""
    g = b.graph
    nodes = model.graph.node
    n_nodes = len(nodes)
    made_in = [{o for i in rep.block(j) for o in nodes[i].output if o} for j in range(rep.count)]
    used_outside = _used_outside(model, rep, made_in)
    first = rep.block(0)
    fname = f"outlined/{nodes[first[0]].name or nodes[first[0]].op_type}"

    # -- the body: the first block's nodes on parameters --------------------------------------
    params: dict[str, Tensor] = {}  # outside input name (first block) -> its parameter
    originals: dict[str, Value] = {}
    for i in first:
        for name in nodes[i].input:
            v = b.values.get(name) if name else None
            if isinstance(v, Tensor) and name not in made_in[0] and name not in params:
                params[name] = _like(g, v, f"{fname}/in/{name}")
                originals[name] = v
                b.values[name] = params[name]
    body = Prog(name=fname)
    outer, b.prog = b.prog, body
    weights_before = len(b.created_weights)
    vars_before = len(g.variables)
    args0: list[list[Any]] = []
    on_host0: list[bool] = []
    made0: list[_Made] = []  # what each node's build created: weights, constants
    try:
        for i in first:
            w0, v0 = len(b.created_weights), len(g.variables)
            args, on_host = build_node(i)
            args0.append(args)
            on_host0.append(on_host)
            made0.append(_Made(b.created_weights[w0:], [v for v in g.variables[v0:] if v.constant]))
    finally:
        b.prog = outer
    b.values.update(originals)
    body_outputs = [[b.values.get(o) if o else None for o in nodes[i].output] for i in first]
    working = b.created_weights[weights_before:]
    by_host: dict[int, list[CreatedWeight]] = {}
    for cw in working:
        by_host.setdefault(cw.host_id, []).append(cw)
    function = g.add_function(body, fname)
    # the body's variables (not its constants), whose values end with each call once its outputs are
    # copied out: a WriteUndef after each call says so, as Poplar's liveness finds a value dead
    # until the next call overwrites it (tilescope's liveness splits a lifetime only there)
    temporaries = list(params.values()) + [
        Tensor(g, v.id, Affine.contiguous(v.shape), v.dtype)
        for v in g.variables[vars_before:]
        if not v.constant and v.numel > 0
    ]
    for cw in working:  # the body's weights become working copies, written by each call
        var = g.variables[cw.tensor.single_variable()]  # type: ignore[index]
        handle, var.name, var.host_visible = var.name, f"{fname}/{var.name}", False
        stored = g.clone(cw.tensor, handle)
        g.create_host_write(handle, stored)
        k = next(k for k, p in enumerate(b.weights_prog.programs) if p is cw.upload)
        b.weights_prog.programs[k] = Copy(cw.upload.src, stored, name=cw.upload.name)
        cw.stored = stored

    # -- the calls ----------------------------------------------------------------------------
    for j in range(rep.count):
        block = rep.block(j)
        ins: list[tuple[Tensor, Tensor]] = []  # (source, parameter)
        weight_copies: list[tuple[Tensor, Tensor]] = []  # (stored, working)
        if j == 0:
            ins = [(originals[n], p) for n, p in params.items()]
            weight_copies = [(cw.stored, cw.tensor) for cw in working if cw.stored is not None]
        else:
            plan = _call_plan(b, model, rep, j, args0, on_host0, made0, params, by_host, build_node)
            if plan is None:  # differs from the first block: built inline
                for i in block:
                    build_node(i)
                if progress is not None:
                    progress(block[-1] + 1, n_nodes)
                continue
            ins, weight_copies = plan
        with g.debug_context(f"{fname} (call {j})", op_type=ControlType.CALL, layer=LAYER):
            for src, dst in ins:
                b.prog.add(Copy(src, dst, name=f"{fname}/copy in"))
            for src, dst in weight_copies:
                b.prog.add(Copy(src, dst, name=f"{fname}/copy weights in"))
            b.prog.add(Call(function, name=fname))
            for t, i in enumerate(block):
                for o, name in enumerate(nodes[i].output):
                    inner = body_outputs[t][o]
                    if not name:
                        continue
                    if not isinstance(inner, Tensor):  # a host value (from shapes): the same for every block
                        if j:
                            b.values[name] = inner  # type: ignore[assignment]
                        continue
                    if name in used_outside[j]:
                        out = _like(g, inner, f"{fname}/out{j}/{name}")
                        b.prog.add(Copy(inner, out, name=f"{fname}/copy out"))
                        b.values[name] = out
            b.prog.add(WriteUndef(tuple(temporaries), name=f"{fname}/end of call"))
        if progress is not None:
            progress(block[-1] + 1, n_nodes)


def _used_outside(model: onnx.ModelProto, rep: Repeat, made_in: list[set[str]]) -> list[set[str]]:
    """Per block, the values it makes that a node outside it or a graph output reads."""
    nodes = model.graph.node
    readers: dict[str, set[int]] = {}
    for i, nd in enumerate(nodes):
        for name in nd.input:
            if name:
                readers.setdefault(name, set()).add(i)
    outputs = {o.name for o in model.graph.output}
    out = []
    for j in range(rep.count):
        block = rep.block(j)
        out.append({
            name for name in made_in[j]
            if name in outputs or any(r not in block for r in readers.get(name, ()))
        })  # fmt: skip
    return out


def _call_plan(
    b: Builder,
    model: onnx.ModelProto,
    rep: Repeat,
    j: int,
    args0: list[list[Any]],
    on_host0: list[bool],
    made0: list[_Made],
    params: dict[str, Tensor],
    by_host: dict[int, list[CreatedWeight]],
    build_node: Callable[[int], tuple[list[Any], bool]],
) -> tuple[list[tuple[Tensor, Tensor]], list[tuple[Tensor, Tensor]]] | None:
    """Block ``j``'s copies in (outside inputs to parameters, its own weights to the working copies),
    after folding its host nodes; None when it does not match the first block (a host value, an
    input's shape or type differs)."""
    nodes = model.graph.node
    block = rep.block(j)
    for t, i in enumerate(block):  # host nodes first: their values are compared below
        if on_host0[t]:
            if any(isinstance(b.values.get(n), Tensor) for n in nodes[i].input if n):
                return None
            build_node(i)
    made_by_body = {o for t, i in enumerate(block) if not on_host0[t] for o in nodes[i].output if o}
    ins: dict[str, tuple[Tensor, Tensor]] = {}
    weights: dict[int, tuple[CreatedWeight, np.ndarray, str]] = {}  # its own value for each working copy
    first_names = [nodes[i].input for i in rep.block(0)]
    for t, i in enumerate(block):
        if on_host0[t]:
            continue
        derived = False  # a host value that is not itself a weight differs: rebuild to find its weights
        stand_ins: list[Any] = []
        for k, name in enumerate(nodes[i].input):
            a0 = args0[t][k]
            stand_ins.append(a0 if isinstance(a0, Tensor) or not name or name in made_by_body else b.values.get(name))
            if not name or name in made_by_body:  # absent, or the body's own value
                if (not name) != (a0 is None):
                    return None
                continue
            v = b.values.get(name)
            if isinstance(a0, Tensor):  # an outside input: copied to its parameter
                if not isinstance(v, Tensor) or v.shape != a0.shape or v.dtype != a0.dtype:
                    return None
                param = params.get(first_names[t][k])
                if param is None:  # the first block read a value made in it here
                    return None
                if ins.setdefault(first_names[t][k], (v, param))[0] is not v:
                    return None
            elif isinstance(a0, np.ndarray):
                if not isinstance(v, np.ndarray) or v.shape != a0.shape or v.dtype != a0.dtype:
                    return None
                for cw in by_host.get(id(a0), []):  # a weight: its own, copied to the working copy
                    weights.setdefault(id(cw), (cw, v, name))
                if id(a0) not in by_host and v is not a0 and not np.array_equal(v, a0):
                    derived = True
            elif a0 is not None or v is not None:
                return None
        if derived:  # e.g. a batch norm's scale and shift, computed on the host from its statistics
            rebuilt = _rebuilt_weights(b, nodes[i], stand_ins, made0[t])
            if rebuilt is None:
                return None
            for cw, value in rebuilt:
                weights[id(cw)] = (cw, value, nodes[i].name)
    stored = [(b.weight_like(cw.tensor, v, cw.like, name), cw.tensor) for cw, v, name in weights.values()]
    return list(ins.values()), stored


@dataclass
class _Made:
    """What building one node of the first block created: weight variables and constants."""

    weights: list[CreatedWeight]
    constants: list[Any]  # profiler.poplar.graph.Variable


def _rebuilt_weights(
    b: Builder, node: onnx.NodeProto, args: list[Any], made: _Made
) -> list[tuple[CreatedWeight, np.ndarray]] | None:
    """A block's own weights for a node whose host values differ from the first block's in more than
    weights (the importer computes them on the host): its handler is run again on the block's host
    values (the first block's tensors standing in for its device inputs) and everything it added to
    the graph and the builder is taken back. Each weight it made is paired, in order, with the first
    block's; None unless the same weights (shape, type) and the same constants came out."""
    g = b.graph
    lens = (len(g.variables), len(g.compute_sets), len(g.streams), len(g.debug_contexts), len(g.functions))
    keys = (set(g.host_reads), set(g.host_writes), set(b.weights), set(b._materialized), set(b._used))
    n_created, n_uploads, next_tile = len(b.created_weights), len(b.weights_prog.programs), b._next_tile
    outer, b.prog = b.prog, Prog()
    try:
        HANDLERS[node.op_type](b, node, args)
        new = b.created_weights[n_created:]
        consts = [v for v in g.variables[lens[0] :] if v.constant]
        same = (
            len(new) == len(made.weights)
            and all(n.tensor.shape == m.tensor.shape and n.tensor.dtype == m.tensor.dtype
                    for n, m in zip(new, made.weights, strict=True))
            and len(consts) == len(made.constants)
            and all(c.value is not None and m.value is not None and np.array_equal(c.value, m.value)
                    for c, m in zip(consts, made.constants, strict=True))
        )  # fmt: skip
        return [(m, n.value) for n, m in zip(new, made.weights, strict=True)] if same else None  # type: ignore[misc]
    except Exception:  # the handler refuses the stand-ins: build the block inline instead
        return None
    finally:
        b.prog = outer
        for lst, n in zip((g.variables, g.compute_sets, g.streams, g.debug_contexts, g.functions), lens, strict=True):
            del lst[n:]
        for d, old in zip((g.host_reads, g.host_writes, b.weights, b._materialized), keys[:4], strict=True):
            for k in set(d) - old:
                del d[k]
        b._used = keys[4]
        del b.created_weights[n_created:]
        del b.weights_prog.programs[n_uploads:]
        b._next_tile = next_tile
