"""Importing an ONNX model: each node folded on the host (constant folding, onnx.reference) or built
on the device by its operator handler, on its IPU, inside its debug context; the model's inputs and
outputs as host streams (``import_model``)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from profiler import ops
from profiler.chip.dtypes import is_float8
from profiler.chip.targets import Target
from profiler.compiler.pace import Pace, with_work
from profiler.host.allocator import heap_only
from profiler.multi_ipu import sharding
from profiler.ops.core import linear_tiles
from profiler.ops.matmul import DEFAULT_AVAILABLE_MEMORY_PROPORTION
from profiler.poplar.graph import Graph
from profiler.poplar.programs import Copy
from profiler.poplar.programs import Sequence as Prog
from profiler.poplar.shape_only import astype, is_placeholder
from profiler.poplar.tensor import Tensor
from report_format.text import printable

from . import fusion
from .builder import (
    FP8_MODEL_TYPES,
    INPUT_OP,
    LAYER,
    OUTPUT_OP,
    SMALL_CONSTANT,
    Builder,
    ImportedModel,
    IOSpec,
    Value,
    device_dtype,
    elem_np_dtype,
)
from .errors import FrontendError, Unsupported, UnsupportedError
from .limits import check_output_size
from .model import check_supported, opset_version, override_batch
from .operators import HANDLERS
from .outline import build_repeat, find_repeat
from .serialize import serialize_large_matmuls
from .shapes import fold_shapes, holds_data, keeps_value, shape_of
from .split import node_cycles


def _fold(node: onnx.NodeProto, inputs: list[Any], opset: int) -> list[np.ndarray]:
    """Run one node on the host with onnx.reference (constant folding), with the semantics of the
    model's declared opset: the node goes into a one-node graph evaluated under ``opset`` (a bare
    NodeProto is evaluated with the newest opset, whose Unsqueeze/Squeeze/ReduceX take axes as an
    input, not the attribute that opset 7-12 exports carry)."""
    from onnx.reference import ReferenceEvaluator

    feeds = {name: np.asarray(v) for name, v in zip(node.input, inputs, strict=True) if name}
    vis = [
        helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(v.dtype), None) for name, v in feeds.items()
    ]
    outs = [helper.make_empty_tensor_value_info(o) for o in node.output if o]
    graph = helper.make_graph([node], "fold", vis, outs)
    ev = ReferenceEvaluator(graph, opsets={"": opset})
    with np.errstate(all="ignore"):
        results = ev.run(None, feeds)
    by_name = dict(zip([o for o in node.output if o], results, strict=True))
    return [np.asarray(by_name[o]) if o else None for o in node.output]  # type: ignore[misc]


def _empty_outputs(node: onnx.NodeProto, args: list[Any], opset: int) -> list[np.ndarray] | None:
    """A node with an empty input (a dimension of 0) and device inputs: its outputs when they are all
    empty too (then they hold no data and are exact as host values), else None. The node runs on the
    host with zeros standing in for the device inputs: only the output shapes are used."""
    if not any(a is not None and int(np.prod(_value_shape(a), dtype=np.int64)) == 0 for a in args):
        return None
    if all(a is None or isinstance(a, np.ndarray) for a in args):
        return None  # folded as usual
    if any(isinstance(a, Tensor) and a.dtype.kind in "iu" for a in args[1:]):
        return None  # may be shape-like (axes, shapes, indices): zeros would not stand in for them
    stand_in = [np.zeros(a.shape, a.dtype) if isinstance(a, Tensor) else a for a in args]
    try:
        outs = _fold(node, stand_in, opset)
    except Exception:
        return None  # the handler reports what it cannot do
    if all(o is None or o.size == 0 for o in outs):
        return outs
    return None


def _value_shape(v: Value) -> tuple[int, ...]:
    return v.shape if isinstance(v, Tensor) else np.shape(v)


def _message(exc: BaseException) -> str:
    """The first non-blank line of ``exc``'s message ("" when it has none: the callers name its type)."""
    for line in str(exc).splitlines():
        if line.strip():
            return line.strip()
    return ""


