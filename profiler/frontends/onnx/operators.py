"""ONNX operators on the device: one handler per op type, following the semantics of the model's opset.

A handler is ``handler(builder, node, inputs) -> outputs``: ``inputs`` are host arrays (np.ndarray),
device tensors or None (an omitted optional input), in the node's input order; it returns one value
per node output. Shape-only ops (Reshape targets, Slice bounds, Split sizes, axes given as inputs)
need their shape inputs on the host: they always are in exported models (Shape of a statically
shaped tensor and Constant are folded at import).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from profiler import ops
from profiler.chip import cost_model
from profiler.poplar.tensor import Tensor, concat

from .builder import Builder, Unsupported, Value, _elem_np_dtype, _nd, device_dtype
from .model import FrontendError

Handler = Callable[[Builder, onnx.NodeProto, list[Any]], list[Any]]
HANDLERS: dict[str, Handler] = {}


def handles(*op_types: str) -> Callable[[Handler], Handler]:
    def deco(fn: Handler) -> Handler:
        for t in op_types:
            HANDLERS[t] = fn
        return fn

    return deco


def attrs(node: onnx.NodeProto) -> dict[str, Any]:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _shape(v: Value) -> tuple[int, ...]:
    return v.shape if isinstance(v, Tensor) else np.shape(v)


def _host(v: Value | None, what: str) -> np.ndarray | None:
    """A shape-like input that must be known at import."""
    if v is None:
        return None
    if isinstance(v, Tensor):
        raise Unsupported(f"{what} computed on the device (must be constant)")
    return np.asarray(v)


def _axis(a: int, rank: int) -> int:
    if not -rank <= a < max(rank, 1):
        raise Unsupported(f"axis {a} out of range for rank {rank}")
    return a % rank if rank else 0


def _axes_input(b: Builder, node: onnx.NodeProto, inputs: list[Any], since: int, pos: int = 1) -> list[int] | None:
    """Axes from the attribute (opsets before ``since``) or from input ``pos``."""
    if b.opset < since:
        a = attrs(node).get("axes")
        return None if a is None else [int(x) for x in a]
    v = _host(inputs[pos] if len(inputs) > pos else None, "axes")
    return None if v is None else [int(x) for x in v.reshape(-1)]


# -- elementwise ---------------------------------------------------------------------------------
_UNARY = {
    "Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Erf": "erf", "Sqrt": "sqrt", "Exp": "exp", "Log": "log",
    "Neg": "neg", "Abs": "abs", "Reciprocal": "inv", "Sign": "sign",
}  # fmt: skip


@handles(*_UNARY)
def _unary(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    name = _UNARY[node.op_type]
    if x.dtype.kind != "f" and name in ("neg", "abs", "sign"):
        fn = {"neg": np.negative, "abs": np.abs, "sign": np.sign}[name]
        return [
            b.map(
                node.op_type, fn, [x], (cost_model.unary({"neg": "negate", "abs": "absolute", "sign": "signum"}[name]),)
            )
        ]
    if x.dtype.kind != "f":
        raise Unsupported(f"integer input ({x.dtype.name})")
    return [b.unary(name, x)]


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))


@handles("Gelu")
def _gelu(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    if attrs(node).get("approximate", b"none") in (b"tanh", "tanh"):
        return [b.map("GeluTanh", _gelu_tanh, [inputs[0]], (cost_model.unary("gelu_erf"),))]
    x = b.device(inputs[0])
    return [ops.gelu(b.graph, _nd(x), b.prog).reshape(x.shape)]


def _leaky(x: np.ndarray, alpha: float) -> np.ndarray:
    return np.where(x >= 0, x, x * alpha)


@handles("LeakyRelu")
def _leaky_relu(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    alpha = float(attrs(node).get("alpha", 0.01))
    return [
        b.map("LeakyRelu", _leaky, [inputs[0]], (cost_model.unary("relu"), cost_model.binary("multiply")), alpha=alpha)
    ]


def _clamp(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    return np.clip(x, lo, hi)


@handles("Clip")
def _clip(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    if b.opset < 11:
        a = attrs(node)
        lo: Value | None = np.float32(a.get("min", -np.inf))
        hi: Value | None = np.float32(a.get("max", np.inf))
    else:
        lo = inputs[1] if len(inputs) > 1 else None
        hi = inputs[2] if len(inputs) > 2 else None
    if not isinstance(lo, Tensor) and not isinstance(hi, Tensor):
        info = np.finfo if x.dtype.kind == "f" else np.iinfo
        lo_v = info(x.dtype).min if lo is None else np.asarray(lo).item()
        hi_v = info(x.dtype).max if hi is None else np.asarray(hi).item()
        return [
            b.map("Clamp", _clamp, [x], (cost_model.binary("maximum"), cost_model.binary("minimum")), lo=lo_v, hi=hi_v)
        ]
    y: Value = x
    if lo is not None:
        y = b.binary("max", y, lo)
    if hi is not None:
        y = b.binary("min", y, hi)
    return [y]


_BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Pow": "pow"}


@handles(*_BINARY)
def _binary(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    a, c = inputs[0], inputs[1]
    if node.op_type == "Pow":  # the exponent may have another type than the base
        base = b.device(a)
        if isinstance(c, Tensor):
            c = b.cast(c, base.dtype)
        else:
            c = np.asarray(c).astype(np.float32 if base.dtype.kind == "f" else np.int64)
        return [b.binary("pow", base, legacy_broadcast(b, node, base, c))]
    return [b.binary(_BINARY[node.op_type], a, legacy_broadcast(b, node, a, c))]


def legacy_broadcast(b: Builder, node: onnx.NodeProto, a: Value, c: Value) -> Value:
    """Opsets before 7: with broadcast=1, ``c`` lines up with ``a`` from ``axis`` (default: the suffix)."""
    at = attrs(node)
    if b.opset >= 7 or not at.get("broadcast", 0) or "axis" not in at:
        return c
    ra, rc = len(_shape(a)), len(_shape(c))
    axis = int(at["axis"]) % ra
    shape = tuple(_shape(c)) + (1,) * (ra - axis - rc)
    return c.reshape(shape) if isinstance(c, Tensor) else np.reshape(c, shape)


@handles("Sum", "Max", "Min", "Mean")
def _variadic(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    name = {"Sum": "add", "Max": "max", "Min": "min", "Mean": "add"}[node.op_type]
    acc: Value = inputs[0]
    for x in inputs[1:]:
        acc = b.binary(name, acc, x)
    acc = b.device(acc)
    if node.op_type == "Mean" and len(inputs) > 1:
        acc = ops.scale(b.graph, _nd(acc), 1.0 / len(inputs), b.prog).reshape(acc.shape)
    return [acc]


def _less(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    return a < c


def _greater(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    return a > c


def _equal(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    return a == c


def _less_equal(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    return a <= c


def _greater_equal(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    return a >= c


_COMPARE = {
    "Less": (_less, "less_than"), "Greater": (_greater, "greater_than"), "Equal": (_equal, "equal"),
    "LessOrEqual": (_less_equal, "less_than_equal"), "GreaterOrEqual": (_greater_equal, "greater_than_equal"),
}  # fmt: skip


@handles(*_COMPARE)
def _compare(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    ta, tc = b._pair(inputs[0], inputs[1])
    fn, cost = _COMPARE[node.op_type]
    cost_op = cost if ta.dtype.kind in "fiu" and ta.dtype != np.bool_ else "logical_and"
    return [b.map(node.op_type, fn, [ta, tc], (cost_model.binary(cost_op),), out_dtype="bool")]


def _select(x: np.ndarray, y: np.ndarray, cond: np.ndarray) -> np.ndarray:
    return np.where(cond, x, y)


@handles("Where")
def _where(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    cond, x, y = inputs
    tx, ty = b._pair(x, y)
    tcond = b.device(cond)
    # popops::Select costs about a binary op per element [INF]
    return [b.map("Select", _select, [tx, ty, tcond], (cost_model.binary("maximum"),))]


@handles("Not")
def _not(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    return [b.map("LogicalNot", np.logical_not, [inputs[0]], (cost_model.unary("logical_not"),))]


@handles("Cast")
def _cast(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    to = _elem_np_dtype(int(attrs(node)["to"]))
    if attrs(node).get("saturate", 1) != 1 or to.itemsize == 1 and to.kind == "f":
        raise Unsupported("float8 casts")
    x = b.device(inputs[0])
    dt = device_dtype(to, b.half)
    return [b.cast(x, dt)]


@handles("Identity")
def _identity(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    return [inputs[0]]


@handles("Dropout")
def _dropout(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    training = inputs[2] if len(inputs) > 2 else None
    if training is not None and (isinstance(training, Tensor) or bool(np.asarray(training))):
        raise Unsupported("training mode")
    x = inputs[0]
    return [x, np.ones(_shape(x), dtype=bool)]


# -- matmul --------------------------------------------------------------------------------------
def matmul(b: Builder, a: Value, c: Value) -> Tensor:
    """numpy.matmul semantics (1-D promotion, broadcast batch dimensions) with ops.matmul. A 2-D
    weight (host array) is created laid out for the product (createMatMulInputRHS)."""
    if isinstance(a, Tensor) and a.rank >= 1 and not isinstance(c, Tensor) and np.ndim(c) == 2 and a.dtype.kind == "f":
        k_, m_ = a.shape[-1], int(np.prod(a.shape[:-1], dtype=np.int64))

        def laid_out(t: Tensor) -> bool:
            return t.shape[0] == k_ and ops.map_for_matmul(b.graph, t, "rhs", (m_, k_), t.shape, b.partials, b.amp)

        like = a.dtype if np.asarray(c).dtype != a.dtype else None
        dt = device_dtype(np.asarray(c).dtype if like is None else like, b.half)
        # stored as PopLibs creates the weights for this product (createMatMulInputRHS), where it groups them
        storage = (
            ops.operand_storage(b.graph, "rhs", dt, (m_, k_), np.shape(c), b.partials, b.amp)
            if np.shape(c)[0] == k_
            else None
        )
        ta, tc = a, b.device(c, like=like, mapper=laid_out, storage=storage)
    else:
        ta, tc = b._pair(a, c)
    if ta.dtype.kind != "f":
        raise Unsupported(f"integer matmul ({ta.dtype.name})")
    a1, c1 = ta.rank == 1, tc.rank == 1
    if a1:
        ta = ta.reshape(1, -1)
    if c1:
        tc = tc.reshape(-1, 1)
    m, k = ta.shape[-2:]
    k2, n = tc.shape[-2:]
    if k != k2:
        raise ValueError(f"MatMul: shapes {ta.shape} and {tc.shape} do not multiply")
    batch = tuple(np.broadcast_shapes(ta.shape[:-2], tc.shape[:-2]))
    if tc.rank == 2:  # [.., M, K] x [K, N]: one big product
        # held channel-grouped as PopLibs holds it (a matmul's result is its convolution's output,
        # {C/ocpg, batch, ocpg}: lib/poplin/Convolution.cpp getPartialOutputShape); the elementwise ops
        # after it clone that layout (Graph::clone), so the next matmul's lhs arrives grouped
        out = ops.matmul(
            b.graph,
            ta.reshape(-1, k),
            tc,
            b.prog,
            partials_dtype=b.partials,
            available_memory_proportion=b.amp,
            grouped_out=True,
        ).reshape(*ta.shape[:-2], m, n)
    else:
        g = int(np.prod(batch, dtype=np.int64))
        xa = ta.broadcast_to(batch + (m, k)).reshape(g, m, k)
        xc = tc.broadcast_to(batch + (k, n)).reshape(g, k, n)
        # held row by row: a grouped result here (PopLibs holds it so) makes the softmax after the
        # attention's scores read and reduce a factored view, 1.8x the host time of the whole import
        # at BERT-base batch 8 for 1.6 of 8.6 MiB of exchange code a layer (docs/fidelity.md)
        out = ops.matmul(b.graph, xa, xc, b.prog, partials_dtype=b.partials, available_memory_proportion=b.amp).reshape(
            *batch, m, n
        )
    shape = out.shape
    if a1:
        shape = shape[:-2] + shape[-1:]
    if c1:
        shape = shape[:-1]
    return out.reshape(shape)


@handles("MatMul")
def _matmul(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    return [matmul(b, inputs[0], inputs[1])]


@handles("Gemm")
def _gemm(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    at = attrs(node)
    alpha, beta = float(at.get("alpha", 1.0)), float(at.get("beta", 1.0))
    a, c = inputs[0], inputs[1]
    if at.get("transA", 0):
        a = a.T if isinstance(a, Tensor) else np.asarray(a).T
    if at.get("transB", 0):
        c = c.T if isinstance(c, Tensor) else np.asarray(c).T
    if alpha != 1.0 and not isinstance(c, Tensor):
        c, alpha = np.asarray(c) * np.asarray(alpha, dtype=np.asarray(c).dtype), 1.0
    y = matmul(b, a, c)
    if alpha != 1.0:
        y = ops.scale(b.graph, y, alpha, b.prog)
    bias = inputs[2] if len(inputs) > 2 else None
    if bias is not None and beta != 0.0:
        if isinstance(bias, Tensor):
            if beta != 1.0:
                bias = ops.scale(b.graph, _nd(bias), beta, b.prog).reshape(bias.shape)
        elif beta != 1.0:
            bias = np.asarray(bias) * np.asarray(beta, dtype=np.asarray(bias).dtype)
        y = b.binary("add", y, bias)
    return [y]


# -- shape and movement ops (views: no device work) ------------------------------------------------
@handles("Reshape")
def _reshape(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    if b.opset < 5:
        raise Unsupported("opset < 5")
    shape = [int(s) for s in _host(inputs[1], "target shape").reshape(-1)]  # type: ignore[union-attr]
    if not attrs(node).get("allowzero", 0):
        shape = [x.shape[i] if s == 0 else s for i, s in enumerate(shape)]
    return [x.reshape(shape)]


@handles("Flatten")
def _flatten(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    axis = int(attrs(node).get("axis", 1))
    axis = axis + x.rank if axis < 0 else axis  # Flatten's axis may equal the rank
    outer = int(np.prod(x.shape[:axis], dtype=np.int64))
    return [x.reshape(outer, -1 if x.numel() else 0)]


@handles("Transpose")
def _transpose(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    perm = attrs(node).get("perm")
    return [x.transpose(*perm) if perm is not None else x.transpose()]


@handles("Squeeze")
def _squeeze(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    axes = _axes_input(b, node, inputs, 13)
    if axes is None:
        shape = [s for s in x.shape if s != 1]
    else:
        ax = {_axis(a, x.rank) for a in axes}
        if any(x.shape[a] != 1 for a in ax):
            raise ValueError(f"Squeeze: axes {sorted(ax)} of shape {x.shape} are not all 1")
        shape = [s for i, s in enumerate(x.shape) if i not in ax]
    return [x.reshape(shape)]


@handles("Unsqueeze")
def _unsqueeze(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    axes = _axes_input(b, node, inputs, 13)
    rank = x.rank + len(axes or [])
    ax = sorted(_axis(a, rank) for a in axes or [])
    shape = list(x.shape)
    for a in ax:
        shape.insert(a, 1)
    return [x.reshape(shape)]


@handles("Concat")
def _concat(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    parts = [v for v in inputs if v is not None and int(np.prod(_shape(v))) > 0]
    dev = next(v for v in parts if isinstance(v, Tensor))
    ts = [b.device(v, like=dev.dtype) if not isinstance(v, Tensor) else v for v in parts]
    axis = _axis(int(attrs(node)["axis"]), ts[0].rank)
    return [concat(ts, axis) if len(ts) > 1 else ts[0]]


@handles("Split")
def _split(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    at = attrs(node)
    axis = _axis(int(at.get("axis", 0)), x.rank)
    n = len(node.output)
    if b.opset < 13:
        split = at.get("split")
    else:
        sv = _host(inputs[1] if len(inputs) > 1 else None, "split sizes")
        split = None if sv is None else [int(s) for s in sv.reshape(-1)]
    dim = x.shape[axis]
    if split is None:
        if at.get("num_outputs") is not None:
            n = int(at["num_outputs"])
        size = -(-dim // n)
        split = [min(size, dim - i * size) for i in range(n)]
    starts = np.concatenate(([0], np.cumsum(split)))
    return [x.slice(int(starts[i]), int(starts[i + 1]), axis) for i in range(len(split))]


@handles("Slice")
def _slice(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    if b.opset < 10:
        at = attrs(node)
        starts, ends, axes, steps = at["starts"], at["ends"], at.get("axes"), None
    else:
        starts = _host(inputs[1], "starts").reshape(-1)  # type: ignore[union-attr]
        ends = _host(inputs[2], "ends").reshape(-1)  # type: ignore[union-attr]
        axes = _host(inputs[3] if len(inputs) > 3 else None, "axes")
        steps = _host(inputs[4] if len(inputs) > 4 else None, "steps")
    axes = list(range(len(starts))) if axes is None else [int(a) for a in np.reshape(axes, -1)]
    steps = [1] * len(starts) if steps is None else [int(s) for s in np.reshape(steps, -1)]
    key: list[slice] = [slice(None)] * x.rank
    for s, e, a, st in zip(starts, ends, axes, steps, strict=True):
        dim = x.shape[_axis(a, x.rank)]
        s, e = int(s), int(e)
        # clamp as ONNX does (Python slicing clamps the same way once values are in range)
        s = max(-dim - 1, min(s, dim))
        e = max(-dim - 1, min(e, dim))
        if st < 0 and e < -dim:
            e = None  # type: ignore[assignment]
        key[_axis(a, x.rank)] = slice(s, e, st)
    out = x[tuple(key)]
    if out.numel() == 0:  # no elements: exact as a host value
        return [np.zeros(out.shape, x.dtype)]
    return [out]


def _wrap_index(i: np.ndarray, size: int) -> np.ndarray:
    return np.where(i < 0, i + size, i)


@handles("Gather")
def _gather(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    axis = _axis(int(attrs(node).get("axis", 0)), x.rank)
    idx = inputs[1]
    if not isinstance(idx, Tensor):  # constant indices: a view
        i = np.asarray(idx).astype(np.int64)
        i = np.where(i < 0, i + x.shape[axis], i)
        return [x._apply(lambda a: np.take(a, i, axis=axis))]
    if idx.dtype.kind not in "iu":
        raise Unsupported("non-integer indices")
    idx = b.map("WrapIndex", _wrap_index, [idx], (cost_model.binary("add"),), size=int(x.shape[axis]))
    moved = x.transpose(axis, *[d for d in range(x.rank) if d != axis])
    rest = moved.shape[1:]
    table = moved.reshape(moved.shape[0], -1)
    flat = idx.reshape(-1)
    out = ops.gather(b.graph, table, flat, b.prog).reshape(*idx.shape, *rest)
    # move the index dims to where the axis was
    r = idx.rank
    perm = list(range(r, r + axis)) + list(range(r)) + list(range(r + axis, r + len(rest)))
    return [out.transpose(*perm)]


@handles("Expand")
def _expand(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    shape = tuple(int(s) for s in _host(inputs[1], "shape").reshape(-1))  # type: ignore[union-attr]
    out = tuple(np.broadcast_shapes(x.shape, shape))
    return [x.broadcast_to(out) if out != x.shape else x]


def pad_view(b: Builder, x: Tensor, pads: list[tuple[int, int]], mode: str, value: float = 0.0) -> Tensor:
    """``x`` padded per axis (before, after) as a view: edge/reflect repeat x's own elements, constant
    mode reads a constant element on the tile of the nearest element of ``x`` (as PopLibs maps
    padding, so no tile serves every other tile's padding); negative pads crop."""
    crop = tuple(slice(-lo if lo < 0 else 0, x.shape[i] + hi if hi < 0 else None) for i, (lo, hi) in enumerate(pads))
    x = x[crop]
    pos = [(max(lo, 0), max(hi, 0)) for lo, hi in pads]
    if not any(lo or hi for lo, hi in pos):
        return x
    var, idx = x.elements()
    var, idx = var.reshape(x.shape), idx.reshape(x.shape)
    if mode == "constant" and x.numel():
        cvar, cidx = ops.constant_per_tile(b.graph, x.dtype, value).elements()
        near = np.pad(b.graph.tile_of(x).reshape(x.shape), pos, mode="edge")
        inside = np.pad(np.ones(x.shape, dtype=bool), pos)
        var = np.where(inside, np.pad(var, pos), cvar[0])
        idx = np.where(inside, np.pad(idx, pos), cidx[near])
    elif mode == "constant":  # nothing to be near: one constant element
        c = b.device(np.asarray(value, dtype=x.dtype), like=x.dtype).reshape(1)
        cvar, cidx = c.elements()
        var = np.pad(var, pos, mode="constant", constant_values=int(cvar[0]))
        idx = np.pad(idx, pos, mode="constant", constant_values=int(cidx[0]))
    elif mode in ("edge", "reflect", "wrap"):
        var = np.pad(var, pos, mode=mode)
        idx = np.pad(idx, pos, mode=mode)
    else:
        raise Unsupported(f"pad mode {mode!r}")
    return Tensor(b.graph, var.astype(np.int32), idx, x.dtype)


@handles("Pad")
def _pad(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    at = attrs(node)
    mode = at.get("mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if b.opset < 11:
        raw, value, axes = list(at.get("pads")), float(at.get("value", 0.0)), None
    else:
        raw = [int(p) for p in _host(inputs[1], "pads").reshape(-1)]  # type: ignore[union-attr]
        cv = _host(inputs[2] if len(inputs) > 2 else None, "constant value")
        value = 0.0 if cv is None or cv.size == 0 else cv.reshape(-1)[0].item()
        av = _host(inputs[3] if len(inputs) > 3 else None, "axes")
        axes = None if av is None else [_axis(int(a), x.rank) for a in av.reshape(-1)]
    axes = axes if axes is not None else list(range(x.rank))
    k = len(axes)
    pads = [(0, 0)] * x.rank
    for j, a in enumerate(axes):
        pads[a] = (int(raw[j]), int(raw[j + k]))
    return [pad_view(b, x, pads, mode, value)]


# -- host-only ops (folded when their inputs are constant; these only need static shapes) ----------
@handles("Shape")
def _shape_op(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    shape = np.asarray(_shape(inputs[0]), dtype=np.int64)
    at = attrs(node)
    start, end = at.get("start", 0), at.get("end")
    return [shape[start:end]]


@handles("Size")
def _size_op(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    return [np.asarray(int(np.prod(_shape(inputs[0]))), dtype=np.int64)]


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
    shape = [int(s) for s in _host(inputs[0], "shape").reshape(-1)]  # type: ignore[union-attr]
    v = attrs(node).get("value")
    value = numpy_helper.to_array(v).reshape(-1) if v is not None else np.zeros(1, np.float32)
    return [np.full(shape, value[0], dtype=value.dtype)]


# -- reductions, softmax, norms ------------------------------------------------------------------
_REDUCE = {"ReduceSum": ("add", 13), "ReduceMean": ("mean", 18), "ReduceMax": ("max", 18), "ReduceMin": ("min", 18)}


def reduce(b: Builder, x: Tensor, axes: list[int] | None, kind: str, keepdims: bool) -> Tensor:
    ax = sorted({_axis(a, x.rank) for a in axes}) if axes is not None else list(range(x.rank))
    if x.rank == 0 or not ax:
        return x
    if kind == "mean":
        return ops.reduce_mean(b.graph, x, ax, b.prog, keepdims=keepdims)
    return ops.reduce(b.graph, x, ax, b.prog, op_name=kind, keepdims=keepdims, debug_name=f"reduce_{kind}")


@handles(*_REDUCE)
def _reduce(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    kind, since = _REDUCE[node.op_type]
    at = attrs(node)
    axes = _axes_input(b, node, inputs, since)
    if axes is not None and not axes:
        axes = None
    if axes is None and at.get("noop_with_empty_axes", 0):
        return [x]
    if x.numel() == 0:
        raise Unsupported("empty input")
    return [reduce(b, x, axes, kind, bool(at.get("keepdims", 1)))]


def _coerced(b: Builder, node: onnx.NodeProto, x: Tensor) -> tuple[Tensor, int]:
    """Softmax-like ops: opsets before 13 work on x flattened to 2-D at ``axis`` (default 1)."""
    if b.opset >= 13:
        return x, _axis(int(attrs(node).get("axis", -1)), x.rank)
    axis = _axis(int(attrs(node).get("axis", 1)), x.rank)
    outer = int(np.prod(x.shape[:axis], dtype=np.int64))
    return x.reshape(outer, -1), 1


@handles("Softmax", "LogSoftmax")
def _softmax(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    if x.dtype.kind != "f":
        raise Unsupported("integer input")
    xs, axis = _coerced(b, node, _nd(x))
    fn = ops.softmax if node.op_type == "Softmax" else ops.log_softmax
    return [fn(b.graph, xs, b.prog, axis=axis).reshape(x.shape)]


def _per_channel(v: np.ndarray, rank: int) -> np.ndarray:
    return v.reshape((1, -1) + (1,) * (rank - 2))


@handles("BatchNormalization")
def _batch_norm(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    at = attrs(node)
    if at.get("training_mode", 0) or len([o for o in node.output if o]) > 1:
        raise Unsupported("training mode")
    x = b.device(inputs[0])
    scale, bias, mean, var = inputs[1:5]
    eps = float(at.get("epsilon", 1e-5))
    if x.rank < 2:
        raise Unsupported(f"rank {x.rank} input")
    if all(not isinstance(v, Tensor) for v in (scale, bias, mean, var)):
        # fold the statistics into one scale and shift per channel on the host
        a = np.asarray(scale, np.float64) / np.sqrt(np.asarray(var, np.float64) + eps)
        s = np.asarray(bias, np.float64) - np.asarray(mean, np.float64) * a
        dt = np.asarray(scale).dtype
        a = b.host(f"{node.name}/scale", _per_channel(a.astype(dt), x.rank))
        s = b.host(f"{node.name}/shift", _per_channel(s.astype(dt), x.rank))
        return [b.binary("add", b.binary("mul", x, a), s)]
    r = x.rank
    shp = (1, -1) + (1,) * (r - 2)

    def dev(v: Value) -> Tensor:
        return b.device(v, like=x.dtype).reshape(shp)

    inv = ops.unary(b.graph, "rsqrt", ops.add_scalar(b.graph, b.device(var, like=x.dtype), eps, b.prog), b.prog)
    a = b.binary("mul", dev(scale), inv.reshape(shp))
    y = b.binary("mul", b.binary("sub", x, dev(mean)), a)
    return [b.binary("add", y, dev(bias))]


@handles("LayerNormalization")
def _layer_norm(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    at = attrs(node)
    x = b.device(inputs[0])
    axis = _axis(int(at.get("axis", -1)), x.rank)
    eps = float(at.get("epsilon", 1e-5))
    outer = int(np.prod(x.shape[:axis], dtype=np.int64))
    inner_shape = x.shape[axis:]
    inner = int(np.prod(inner_shape, dtype=np.int64))

    def param(v: Value | None) -> Tensor | None:
        if v is None:
            return None
        t = b.device(v, like=x.dtype)
        return (t.broadcast_to(inner_shape) if t.shape != inner_shape else t).reshape(inner)

    x2 = x.reshape(outer, inner)
    y, _, invstd = ops.layer_norm(b.graph, x2, param(inputs[1]), param(inputs[2] if len(inputs) > 2 else None),
                                  b.prog, eps=eps)  # fmt: skip
    stat_shape = x.shape[:axis] + (1,) * (x.rank - axis)
    outs: list[Any] = [y.reshape(x.shape)]
    if len(node.output) > 1 and node.output[1]:
        outs.append(ops.reduce_mean(b.graph, x2, [1], b.prog, keepdims=True).reshape(stat_shape))
    else:
        outs.append(None)
    outs.append(invstd.reshape(stat_shape))
    return outs


def _pow_scalar(x: np.ndarray, p: float) -> np.ndarray:
    return np.power(x, p)


@handles("LRN")
def _lrn(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    at = attrs(node)
    x = b.device(inputs[0])
    size = int(at["size"])
    alpha, beta, bias = float(at.get("alpha", 1e-4)), float(at.get("beta", 0.75)), float(at.get("bias", 1.0))
    sq = b.unary("square", x)
    lo, hi = (size - 1) // 2, -(-(size - 1) // 2)
    pads = [(0, 0)] * x.rank
    pads[1] = (lo, hi)
    padded = pad_view(b, sq, pads, "constant", 0.0)
    c = x.shape[1]
    total: Tensor = padded.slice(0, c, 1)
    for j in range(1, size):
        total = b.binary("add", total, padded.slice(j, j + c, 1))
    t = ops.add_scalar(b.graph, ops.scale(b.graph, total, alpha / size, b.prog), bias, b.prog)
    d = b.map("PowScalar", _pow_scalar, [t], (cost_model.binary("power"),), p=beta)
    return [b.binary("div", x, d)]


# -- convolution and pooling -------------------------------------------------------------------------
def _spatial_pads(
    at: dict[str, Any], in_sizes: tuple[int, ...], kernel: list[int], strides: list[int], dilations: list[int]
) -> list[tuple[int, int]]:
    """(before, after) padding per spatial dimension from ``pads`` or ``auto_pad``."""
    n = len(in_sizes)
    auto = at.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto in ("NOTSET", ""):
        p = list(at.get("pads", [0] * 2 * n))
        return [(int(p[i]), int(p[i + n])) for i in range(n)]
    if auto == "VALID":
        return [(0, 0)] * n
    out = []
    for size, k, s, d in zip(in_sizes, kernel, strides, dilations, strict=True):
        total = max((-(-size // s) - 1) * s + (k - 1) * d + 1 - size, 0)
        small, big = total // 2, total - total // 2
        out.append((small, big) if auto == "SAME_UPPER" else (big, small))
    return out


def _to_2d(x: Tensor, what: str) -> tuple[Tensor, bool]:
    if x.rank == 3:
        return x.reshape(x.shape[0], x.shape[1], 1, x.shape[2]), True
    if x.rank != 4:
        raise Unsupported(f"{x.rank - 2}-D {what}")
    return x, False


def _expand_1d(v: list[int], one_d: bool, fill: int) -> list[int]:
    return [fill] + v if one_d else v


@handles("Conv")
def _conv(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    at = attrs(node)
    x = b.device(inputs[0])
    if x.rank == 5:
        y = more_operators.conv3d_by_slices(b, node, x, inputs[1], at)
        if len(inputs) > 2 and inputs[2] is not None:
            bias = inputs[2]
            y = b.binary("add", y, bias.reshape(1, -1, 1, 1, 1) if isinstance(bias, Tensor)
                         else np.asarray(bias).reshape(1, -1, 1, 1, 1))  # fmt: skip
        return [y]
    w_shape = inputs[1].shape if isinstance(inputs[1], Tensor) else np.shape(inputs[1])
    x4, one_d = _to_2d(x, "convolution")
    if len(w_shape) != (3 if one_d else 4):
        raise Unsupported("weights rank")
    n_sp = x.rank - 2
    kernel = list(at.get("kernel_shape", w_shape[2:]))
    strides = list(at.get("strides", [1] * n_sp))
    dil = list(at.get("dilations", [1] * n_sp))
    pads = _spatial_pads(at, x.shape[2:], kernel, strides, dil)
    strides, dil = _expand_1d(strides, one_d, 1), _expand_1d(dil, one_d, 1)
    pads = ([(0, 0)] if one_d else []) + pads
    if any(lo != hi for lo, hi in pads):  # asymmetric padding: pad explicitly
        x4 = pad_view(b, x4, [(0, 0), (0, 0)] + pads, "constant", 0.0)
        sym = (0, 0)
    else:
        sym = (pads[0][0], pads[1][0])
    groups = int(at.get("group", 1))
    if isinstance(inputs[1], Tensor):
        w = inputs[1]
    else:  # weights created laid out for this convolution (PopART's createWeights)
        grp = ops.conv.channel_group(x4, groups)  # the column order conv2d will take

        def laid_out(t: Tensor) -> bool:
            return not one_d and ops.map_conv_weights(b.graph, t, x4.shape, tuple(strides), sym, tuple(dil), groups,
                                                      b.partials, b.amp, channel_group=grp)  # fmt: skip

        storage = None if one_d else ops.conv.WeightStorage(grp)  # as ops.create_conv_weights stores them
        w = b.device(inputs[1], name=node.input[1], like=x.dtype, mapper=laid_out, storage=storage)
    w4 = w.reshape(w.shape[0], w.shape[1], 1, w.shape[2]) if one_d else w
    y = ops.conv2d(b.graph, x4, w4, b.prog, stride=tuple(strides), padding=sym, dilation=tuple(dil),
                   groups=groups, partials_dtype=b.partials, available_memory_proportion=b.amp)  # fmt: skip
    if one_d:
        y = y.reshape(y.shape[0], y.shape[1], y.shape[3])
    if len(inputs) > 2 and inputs[2] is not None:
        bias = inputs[2]
        bias = (
            bias.reshape((1, -1) + (1,) * n_sp) if isinstance(bias, Tensor) else _per_channel(np.asarray(bias), y.rank)
        )
        y = b.binary("add", y, bias)
    return [y]


def _pool_geometry(b: Builder, node: onnx.NodeProto, x: Tensor) -> tuple[list[int], list[int], list[int], list[tuple[int, int]], list[tuple[int, int]]]:  # fmt: skip
    """(kernel, strides, dilations, explicit pads, ceil-mode extra pads) per spatial dimension."""
    at = attrs(node)
    kernel = list(at["kernel_shape"])
    n = len(kernel)
    strides = list(at.get("strides", [1] * n))
    dilations = list(at.get("dilations", [1] * n))
    if (at.get("storage_order", 0) or len([o for o in node.output if o]) > 1) and x.rank != 4:
        raise Unsupported("indices output of 1-D or 3-D pooling")
    pads = _spatial_pads(at, x.shape[2:], kernel, strides, dilations)
    extra = []
    for size, k, s, d, (lo, hi) in zip(x.shape[2:], kernel, strides, dilations, pads, strict=True):
        k = (k - 1) * d + 1  # the window's extent
        span = size + lo + hi - k
        out = (-(-span // s) if at.get("ceil_mode", 0) else span // s) + 1
        if at.get("ceil_mode", 0) and (out - 1) * s >= size + lo:
            out -= 1  # the last window would start in the padding
        extra.append(max(0, (out - 1) * s + k - (size + lo + hi)))
    return kernel, strides, dilations, pads, [(0, e) for e in extra]


@handles("MaxPool", "AveragePool")
def _pool(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    if x.rank == 5:
        return [more_operators.pool3d_by_slices(b, node, x)]
    x4, one_d = _to_2d(x, "pooling")
    kernel, strides, dilations, pads, extra = _pool_geometry(b, node, x)
    kernel, strides, dilations = (_expand_1d(v, one_d, 1) for v in (kernel, strides, dilations))
    pads, extra = ([(0, 0)] if one_d else []) + pads, ([(0, 0)] if one_d else []) + extra
    full = [(lo, hi + e) for (lo, hi), (_, e) in zip(pads, extra, strict=True)]
    # equal padding on both sides is the op's own (its window reads a pad constant per tile, no
    # index per element); other padding is a padded view
    indices = node.op_type == "MaxPool" and len(node.output) > 1 and bool(node.output[1])
    even = all(lo == hi for lo, hi in full) and not indices  # (the indices are found in the padded view)
    op_pad = tuple(lo for lo, _ in full) if even else (0, 0)
    if node.op_type == "MaxPool":
        lowest = float(np.finfo(x.dtype).min) if x.dtype.kind == "f" else int(np.iinfo(x.dtype).min)
        xp = x4 if even else pad_view(b, x4, [(0, 0), (0, 0)] + full, "constant", lowest)
        y = ops.max_pool2d(b.graph, xp, tuple(kernel), b.prog, stride=tuple(strides), padding=op_pad,
                           dilation=tuple(dilations))  # fmt: skip
        if len(node.output) > 1 and node.output[1]:
            order = int(attrs(node).get("storage_order", 0))
            idx = more_operators.max_pool_indices(b, x4, xp, y, kernel, strides, dilations, full, order)
            return [y, idx]
    else:
        xp = x4 if even else pad_view(b, x4, [(0, 0), (0, 0)] + full, "constant", 0.0)
        y = ops.avg_pool2d(b.graph, xp, tuple(kernel), b.prog, stride=tuple(strides), padding=op_pad,
                           dilation=tuple(dilations))  # fmt: skip
        # divisor per output position: the window's elements inside the input (count_include_pad=0)
        # or inside the explicitly padded input (=1); ceil-mode overhang never counts
        include = attrs(node).get("count_include_pad", 0)
        h, w = x4.shape[2:]
        ones = np.zeros((h + full[0][0] + full[0][1], w + full[1][0] + full[1][1]))
        if include:
            ones[: h + pads[0][0] + pads[0][1], : w + pads[1][0] + pads[1][1]] = 1
        else:
            ones[full[0][0] : full[0][0] + h, full[1][0] : full[1][0] + w] = 1
        ho, wo = y.shape[2:]
        extent = tuple((k - 1) * d + 1 for k, d in zip(kernel, dilations, strict=True))
        win = np.lib.stride_tricks.sliding_window_view(ones, extent)[:: strides[0], :: strides[1]][:ho, :wo]
        win = win[:, :, :: dilations[0], :: dilations[1]]
        count = win.sum(axis=(2, 3))
        factor = kernel[0] * kernel[1] / np.maximum(count, 1)
        if not np.allclose(factor, 1.0):
            y = b.binary("mul", y, factor.astype(x.dtype).reshape(1, 1, ho, wo))
    if one_d:
        y = y.reshape(y.shape[0], y.shape[1], y.shape[3])
    return [y]


@handles("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    if x.rank == 4:  # pooling over the whole image: vertices over positions and channel chunks
        pool = ops.avg_pool2d if node.op_type == "GlobalAveragePool" else ops.max_pool2d
        return [pool(b.graph, x, tuple(x.shape[2:]), b.prog)]
    kind = "mean" if node.op_type == "GlobalAveragePool" else "max"
    return [reduce(b, x, list(range(2, x.rank)), kind, keepdims=True)]


from . import more_operators  # noqa: E402 - registers its handlers, which build on the ones above

SUPPORTED: tuple[str, ...] = tuple(sorted(HANDLERS))


@contextlib.contextmanager
def wrong_kernel(op_type: str | None) -> Iterator[None]:
    """Test-only (``tilescope run --test-wrong-kernel OP``): while active, ``op_type``'s handler adds 1
    to its first output on the device: a deliberately wrong kernel that ``--check`` must catch."""
    if not op_type:
        yield
        return
    if op_type not in HANDLERS:
        raise FrontendError(f"--test-wrong-kernel: no handler for {op_type!r}")
    right = HANDLERS[op_type]

    def wrong(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
        outs = right(b, node, inputs)
        y = b.device(outs[0])
        return [ops.add_scalar(b.graph, _nd(y), 1.0, b.prog).reshape(y.shape), *outs[1:]]

    HANDLERS[op_type] = wrong
    try:
        yield
    finally:
        HANDLERS[op_type] = right
