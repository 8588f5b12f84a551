"""The Builder operator handlers build with: an ONNX graph's values, its weights and constants, and
the imported model it makes.

Every ONNX value is either a host array (initializers, Constant outputs and anything computed only
from them: folded at import, as PopART's constant folding does) or a device tensor. Host arrays
that a device op needs become weights (variables written by the weights-to-device program, as
PopART's WeightsFromHost) or, by option and for small values, graph constants. Each ONNX node on
the device runs inside a debug context (layer "onnx", name = node name, op type = ONNX op type)
that parents the contexts the operations library opens (the importer opens it: ``importer``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import helper

from profiler import ops
from profiler.chip import cost_model
from profiler.chip.dtypes import FLOAT8_E4M3, FLOAT8_E5M2, as_dtype, is_float, is_float8
from profiler.executable.convert import copy_into
from profiler.ops.conv import WeightStorage
from profiler.ops.core import default_linear_runs
from profiler.ops.elementwise import apply_map
from profiler.ops.matmul import DEFAULT_AVAILABLE_MEMORY_PROPORTION
from profiler.ops.poplibs_codelets import map_codelet
from profiler.poplar import shape_only
from profiler.poplar.graph import Graph
from profiler.poplar.programs import Copy
from profiler.poplar.programs import Sequence as Prog
from profiler.poplar.tensor import Tensor
from report_format.vocabulary import Layer

from .errors import FrontendError, Unsupported

LAYER = Layer.ONNX
WEIGHT_STREAM_PREFIX = "weights/"
# The operation types of the host transfers, as PopART's IR names its host-transfer ops
# (HostLoadOp, HostStoreOp) and the program that uploads the weights (weightsFromHost).
INPUT_OP, OUTPUT_OP, WEIGHT_UPLOAD_OP = "HostLoad", "HostStore", "WeightsFromHost"
# Host values up to this many elements become graph constants rather than weights (scalars,
# broadcast biases of elementwise ops), as PopART keeps small constants in the graph.
SMALL_CONSTANT = 16

Value = np.ndarray | Tensor


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


# The model types the importer builds in (its ``dtype`` option) -> the FP8 format of the matmuls' and
# convolutions' operands, None for none. "float8" is e4m3 for weights and activations alike, Graphcore's
# recommendation for the forward pass (Noune et al. 2022, arXiv 2206.02915: 1.4.3 for activations and
# weights, 1.5.2 for gradients); "float8_e5m2" is there to compare the wider-range format.
FP8_MODEL_TYPES: dict[str, np.dtype | None] = {
    "float32": None,
    "float16": None,
    "float8": FLOAT8_E4M3,
    "float8_e5m2": FLOAT8_E5M2,
}


def saturate(host: np.ndarray, data: np.ndarray) -> tuple[np.ndarray, bool]:
    """``data`` (``host`` cast to a narrower float type) with each finite ``host`` value that became
    +-inf set to the type's largest finite value of its sign, and whether any was (see ``device``)."""
    with np.errstate(over="ignore", invalid="ignore"):
        over = np.isinf(data) & np.isfinite(host)
    if not over.any():
        return data, False
    top = np.finfo(data.dtype).max
    return np.where(over, np.where(host > 0, top, -top).astype(data.dtype), data), True