def node_error(name: str, op_type: str, opset: int, exc: BaseException) -> FrontendError:
    """One line naming the node, its operator and opset, and what went wrong (never a traceback)."""
    what = _message(exc)
    kind = type(exc).__name__
    if not isinstance(exc, (ops.OpError, ValueError, IndexError)) or not what:
        what = f"{kind}: {what}" if what else kind
    return FrontendError(f"node {printable(name)!r} ({printable(op_type)}, opset {opset}): {printable(what, 200)}")


# A graph input a Gather reads as its indices is created by the Gather (PopART GatherOpx::createInput:
# popops::createIndicesTensor), which maps it linearly with at least 32 indices a tile (graphcore/poplibs
# lib/popops/DynamicSlice.cpp minIndicesPerTile). Every tile of the table reads all of them, so spread
# one or two a tile it read a region from nearly every tile (packed BERT-base at batch 40: 1,397
# regions, 5.6 KB of exchange code on each table tile per lookup, docs/fidelity.md).
MIN_INDICES_PER_TILE = 32


def _lookup_indices(model: onnx.ModelProto) -> set[str]:
    """Names of the graph inputs some Gather reads directly as its indices."""
    return {n.input[1] for n in model.graph.node if n.op_type == "Gather" and len(n.input) > 1}


def _input_specs(model: onnx.ModelProto, half: bool) -> list[IOSpec]:
    init = {t.name for t in model.graph.initializer}
    specs = []
    for vi in model.graph.input:
        if vi.name in init:
            continue
        tt = vi.type.tensor_type
        if not vi.type.HasField("tensor_type"):
            raise FrontendError(f"input {vi.name!r}: only tensor inputs are supported")
        dims = []
        for i, d in enumerate(tt.shape.dim):
            if d.HasField("dim_value") and d.dim_value < -1:  # -1: some exporters' "dynamic", as a name
                raise FrontendError(
                    f"input {vi.name!r}: dimension {i} is {d.dim_value}; ONNX sizes are 0 or more (or a name)"
                )
            if d.HasField("dim_value") and d.dim_value >= 0:  # 0: an empty input (a host value, see below)
                dims.append(d.dim_value)
            elif i == 0:
                dims.append(1)  # a symbolic batch dimension defaults to 1 (override with batch=)
            else:
                raise FrontendError(
                    f"input {vi.name!r}: dimension {i} is symbolic ({d.dim_param or d.dim_value or '?'}); "
                    "give the model fixed shapes"
                )
        host = elem_np_dtype(tt.elem_type)
        if is_float8(host):  # FP8 weights and casts import; host data fed as FP8 is not modelled
            raise Unsupported(f"element type {host.name}")
        specs.append(IOSpec(vi.name, tuple(dims), host, device_dtype(host, half)))
    return specs


def _on_ipu(g: Graph, ipu: int | None) -> contextlib.AbstractContextManager[Any]:
    """The node's virtual graph (one IPU of a sharded model), or nothing on one IPU."""
    return contextlib.nullcontext() if ipu is None else g.virtual_graph(ipu)


def _io_buffer(g: Graph, name: str, dtype: Any, shape: tuple[int, ...], io_tiles: int) -> Tensor:
    """A stream's batch buffer on the IPU's last ``io_tiles`` tiles (its I/O tiles), spread linearly.

    One buffer a stream: under PopART's OverlapInnerLoop the I/O tiles hold the batch arriving for the next
    iteration (or the result of the last leaving) while the compute tiles work on their own copy of the
    current one (graphcore/popart docs/user_guide/overlap_io.rst: "Preload values in the previous inner loop
    iteration for the next iteration"), so each batch is held twice on the device, once on each side."""
    buf = g.add_variable(dtype, shape, f"{name}/io")
    first = g.target.tiles_per_ipu - io_tiles
    g.set_tile_mapping(buf, first + linear_tiles(buf.numel(), io_tiles))
    return buf


