"""Building a simulator graph from an ONNX graph: values, weights, host streams, constant folding.

Every ONNX value is either a host array (initializers, Constant outputs and anything computed only
from them: folded at import, as PopART's constant folding does) or a device tensor. Host arrays
that a device op needs become weights (variables written by the weights-to-device program, as
PopART's WeightsFromHost) or, by option and for small values, graph constants. Each ONNX node on
the device runs inside a debug context (layer "onnx", name = node name, op type = ONNX op type)
that parents the contexts the operations library opens.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from profiler import ops
from profiler.chip import cost_model
from profiler.chip.dtypes import as_dtype
from profiler.chip.targets import Target
from profiler.host.allocator import heap_only
from profiler.multi_ipu import sharding
from profiler.ops.conv import WeightStorage
from profiler.ops.core import default_linear_tiles, linear_tiles
from profiler.ops.elementwise import apply_map
from profiler.ops.matmul import DEFAULT_AVAILABLE_MEMORY_PROPORTION
from profiler.ops.poplibs_codelets import map_codelet
from profiler.poplar.graph import Graph
from profiler.poplar.programs import Copy
from profiler.poplar.programs import Sequence as Prog
from profiler.poplar.tensor import Tensor
from report_format.vocabulary import Layer

from .model import FrontendError, UnsupportedError, opset_version, printable
from .outline import build_repeat, find_repeat

LAYER = Layer.ONNX
WEIGHT_STREAM_PREFIX = "weights/"
# Host values up to this many elements become graph constants rather than weights (scalars,
# broadcast biases of elementwise ops), as PopART keeps small constants in the graph.
SMALL_CONSTANT = 16

Value = np.ndarray | Tensor


class Unsupported(Exception):
    """Raised by an operator handler for an attribute or input it cannot take (the reason)."""


@dataclass
class IOSpec:
    """A model input or output: ONNX name, shape, the host dtype the user sees and the device one."""

    name: str
    shape: tuple[int, ...]
    host_dtype: np.dtype
    device_dtype: np.dtype


@dataclass
class ImportedModel:
    """A model built on a graph: programs[0] uploads the weights, programs[1] runs inference."""

    graph: Graph
    programs: list[Prog]
    inputs: list[IOSpec]
    outputs: list[IOSpec]
    weights: dict[str, np.ndarray]  # weight stream name -> value (device dtype)
    host_outputs: dict[str, np.ndarray]  # outputs folded at import (no device work)
    batch_size: int
    opset: int
    name: str
    nodes: int = 0
    folded_nodes: int = 0
    info: dict[str, Any] = field(default_factory=dict)
    # the model as imported (batch override and rewritten shape constants applied): what a
    # reference runtime must run to check the simulated results
    onnx_model: onnx.ModelProto | None = None


def device_dtype(dt: np.dtype, half: bool) -> np.dtype:
    """The device element type for a host one: no 64-bit types on the IPU (as PopART: int64 -> int32,
    double -> float); ``half`` converts float to float16."""
    dt = np.dtype(dt)
    if dt.kind == "f":
        return np.dtype(np.float16) if half or dt == np.float16 else np.dtype(np.float32)
    if dt.kind == "i" and dt != np.int32:  # int8/int16 widen (their popops costs are not modelled)
        return np.dtype(np.int32)
    if dt.kind == "u" and dt != np.uint32:
        return np.dtype(np.uint32)
    try:
        return as_dtype(dt)
    except ValueError:
        raise Unsupported(f"element type {dt.name}") from None


def _elem_np_dtype(elem_type: int) -> np.dtype:
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))
    except Exception:
        raise Unsupported(f"element type {onnx.TensorProto.DataType.Name(elem_type)}") from None


@dataclass
class CreatedWeight:
    """A weight variable ``device()`` made from a host array (by id), converted to ``like`` if given,
    and the weights-to-device copy that fills it."""

    host_id: int
    like: np.dtype | None
    tensor: Tensor
    upload: Copy
    value: np.ndarray | None = None  # the host array (kept alive by the builder)
    stored: Tensor | None = None  # outlined: the block's own copy (``tensor`` is the body's working copy)


class Builder:
    """Holds the values of an ONNX graph while its nodes are built onto ``graph``."""

    def __init__(
        self, graph: Graph, prog: Prog, weights_prog: Prog, opset: int, half: bool, weights: str,
        partials: str = "float32", available_memory_proportion: float = DEFAULT_AVAILABLE_MEMORY_PROPORTION,
    ) -> None:  # fmt: skip
        self.graph, self.prog, self.weights_prog = graph, prog, weights_prog
        self.opset, self.half, self.weights_mode = opset, half, weights
        self.partials = partials  # matmuls' and convolutions' partials type (PopLibs' partialsType)
        # the share of a tile their plans may take for temporaries (PopLibs' availableMemoryProportion)
        self.amp = available_memory_proportion
        self.values: dict[str, Value] = {}
        self.names: dict[int, str] = {}  # id of a host value -> its ONNX value name
        self._used: set[str] = set()
        self._next_tile = 0
        self.weights: dict[str, np.ndarray] = {}
        self._materialized: dict[tuple[int, str | None], Tensor] = {}
        self._host_keep: list[np.ndarray] = []  # keeps ids in _materialized valid
        self._on_ipu: dict[tuple[int, int], tuple[Tensor, Tensor]] = {}  # (id of a tensor, IPU) -> (it, its copy)
        self.created_weights: list[CreatedWeight] = []  # weight variables, in the order device() made them
        self.overflowed: list[str] = []  # host tensors with finite values the device type holds as +-inf

    # -- values ------------------------------------------------------------------------------
    def device(
        self, v: Value, name: str = "const", like: np.dtype | None = None,
        mapper: Callable[[Tensor], bool] | None = None, storage: WeightStorage | None = None,
    ) -> Tensor:  # fmt: skip
        """``v`` as a device tensor (host arrays become a weight or a constant once). ``mapper(t)``
        maps a new one for the op that uses it (PopART creates weights laid out for their matmul or
        convolution) and says whether it did; else it is spread linearly. ``storage``: how a new
        one is stored (``v``'s own order when None); the tensor is ``v``-shaped."""
        if isinstance(v, Tensor):
            return v
        key = (id(v), None if like is None else np.dtype(like).name)
        if key in self._materialized:
            return self._materialized[key]
        # A value beyond a narrower type's range becomes +-inf, as an IEEE cast (and ONNX Cast) makes
        # it: a float32 mask constant (-1e9, or float32's lowest) is -inf in float16, which the softmax
        # after it takes as the mask it is. A weight that overflows is likely a fault, so each tensor
        # with a value that did is named in ``overflowed`` (the import's info) rather than warned about
        # element by element.
        with np.errstate(over="ignore"):
            host = np.asarray(v)
            arr = host if like is None else host.astype(like)
            if arr.size == 0:
                raise Unsupported("empty tensors")
            dt = device_dtype(arr.dtype, self.half)
            data = arr.astype(dt)
        if data.dtype.kind == "f" and host.dtype.kind == "f" and data.itemsize < host.itemsize:
            inf = np.isinf(data)
            if inf.any() and (inf & np.isfinite(host)).any():
                self.overflowed.append(self.names.get(id(v), name))
        g = self.graph
        name = self.names.get(id(v), name)
        shape, view = (list(arr.shape), lambda t: t) if storage is None else (storage.shape(arr.shape), storage.view)
        if self.weights_mode == "variables" and arr.size > SMALL_CONSTANT:
            name = self._unique(name)
            t = view(g.add_variable(dt, shape, name))
            if mapper is None or not mapper(t):
                g.set_tile_mapping(t, self._spread(t))
            upload = self._upload(t, name, data)
            self.created_weights.append(CreatedWeight(id(v), like, t, upload, v))
        else:
            t = view(g.add_constant(dt, shape, data if storage is None else storage.stored(data), name=name))
            if mapper is None or not mapper(t):
                g.set_tile_mapping(t, self._spread(t))
        self._materialized[key] = t
        self._host_keep.append(v)  # keeps id(v) unique while the builder lives
        return t

    def weight_like(self, like: Tensor, v: np.ndarray, dtype: np.dtype | None, name: str) -> Tensor:
        """A weight variable holding host ``v`` (converted to ``dtype`` if given), laid out and mapped
        as ``like`` (a weight variable), uploaded by the weights-to-device program."""
        arr = np.asarray(v) if dtype is None else np.asarray(v).astype(dtype)
        dt = device_dtype(arr.dtype, self.half)
        name = self._unique(self.names.get(id(v), name))
        t = self.graph.clone(like, name)
        if t is None:
            raise FrontendError(f"weight {name!r}: cannot be laid out as {like!r}")
        self._upload(t, name, arr.astype(dt))
        self._host_keep.append(v)
        return t

    def _upload(self, t: Tensor, name: str, data: np.ndarray) -> Copy:
        """Make weight ``t`` (``data``-shaped) host-writable as ``name`` and filled by the
        weights-to-device program from its own stream; the upload copy."""
        g, stream = self.graph, WEIGHT_STREAM_PREFIX + name
        g.create_host_write(name, t)
        upload = Copy(g.add_host_to_device_fifo(stream, data.dtype, list(data.shape)), t, name=stream)
        self.weights_prog.add(upload)
        self.weights[stream] = np.ascontiguousarray(data)
        return upload

    def _spread(self, t: Tensor) -> np.ndarray:
        """Linear mapping with poputil::mapTensorLinearly's defaults, starting where the previous
        weight or constant ended, so that the many small ones do not all start on tile 0 (which would
        run out of memory first) - as PopART's LinearMapper offsets them."""
        tiles = self.graph.target.num_tiles
        mapping = default_linear_tiles(t.numel(), t.dtype.itemsize, tiles, start=self._next_tile)
        used = int(mapping[-1] - self._next_tile) % tiles + 1  # consecutive tiles from the start
        self._next_tile = (self._next_tile + used) % tiles
        return mapping

    def to_ipu(self, t: Tensor, ipu: int) -> Tensor:
        """``t`` on ``ipu``: itself if it is held there, else a copy laid out as it is, on that IPU's
        tiles (made once per tensor and IPU). The copy moves each element over the IPU-Links once,
        where an op reading ``t`` remotely would receive it on every tile that reads it."""
        g = self.graph
        tiles = g.tile_of(t)
        tpi = g.target.tiles_per_ipu
        if tiles.size == 0 or bool((tiles // tpi == ipu).all()):
            return t
        key = (id(t), ipu)
        if key not in self._on_ipu:
            with g.virtual_graph(ipu):
                copy = g.add_variable(t.dtype, t.shape, f"{self.names.get(id(t), 'value')}/ipu{ipu}")
                g.set_tile_mapping(copy, tiles % tpi)
            self.prog.add(Copy(t, copy, name=f"IpuCopy to IPU {ipu}"))
            self._on_ipu[key] = (t, copy)  # holds t: its id stays unique while the builder lives
        return self._on_ipu[key][1]

    def _unique(self, name: str) -> str:
        base, k = name, 1
        while name in self._used:
            k += 1
            name = f"{base}#{k}"
        self._used.add(name)
        return name

    def host(self, name: str, value: np.ndarray) -> np.ndarray:
        """Record a host value under ``name`` (the weight it becomes on the device is named after it)."""
        self.names[id(value)] = name
        self._host_keep.append(value)
        return value

    # -- elementwise helpers -------------------------------------------------------------------
    def map(
        self,
        name: str,
        fn: Callable[..., np.ndarray],
        inputs: Sequence[Value],
        cost: tuple[cost_model.CostOp, ...],
        out_dtype: object = None,
        **params: Any,
    ) -> Tensor:
        """``fn`` elementwise over ``inputs`` (numpy broadcasting) as one compute set of MultiVertices."""
        ts = [self.device(x) for x in inputs]
        ts = [t.reshape(1) if t.rank == 0 else t for t in ts]
        shape = np.broadcast_shapes(*(x.shape for x in inputs))
        codelet = map_codelet(f"popops::{name}", fn, len(ts), cost)
        out = apply_map(self.graph, codelet, ts, self.prog, name, out_dtype=out_dtype, **params)
        return out.reshape(shape)

    def binary(self, name: str, a: Value, b: Value) -> Tensor:
        """An ops.binary op with host operands made device tensors of the other operand's type."""
        ta, tb = self._pair(a, b)
        shape = np.broadcast_shapes(ta.shape, tb.shape)
        if ta.dtype.kind != "f" and name in ("div", "pow"):
            return self.map(name.capitalize(), _INT_BINARY[name], [ta, tb], (cost_model.binary("multiply"),))
        out = ops.binary(self.graph, name, _nd(ta), _nd(tb), self.prog, debug_name=name)
        return out.reshape(shape)

    def _pair(self, a: Value, b: Value) -> tuple[Tensor, Tensor]:
        if isinstance(a, Tensor) and not isinstance(b, Tensor):
            return a, self.device(b, like=a.dtype) if np.asarray(b).dtype != a.dtype else self.device(b)
        if isinstance(b, Tensor) and not isinstance(a, Tensor):
            return (self.device(a, like=b.dtype) if np.asarray(a).dtype != b.dtype else self.device(a)), b
        ta, tb = self.device(a), self.device(b)
        if ta.dtype != tb.dtype:
            raise Unsupported(f"mixed operand types {ta.dtype.name} and {tb.dtype.name}")
        return ta, tb

    def unary(self, name: str, x: Value) -> Tensor:
        t = self.device(x)
        return ops.unary(self.graph, name, _nd(t), self.prog, debug_name=name).reshape(t.shape)

    def cast(self, x: Value, dtype: np.dtype) -> Tensor:
        t = self.device(x)
        if t.dtype == dtype:
            return t
        return ops.cast(self.graph, _nd(t), dtype, self.prog).reshape(t.shape)


def _nd(t: Tensor) -> Tensor:
    """0-d device tensors as [1] (the ops work on element lists)."""
    return t.reshape(1) if t.rank == 0 else t


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    safe = np.where(b == 0, 1, b)
    return np.trunc(a / safe)


def _int_pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.power(a.astype(np.float64), b.astype(np.float64))


_INT_BINARY = {"div": _int_div, "pow": _int_pow}


# -- import --------------------------------------------------------------------------------------
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


def _first_line(exc: BaseException) -> str:
    for line in str(exc).splitlines():
        if line.strip():
            return line.strip()
    return ""


def node_error(name: str, op_type: str, opset: int, exc: BaseException) -> FrontendError:
    """One line naming the node, its operator and opset, and what went wrong (never a traceback)."""
    what = _first_line(exc)
    kind = type(exc).__name__
    if not isinstance(exc, (ops.OpError, ValueError, IndexError)) or not what:
        what = f"{kind}: {what}" if what else kind
    return FrontendError(f"node {printable(name)!r} ({printable(op_type)}, opset {opset}): {printable(what, 200)}")


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
            if d.HasField("dim_value") and d.dim_value >= 0:  # 0: an empty input (a host value, see below)
                dims.append(d.dim_value)
            elif i == 0:
                dims.append(1)  # a symbolic batch dimension defaults to 1 (override with batch=)
            else:
                raise FrontendError(
                    f"input {vi.name!r}: dimension {i} is symbolic ({d.dim_param or '?'}); give the model fixed shapes"
                )
        host = _elem_np_dtype(tt.elem_type)
        specs.append(IOSpec(vi.name, tuple(dims), host, device_dtype(host, half)))
    return specs


def _on_ipu(g: Graph, ipu: int | None) -> contextlib.AbstractContextManager[Any]:
    """The node's virtual graph (one IPU of a sharded model), or nothing on one IPU."""
    return contextlib.nullcontext() if ipu is None else g.virtual_graph(ipu)


def check_supported(model: onnx.ModelProto, handlers: dict[str, Any]) -> None:
    """UnsupportedError listing every node whose operator has no handler (all at once)."""
    bad = [
        (n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}", n.name or f"#{i}", "")
        for i, n in enumerate(model.graph.node)
        if n.domain not in ("", "ai.onnx") or n.op_type not in handlers
    ]
    if bad:
        raise UnsupportedError(bad, opset_version(model))


def import_model(
    model: onnx.ModelProto,
    target: Target,
    batch_size: int | None = None,
    dtype: str = "float32",
    weights: str = "variables",
    progress: Callable[[int, int], None] | None = None,
    split: str = "memory",
    partials: str = "float32",
    available_memory_proportion: float = DEFAULT_AVAILABLE_MEMORY_PROPORTION,
    outline: bool = False,
) -> ImportedModel:
    """Build ``model`` (already loaded and checked) on a new graph for ``target``;
    ``progress(done, total)`` after each node; on several IPUs ``split`` says what the automatic
    split balances (profiler.multi_ipu.sharding: "memory" or "compute"). ``partials`` is the type matmuls and
    convolutions accumulate partial sums in: float32 (PopLibs' and PopART's default) or float16
    (what ByteMLPerf's IPU backend compiles with through PopRT). ``available_memory_proportion`` is
    the share of a tile's memory their plans may take for temporaries (PopLibs' and PopART's
    availableMemoryProportion, default 0.6; lower it when a model runs out of tile memory, as
    ByteMLPerf's BERT on C600 runs at 0.4). ``outline``: build the longest run of identical blocks of
    nodes (a transformer's layers) once, as a function each block calls with copies in and out
    (PopART's outlining; profiler.frontends.onnx.outline); one IPU, weights as variables. Off by
    default: PopART outlines smaller pieces, weighing what the copies cost. Every failure is a
    FrontendError (one line; nodes are named with their operator and opset) or a HostMemoryError,
    never another exception."""
    try:
        with heap_only():  # the graph's large temporaries reused, not faulted in afresh (profiler.host.allocator)
            return _import_model(
                model, target, batch_size, dtype, weights, progress, split, partials, available_memory_proportion,
                outline,
            )  # fmt: skip
    except (FrontendError, MemoryError):
        raise
    except Exception as exc:  # outside any node (batch tracing, inputs, outputs): still one line
        what = _first_line(exc)
        raise FrontendError(
            f"model {model.graph.name!r}: import failed: {type(exc).__name__}{': ' + what if what else ''}"
        ) from None


def _import_model(
    model: onnx.ModelProto,
    target: Target,
    batch_size: int | None,
    dtype: str,
    weights: str,
    progress: Callable[[int, int], None] | None,
    split: str = "memory",
    partials: str = "float32",
    available_memory_proportion: float = DEFAULT_AVAILABLE_MEMORY_PROPORTION,
    outline: bool = False,
) -> ImportedModel:
    from .model import override_batch
    from .operators import HANDLERS

    if dtype not in ("float32", "float16"):
        raise FrontendError(f"dtype must be float32 or float16, got {dtype!r}")
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
    check_supported(model, HANDLERS)
    model = override_batch(model, batch_size)
    half = dtype == "float16"
    opset = opset_version(model)
    g = Graph(target)
    weights_prog, prog = Prog(name="WeightsFromHost"), Prog(name="Inference")
    b = Builder(g, prog, weights_prog, opset, half, weights, partials, available_memory_proportion)
    # several IPUs: each node on its IPU (manual __ipu_number attributes, else balanced by ``split``)
    sharding.check_split(split)
    costs = None
    if split == "compute" and g.target.num_ipus > 1 and sharding.manual_ipus(model) is None:
        from .split import node_cycles  # the memory split, compiled: each node's simulated cycles

        costs = node_cycles(
            _import_model(
                model, target, batch_size, dtype, weights, None, "memory", partials, available_memory_proportion
            )
        )
    ipus = (
        sharding.assign_ipus(model, g.target.num_ipus, costs) if g.target.num_ipus > 1 else None
    )  # one replica's IPUs
    try:
        inputs = _input_specs(model, half)
    except Unsupported as exc:
        raise UnsupportedError([("(graph input)", "model inputs", str(exc))]) from None
    for t in model.graph.initializer:
        try:
            b.values[t.name] = b.host(t.name, numpy_helper.to_array(t))
        except (ValueError, TypeError, KeyError, IndexError) as exc:  # dims that do not match its data, ...
            raise FrontendError(f"initializer {printable(t.name)!r}: {printable(_first_line(exc), 200)}") from None
    for spec in inputs:
        if 0 in spec.shape:  # no elements, so no data: a host value, and nodes on it fold on the host
            b.values[spec.name] = b.host(spec.name, np.zeros(spec.shape, spec.host_dtype))
            continue
        with _on_ipu(g, ipus[0] if ipus else None):  # inputs arrive on the first node's IPU
            x = g.add_variable(spec.device_dtype, spec.shape, spec.name)
            g.set_tile_mapping(x, linear_tiles(x.numel(), g.target.num_tiles))
        prog.add(Copy(g.add_host_to_device_fifo(spec.name, spec.device_dtype, list(spec.shape)), x, name=spec.name))
        b.values[spec.name] = x
    folded = 0

    def build_node(i: int) -> tuple[list[Any], bool]:
        """Node ``i`` folded on the host or built on the device (its outputs into ``b.values``):
        (its arguments, whether they were all host values)."""
        nonlocal folded
        node = model.graph.node[i]
        name = node.name or f"{node.op_type}_{i}"
        args = [b.values.get(n) if n else None for n in node.input]
        if ipus:  # inputs held on another IPU cross once, by an inter-IPU copy (PopART's IpuCopy)
            args = [b.to_ipu(a, ipus[i]) if isinstance(a, Tensor) else a for a in args]
        missing = [n for n, a in zip(node.input, args, strict=True) if n and a is None]
        if missing:
            raise FrontendError(f"node {name!r} ({node.op_type}): input(s) {missing} are not defined")
        on_host = all(a is None or isinstance(a, np.ndarray) for a in args)
        try:
            empty = _empty_outputs(node, args, opset)
            if empty is not None:  # an empty input whose outputs are all empty: nothing to compute
                outs: list[Value | None] = list(empty)
                folded += 1
                on_host = True
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
                with _on_ipu(g, ipus[i] if ipus else None), g.debug_context(name, op_type=node.op_type, layer=LAYER):
                    outs = HANDLERS[node.op_type](b, node, args)
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
        return args, on_host

    n_nodes = len(model.graph.node)
    rep = find_repeat(model, SMALL_CONSTANT) if outline else None
    i = 0
    while i < n_nodes:
        if rep is not None and i == rep.start:
            build_repeat(b, model, rep, build_node, progress)
            i = rep.end
            continue
        build_node(i)
        i += 1
        if progress is not None:
            progress(i, n_nodes)
    outputs, host_outputs = [], {}
    for vi in model.graph.output:
        v = b.values.get(vi.name)
        if v is None:
            raise FrontendError(f"model output {printable(vi.name)!r} is not computed by any node")
        host = _elem_np_dtype(vi.type.tensor_type.elem_type)
        if isinstance(v, Tensor):
            stream = g.add_device_to_host_fifo(vi.name, v.dtype, list(v.shape))
            prog.add(Copy(v, stream, name=vi.name))
            outputs.append(IOSpec(vi.name, v.shape, host, v.dtype))
        else:
            host_outputs[vi.name] = np.asarray(v).astype(host)
            outputs.append(IOSpec(vi.name, np.shape(v), host, host))
    batch = inputs[0].shape[0] if inputs and inputs[0].shape else 1
    return ImportedModel(g, [weights_prog, prog], inputs, outputs, b.weights, host_outputs, batch, opset,
                         model.graph.name or "onnx", len(model.graph.node), folded, onnx_model=model,
                         info={"node_ipus": ipus or [0] * len(model.graph.node),
                               "overflowed": sorted(set(b.overflowed))})  # fmt: skip