def device_values(host: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``host`` in the device type (``astype``'s bits; a shape-only placeholder stays one). float32 to
    float16, a model's weights in a half run, goes through the run's compiled conversion over its
    threads (``profiler.executable.convert``: ~0.3 ns an element against numpy's 2.5-9; BERT-large's
    335 M weights took ~2.8 s of its import)."""
    if (
        host.dtype == np.float32
        and np.dtype(dtype) == np.float16
        and host.flags.c_contiguous
        and not shape_only.is_placeholder(host)
    ):
        out = np.empty(host.shape, np.float16)
        copy_into(out, host)
        return out
    return shape_only.astype(host, dtype)


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


def elem_np_dtype(elem_type: int) -> np.dtype:
    """The numpy type of an ONNX element type; Unsupported for one numpy has not."""
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
        fp8: np.dtype | None = None, fp8_log2_scale: int = 0,
    ) -> None:  # fmt: skip
        self.graph, self.prog, self.weights_prog = graph, prog, weights_prog
        self.opset, self.half, self.weights_mode = opset, half, weights
        # the FP8 format MatMul, Gemm and Conv take their operands in (None: the model's own type); the
        # rest of the model runs in float16 (``half``), as PopRT's FP8 conversion leaves it
        self.fp8 = fp8
        # activations are cast as x * 2^fp8_log2_scale (PopXL's pow2scale_cast_to_fp8), the products
        # that read them scaled back by the opposite power (matmul_pow2scaled's log2_scale)
        self.fp8_log2_scale = fp8_log2_scale
        self._fp8_casts: dict[int, tuple[Tensor, Tensor]] = {}  # id of a tensor -> (it, its FP8 cast)
        self._fp8_scaled: set[int] = set()  # ids of the casts scaled by 2^fp8_log2_scale
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
        self.overflowed: list[str] = []  # host tensors with finite values past the device type's range (saturated)
        # In-place elementwise ops (see ``overwritable``): the index of the node being built (None: no node
        # may overwrite an input), and for each variable an ONNX value views, the last node that reads one
        self.node_index: int | None = None
        self._var_last: dict[int, int] = {}

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
            # made on another IPU (a table every pipeline stage reads, e.g. a decoder's rotary sin and
            # cos): it crosses once to this one, as an activation does (``to_ipu``, PopART's IpuCopy),
            # and is read there, not over the IPU-Links by every op that uses it
            t = self._materialized[key]
            ipu = self.graph.current_ipu
            return t if ipu is None else self.to_ipu(t, ipu)
        # A finite value beyond float16's range saturates to +-65,504, as the converters that turn an
        # exported float32 model into float16 do ("without changing sign or finiteness": onnxruntime's
        # transformers/float16.py convert_np_to_float16, max_finite_val=65504): a float32 mask constant
        # (float32's lowest, as Hugging Face's exports write it) stays a finite, very negative mask, so a
        # softmax row masked whole is uniform as in float32, not NaN as -inf everywhere would make it.
        # Inputs' and activations' casts stay IEEE (ONNX Cast). A weight that saturates is likely a
        # fault, so each tensor with such a value is named in ``overflowed`` (the import's info) rather
        # than warned about element by element.
        with np.errstate(over="ignore"):
            host = np.asarray(v)
            arr = host if like is None else shape_only.astype(host, like)
            if arr.size == 0:
                raise Unsupported("empty tensors")
            dt = device_dtype(arr.dtype, self.half)
            data = device_values(arr, dt)
        data = self._saturated(host, data, self.names.get(id(v), name))
        if shape_only.is_placeholder(data):  # compile-only: no values to overflow
            pass
        elif is_float8(data.dtype) and host.dtype.kind == "f":  # FP8 has no infinities: overflow is NaN
            nan = np.isnan(data.astype(np.float32))
            if nan.any() and (nan & np.isfinite(host)).any():
                self.overflowed.append(self.names.get(id(v), name))
        g = self.graph
        name = self.names.get(id(v), name)
        shape, view = (list(arr.shape), lambda t: t) if storage is None else (storage.shape(arr.shape), storage.view)
        if self.weights_mode == "variables" and arr.size > SMALL_CONSTANT:
            name = self._unique(name)
            t = view(g.add_variable(dt, shape, name))
            if mapper is None or not mapper(t):
                self._spread(t)
            upload = self._upload(t, name, data)
            self.created_weights.append(CreatedWeight(id(v), like, t, upload, v))
        else:
            t = view(g.add_constant(dt, shape, data if storage is None else storage.stored(data), name=name))
            if mapper is None or not mapper(t):
                self._spread(t)
        self._materialized[key] = t
        self._host_keep.append(v)  # keeps id(v) unique while the builder lives
        return t

    def weight_like(self, like: Tensor, v: np.ndarray, dtype: np.dtype | None, name: str) -> Tensor:
        """A weight variable holding host ``v`` (converted to ``dtype`` if given), laid out and mapped
        as ``like`` (a weight variable), uploaded by the weights-to-device program."""
        arr = np.asarray(v) if dtype is None else shape_only.astype(np.asarray(v), dtype)
        dt = device_dtype(arr.dtype, self.half)
        name = self._unique(self.names.get(id(v), name))
        t = self.graph.clone(like, name)
        if t is None:
            raise FrontendError(f"weight {name!r}: cannot be laid out as {like!r}")
        self._upload(t, name, self._saturated(np.asarray(v), device_values(arr, dt), name))
        self._host_keep.append(v)
        return t

    def _saturated(self, host: np.ndarray, data: np.ndarray, name: str) -> np.ndarray:
        """``data`` (``host`` cast to the device type) with the finite values past a narrower float
        type's range saturated (``saturate``), ``name`` noted in ``overflowed`` if any was."""
        if shape_only.is_placeholder(data) or not (data.dtype.kind == host.dtype.kind == "f"):
            return data
        if data.itemsize >= host.itemsize:
            return data
        data, hit = saturate(host, data)
        if hit:
            self.overflowed.append(name)
        return data

    def _upload(self, t: Tensor, name: str, data: np.ndarray) -> Copy:
        """Make weight ``t`` (``data``-shaped) host-writable as ``name`` and filled by the
        weights-to-device program from its own stream; the upload copy."""
        g, stream = self.graph, WEIGHT_STREAM_PREFIX + name
        g.create_host_write(name, t)
        # its own operation, named by the weight: the upload's stream copy is then neither
        # "(outside any operation)" on the Operations page nor part of the node that reads it
        with g.debug_context(name, op_type=WEIGHT_UPLOAD_OP, layer=LAYER, top_level=True):
            upload = Copy(g.add_host_to_device_fifo(stream, data.dtype, list(data.shape)), t, name=stream)
        self.weights_prog.add(upload)
        self.weights[stream] = shape_only.contiguous(data)
        return upload

    def _spread(self, t: Tensor) -> None:
        """Map ``t`` linearly with poputil::mapTensorLinearly's defaults, starting where the previous
        weight or constant ended, so that the many small ones do not all start on tile 0 (which would
        run out of memory first) - as PopART's LinearMapper offsets them. As intervals (one a tile):
        a tile per element of a 131 M-element LM head was 2 GB of host memory for a compile-only import."""
        tiles, n, start = self.graph.target.num_tiles, t.numel(), self._next_tile
        if n == 0:
            return
        starts, owners = default_linear_runs(n, t.dtype.itemsize, tiles, start=start)
        self.graph.map_intervals(t, starts, np.diff(np.append(starts, n)), owners)
        used = int(owners[-1] - start) % tiles + 1  # consecutive tiles from the start
        self._next_tile = (start + used) % tiles

    def to_ipu(self, t: Tensor, ipu: int) -> Tensor:
        """``t`` on ``ipu``: itself if it is held there, else a copy laid out as it is, on that IPU's
        tiles (made once per tensor and IPU). The copy moves each element over the IPU-Links once,
        where an op reading ``t`` remotely would receive it on every tile that reads it."""
        g = self.graph
        tpi = g.target.tiles_per_ipu
        # every node's every input is checked: first from its variables' intervals (all of each on
        # ``ipu``: so is any view of them), the usual case; runs of the view cut at every interval
        # (a POD16 decoder's attention scores: a million) only when a variable is elsewhere
        if t.numel() and g.wholly_on_ipu(t, ipu):
            return t
        # the view's tiles as runs of its mapping when it has them (a tile per element here was the
        # import's largest transient on a POD16 LLM)
        runs = g.view_runs(t) if t.numel() else None
        tiles = runs[1] if runs is not None else g.tile_of(t)
        if tiles.size == 0 or bool((tiles // tpi == ipu).all()):
            return t
        key = (id(t), ipu)
        if key not in self._on_ipu:
            with g.virtual_graph(ipu):
                copy = g.add_variable(t.dtype, t.shape, f"{self.names.get(id(t), 'value')}/ipu{ipu}")
                if runs is not None and (tiles >= 0).all():
                    g.map_intervals(copy, runs[0], np.diff(np.append(runs[0], t.numel())), tiles % tpi)
                else:
                    g.set_tile_mapping(copy, (tiles if runs is None else g.tile_of(t)) % tpi)
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

    # -- in-place elementwise ops --------------------------------------------------------------
    def note_value(self, t: Tensor, last_use: int) -> None:
        """Record that an ONNX value viewing ``t``'s variables is read up to node ``last_use`` (a graph
        input or output: past the last node)."""
        for v in t.variable_ids():
            self._var_last[v] = max(self._var_last.get(v, -1), last_use)

    def overwritable(self, t: Tensor, *others: Tensor) -> bool:
        """Whether the node being built may write its result into ``t``, an input, as PopART's inplace
        transform does for the ops with an inplace variant (willow/src/ir.cpp ``Ir::applyInplacePattern``;
        AddLhsInplace, MulRhsInplace, ReluInplace, ...): ``t`` views one activation variable (made by an
        earlier node: not a graph input, weight or constant, which PopART never modifies in an
        inference graph), each of its elements once, no ONNX value viewing that variable is read after
        this node, and no other operand of the op views it (an input modified while another reads it)."""
        i = self.node_index
        v = t.single_variable()
        if i is None or v is None or not t.strided or t.affine is None or not t.affine.one_to_one():
            return False
        var = self.graph.variables[v]
        if var.constant or var.host_visible or self._var_last.get(v, i + 1) > i:
            return False
        return all(v not in o.variable_ids() for o in others)

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

    def binary(self, name: str, a: Value, b: Value, in_place: bool = False) -> Tensor:
        """An ops.binary op with host operands made device tensors of the other operand's type.
        ``in_place``: ``a`` and ``b`` are the node's own inputs and the op is the node's last use of
        them, so the result may overwrite one (``overwritable``) where PopART has an inplace variant:
        Add and Mul either operand, Pow its base (popart willow/include/popart/op/add.hpp, mul.hpp,
        pow.hpp; Sub and Div have none). The result keeps the layout the out-of-place op would give it."""
        ta, tb = self.pair(a, b)
        shape = np.broadcast_shapes(ta.shape, tb.shape)
        if ta.dtype.kind != "f" and name in ("div", "pow"):
            return self.map(name.capitalize(), _INT_BINARY[name], [ta, tb], (cost_model.binary("multiply"),))
        lhs, rhs = at_least_1d(ta), at_least_1d(tb)
        if in_place and name in _LHS_IN_PLACE and ta.shape == shape and self.overwritable(ta, tb):
            out = ops.binary_in_place(self.graph, name, lhs, rhs, self.prog)
        elif in_place and name in _RHS_IN_PLACE and ta.shape != shape == tb.shape and self.overwritable(tb, ta):
            # commutative (IEEE addition and multiplication are): the same values written into b. Only
            # where a is broadcast: the out-of-place result is laid out as a (ops.add_like of the first
            # operand of the result's shape), so writing into b when a has that shape would give the
            # result b's layout instead, a choice popops makes by the operands' layouts
            # (createOutputForElementWiseOp) and tilescope does not model
            out = ops.binary_in_place(self.graph, name, rhs, lhs, self.prog)
        else:
            out = ops.binary(self.graph, name, lhs, rhs, self.prog, debug_name=name)
        return out.reshape(shape)

    def pair(self, a: Value, b: Value) -> tuple[Tensor, Tensor]:
        """Two operands as device tensors of one type (a host operand takes the other's type)."""
        if isinstance(a, Tensor) and not isinstance(b, Tensor):
            return a, self.device(b, like=a.dtype) if np.asarray(b).dtype != a.dtype else self.device(b)
        if isinstance(b, Tensor) and not isinstance(a, Tensor):
            return (self.device(a, like=b.dtype) if np.asarray(a).dtype != b.dtype else self.device(a)), b
        ta, tb = self.device(a), self.device(b)
        if ta.dtype != tb.dtype:
            raise Unsupported(f"mixed operand types {ta.dtype.name} and {tb.dtype.name}")
        return ta, tb

    def unary(self, name: str, x: Value, in_place: bool = False) -> Tensor:
        """An ops.unary op; ``in_place`` as for ``binary``: into ``x`` when ``overwritable`` and PopART
        has an inplace variant (ReluInplace, SigmoidInplace, ExpInplace: willow/include/popart/op/)."""
        t = self.device(x)
        if in_place and name in _UNARY_IN_PLACE and self.overwritable(t):
            return ops.unary_in_place(self.graph, name, at_least_1d(t), self.prog).reshape(t.shape)
        return ops.unary(self.graph, name, at_least_1d(t), self.prog, debug_name=name).reshape(t.shape)

    def fp8_operand(self, x: Value) -> Value:
        """``x`` as a matmul's or convolution's operand: in the FP8 format when the model is built in
        FP8. As PopRT converts a model to FP8, a weight (host value) is cast on the host and uploaded
        as FP8 (one byte an element), an activation is cast on the device before the op (popops::Cast,
        once per tensor however many products read it). Activations are scaled by 2^fp8_log2_scale
        in the cast (PopXL's casts take a power-of-two scale, default 2^0: popxl.utils.
        host_pow2scale_cast_to_fp8(src, dtype, log2_scale=0, nan_on_overflow=True)); values past the
        format's range become NaN. Weights are not scaled. ``fp8_unscale`` gives the product's scale."""
        if self.fp8 is None:
            return x
        if not isinstance(x, Tensor):
            host = np.asarray(x)
            return host.astype(self.fp8) if host.dtype.kind == "f" else host
        if not is_float(x.dtype) or is_float8(x.dtype):
            return x
        key = id(x)
        if key not in self._fp8_casts:
            s = self.fp8_log2_scale
            t = at_least_1d(x)
            cast = (ops.pow2scale_cast(self.graph, t, self.fp8, s, self.prog) if s else
                    ops.cast(self.graph, t, self.fp8, self.prog)).reshape(x.shape)  # fmt: skip
            if s:
                self._fp8_scaled.add(id(cast))
            self._fp8_casts[key] = (x, cast)  # holds x: its id stays unique
        return self._fp8_casts[key][1]

    def fp8_unscale(self, *operands: Tensor) -> int:
        """The log2 scale a product of ``operands`` (from ``fp8_operand``) takes to undo their scales."""
        return -sum(self.fp8_log2_scale for t in operands if id(t) in self._fp8_scaled)

    def cast(self, x: Value, dtype: np.dtype) -> Tensor:
        t = self.device(x)
        if t.dtype == dtype:
            return t
        return ops.cast(self.graph, at_least_1d(t), dtype, self.prog).reshape(t.shape)


def at_least_1d(t: Tensor) -> Tensor:
    """0-d device tensors as [1] (the ops work on element lists)."""
    return t.reshape(1) if t.rank == 0 else t


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    safe = np.where(b == 0, 1, b)
    return np.trunc(a / safe)


def _int_pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.power(a.astype(np.float64), b.astype(np.float64))


_INT_BINARY = {"div": _int_div, "pow": _int_pow}
# The elementwise ops PopART has inplace variants of (ElementWiseBinaryOp::hasLhsInplaceVariant /
# hasRhsInplaceVariant, ElementWiseInplaceUnaryOp subclasses in willow/include/popart/op/), by ops name
_LHS_IN_PLACE = frozenset({"add", "mul", "pow"})
_RHS_IN_PLACE = frozenset({"add", "mul"})
_UNARY_IN_PLACE = frozenset({"relu", "sigmoid", "exp"})