def _last_uses(model: onnx.ModelProto) -> dict[str, int]:
    """Each value's last reading node (its index); the graph's outputs are read past the last node."""
    last: dict[str, int] = {}
    for i, node in enumerate(model.graph.node):
        for n in node.input:
            if n:
                last[n] = i
    # a subgraph (If, Loop, Scan) may read an outer value: the node that holds it reads it
    for i, node in enumerate(model.graph.node):
        for a in node.attribute:
            for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                for n in _subgraph_reads(sub):
                    last[n] = max(last.get(n, -1), i)
    for vi in model.graph.output:
        last[vi.name] = len(model.graph.node)
    return last


def _subgraph_reads(graph: onnx.GraphProto) -> set[str]:
    reads = {n for node in graph.node for n in node.input if n}
    for node in graph.node:
        for a in node.attribute:
            for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                reads |= _subgraph_reads(sub)
    return reads


def node_pace(model: onnx.ModelProto) -> Pace:
    """An import's pace over its nodes (by index): a node like an earlier one (the same operator,
    attributes and initializer shapes: a repeated layer's) imports from the plans that one left."""
    dims = {t.name: tuple(t.dims) for t in model.graph.initializer}

    def attribute(a: onnx.AttributeProto) -> object:  # a tensor or graph by its shape, never its bytes
        if a.type == onnx.AttributeProto.TENSOR:
            return a.name, tuple(a.t.dims), a.t.data_type
        if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS, onnx.AttributeProto.TENSORS):
            return a.name, a.type
        return a.SerializeToString()

    return Pace({
        i: (n.op_type, tuple(attribute(a) for a in n.attribute), len(n.input), tuple(dims.get(x) for x in n.input))
        for i, n in enumerate(model.graph.node)
    })  # fmt: skip


def import_model(
    model: onnx.ModelProto,
    target: Target,
    batch_size: int | None = None,
    dtype: str = "float32",
    weights: str = "variables",
    progress: Callable[..., None] | None = None,
    split: str = "memory",
    partials: str = "float32",
    available_memory_proportion: float = DEFAULT_AVAILABLE_MEMORY_PROPORTION,
    outline: bool = False,
    fp8_log2_scale: int = 0,
    values: bool = True,
    io_tiles: int = 0,
) -> ImportedModel:
    """Build ``model`` (already loaded and checked) on a new graph for ``target``;
    ``progress(done, total, work)`` after each node (``work``: the fraction of the import's work done,
    ``node_pace``; None in an outlined import); on several IPUs ``split`` says what the automatic
    split balances (profiler.multi_ipu.sharding: "memory" or "compute"). ``partials`` is the type matmuls and
    convolutions accumulate partial sums in: float32 (PopLibs' and PopART's default) or float16
    (what ByteMLPerf's IPU backend compiles with through PopRT). ``available_memory_proportion`` is
    the share of a tile's memory their plans may take for temporaries (PopLibs' and PopART's
    availableMemoryProportion, default 0.6; lower it when a model runs out of tile memory, as
    ByteMLPerf's BERT on C600 runs at 0.4). ``outline``: build the longest run of identical blocks of
    nodes (a transformer's layers) once, as a function each block calls with copies in and out
    (PopART's outlining; profiler.frontends.onnx.outline); one IPU, weights as variables. Off by
    default: PopART outlines smaller pieces, weighing what the copies cost. ``fp8_log2_scale``: with
    an FP8 ``dtype``, the power of two activations are scaled by in their casts to FP8 (Builder.
    fp8_operand). ``values=False`` (a compile-only profile) loads no weight: initializers beyond
    ``VALUE_LIMIT`` elements or held outside the model file are shapes only (profiler.poplar.shape_only),
    and a node folded on the host from one of them gets its outputs' shapes by ONNX shape inference.
    ``io_tiles`` N > 0 (PopART's ``SessionOptions.numIOTiles``, PopRT's ``num_io_tiles``): the model is built on
    the IPU's other tiles (``Graph.compute_tiles``) and each input and output streams through a buffer on
    the N I/O tiles, moved to or from the compute tiles by an on-chip copy (PopART's ``IoTileCopy``); one IPU.
    Every failure is a
    FrontendError (one line; nodes are named with their operator and opset) or a HostMemoryError,
    never another exception."""
    try:
        with heap_only():  # the graph's large temporaries reused, not faulted in afresh (profiler.host.allocator)
            return _import_model(
                model, target, batch_size, dtype, weights, progress, split, partials, available_memory_proportion,
                outline, fp8_log2_scale, values, io_tiles,
            )  # fmt: skip
    except (FrontendError, MemoryError):
        raise
    except Exception as exc:  # outside any node (batch tracing, inputs, outputs): still one line
        what = _message(exc)
        raise FrontendError(
            f"model {model.graph.name!r}: import failed: {type(exc).__name__}{': ' + what if what else ''}"
        ) from None


def _import_model(
    model: onnx.ModelProto,
    target: Target,
    batch_size: int | None,
    dtype: str,
    weights: str,
    progress: Callable[..., None] | None,
    split: str = "memory",
    partials: str = "float32",
    available_memory_proportion: float = DEFAULT_AVAILABLE_MEMORY_PROPORTION,
    outline: bool = False,
    fp8_log2_scale: int = 0,
    values: bool = True,
    io_tiles: int = 0,
) -> ImportedModel:
    if dtype not in FP8_MODEL_TYPES:
        raise FrontendError(f"dtype must be one of {', '.join(FP8_MODEL_TYPES)}, got {dtype!r}")
    if partials not in ("float32", "float16"):
        raise FrontendError(f"partials must be float32 or float16, got {partials!r}")
    if not 0 < available_memory_proportion <= 1:
        raise FrontendError(f"availableMemoryProportion must be in (0, 1], got {available_memory_proportion}")
    if weights not in ("variables", "constants"):
        raise FrontendError(f"weights must be 'variables' or 'constants', got {weights!r}")
    if outline and weights != "variables":
        raise FrontendError("outline needs weights as variables: each block's own weights are copied into the body's")
    per_replica = target.num_ipus // max(target.num_replicas, 1)
    if outline and per_replica > 1:
        raise FrontendError(f"outline builds on one IPU; the model would be split over {per_replica}")
    if io_tiles and per_replica > 1:
        raise FrontendError(f"I/O tiles need the model on one IPU per replica; it would be split over {per_replica}")
    if io_tiles and not 0 < io_tiles < target.tiles_per_ipu:
        raise FrontendError(f"I/O tiles: {io_tiles} of the IPU's {target.tiles_per_ipu} tiles; give 1 to tiles - 1")
    check_supported(model, HANDLERS)
    model = override_batch(model, batch_size)
    # FP8: the matmuls' and convolutions' operands in FP8, everything else in float16 (Builder.fp8_operand)
    half, fp8 = dtype != "float32", FP8_MODEL_TYPES[dtype]
    opset = opset_version(model)
    g = Graph(target)
    weights_prog, prog = Prog(name="WeightsFromHost"), Prog(name="Inference")
    if not -32 <= fp8_log2_scale < 32:  # PopXL's range for a pow2 scale
        raise FrontendError(f"fp8 log2 scale must be in [-32, 32), got {fp8_log2_scale}")
    b = Builder(g, prog, weights_prog, opset, half, weights, partials, available_memory_proportion, fp8, fp8_log2_scale)
    # several IPUs: each node on its IPU (manual __ipu_number attributes, else balanced by ``split``);
    # a matmul larger than an IPU's share is first cut into parts the split can place apart
    sharding.check_split(split)
    model = serialize_large_matmuls(model, g.target.num_ipus, opset, in_place=True)  # the copy override_batch made
    costs = None
    if split == "compute" and g.target.num_ipus > 1 and sharding.manual_ipus(model) is None:
        # the memory split, compiled: each node's simulated cycles
        costs = node_cycles(
            _import_model(
                model,
                target,
                batch_size,
                dtype,
                weights,
                None,
                "memory",
                partials,
                available_memory_proportion,
                fp8_log2_scale=fp8_log2_scale,
                values=values,
            )
        )
    ipus = (
        sharding.assign_ipus(model, g.target.num_ipus, costs) if g.target.num_ipus > 1 else None
    )  # one replica's IPUs
    try:
        inputs = _input_specs(model, half)
    except Unsupported as exc:
        raise UnsupportedError([("(graph input)", "model inputs", str(exc))]) from None
    # I/O tiles: every input's buffer on them first, while the graph still sees the whole IPU; the model
    # itself on the compute tiles (closed again before the outputs' buffers)
    io_in = {
        s.name: _io_buffer(g, s.name, s.device_dtype, s.shape, io_tiles)
        for s in inputs
        if io_tiles and 0 not in s.shape
    }
    building = contextlib.ExitStack()
    if io_tiles:
        building.enter_context(g.compute_tiles(io_tiles))
    for t in model.graph.initializer:
        try:
            if values and not holds_data(t):  # external data not read, or dropped by a compile-only load
                raise ValueError("its data was not loaded; import it with values=False (compile-only)")
            value = numpy_helper.to_array(t) if values or keeps_value(t) else shape_of(t)
            b.values[t.name] = b.host(t.name, value)
        except (ValueError, TypeError, KeyError, IndexError) as exc:  # dims that do not match its data, ...
            raise FrontendError(f"initializer {printable(t.name)!r}: {printable(_message(exc), 200)}") from None
    lookup_indices = _lookup_indices(model)
    for spec in inputs:
        if 0 in spec.shape:  # no elements, so no data: a host value, and nodes on it fold on the host
            b.values[spec.name] = b.host(spec.name, np.zeros(spec.shape, spec.host_dtype))
            continue
        with _on_ipu(g, ipus[0] if ipus else None):  # inputs arrive on the first node's IPU
            x = g.add_variable(spec.device_dtype, spec.shape, spec.name)
            least = MIN_INDICES_PER_TILE if spec.name in lookup_indices else 1
            g.set_tile_mapping(x, linear_tiles(x.numel(), g.target.num_tiles, min_elements=least))
        with g.debug_context(spec.name, op_type=INPUT_OP, layer=LAYER):
            stream = g.add_host_to_device_fifo(spec.name, spec.device_dtype, list(spec.shape))
            if spec.name in io_in:  # host -> I/O tiles, then I/O tiles -> compute tiles (an internal exchange)
                prog.add(Copy(stream, io_in[spec.name], name=spec.name))
                prog.add(Copy(io_in[spec.name], x, name=f"{spec.name}/IoTileCopy"))
            else:
                prog.add(Copy(stream, x, name=spec.name))
        b.values[spec.name] = x
    n_nodes = len(model.graph.node)
    rep = find_repeat(model, SMALL_CONSTANT) if outline else None
    # the last node reading each value (graph outputs: past the last node), so that an elementwise node
    # may write its result into an input no later node reads (Builder.overwritable); never in an
    # outlined block, whose body runs once for every block
    last_use = _last_uses(model)
    for spec in inputs:
        given = b.values[spec.name]
        if isinstance(given, Tensor):
            b.note_value(given, n_nodes)
    folded = 0
    # decomposed layer norms built as popnn's (profiler.frontends.onnx.fusion); not inside an outlined
    # block, whose call plan reads every node's arguments
    fusions = {} if outline else fusion.layer_norms(model)
    skipped: set[int] = set()

    def build_node(i: int) -> tuple[list[Any], bool]:
        """Node ``i`` folded on the host or built on the device (its outputs into ``b.values``):
        (its arguments, whether they were all host values)."""
        nonlocal folded
        if i in skipped:
            return [], False
        node = model.graph.node[i]
        plan = fusions.get(i)
        x = b.values.get(node.input[0]) if plan is not None else None
        if plan is not None and isinstance(x, Tensor) and plan.axis in (-1, x.rank - 1):
            node = plan.node  # only over the last axis: the explicit axis is checked against x's rank here
            skipped.update(plan.skip)
        name = node.name or f"{node.op_type}_{i}"
        args = [b.values.get(n) if n else None for n in node.input]
        if ipus:  # inputs held on another IPU cross once, by an inter-IPU copy (PopART's IpuCopy)
            args = [b.to_ipu(a, ipus[i]) if isinstance(a, Tensor) else a for a in args]
        missing = [n for n, a in zip(node.input, args, strict=True) if n and a is None]
        if missing:
            raise FrontendError(f"node {name!r} ({node.op_type}): input(s) {missing} are not defined")
        on_host = all(a is None or isinstance(a, np.ndarray) for a in args)
        try:
            check_output_size(node, name, args, target, on_host)
            empty = _empty_outputs(node, args, opset)
            if empty is not None:  # an empty input whose outputs are all empty: nothing to compute
                outs: list[Value | None] = list(empty)
                folded += 1
                on_host = True
            elif on_host and any(is_placeholder(a) for a in args):  # compile-only: shapes, never values
                outs = list(fold_shapes(node, args, opset))
                folded += 1
            elif on_host:
                try:
                    outs = list(_fold(node, args, opset))
                    folded += 1
                except Exception as exc:
                    # onnx.reference lacks some old operator versions: the device handler (which
                    # follows the model's opset) computes the value instead, else the fold's error
                    try:
                        with (
                            _on_ipu(g, ipus[i] if ipus else None),
                            g.debug_context(name, op_type=node.op_type, layer=LAYER),
                        ):
                            outs = HANDLERS[node.op_type](b, node, args)
                    except Exception:
                        raise exc from None
            else:
                b.node_index = None if rep is not None and rep.start <= i < rep.end else i
                try:
                    with (
                        _on_ipu(g, ipus[i] if ipus else None),
                        g.debug_context(name, op_type=node.op_type, layer=LAYER),
                    ):
                        outs = HANDLERS[node.op_type](b, node, args)
                finally:
                    b.node_index = None
        except Unsupported as exc:
            raise UnsupportedError([(node.op_type, name, str(exc))], opset) from None
        except FrontendError:
            raise
        except MemoryError:  # HostMemoryError: one line already, the caller reports it
            raise
        except Exception as exc:  # anything else (a handler's or onnx.reference's bug) is still one line
            raise node_error(name, node.op_type, opset, exc) from None
        for out_name, v in zip(node.output, outs, strict=False):
            if out_name:
                b.values[out_name] = b.host(out_name, v) if isinstance(v, np.ndarray) else v  # type: ignore[assignment]
                if isinstance(v, Tensor):
                    b.note_value(v, last_use.get(out_name, -1))
        return args, on_host

    progress = with_work(progress)
    pace = node_pace(model) if progress is not None and rep is None else None
    i = 0
    while i < n_nodes:
        if rep is not None and i == rep.start:
            build_repeat(b, model, rep, build_node, progress)
            i = rep.end
            continue
        build_node(i)
        i += 1
        if progress is not None:
            progress(i, n_nodes, None if pace is None else pace.done(i - 1))
    building.close()  # the I/O tiles are the graph's again
    outputs, host_outputs = [], {}
    for vi in model.graph.output:
        v = b.values.get(vi.name)
        if v is None:
            raise FrontendError(f"model output {printable(vi.name)!r} is not computed by any node")
        host = elem_np_dtype(vi.type.tensor_type.elem_type)
        if isinstance(v, Tensor):
            stream = g.add_device_to_host_fifo(vi.name, v.dtype, list(v.shape))
            with g.debug_context(vi.name, op_type=OUTPUT_OP, layer=LAYER):
                if io_tiles:  # compute tiles -> I/O tiles, then to the host
                    buf = _io_buffer(g, vi.name, v.dtype, v.shape, io_tiles)
                    prog.add(Copy(v, buf, name=f"{vi.name}/IoTileCopy"))
                    v = buf
                prog.add(Copy(v, stream, name=vi.name))
            outputs.append(IOSpec(vi.name, v.shape, host, v.dtype))
        else:
            host_outputs[vi.name] = astype(np.asarray(v), host)
            outputs.append(IOSpec(vi.name, np.shape(v), host, host))
    batch = inputs[0].shape[0] if inputs and inputs[0].shape else 1
    return ImportedModel(g, [weights_prog, prog], inputs, outputs, b.weights, host_outputs, batch, opset,
                         model.graph.name or "onnx", len(model.graph.node), folded, onnx_model=model,
                         info={"node_ipus": ipus or [0] * len(model.graph.node),
                               "overflowed": sorted(set(b.overflowed))})  # fmt: skip
