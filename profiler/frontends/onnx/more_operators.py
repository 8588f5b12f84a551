"""More ONNX operators (issue 14): the activations, rounding, logic, indexing and layout ops that
real exported CNNs and transformers use. Every handler composes public operations (``profiler.ops``
functions, the builder's elementwise ``map`` and tensor views: slice, reshape, transpose, concat,
broadcast, indexing); none needs a new codelet.

Imported by ``operators`` (which registers the core handlers first).
"""

from __future__ import annotations

import string
from typing import Any

import numpy as np
import onnx
from onnx import helper

from profiler import ops
from profiler.chip import cost_model
from profiler.poplar.tensor import Tensor, concat

from .builder import Builder, Unsupported, Value, _nd, device_dtype
from .operators import _axis, _host, _select, _shape, attrs, handles, matmul, pad_view, reduce


def _text(v: object, default: str) -> str:
    if v is None:
        return default
    return v.decode() if isinstance(v, bytes) else str(v)


# -- activations and elementwise math ------------------------------------------------------------
def _prelu(x: np.ndarray, slope: np.ndarray) -> np.ndarray:
    return np.where(x < 0, x * slope, x)


def _hard_sigmoid(x: np.ndarray, alpha: float, beta: float) -> np.ndarray:
    return np.clip(x * alpha + beta, 0, 1)


def _hard_swish(x: np.ndarray) -> np.ndarray:
    return x * np.clip(x * (1.0 / 6.0) + 0.5, 0, 1)


def _selu(x: np.ndarray, alpha: float, gamma: float) -> np.ndarray:
    return np.where(x > 0, gamma * x, gamma * alpha * np.expm1(np.minimum(x, 0)))


def _elu(x: np.ndarray, alpha: float) -> np.ndarray:
    return np.where(x >= 0, x, alpha * np.expm1(np.minimum(x, 0)))


def _celu(x: np.ndarray, alpha: float) -> np.ndarray:
    return np.maximum(x, 0) + np.minimum(0, alpha * np.expm1(np.minimum(x, 0) / alpha))


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(0, x)  # log(1 + e^x) without overflow for large x


def _softsign(x: np.ndarray) -> np.ndarray:
    return x / (1 + np.abs(x))


def _thresholded_relu(x: np.ndarray, alpha: float) -> np.ndarray:
    return np.where(x > alpha, x, 0)


def _mish(x: np.ndarray) -> np.ndarray:
    return x * np.tanh(np.logaddexp(0, x))


# cost: the popops ops a fused vertex would perform, as the existing LeakyRelu/GeluTanh maps do [INF]
_EXP = (cost_model.unary("exponent"), cost_model.binary("maximum"), cost_model.binary("multiply"))
_ACTIVATIONS: dict[str, tuple[Any, tuple[cost_model.CostOp, ...], dict[str, float]]] = {
    "HardSigmoid": (_hard_sigmoid, (cost_model.binary("multiply"), cost_model.binary("add"), cost_model.binary("maximum"),
                                    cost_model.binary("minimum")), {"alpha": 0.2, "beta": 0.5}),
    "HardSwish": (_hard_swish, (cost_model.binary("multiply"), cost_model.binary("add"), cost_model.binary("maximum"),
                                cost_model.binary("minimum"), cost_model.binary("multiply")), {}),
    "Selu": (_selu, _EXP, {"alpha": 1.67326319217681884765625, "gamma": 1.05070102214813232421875}),
    "Elu": (_elu, _EXP, {"alpha": 1.0}),
    "Celu": (_celu, _EXP, {"alpha": 1.0}),
    "Softplus": (_softplus, (cost_model.unary("exponent"), cost_model.unary("logarithm"), cost_model.binary("add")), {}),
    "Softsign": (_softsign, (cost_model.unary("absolute"), cost_model.binary("add"), cost_model.binary("divide")), {}),
    "ThresholdedRelu": (_thresholded_relu, (cost_model.binary("greater_than"), cost_model.binary("multiply")), {"alpha": 1.0}),
    "Mish": (_mish, (cost_model.unary("exponent"), cost_model.unary("logarithm"), cost_model.unary("tanh"), cost_model.binary("multiply")), {}),
}  # fmt: skip


@handles(*_ACTIVATIONS)
def _activation(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    fn, cost, defaults = _ACTIVATIONS[node.op_type]
    x = b.device(inputs[0])
    if x.dtype.kind != "f":
        raise Unsupported(f"integer input ({x.dtype.name})")
    at = attrs(node)
    params = {k: float(at.get(k, v)) for k, v in defaults.items()}
    return [b.map(node.op_type, fn, [x], cost, **params)]


@handles("PRelu")
def _prelu_op(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x, slope = b._pair(inputs[0], inputs[1])
    if b.opset < 7 and slope.rank == 1 and x.rank > 2:  # opset 6: a per-channel slope lines up with axis 1
        slope = slope.reshape((1, -1) + (1,) * (x.rank - 2))
    return [b.map("PRelu", _prelu, [x, slope], (cost_model.binary("multiply"), cost_model.binary("maximum")))]


_ROUND = {"Floor": (np.floor, "floor"), "Ceil": (np.ceil, "ceil"), "Round": (np.round, "round")}


@handles(*_ROUND)
def _round(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    if x.dtype.kind != "f":
        return [x]  # integers are already whole
    fn, cost = _ROUND[node.op_type]  # np.round rounds halves to even, as ONNX Round does
    return [b.map(node.op_type, fn, [x], (cost_model.unary(cost),))]


def _sin(x: np.ndarray) -> np.ndarray:
    return np.sin(x)


def _cos(x: np.ndarray) -> np.ndarray:
    return np.cos(x)


def _is_nan(x: np.ndarray) -> np.ndarray:
    return np.isnan(x)


def _is_inf(x: np.ndarray, pos: int, neg: int) -> np.ndarray:
    return (np.isposinf(x) & bool(pos)) | (np.isneginf(x) & bool(neg))


@handles("Sin", "Cos")
def _trig(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    fn, cost = (_sin, "sin") if node.op_type == "Sin" else (_cos, "cos")
    return [b.map(node.op_type, fn, [inputs[0]], (cost_model.unary(cost),))]


@handles("IsNaN", "IsInf")
def _is_special(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    if node.op_type == "IsNaN":
        return [b.map("IsNaN", _is_nan, [x], (cost_model.binary("not_equal"),), out_dtype="bool")]
    at = attrs(node)
    pos, neg = int(at.get("detect_positive", 1)), int(at.get("detect_negative", 1))
    return [b.map("IsInf", _is_inf, [x], (cost_model.binary("equal"),), out_dtype="bool", pos=pos, neg=neg)]


def _mod(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "f":  # fmod=0 on floats (the spec asks for fmod=1; its tests use both): Python's %
        return np.mod(a, c)
    safe = np.where(c == 0, 1, c)
    return np.mod(a, safe)  # the sign of the divisor, as Python's and ONNX's fmod=0


def _fmod(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    return np.fmod(a, c)  # the sign of the dividend (C's fmod)


@handles("Mod")
def _mod_op(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    ta, tc = b._pair(inputs[0], inputs[1])
    fmod = int(attrs(node).get("fmod", 0))
    fn = _fmod if fmod else _mod
    if ta.dtype.kind == "f":
        return [
            b.map(
                "Remainder",
                fn,
                [ta, tc],
                (cost_model.binary("divide"), cost_model.binary("multiply"), cost_model.binary("subtract")),
            )
        ]
    # integer remainder: the cost model has no integer divide; as integer multiply-subtract [INF]
    return [b.map("RemainderInt", fn, [ta, tc], (cost_model.binary("multiply"), cost_model.binary("subtract")))]


def _and(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    return np.logical_and(a, c)


def _or(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    return np.logical_or(a, c)


def _xor(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    return np.logical_xor(a, c)


_LOGIC = {"And": (_and, "logical_and"), "Or": (_or, "logical_or"), "Xor": (_xor, "logical_or")}


@handles(*_LOGIC)
def _logic(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    ta, tc = b._pair(inputs[0], inputs[1])
    fn, cost = _LOGIC[node.op_type]
    return [b.map(node.op_type, fn, [ta, tc], (cost_model.binary(cost),), out_dtype="bool")]


# -- layout -----------------------------------------------------------------------------------------
@handles("Tile")
def _tile(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    reps = [int(r) for r in _host(inputs[1], "repeats").reshape(-1)]  # type: ignore[union-attr]
    if len(reps) != x.rank:
        raise ValueError(f"Tile: {len(reps)} repeats for rank {x.rank}")
    if 0 in reps or x.numel() == 0:
        raise Unsupported("empty tensors")
    y = x
    for axis, r in enumerate(reps):
        if r > 1:
            y = y.broadcast(r, axis)  # Poplar Tensor::broadcast repeats the whole tensor: a view
    return [y]


@handles("Range")
def _range(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    # Range of constants is folded at import; bounds computed on the device would give a shape
    # only known at run time, which a static graph cannot have
    raise Unsupported("start/limit/delta computed on the device (must be constant)")


@handles("Trilu")
def _trilu(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    k = 0 if len(inputs) < 2 or inputs[1] is None else int(_host(inputs[1], "k").reshape(-1)[0])  # type: ignore[union-attr]
    n, m = x.shape[-2:]
    upper = int(attrs(node).get("upper", 1))
    keep = np.triu(np.ones((n, m), bool), k) if upper else np.tril(np.ones((n, m), bool), k)
    zero = np.zeros((), dtype=x.dtype)
    return [b.map("Select", _select, [x, zero, keep], (cost_model.binary("maximum"),))]


# -- reductions that pick an index ------------------------------------------------------------------
def _first_index(x: np.ndarray, m: np.ndarray, iota: np.ndarray, miss: int) -> np.ndarray:
    return np.where(x == m, iota, miss)


def arg_extreme(b: Builder, x: Tensor, axis: int, largest: bool, last: bool) -> tuple[Tensor, Tensor]:
    """(extreme value keepdims, its index keepdims as int32) along ``axis``: a max/min reduction, then
    the lowest (or highest) position holding it, as a second min/max reduction of the positions."""
    m = reduce(b, x, [axis], "max" if largest else "min", keepdims=True)
    n = x.shape[axis]
    iota = np.arange(n, dtype=np.int32).reshape([n if d == axis else 1 for d in range(x.rank)])
    miss = -1 if last else n
    cand = b.map("ArgCandidates", _first_index, [x, m, iota], (cost_model.binary("equal"), cost_model.binary("maximum")),
                 out_dtype="int32", miss=miss)  # fmt: skip
    return m, reduce(b, cand, [axis], "max" if last else "min", keepdims=True)


@handles("ArgMax", "ArgMin")
def _arg(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    at = attrs(node)
    axis = _axis(int(at.get("axis", 0)), x.rank)
    _, idx = arg_extreme(b, x, axis, node.op_type == "ArgMax", bool(at.get("select_last_index", 0)))
    if not at.get("keepdims", 1):
        idx = idx.reshape([s for d, s in enumerate(idx.shape) if d != axis])
    return [idx]


def _masked(x: np.ndarray, idx: np.ndarray, iota: np.ndarray, fill: float) -> np.ndarray:
    return np.where(iota == idx, fill, x)


@handles("TopK")
def _topk(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    at = attrs(node)
    axis = _axis(int(at.get("axis", -1)), x.rank)
    k = int(at["k"]) if b.opset < 10 else int(_host(inputs[1], "k").reshape(-1)[0])  # type: ignore[union-attr]
    largest = bool(at.get("largest", 1))
    if k > 64:
        raise Unsupported(f"k={k} > 64 (TopK runs k max-reductions)")
    if k == 0 or x.numel() == 0:
        raise Unsupported("empty tensors")
    n = x.shape[axis]
    iota = np.arange(n, dtype=np.int32).reshape([n if d == axis else 1 for d in range(x.rank)])
    fill = -np.inf if largest else np.inf
    if x.dtype.kind != "f":
        info = np.iinfo(x.dtype)
        fill = info.min if largest else info.max
    values, indices, cur = [], [], x
    for i in range(k):  # selection: the next extreme, then mask it out (ties: the lower index first)
        m, idx = arg_extreme(b, cur, axis, largest, False)
        values.append(m)
        indices.append(idx)
        if i + 1 < k:
            cur = b.map("TopKMask", _masked, [cur, idx, iota], (cost_model.binary("equal"), cost_model.binary("maximum")),
                        fill=fill)  # fmt: skip
    return [concat(values, axis) if k > 1 else values[0], concat(indices, axis) if k > 1 else indices[0]]


# -- scans ------------------------------------------------------------------------------------------
@handles("CumSum")
def _cumsum(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    axis = _axis(int(_host(inputs[1], "axis").reshape(-1)[0]), x.rank)  # type: ignore[union-attr]
    at = attrs(node)
    n = x.shape[axis]
    flip = tuple(slice(None, None, -1) if d == axis else slice(None) for d in range(x.rank))
    y: Tensor = x[flip] if at.get("reverse", 0) else x
    if at.get("exclusive", 0):
        pads = [(1, -1) if d == axis else (0, 0) for d in range(x.rank)]
        y = pad_view(b, y, pads, "constant", 0)
    # Hillis-Steele scan: log2(n) steps, each adds a copy shifted by 2^s (padding reads zeros)
    shift = 1
    while shift < n:
        pads = [(shift, -shift) if d == axis else (0, 0) for d in range(x.rank)]
        y = b.binary("add", y, pad_view(b, y, pads, "constant", 0))
        shift *= 2
    if at.get("reverse", 0):
        y = y[flip]
    return [y]


# -- einsum -----------------------------------------------------------------------------------------
def _einsum_terms(eq: str, ranks: list[int]) -> tuple[list[str], str]:
    """Operand and output index strings, with any ellipsis spelled out as letters the equation does
    not use (broadcast dimensions, right-aligned as numpy does)."""
    eq = eq.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise ValueError(f"Einsum: {len(terms)} terms for {len(ranks)} inputs")
    if "..." in eq:
        free = [c for c in string.ascii_uppercase + string.ascii_lowercase if c not in eq]
        widths = [r - len(t.replace("...", "")) for t, r in zip(terms, ranks, strict=True) if "..." in t]
        ell = "".join(free[: max(widths, default=0)])
        terms = [t.replace("...", ell[len(ell) - (r - len(t.replace("...", ""))):]) if "..." in t else t
                 for t, r in zip(terms, ranks, strict=True)]  # fmt: skip
        if arrow:
            rhs = rhs.replace("...", ell)
        else:
            lhs = ",".join(terms)
            rest = {c: lhs.count(c) for c in set(lhs) if c not in ell and c in string.ascii_letters}
            rhs = ell + "".join(sorted(c for c, k in rest.items() if k == 1))
            arrow = "->"
    if not arrow:
        counts = {c: lhs.count(c) for c in set(lhs) if c in string.ascii_letters}
        rhs = "".join(sorted(c for c, k in counts.items() if k == 1))
    return terms, rhs


def _sum_out(b: Builder, x: Tensor, term: str, keep: set[str]) -> tuple[Tensor, str]:
    """Sum over the indices of ``term`` that appear nowhere else."""
    gone = [i for i, c in enumerate(term) if c not in keep]
    if not gone:
        return x, term
    y = reduce(b, x, gone, "add", keepdims=False)
    return y, "".join(c for c in term if c in keep)


def _diagonal(x: Tensor, term: str) -> tuple[Tensor, str]:
    """An index repeated within one operand (``ii``, ``bii``) takes the diagonal: a view."""
    while len(set(term)) != len(term):
        c = next(ch for ch in term if term.count(ch) > 1)
        i, j = term.index(c), term.index(c, term.index(c) + 1)
        rest = [d for d in range(x.rank) if d not in (i, j)]
        moved = x.transpose(*rest, i, j)
        ar = np.arange(min(x.shape[i], x.shape[j]))
        x = moved[(Ellipsis, ar, ar)]
        term = "".join(term[d] for d in rest) + c
    return x, term


@handles("Einsum")
def _einsum(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    eq = _text(attrs(node).get("equation"), "")
    terms, out = _einsum_terms(eq, [len(_shape(v)) for v in inputs])
    if len(terms) == 1:
        x, t0 = _diagonal(b.device(inputs[0]), terms[0])
        y, t = _sum_out(b, x, t0, set(out))
        return [y.transpose(*[t.index(c) for c in out]) if t != out else y]
    if len(terms) != 2:
        raise Unsupported(f"{len(terms)} operands")
    a, c = b._pair(inputs[0], inputs[1])
    (a, ta), (c, tc) = _diagonal(a, terms[0]), _diagonal(c, terms[1])
    a, ta = _sum_out(b, a, ta, set(tc) | set(out))
    c, tc = _sum_out(b, c, tc, set(ta) | set(out))
    batch = [ch for ch in ta if ch in tc and ch in out]
    contract = [ch for ch in ta if ch in tc and ch not in out]
    left = [ch for ch in ta if ch not in tc]
    right = [ch for ch in tc if ch not in ta]
    size = {ch: max(a.shape[ta.index(ch)] if ch in ta else 1, c.shape[tc.index(ch)] if ch in tc else 1)
            for ch in set(ta) | set(tc)}  # fmt: skip
    # broadcast batch dimensions of size 1 (ellipsis dimensions broadcast as in numpy)
    if any(a.shape[ta.index(ch)] != size[ch] for ch in batch):
        a = a.broadcast_to([size[ch] if ch in batch else a.shape[i] for i, ch in enumerate(ta)])
    if any(c.shape[tc.index(ch)] != size[ch] for ch in batch):
        c = c.broadcast_to([size[ch] if ch in batch else c.shape[i] for i, ch in enumerate(tc)])

    def prod(chs: list[str]) -> int:
        return int(np.prod([size[ch] for ch in chs], dtype=np.int64))

    # [batch, left, contract] x [batch, contract, right] -> [batch, left, right]: one (batched) matmul
    a3 = a.transpose(*[ta.index(ch) for ch in batch + left + contract]).reshape(prod(batch), prod(left), prod(contract))
    c3 = c.transpose(*[tc.index(ch) for ch in batch + contract + right]).reshape(
        prod(batch), prod(contract), prod(right)
    )
    if not batch:
        y = matmul(b, a3.reshape(prod(left), prod(contract)), c3.reshape(prod(contract), prod(right)))
    else:
        y = matmul(b, a3, c3)
    got = batch + left + right
    y = y.reshape([size[ch] for ch in got]) if got else y.reshape(())
    return [y.transpose(*[got.index(ch) for ch in out]) if got != list(out) else y]


# -- indexing with constant indices: views --------------------------------------------------------------
def _gather_nd_index(data_shape: tuple[int, ...], idx: np.ndarray, batch_dims: int) -> tuple[np.ndarray, ...]:
    """numpy advanced-index arrays selecting GatherND's result from data."""
    idx = idx.astype(np.int64)
    q = idx.shape[-1]
    bshape = idx.shape[:batch_dims]
    outer = idx.shape[batch_dims:-1]
    grids = np.indices(bshape) if batch_dims else np.zeros((0,), np.int64)
    index: list[np.ndarray] = []
    for d in range(batch_dims):
        index.append(grids[d].reshape(bshape + (1,) * len(outer)))
    for j in range(q):
        v = idx[..., j]
        dim = data_shape[batch_dims + j]
        index.append(np.where(v < 0, v + dim, v))
    return tuple(np.broadcast_arrays(*index)) if index else ()


@handles("GatherND")
def _gather_nd(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    idx = _host(inputs[1], "indices")
    batch_dims = int(attrs(node).get("batch_dims", 0))
    index = _gather_nd_index(x.shape, idx, batch_dims)  # type: ignore[arg-type]
    return [x[index]]


def _flat_index(i: np.ndarray, offset: np.ndarray, dim: int, stride: int) -> np.ndarray:
    return np.where(i < 0, i + dim, i) * stride + offset


def gather_elements(b: Builder, x: Tensor, ti: Tensor, axis: int) -> Tensor:
    """GatherElements with device indices: flat element indices, then one gather from x as a column."""
    if ti.dtype.kind not in "iu":
        raise Unsupported("non-integer indices")
    stride = int(np.prod(x.shape[axis + 1 :], dtype=np.int64))
    grid = np.indices(ti.shape)
    grid[axis] = 0
    offset = np.ravel_multi_index(tuple(grid), x.shape).astype(np.int32)
    flat = b.map("FlatIndex", _flat_index, [ti, offset], (cost_model.binary("multiply"), cost_model.binary("add")),
                 out_dtype="int32", dim=int(x.shape[axis]), stride=stride)  # fmt: skip
    out = ops.gather(b.graph, x.reshape(-1, 1), flat.reshape(-1), b.prog)
    return out.reshape(ti.shape)


@handles("GatherElements")
def _gather_elements(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    axis = _axis(int(attrs(node).get("axis", 0)), x.rank)
    if isinstance(inputs[1], Tensor):  # indices on the device: one flat-index gather (popops MultiSlice)
        return [gather_elements(b, x, inputs[1], axis)]
    idx = _host(inputs[1], "indices").astype(np.int64)  # type: ignore[union-attr]
    idx = np.where(idx < 0, idx + x.shape[axis], idx)
    grid = list(np.indices(idx.shape))
    grid[axis] = idx
    return [x[tuple(grid)]]


@handles("ScatterND", "ScatterElements", "Scatter")
def _scatter(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    """With constant indices the result is a view: each element comes from ``data`` or from ``updates``."""
    data, idx, upd = inputs[0], _host(inputs[1], "indices"), inputs[2]
    x, u = b._pair(data, upd)
    reduction = _text(attrs(node).get("reduction"), "none")
    if reduction not in ("none", "add", "mul", "max", "min"):
        raise Unsupported(f"reduction={reduction!r}")
    idx = idx.astype(np.int64)  # type: ignore[union-attr]
    pos = np.arange(x.numel(), dtype=np.int64).reshape(x.shape)  # element positions in data
    if node.op_type == "ScatterND":
        target = pos[_gather_nd_index(x.shape, idx, 0)]  # positions each update row lands on
    else:
        axis = _axis(int(attrs(node).get("axis", 0)), x.rank)
        idx = np.where(idx < 0, idx + x.shape[axis], idx)
        grid = list(np.indices(idx.shape))
        grid[axis] = idx
        target = pos[tuple(grid)]
    flat = target.reshape(-1)
    if reduction == "none":
        source = np.arange(x.numel(), dtype=np.int64)  # output element -> position in concat(data, updates)
        source[flat] = x.numel() + np.arange(flat.size, dtype=np.int64)  # the last update wins
        both = concat([x.reshape(-1), u.reshape(-1)], 0)
        return [both[source].reshape(x.shape)]
    # a reduction: the k-th update of each position goes into layer k (positions unique within a
    # layer); each layer is a view holding its updates and the identity elsewhere, combined with
    # the result by one elementwise op
    order = np.argsort(flat, kind="stable")
    first = np.searchsorted(flat[order], flat[order], side="left")
    rank = np.empty(flat.size, dtype=np.int64)
    rank[order] = np.arange(flat.size) - first
    lowest, highest = (np.finfo if x.dtype.kind == "f" else np.iinfo)(x.dtype).min, (
        np.finfo if x.dtype.kind == "f" else np.iinfo)(x.dtype).max  # fmt: skip
    ident = {"add": 0, "mul": 1, "max": lowest, "min": highest}[reduction]
    pool = concat([b.device(np.array([ident], dtype=x.dtype), like=x.dtype), u.reshape(-1)], 0)
    y: Value = x
    for k in range(int(rank.max()) + 1 if rank.size else 0):
        sel = np.nonzero(rank == k)[0]
        source = np.zeros(x.numel(), dtype=np.int64)  # element 0 of the pool: the identity
        source[flat[sel]] = 1 + sel
        y = b.binary(reduction, y, pool[source].reshape(x.shape))
    return [y]


# -- one-hot ------------------------------------------------------------------------------------------
def _one_hot(i: np.ndarray, iota: np.ndarray, depth: int, off: float, on: float) -> np.ndarray:
    i = np.where(i < 0, i + depth, i)
    return np.where(i == iota, on, off)


@handles("OneHot")
def _one_hot_op(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    idx = b.device(inputs[0])
    depth = int(_host(inputs[1], "depth").reshape(-1)[0])  # type: ignore[union-attr]
    values = _host(inputs[2], "values").reshape(-1)  # type: ignore[union-attr]
    rank = idx.rank + 1
    axis = _axis(int(attrs(node).get("axis", -1)), rank)
    shape = list(idx.shape)
    shape.insert(axis, 1)
    ix = idx.reshape(shape)
    iota = np.arange(depth, dtype=np.int32).reshape([depth if d == axis else 1 for d in range(rank)])
    if ix.dtype.kind == "f":
        ix = b.cast(ix, np.dtype(np.int32))
    out_dt = b.device(values).dtype
    y = b.map("OneHot", _one_hot, [ix, iota], (cost_model.binary("equal"), cost_model.binary("maximum")), out_dtype=out_dt,
              depth=depth, off=values[0].item(), on=values[1].item())  # fmt: skip
    return [y]


# -- normalisation ----------------------------------------------------------------------------------
@handles("InstanceNormalization")
def _instance_norm(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    eps = float(attrs(node).get("epsilon", 1e-5))
    n, c = x.shape[:2]
    y, _, _ = ops.layer_norm(b.graph, x.reshape(n * c, -1), None, None, b.prog, eps=eps)
    y = y.reshape(x.shape)
    shp = (1, c) + (1,) * (x.rank - 2)
    scale = inputs[1].reshape(shp) if isinstance(inputs[1], Tensor) else np.asarray(inputs[1]).reshape(shp)
    bias = inputs[2].reshape(shp) if isinstance(inputs[2], Tensor) else np.asarray(inputs[2]).reshape(shp)
    return [b.binary("add", b.binary("mul", y, scale), bias)]


# -- more reductions ------------------------------------------------------------------------------------
_REDUCE_MORE = {"ReduceL1": 18, "ReduceL2": 18, "ReduceSumSquare": 18, "ReduceLogSum": 18, "ReduceLogSumExp": 18}


@handles(*_REDUCE_MORE)
def _reduce_more(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    from .operators import _axes_input

    x = b.device(inputs[0])
    at = attrs(node)
    axes = _axes_input(b, node, inputs, _REDUCE_MORE[node.op_type])
    if axes is not None and not axes:
        axes = None
    if axes is None and at.get("noop_with_empty_axes", 0):
        return [x]
    if x.numel() == 0:
        raise Unsupported("empty input")
    keep = bool(at.get("keepdims", 1))
    op = node.op_type
    if op == "ReduceLogSumExp":  # stable: max + log(sum(exp(x - max)))
        m = reduce(b, x, axes, "max", keepdims=True)
        s = reduce(b, b.unary("exp", b.binary("sub", x, m)), axes, "add", keepdims=True)
        y = b.binary("add", b.unary("log", s), m)
        if not keep:
            ax = {_axis(a, x.rank) for a in axes} if axes is not None else set(range(x.rank))
            y = y.reshape([s for d, s in enumerate(y.shape) if d not in ax])
        return [y]
    pre = {"ReduceL1": "abs", "ReduceL2": "square", "ReduceSumSquare": "square"}.get(op)
    t = b.unary(pre, x) if pre and x.dtype.kind == "f" else x
    if pre == "square" and x.dtype.kind != "f":
        t = b.binary("mul", x, x)
    if pre == "abs" and x.dtype.kind != "f":
        raise Unsupported("integer input")
    y = reduce(b, t, axes, "add", keep)
    if op == "ReduceL2":
        y = b.unary("sqrt", y)
    elif op == "ReduceLogSum":
        y = b.unary("log", y)
    return [y]


# -- convolution-shaped ops ---------------------------------------------------------------------------
def _pads(at: dict[str, Any], n: int) -> list[tuple[int, int]]:
    p = list(at.get("pads", [0] * 2 * n))
    return [(int(p[i]), int(p[i + n])) for i in range(n)]


@handles("ConvTranspose")
def _conv_transpose(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    """A convolution of the stride-dilated, padded input with the flipped, transposed weights
    (1-D as 2-D with a unit height; 3-D through conv3d_by_slices)."""
    at = attrs(node)
    x = b.device(inputs[0])
    if x.rank not in (3, 4, 5):
        raise Unsupported(f"{x.rank - 2}-D transposed convolution")
    one_d = x.rank == 3
    if one_d:
        x = x.reshape(x.shape[0], x.shape[1], 1, x.shape[2])
    w = inputs[1] if isinstance(inputs[1], Tensor) else np.asarray(inputs[1])
    if one_d:
        w = w.reshape(w.shape[0], w.shape[1], 1, w.shape[2])
    g = int(at.get("group", 1))
    cin, cout_g = w.shape[:2]
    kernel = list(w.shape[2:])
    n_sp = 1 if one_d else x.rank - 2

    def per_dim(key: str, fill: int) -> list[int]:
        v = [int(s) for s in at.get(key, [fill] * n_sp)]
        return ([fill] + v) if one_d else v

    strides, dil, out_pad = per_dim("strides", 1), per_dim("dilations", 1), per_dim("output_padding", 0)
    in_sizes = x.shape[2:]
    auto = _text(at.get("auto_pad"), "NOTSET")
    if "pads" not in at and ("output_shape" in at or auto in ("SAME_UPPER", "SAME_LOWER")):
        want = [int(s) for s in at["output_shape"]] if "output_shape" in at else [
            s * i for s, i in zip(strides[-n_sp:], in_sizes[-n_sp:], strict=True)]  # fmt: skip
        want = ([1] + want) if one_d else want
        pads = []
        for i, s, k, d, op_, o in zip(in_sizes, strides, kernel, dil, out_pad, want, strict=True):
            total = s * (i - 1) + op_ + (k - 1) * d + 1 - o
            lo = total // 2 if auto == "SAME_UPPER" else total - total // 2  # as onnx.reference splits it
            pads.append((lo, total - lo))
    elif auto == "VALID":
        pads = [(0, 0)] * len(in_sizes)
    else:
        pads = _pads(at, n_sp)
        pads = ([(0, 0)] + pads) if one_d else pads
    # 1. insert stride-1 zeros between input elements (a view: padding a unit axis, then merging)
    n, c = x.shape[:2]
    inter = [n, c] + [v for size in in_sizes for v in (size, 1)]
    xi = x.reshape(inter)
    if any(st > 1 for st in strides):
        xi = pad_view(b, xi, [(0, 0), (0, 0)] + [p for st in strides for p in ((0, 0), (0, st - 1))], "constant", 0.0)
    xs = xi.reshape([n, c] + [size * st for size, st in zip(in_sizes, strides, strict=True)])
    xs = xs[
        (slice(None), slice(None), *(slice(0, (size - 1) * st + 1) for size, st in zip(in_sizes, strides, strict=True)))
    ]
    # 2. pad by the kernel's extent less the given padding (negative: crop), plus output_padding
    full = [((k - 1) * d - lo, (k - 1) * d - hi + op_) for k, d, (lo, hi), op_ in zip(kernel, dil, pads, out_pad,
                                                                                           strict=True)]  # fmt: skip
    xp = pad_view(b, xs, [(0, 0), (0, 0), *full], "constant", 0.0)
    # 3. weights [Cin, Cout/g, k...] -> [Cout, Cin/g, k...], flipped in space
    flip = (slice(None), slice(None)) + (slice(None, None, -1),) * len(kernel)
    grouped = [g * cout_g, cin // g, *kernel]
    perm = (0, 2, 1, *range(3, 3 + len(kernel)))
    if isinstance(w, Tensor):  # device weights: the same rearrangement as views
        wt: Value = w.reshape(g, cin // g, cout_g, *kernel).transpose(*perm).reshape(grouped)[flip]
    else:
        wt = np.ascontiguousarray(w.reshape(g, cin // g, cout_g, *kernel).transpose(perm).reshape(grouped)[flip])
    if x.rank == 5:
        conv_at = {"kernel_shape": kernel, "strides": [1, 1, 1], "dilations": dil, "group": g}
        y = conv3d_by_slices(b, node, xp, wt, conv_at)
    else:
        if not isinstance(wt, Tensor):
            wt = b.device(b.host(f"{node.name or 'convtranspose'}/weights", wt), like=x.dtype)
        y = ops.conv2d(
            b.graph,
            xp,
            wt,
            b.prog,
            stride=(1, 1),
            padding=(0, 0),
            dilation=tuple(dil),
            groups=g,
            partials_dtype=b.partials,
            available_memory_proportion=b.amp,
        )
    if one_d:
        y = y.reshape(y.shape[0], y.shape[1], y.shape[3])
    if len(inputs) > 2 and inputs[2] is not None:
        bias = inputs[2]
        shp = (1, -1) + (1,) * (y.rank - 2)
        y = b.binary("add", y, bias.reshape(shp) if isinstance(bias, Tensor) else np.asarray(bias).reshape(shp))
    return [y]


# -- resize -------------------------------------------------------------------------------------------
def _source_coords(out_size: int, in_size: int, scale: float, mode: str, roi: tuple[float, float]) -> np.ndarray:
    """The input coordinate of each output position along one axis (ONNX Resize's
    coordinate_transformation_mode); align_corners spans the unrounded output length in * scale."""
    o = np.arange(out_size, dtype=np.float64)
    exact = in_size * scale
    if mode == "half_pixel":
        return (o + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (o + 0.5) / scale - 0.5 if out_size > 1 else np.zeros(out_size)
    if mode == "align_corners":
        return o * (in_size - 1) / (exact - 1) if exact != 1 else np.zeros(out_size)
    if mode == "asymmetric":
        return o / scale
    if mode == "tf_half_pixel_for_nn":
        return (o + 0.5) / scale
    if mode == "half_pixel_symmetric":
        adj = out_size / (scale * in_size)
        center = in_size / 2
        offset = center * (1 - adj)
        return offset + (o + 0.5) / scale - 0.5
    if mode == "tf_crop_and_resize":
        start, end = roi
        if out_size > 1:
            return start * (in_size - 1) + o * (end - start) * (in_size - 1) / (out_size - 1)
        return np.full(out_size, 0.5 * (start + end) * (in_size - 1))
    raise Unsupported(f"coordinate_transformation_mode {mode!r}")


def _nearest(coord: np.ndarray, mode: str, scale: float) -> np.ndarray:
    if mode == "round_prefer_floor":
        return np.where(coord == np.floor(coord) + 0.5, np.floor(coord), np.round(coord))
    if mode == "round_prefer_ceil":
        return np.where(coord == np.floor(coord) + 0.5, np.ceil(coord), np.round(coord))
    if mode == "floor":
        return np.floor(coord)
    if mode == "ceil":
        return np.ceil(coord)
    raise Unsupported(f"nearest_mode {mode!r}")


def _cubic_taps(coords: np.ndarray, n_in: int, a: float, exclude_outside: bool) -> tuple[np.ndarray, np.ndarray]:
    """(input index, weight) of the four taps of each output position (Keys' cubic convolution with
    coefficient ``a``; the edge is repeated, or with exclude_outside its taps get no weight)."""
    x0 = np.floor(coords)
    r = np.where(coords == x0, 1.0, coords - x0)  # an exact integer takes the pixel on its left
    q = 1 - r
    w = np.stack([((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
                  ((a + 2) * r - (a + 3)) * r * r + 1,
                  ((a + 2) * q - (a + 3)) * q * q + 1,
                  ((a * (q + 1) - 5 * a) * (q + 1) + 8 * a) * (q + 1) - 4 * a], axis=1)  # fmt: skip
    xp = coords + 2
    p = np.floor(xp)
    start = p + np.where(xp == p, -2, -1)
    idx = (start[:, None] + np.arange(4)[None, :] - 2).astype(np.int64)
    if exclude_outside:
        w = np.where((idx < 0) | (idx >= n_in), 0.0, w)
        total = w.sum(axis=1, keepdims=True)
        w = w / np.where(total == 0, 1.0, total)
    return np.clip(idx, 0, n_in - 1), w


def _take(x: Tensor, idx: np.ndarray, axis: int) -> Tensor:
    key: tuple[Any, ...] = (slice(None),) * axis + (idx,)
    return x[key]


@handles("Resize", "Upsample")
def _resize(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    at = attrs(node)
    mode = _text(at.get("mode"), "nearest")
    r = x.rank
    roi = None
    sizes = None
    if node.op_type == "Upsample":
        scales = at.get("scales") if b.opset < 9 else _host(inputs[1], "scales")
        scales = [float(s) for s in np.reshape(scales, -1)]  # type: ignore[arg-type]
        coord_mode, nearest_mode = "asymmetric", "floor"
    else:
        if b.opset < 11:
            scales = [float(s) for s in _host(inputs[1], "scales").reshape(-1)]  # type: ignore[union-attr]
            coord_mode, nearest_mode = "asymmetric", "floor"
        else:
            roi_v = _host(inputs[1] if len(inputs) > 1 else None, "roi")
            sc = _host(inputs[2] if len(inputs) > 2 else None, "scales")
            sz = _host(inputs[3] if len(inputs) > 3 else None, "sizes")
            coord_mode = _text(at.get("coordinate_transformation_mode"), "half_pixel")
            nearest_mode = _text(at.get("nearest_mode"), "round_prefer_floor")
            if at.get("antialias", 0):
                raise Unsupported("antialias")
            policy = _text(at.get("keep_aspect_ratio_policy"), "stretch")
            axes = [_axis(int(a), r) for a in at["axes"]] if "axes" in at else list(range(r))
            scales = [1.0] * r
            if sz is not None and sz.size:
                sizes = [x.shape[d] for d in range(r)]
                for a, s in zip(axes, sz.reshape(-1), strict=True):
                    sizes[a] = int(s)
                scales = [sizes[d] / x.shape[d] for d in range(r)]
                if policy != "stretch":  # one scale for every resized axis, sizes rounded half up
                    pick = {"not_larger": min, "not_smaller": max}.get(policy)
                    if pick is None:
                        raise Unsupported(f"keep_aspect_ratio_policy {policy!r}")
                    one = pick(scales[a] for a in axes)
                    scales = [one if d in axes else 1.0 for d in range(r)]
                    sizes = [int(one * x.shape[d] + 0.5) if d in axes else x.shape[d] for d in range(r)]
            elif sc is not None and sc.size:
                for a, s in zip(axes, sc.reshape(-1), strict=True):
                    scales[a] = float(s)
            if roi_v is not None and roi_v.size:
                rv = roi_v.reshape(-1).astype(np.float64)
                full = [(0.0, 1.0)] * r
                for j, a in enumerate(axes):
                    full[a] = (float(rv[j]), float(rv[j + len(axes)]))
                roi = full
    if mode == "cubic" and node.op_type == "Upsample":
        raise Unsupported("cubic mode")
    if sizes is None:
        sizes = [int(np.floor(x.shape[d] * scales[d])) for d in range(r)]
    y = x
    for d in range(r):
        if sizes[d] == x.shape[d] and scales[d] == 1.0 and coord_mode != "tf_crop_and_resize":
            continue
        n_in = x.shape[d]
        coords = _source_coords(sizes[d], n_in, scales[d], coord_mode, roi[d] if roi else (0.0, 1.0))
        if coord_mode == "tf_crop_and_resize":
            raise Unsupported("tf_crop_and_resize")  # needs extrapolation_value outside the box
        if mode == "nearest":
            idx = np.clip(_nearest(coords, nearest_mode, scales[d]), 0, n_in - 1).astype(np.int64)
            y = _take(y, idx, d)
        elif mode == "cubic":  # four neighbours per output position, weights as onnx.reference's
            idx4, w4 = _cubic_taps(coords, n_in, float(at.get("cubic_coeff_a", -0.75)),
                                   bool(at.get("exclude_outside", 0)))  # fmt: skip
            shp = [1] * r
            shp[d] = sizes[d]
            acc: Tensor | None = None
            for t in range(4):
                term = b.binary("mul", _take(y, idx4[:, t], d), w4[:, t].astype(x.dtype).reshape(shp))
                acc = term if acc is None else b.binary("add", acc, term)
            assert acc is not None
            y = acc
        else:  # linear: two neighbours blended per output position along this axis
            c = np.clip(coords, 0, n_in - 1)
            lo = np.floor(c).astype(np.int64)
            hi = np.minimum(lo + 1, n_in - 1)
            frac = (c - lo).astype(x.dtype if x.dtype.kind == "f" else np.float32)
            shp = [1] * r
            shp[d] = sizes[d]
            w_hi = frac.reshape(shp)
            w_lo = (1 - frac).reshape(shp)
            y = b.binary("add", b.binary("mul", _take(y, lo, d), w_lo), b.binary("mul", _take(y, hi, d), w_hi))
    return [y]


# -- 3-D convolution and pooling: 2-D ops over depth slices -----------------------------------------
def conv3d_by_slices(b: Builder, node: onnx.NodeProto, x: Tensor, w: Value, at: dict[str, Any]) -> Tensor:
    """Conv over [N, C, D, H, W]: for each kernel depth offset, the input's depth positions it reads
    become extra images of one 2-D convolution; the offsets' results are summed."""
    from .operators import _spatial_pads

    kernel = [int(k) for k in at.get("kernel_shape", _shape(w)[2:])]
    strides = [int(s) for s in at.get("strides", [1, 1, 1])]
    dil = [int(d) for d in at.get("dilations", [1, 1, 1])]
    pads = _spatial_pads(at, x.shape[2:], kernel, strides, dil)
    g = int(at.get("group", 1))
    xp = pad_view(b, x, [(0, 0), (0, 0), *pads], "constant", 0.0)
    n, c, dp = xp.shape[:3]
    do = (dp - (kernel[0] - 1) * dil[0] - 1) // strides[0] + 1
    total: Tensor | None = None
    for i in range(kernel[0]):
        start = i * dil[0]
        xs = xp[:, :, start : start + (do - 1) * strides[0] + 1 : strides[0]]  # [N, C, Do, H, W]
        x4 = xs.transpose(0, 2, 1, 3, 4).reshape(n * do, c, *xs.shape[3:])
        wi = w[:, :, i] if isinstance(w, Tensor) else b.device(
            b.host(f"{node.name}/w_depth{i}", np.ascontiguousarray(np.asarray(w)[:, :, i])), like=x.dtype)  # fmt: skip
        y = ops.conv2d(b.graph, x4, wi, b.prog, stride=tuple(strides[1:]), padding=(0, 0), dilation=tuple(dil[1:]),
                       groups=g, partials_dtype=b.partials, available_memory_proportion=b.amp)  # fmt: skip
        total = y if total is None else b.binary("add", total, y)
    assert total is not None
    _, co, ho, wo = total.shape
    return total.reshape(n, do, co, ho, wo).transpose(0, 2, 1, 3, 4)


def pool3d_by_slices(b: Builder, node: onnx.NodeProto, x: Tensor) -> Tensor:
    """Max/average pooling over [N, C, D, H, W]: 2-D pooling of the depth positions each output
    reads, combined with max (or averaged) over the kernel's depth."""
    from .operators import _pool_geometry

    at = attrs(node)
    kernel, strides, dil, pads, extra = _pool_geometry(b, node, x)
    if any(e for _, e in extra) or (node.op_type == "AveragePool" and any(lo or hi for lo, hi in pads)
                                    and not at.get("count_include_pad", 0)):  # fmt: skip
        raise Unsupported("3-D pooling with ceil_mode, or padding excluded from averages")
    is_max = node.op_type == "MaxPool"
    fill = float(np.finfo(x.dtype).min) if is_max else 0.0
    xp = pad_view(b, x, [(0, 0), (0, 0), *pads], "constant", fill)
    n, c, dp = xp.shape[:3]
    do = (dp - (kernel[0] - 1) * dil[0] - 1) // strides[0] + 1
    total: Tensor | None = None
    for i in range(kernel[0]):
        start = i * dil[0]
        xs = xp[:, :, start : start + (do - 1) * strides[0] + 1 : strides[0]]
        x4 = xs.reshape(n, c * do, *xs.shape[3:])
        pool = ops.max_pool2d if is_max else ops.avg_pool2d
        y = pool(b.graph, x4, tuple(kernel[1:]), b.prog, stride=tuple(strides[1:]), dilation=tuple(dil[1:]))
        total = y if total is None else b.binary("max" if is_max else "add", total, y)
    assert total is not None
    if not is_max and kernel[0] > 1:
        total = ops.scale(b.graph, _nd(total), 1.0 / kernel[0], b.prog).reshape(total.shape)
    return total.reshape(n, c, do, *total.shape[2:])


def _window_index(xv: np.ndarray, yv: np.ndarray, pos: np.ndarray, best: np.ndarray) -> np.ndarray:
    return np.where((xv == yv) & (pos < best), pos, best)


def max_pool_indices(
    b: Builder,
    x: Tensor,
    xp: Tensor,
    y: Tensor,
    kernel: list[int],
    strides: list[int],
    dilations: list[int],
    pads: list[tuple[int, int]],
    storage_order: int,
) -> Tensor:
    """MaxPool's Indices output: the flat input index (row-major over N, C, H, W, or column-major
    over H, W with storage_order=1) of the first window element equal to the maximum. One
    elementwise pass per kernel offset over strided views of the padded input; the positions are a
    host constant (padding holds an index past the end, so it is never chosen over a real element)."""
    n, c, h, w = x.shape
    ho, wo = y.shape[2:]
    (ph, _), (pw, _) = pads
    hh, ww = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    plane = hh * w + ww if not storage_order else ww * h + hh
    base = (np.arange(n * c) * h * w).reshape(n, c, 1, 1)
    big = n * c * h * w
    pos = np.pad(plane[None, None] + base, [(0, 0), (0, 0), (ph, xp.shape[2] - h - ph), (pw, xp.shape[3] - w - pw)],
                 constant_values=big).astype(np.int32)  # fmt: skip
    best: Value = np.full((n, c, ho, wo), big, dtype=np.int32)
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            r0, c0 = i * dilations[0], j * dilations[1]
            rows = slice(r0, r0 + (ho - 1) * strides[0] + 1, strides[0])
            cols = slice(c0, c0 + (wo - 1) * strides[1] + 1, strides[1])
            xv = xp[:, :, rows, cols]
            pv = b.host(f"maxpool_positions_{i}_{j}", np.ascontiguousarray(pos[:, :, rows, cols]))
            best = b.map("MaxPoolIndex", _window_index, [xv, y, pv, best], (cost_model.binary("equal"), cost_model.binary("minimum")),
                         out_dtype="int32")  # fmt: skip
    return b.device(best)


# -- pixel shuffles (views) and group normalisation ---------------------------------------------------
@handles("DepthToSpace", "SpaceToDepth")
def _depth_space(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    if x.rank != 4:
        raise Unsupported(f"rank {x.rank} input")
    at = attrs(node)
    s = int(at["blocksize"])
    n, c, h, w = x.shape
    if node.op_type == "SpaceToDepth":
        y = x.reshape(n, c, h // s, s, w // s, s)
        crd = _text(at.get("mode"), "DCR") == "CRD"
        y = y.transpose(0, 1, 3, 5, 2, 4) if crd else y.transpose(0, 3, 5, 1, 2, 4)
        return [y.reshape(n, c * s * s, h // s, w // s)]
    if _text(at.get("mode"), "DCR") == "DCR":
        y = x.reshape(n, s, s, c // (s * s), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:  # CRD
        y = x.reshape(n, c // (s * s), s, s, h, w).transpose(0, 1, 4, 2, 5, 3)
    return [y.reshape(n, c // (s * s), h * s, w * s)]


@handles("GroupNormalization")
def _group_norm(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    at = attrs(node)
    groups, eps = int(at["num_groups"]), float(at.get("epsilon", 1e-5))
    n, c = x.shape[:2]
    y, _, _ = ops.layer_norm(b.graph, x.reshape(n * groups, -1), None, None, b.prog, eps=eps)
    y = y.reshape(x.shape)
    shp = (1, c) + (1,) * (x.rank - 2)

    def per_channel(v: Value) -> Value:
        # opset 18 gives scale and bias per group, opset 21 per channel
        size = _shape(v)[0] if _shape(v) else 1
        if size == groups and groups != c:
            v = (
                v.reshape(groups, 1).broadcast(c // groups, 1)
                if isinstance(v, Tensor)
                else np.repeat(np.asarray(v), c // groups)
            )
        return v.reshape(shp) if isinstance(v, Tensor) else np.asarray(v).reshape(shp)

    return [b.binary("add", b.binary("mul", y, per_channel(inputs[1])), per_channel(inputs[2]))]


def _hardmax_rows(x: np.ndarray, idx: np.ndarray, iota: np.ndarray) -> np.ndarray:
    return (iota == idx).astype(x.dtype)


@handles("Hardmax")
def _hardmax(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    if b.opset < 13:  # the input flattened to 2-D at axis (default 1), as Softmax before 13
        axis = _axis(int(attrs(node).get("axis", 1)), x.rank)
        xs = x.reshape(int(np.prod(x.shape[:axis], dtype=np.int64)), -1)
        ax = 1
    else:
        ax = _axis(int(attrs(node).get("axis", -1)), x.rank)
        xs = x
    _, idx = arg_extreme(b, xs, ax, True, False)
    n = xs.shape[ax]
    iota = np.arange(n, dtype=np.int32).reshape([n if d == ax else 1 for d in range(xs.rank)])
    y = b.map("Hardmax", _hardmax_rows, [xs, idx, iota], (cost_model.binary("equal"),))
    return [y.reshape(x.shape)]


_TRIG = {"Tan": np.tan, "Asin": np.arcsin, "Acos": np.arccos, "Atan": np.arctan, "Sinh": np.sinh,
         "Cosh": np.cosh, "Asinh": np.arcsinh, "Acosh": np.arccosh, "Atanh": np.arctanh}  # fmt: skip


@handles(*_TRIG)
def _trig_more(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    # costed as popops SIN (the reference's only transcendental figure of that kind) [INF]
    return [b.map(node.op_type, _TRIG[node.op_type], [inputs[0]], (cost_model.unary("sin"),))]


# -- recurrent layers: unrolled over the sequence ----------------------------------------------------------
def _act(b: Builder, name: str, x: Tensor) -> Tensor:
    if name == "Sigmoid":
        return b.unary("sigmoid", x)
    if name == "Tanh":
        return b.unary("tanh", x)
    if name == "Relu":
        return b.unary("relu", x)
    raise Unsupported(f"activation {name}")


def _rnn_args(b: Builder, node: onnx.NodeProto, inputs: list[Any], gates: int) -> dict[str, Any]:
    at = attrs(node)
    x = b.device(inputs[0])
    if at.get("layout", 0):
        x = x.transpose(1, 0, 2)  # [B, S, I] -> [S, B, I]
    seq_lens = inputs[4] if len(inputs) > 4 else None
    if seq_lens is not None and not isinstance(seq_lens, Tensor) and np.all(np.asarray(seq_lens) == x.shape[0]):
        seq_lens = None  # every sequence is full length: no masking
    if at.get("clip") is not None:
        raise Unsupported("clip")
    if node.op_type == "LSTM" and at.get("input_forget", 0):
        raise Unsupported("input_forget")
    direction = _text(at.get("direction"), "forward")
    hidden = int(at["hidden_size"])
    acts = [_text(a, "") for a in at.get("activations", [])]
    return {"x": x, "w": inputs[1], "r": inputs[2], "bias": inputs[3] if len(inputs) > 3 else None,
            "h0": inputs[5] if len(inputs) > 5 else None, "c0": inputs[6] if len(inputs) > 6 else None,
            "dirs": ["forward", "reverse"] if direction == "bidirectional" else [direction], "hidden": hidden,
            "acts": acts, "layout": int(at.get("layout", 0)), "lbr": int(at.get("linear_before_reset", 0)),
            "seq_lens": seq_lens, "peep": inputs[7] if node.op_type == "LSTM" and len(inputs) > 7 else None}  # fmt: skip


def _part(v: Value, d: int) -> Value:
    return v[d] if isinstance(v, Tensor) else np.asarray(v)[d]


def _t(v: Value) -> Value:
    return v.transpose() if isinstance(v, Tensor) else np.ascontiguousarray(np.asarray(v).T)


def _step_valid(n: np.ndarray, t: int) -> np.ndarray:
    return t < n


@handles("LSTM", "GRU", "RNN")
def _recurrent(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    """One matmul for every step's input projection, then per step a matmul of the hidden state and
    the gate arithmetic (as PopLibs' LSTM/GRU unroll over the sequence)."""
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[node.op_type]
    a = _rnn_args(b, node, inputs, gates)
    x, hdim = a["x"], a["hidden"]
    s, batch = x.shape[0], x.shape[1]
    defaults = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"], "RNN": ["Tanh"]}[node.op_type]
    per = len(defaults)
    ys, hs, cs = [], [], []
    for d, direction in enumerate(a["dirs"]):
        acts = a["acts"][d * per : (d + 1) * per] or defaults
        w, r = _part(a["w"], d), _part(a["r"], d)
        xw = matmul(b, x.reshape(s * batch, -1), _t(w)).reshape(s, batch, gates * hdim)
        wb = rb = None
        if a["bias"] is not None:
            bias = _part(a["bias"], d)
            wb, rb = bias[: gates * hdim], bias[gates * hdim :]
            if node.op_type != "GRU" or not a["lbr"]:
                xw = b.binary("add", xw, b.binary("add", wb, rb) if isinstance(wb, Tensor) else np.asarray(wb) + rb)
                rb = None
            else:
                xw = b.binary("add", xw, wb)
        h: Value = np.zeros((batch, hdim), np.float32) if a["h0"] is None else _part(a["h0"], d)
        c: Value = np.zeros((batch, hdim), np.float32) if a["c0"] is None else _part(a["c0"], d)
        rt = _t(r)
        out = []
        steps = range(s) if direction == "forward" else range(s - 1, -1, -1)
        lens = None if a["seq_lens"] is None else b.device(a["seq_lens"]).reshape(batch, 1)
        peep = None if a["peep"] is None else _part(a["peep"], d)
        for t in steps:
            g = xw[t]
            h_prev, c_prev = h, c
            if node.op_type == "LSTM":
                z = b.binary("add", g, matmul(b, h, rt))
                i_, o_, f_, c_ = (z.slice(k * hdim, (k + 1) * hdim, 1) for k in range(4))
                if peep is not None:  # peepholes: P = [p_i, p_o, p_f] on the cell state
                    i_ = b.binary("add", i_, b.binary("mul", c, peep[:hdim]))
                    f_ = b.binary("add", f_, b.binary("mul", c, peep[2 * hdim :]))
                i_, f_ = _act(b, acts[0], i_), _act(b, acts[0], f_)
                c = b.binary("add", b.binary("mul", f_, c), b.binary("mul", i_, _act(b, acts[1], c_)))
                if peep is not None:
                    o_ = b.binary("add", o_, b.binary("mul", c, peep[hdim : 2 * hdim]))
                h = b.binary("mul", _act(b, acts[0], o_), _act(b, acts[2], c))
            elif node.op_type == "GRU":
                hr = matmul(b, h, rt.slice(0, 2 * hdim, 1) if isinstance(rt, Tensor) else rt[:, : 2 * hdim])
                rh_w = rt.slice(2 * hdim, 3 * hdim, 1) if isinstance(rt, Tensor) else rt[:, 2 * hdim :]
                if rb is not None:
                    hr = b.binary("add", hr, rb[: 2 * hdim])
                zr = b.binary("add", g.slice(0, 2 * hdim, 1), hr)
                z_ = _act(b, acts[0], zr.slice(0, hdim, 1))
                r_ = _act(b, acts[0], zr.slice(hdim, 2 * hdim, 1))
                if a["lbr"]:
                    hh = matmul(b, h, rh_w)
                    if rb is not None:
                        hh = b.binary("add", hh, rb[2 * hdim :])
                    cand = b.binary("add", g.slice(2 * hdim, 3 * hdim, 1), b.binary("mul", r_, hh))
                else:
                    cand = b.binary("add", g.slice(2 * hdim, 3 * hdim, 1), matmul(b, b.binary("mul", r_, h), rh_w))
                cand = _act(b, acts[1], cand)
                # h = (1 - z) * cand + z * h = cand + z * (h - cand)
                h = b.binary("add", cand, b.binary("mul", z_, b.binary("sub", h, cand)))
            else:
                h = _act(b, acts[0], b.binary("add", g, matmul(b, h, rt)))
            if lens is not None:  # steps past a sequence's length keep its state and output zeros
                valid = b.map("SeqValid", _step_valid, [lens], (cost_model.binary("less_than"),), out_dtype="bool", t=t)
                zero = np.zeros((), dtype=x.dtype)
                y_t = b.map("Select", _select, [b.device(h), zero, valid], (cost_model.binary("maximum"),))
                h = b.map(
                    "Select",
                    _select,
                    [b.device(h), b.device(h_prev, like=x.dtype), valid],
                    (cost_model.binary("maximum"),),
                )
                if node.op_type == "LSTM":
                    c = b.map("Select", _select, [b.device(c, like=x.dtype), b.device(c_prev, like=x.dtype), valid],
                              (cost_model.binary("maximum"),))  # fmt: skip
                out.append(y_t.reshape(1, batch, hdim))
                continue
            out.append(b.device(h).reshape(1, batch, hdim))
        if direction == "reverse":
            out.reverse()
        ys.append(concat(out, 0) if len(out) > 1 else out[0])  # [S, B, H]
        hs.append(b.device(h).reshape(1, batch, hdim))
        cs.append(b.device(c, like=x.dtype).reshape(1, batch, hdim))
    y = concat([v.reshape(s, 1, batch, hdim) for v in ys], 1) if len(ys) > 1 else ys[0].reshape(s, 1, batch, hdim)
    yh = concat(hs, 0) if len(hs) > 1 else hs[0]
    yc = concat(cs, 0) if len(cs) > 1 else cs[0]
    if a["layout"]:
        y, yh, yc = y.transpose(2, 0, 1, 3), yh.transpose(1, 0, 2), yc.transpose(1, 0, 2)
    outs: list[Any] = [y, yh]
    if node.op_type == "LSTM":
        outs.append(yc)
    return outs


# -- small ops that function-expanded models and newer exporters use ------------------------------------
@handles("CastLike")
def _cast_like(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    like = inputs[1]
    to = like.dtype if isinstance(like, Tensor) else np.asarray(like).dtype
    if attrs(node).get("saturate", 1) != 1 or to.itemsize == 1 and to.kind == "f":
        raise Unsupported("float8 casts")
    return [b.cast(b.device(inputs[0]), device_dtype(to, b.half))]


def _swish(x: np.ndarray, alpha: float) -> np.ndarray:
    return x * (0.5 * (np.tanh(0.5 * alpha * x) + 1.0))


def _shrink(x: np.ndarray, lambd: float, bias: float) -> np.ndarray:
    return np.where(x < -lambd, x + bias, np.where(x > lambd, x - bias, 0)).astype(x.dtype)


@handles("Swish", "Shrink")
def _swish_shrink(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    at = attrs(node)
    if node.op_type == "Swish":
        return [b.map("Swish", _swish, [inputs[0]], (cost_model.unary("sigmoid"), cost_model.binary("multiply")),
                      alpha=float(at.get("alpha", 1.0)))]  # fmt: skip
    return [b.map("Shrink", _shrink, [inputs[0]], (cost_model.binary("greater_than"), cost_model.binary("add")),
                  lambd=float(at.get("lambd", 0.5)), bias=float(at.get("bias", 0.0)))]  # fmt: skip


def _bit_and(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    return np.bitwise_and(a, c)


def _bit_or(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    return np.bitwise_or(a, c)


def _bit_xor(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    return np.bitwise_xor(a, c)


def _shift_left(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    return np.left_shift(a, c)


def _shift_right(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    return np.right_shift(a, c)


_BITWISE = {"BitwiseAnd": _bit_and, "BitwiseOr": _bit_or, "BitwiseXor": _bit_xor}


@handles("BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitShift", "BitwiseNot")
def _bitwise(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    if node.op_type == "BitwiseNot":
        x = b.device(inputs[0])
        if x.dtype.kind not in "iu":
            raise Unsupported(f"element type {x.dtype.name}")
        return [b.map("BitwiseNot", np.invert, [x], (cost_model.unary("bitwise_not"),))]
    ta, tc = b._pair(inputs[0], inputs[1])
    if ta.dtype.kind not in "iu":
        raise Unsupported(f"element type {ta.dtype.name}")
    # 8/16/64-bit integers are computed as 32-bit on the device (as for every integer op): shifts
    # that overflow the narrow type would differ
    if node.op_type == "BitShift":
        left = _text(attrs(node).get("direction"), "") == "LEFT"
        fn = _shift_left if left else _shift_right
        return [b.map("ShiftLeft" if left else "ShiftRight", fn, [ta, tc], (cost_model.binary("add"),))]
    # [NF] bitwise ops costed as integer ADD
    return [b.map(node.op_type, _BITWISE[node.op_type], [ta, tc], (cost_model.binary("add"),))]


@handles("CumProd")
def _cumprod(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    """As CumSum: a log-step scan, multiplying (padding reads ones)."""
    x = b.device(inputs[0])
    axis = _axis(int(_host(inputs[1], "axis").reshape(-1)[0]), x.rank)  # type: ignore[union-attr]
    at = attrs(node)
    n = x.shape[axis]
    flip = tuple(slice(None, None, -1) if d == axis else slice(None) for d in range(x.rank))
    y: Tensor = x[flip] if at.get("reverse", 0) else x
    if at.get("exclusive", 0):
        y = pad_view(b, y, [(1, -1) if d == axis else (0, 0) for d in range(x.rank)], "constant", 1)
    shift = 1
    while shift < n:
        y = b.binary("mul", y, pad_view(b, y, [(shift, -shift) if d == axis else (0, 0) for d in range(x.rank)],
                                        "constant", 1))  # fmt: skip
        shift *= 2
    return [y[flip] if at.get("reverse", 0) else y]


@handles("EyeLike")
def _eye_like(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    """Depends only on the input's shape: a host constant."""
    shape = _shape(inputs[0])
    at = attrs(node)
    dt = helper.tensor_dtype_to_np_dtype(int(at["dtype"])) if "dtype" in at else (
        inputs[0].dtype if isinstance(inputs[0], Tensor) else np.asarray(inputs[0]).dtype)  # fmt: skip
    return [np.eye(shape[0], shape[1], int(at.get("k", 0)), dtype=dt)]


@handles("RMSNormalization")
def _rms_norm(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    """x / sqrt(mean(x^2) + eps) * scale over the axes from ``axis`` on."""
    x = b.device(inputs[0])
    at = attrs(node)
    axis = _axis(int(at.get("axis", -1)), x.rank)
    eps = float(at.get("epsilon", 1e-5))
    ms = reduce(b, b.unary("square", x), list(range(axis, x.rank)), "mean", keepdims=True)
    inv = b.unary("rsqrt", ops.add_scalar(b.graph, _nd(ms), eps, b.prog).reshape(ms.shape))
    return [b.binary("mul", b.binary("mul", x, inv), inputs[1])]


@handles("LpNormalization")
def _lp_norm(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    at = attrs(node)
    axis = _axis(int(at.get("axis", -1)), x.rank)
    p = int(at.get("p", 2))
    if p == 1:
        norm = reduce(b, b.unary("abs", x), [axis], "add", keepdims=True)
    elif p == 2:
        norm = b.unary("sqrt", reduce(b, b.unary("square", x), [axis], "add", keepdims=True))
    else:
        raise Unsupported(f"p={p}")
    return [b.map("NormDivide", _safe_div, [x, norm], (cost_model.binary("divide"),))]


def _safe_div(x: np.ndarray, n: np.ndarray) -> np.ndarray:
    return np.where(n == 0, 0, x / np.where(n == 0, 1, n))  # a zero vector stays zero (onnx.reference)


@handles("MeanVarianceNormalization")
def _mvn(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    axes = [_axis(int(a), x.rank) for a in attrs(node).get("axes", [0, 2, 3])]
    mean = reduce(b, x, axes, "mean", keepdims=True)
    d = b.binary("sub", x, mean)
    var = reduce(b, b.unary("square", d), axes, "mean", keepdims=True)
    std = b.unary("sqrt", var)
    return [b.binary("div", d, ops.add_scalar(b.graph, _nd(std), 1e-9, b.prog).reshape(std.shape))]


@handles("ReverseSequence")
def _reverse_sequence(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    """With constant lengths: a view (each batch entry's first len elements reversed)."""
    x = b.device(inputs[0])
    lens = _host(inputs[1], "sequence_lens").reshape(-1).astype(np.int64)  # type: ignore[union-attr]
    at = attrs(node)
    ta, ba = int(at.get("time_axis", 0)), int(at.get("batch_axis", 1))
    t = np.arange(x.shape[ta])
    src = np.where(t[None, :] < lens[:, None], lens[:, None] - 1 - t[None, :], t[None, :])  # [B, T]
    grid = list(np.indices(x.shape))
    bidx, tidx = grid[ba], grid[ta]
    grid[ta] = src[bidx, tidx]
    return [x[tuple(grid)]]


# -- losses (the exported forms of torch's nll_loss / cross_entropy) ---------------------------------
def _not_equal_to(t: np.ndarray, value: int) -> np.ndarray:
    return t != value


def _zero_where_ignored(t: np.ndarray, value: int) -> np.ndarray:
    return np.where(t == value, 0, t)


def _take_rows(b: Builder, table: Value, idx: Tensor) -> Tensor:
    """table[idx] for a 1-D table and integer indices of any shape (popops MultiSlice)."""
    t = b.device(table)
    return ops.gather(b.graph, t.reshape(-1, 1), idx.reshape(-1), b.prog).reshape(idx.shape)


def nll_loss(b: Builder, logp: Tensor, target: Value, weight: Value | None, reduction: str,
             ignore: int | None) -> Tensor:  # fmt: skip
    """-logp[n, target[n, ...], ...] * weight[target], reduced as ONNX's NegativeLogLikelihoodLoss."""
    tg = b.device(target)
    if tg.dtype.kind not in "iu":
        raise Unsupported("non-integer target")
    if ignore is not None:
        valid = b.map(
            "NotEqual", _not_equal_to, [tg], (cost_model.binary("not_equal"),), out_dtype="bool", value=ignore
        )
        tg = b.map("IgnoreIndex", _zero_where_ignored, [tg], (cost_model.binary("maximum"),), value=ignore)
    # GatherElements on the class axis, with the target as a unit class dimension
    idx = tg.reshape(tg.shape[0], 1, *tg.shape[1:])
    picked = gather_elements(b, logp, idx, 1).reshape(tg.shape)
    w: Tensor | None = None
    if weight is not None:
        w = _take_rows(b, weight if isinstance(weight, Tensor) else np.asarray(weight).astype(logp.dtype), tg)
    if ignore is not None:
        mask = b.cast(valid, logp.dtype)
        w = mask if w is None else b.binary("mul", w, mask)
    loss = b.unary("neg", picked) if w is None else b.binary("mul", b.unary("neg", picked), w)
    if reduction == "none":
        return loss
    axes = list(range(loss.rank))
    total = reduce(b, loss, axes, "add", keepdims=False)
    if reduction == "sum":
        return total
    if reduction != "mean":
        raise Unsupported(f"reduction={reduction!r}")
    if w is None:
        return ops.scale(b.graph, _nd(total), 1.0 / loss.numel(), b.prog).reshape(())
    return b.binary("div", total, reduce(b, w, axes, "add", keepdims=False))


@handles("NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss")
def _loss(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    at = attrs(node)
    x = b.device(inputs[0])
    reduction = _text(at.get("reduction"), "mean")
    ignore = int(at["ignore_index"]) if "ignore_index" in at else None
    weight = inputs[2] if len(inputs) > 2 else None
    if node.op_type == "NegativeLogLikelihoodLoss":
        return [nll_loss(b, x, inputs[1], weight, reduction, ignore)]
    logp = ops.log_softmax(b.graph, x, b.prog, axis=1)
    outs: list[Any] = [nll_loss(b, logp, inputs[1], weight, reduction, ignore)]
    if len(node.output) > 1:
        outs.append(logp)
    return outs


# -- product reduction, Lp pooling, Compress, CenterCropPad --------------------------------------------------
@handles("ReduceProd")
def _reduce_prod(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    """A pairwise product tree over the reduced elements (moved last, padded with ones to a power of
    two): log2(n) elementwise multiplies, exact for integers too."""
    from .operators import _axes_input

    x = b.device(inputs[0])
    at = attrs(node)
    axes = _axes_input(b, node, inputs, 18)
    if axes is not None and not axes:
        axes = None
    if axes is None and at.get("noop_with_empty_axes", 0):
        return [x]
    ax = sorted({_axis(a, x.rank) for a in axes}) if axes is not None else list(range(x.rank))
    keep = [d for d in range(x.rank) if d not in ax]
    n = int(np.prod([x.shape[d] for d in ax], dtype=np.int64))
    if n == 0 or x.numel() == 0:
        raise Unsupported("empty input")
    y = x.transpose(*keep, *ax).reshape(-1, n)
    width = 1 << (n - 1).bit_length()
    if width > n:
        y = pad_view(b, y, [(0, 0), (0, width - n)], "constant", 1)
    while width > 1:
        width //= 2
        y = b.binary("mul", y.slice(0, width, 1), y.slice(width, 2 * width, 1))
    shape = (
        [1 if d in ax else x.shape[d] for d in range(x.rank)] if at.get("keepdims", 1) else [x.shape[d] for d in keep]
    )
    return [y.reshape(shape)]


def _abs_pow(x: np.ndarray, p: float) -> np.ndarray:
    return np.power(np.abs(x), p)


@handles("LpPool")
def _lp_pool(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    """(sum over the window of |x|^p)^(1/p): an average pool of |x|^p times the window size."""
    from .operators import _pool_geometry

    x = b.device(inputs[0])
    if x.rank != 4:
        raise Unsupported(f"{x.rank - 2}-D LpPool")
    p = float(attrs(node).get("p", 2))
    kernel, strides, dil, pads, extra = _pool_geometry(b, node, x)
    full = [(lo, hi + e) for (lo, hi), (_, e) in zip(pads, extra, strict=True)]
    xp = pad_view(b, b.map("AbsPow", _abs_pow, [x], (cost_model.unary("absolute"), cost_model.binary("power")), p=p),
                  [(0, 0), (0, 0), *full], "constant", 0.0)  # fmt: skip
    y = ops.avg_pool2d(b.graph, xp, tuple(kernel), b.prog, stride=tuple(strides), dilation=tuple(dil))
    y = ops.scale(b.graph, _nd(y), float(kernel[0] * kernel[1]), b.prog).reshape(y.shape)
    return [b.map("PowScalar", _pow_inv, [y], (cost_model.binary("power"),), p=1.0 / p)]


def _pow_inv(x: np.ndarray, p: float) -> np.ndarray:
    return np.power(x, p)


@handles("Compress")
def _compress(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    """With a constant condition: a view of the selected slices."""
    x = b.device(inputs[0])
    cond = _host(inputs[1], "condition").reshape(-1).astype(bool)  # type: ignore[union-attr]
    at = attrs(node)
    if "axis" not in at:
        x, axis = x.reshape(-1), 0
    else:
        axis = _axis(int(at["axis"]), x.rank)
    sel = np.nonzero(cond[: x.shape[axis]])[0]
    if sel.size == 0:
        shape = list(x.shape)
        shape[axis] = 0
        return [np.zeros(shape, x.dtype)]
    return [x[(slice(None),) * axis + (sel,)]]


@handles("CenterCropPad")
def _center_crop_pad(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    shape = [int(s) for s in _host(inputs[1], "shape").reshape(-1)]  # type: ignore[union-attr]
    axes = [_axis(int(a), x.rank) for a in attrs(node).get("axes", range(x.rank))]
    pads = [(0, 0)] * x.rank
    for a, want in zip(axes, shape, strict=True):
        diff = want - x.shape[a]
        # as onnx.reference: crop (in - out) // 2 at the start and the rest at the end; pad
        # (out - in) // 2 before and the rest after
        pads[a] = (diff // 2, diff - diff // 2) if diff >= 0 else (-((-diff) // 2), -((-diff) - (-diff) // 2))
    return [pad_view(b, x, pads, "constant", 0)]


# -- quantisation (int8/uint8 QDQ models) ---------------------------------------------------------------
def _quantize(x: np.ndarray, scale: np.ndarray, zp: np.ndarray, lo: int, hi: int) -> np.ndarray:
    return np.clip(np.round(x / scale) + zp, lo, hi)  # np.round: halves to even, as ONNX


def _dequantize(x: np.ndarray, scale: np.ndarray, zp: np.ndarray) -> np.ndarray:
    return (x.astype(np.float32) - zp.astype(np.float32)) * scale


def _qparam(v: Value | None, rank: int, axis: int, default: float, dtype: np.dtype) -> Value:
    """A scale or zero point: a scalar, or per-axis values shaped to broadcast along ``axis``."""
    if v is None:
        return np.asarray(default, dtype=dtype)
    shape = _shape(v)
    if len(shape) == 1 and shape[0] > 1:
        full = [1] * rank
        full[_axis(axis, rank)] = shape[0]
        return v.reshape(full) if isinstance(v, Tensor) else np.asarray(v).reshape(full)
    if len(shape) > 1:
        raise Unsupported("blocked quantization")
    return v


@handles("QuantizeLinear", "DequantizeLinear")
def _qdq(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    at = attrs(node)
    axis = int(at.get("axis", 1))  # only used by per-axis scales
    zp_in = inputs[2] if len(inputs) > 2 else None
    if at.get("block_size", 0):
        raise Unsupported("blocked quantization")
    if node.op_type == "DequantizeLinear":
        if x.dtype.kind == "f":
            raise Unsupported("float8 input")
        scale = _qparam(inputs[1], x.rank, axis, 1.0, np.dtype(np.float32))
        zp = _qparam(zp_in, x.rank, axis, 0, np.dtype(np.int32))
        if isinstance(zp, np.ndarray):
            zp = zp.astype(np.int32)
        out_dt = scale.dtype if isinstance(scale, Tensor) else np.asarray(scale).dtype
        return [b.map("Dequantize", _dequantize, [x, scale, b.device(zp, like=np.dtype(np.int32))],
                      (cost_model.binary("subtract"), cost_model.binary("multiply")), out_dtype=device_dtype(out_dt, b.half))]  # fmt: skip
    if "output_dtype" in at and int(at["output_dtype"]):
        target = np.dtype(helper.tensor_dtype_to_np_dtype(int(at["output_dtype"])))
    elif isinstance(zp_in, Tensor):  # its ONNX type (the output's) is not known from a device tensor
        raise Unsupported("zero point computed on the device (must be constant)")
    elif zp_in is not None:
        target = np.asarray(zp_in).dtype
    else:
        target = np.dtype(np.uint8)
    if target not in (np.dtype(np.uint8), np.dtype(np.int8), np.dtype(np.uint16), np.dtype(np.int16)):
        raise Unsupported(f"quantizing to {target.name}")
    info = np.iinfo(target)
    scale = _qparam(inputs[1], x.rank, axis, 1.0, np.dtype(np.float32))
    zp = _qparam(zp_in, x.rank, axis, 0, np.dtype(np.int32))
    zp = b.device(zp.astype(np.float32) if isinstance(zp, np.ndarray) else zp, like=x.dtype)
    return [b.map("Quantize", _quantize, [x, scale, zp], (cost_model.binary("divide"), cost_model.unary("round"), cost_model.binary("add")),
                  out_dtype=device_dtype(target, b.half), lo=int(info.min), hi=int(info.max))]  # fmt: skip


# -- Attention (opset 23) --------------------------------------------------------------------------------
_MASKED = -1e30  # masked scores: finite, so a row's max and exp stay defined; exp(-1e30 - max) is 0


def _bool_bias(m: np.ndarray) -> np.ndarray:
    return np.where(m, 0.0, _MASKED)


def _finite_bias(m: np.ndarray) -> np.ndarray:
    return np.maximum(m, _MASKED)  # -inf in a float mask: the same finite floor


def _row_kept(m: np.ndarray) -> np.ndarray:
    return m > _MASKED / 2  # a row with any position left unmasked


@handles("Attention")
def _attention(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    """Scaled dot-product attention as onnx.reference computes it: 3-D inputs split into heads,
    grouped-query heads repeated (views), past keys/values concatenated, optional softcap, a boolean
    or additive mask padded to the key length, causal masking aligned bottom-right, softmax, and
    rows with every position masked set to zero."""
    at = attrs(node)
    for key in ("softmax_precision",):
        at.pop(key, None)
    if int(at.get("qk_matmul_output_mode", 0)) or (len(node.output) > 3 and node.output[3]):
        raise Unsupported("qk_matmul_output")
    if len(inputs) > 6 and inputs[6] is not None:
        raise Unsupported("nonpad_kv_seqlen")
    if int(at.get("left_window_size", -1)) >= 0 or int(at.get("right_window_size", -1)) >= 0:
        raise Unsupported("sliding windows")
    q, k, v = (b.device(t) for t in inputs[:3])
    three_d = q.rank == 3
    if three_d:
        hq, hkv = int(at["q_num_heads"]), int(at["kv_num_heads"])

        def heads(t: Tensor, h: int) -> Tensor:
            return t.reshape(t.shape[0], t.shape[1], h, t.shape[2] // h).transpose(0, 2, 1, 3)

        q, k, v = heads(q, hq), heads(k, hkv), heads(v, hkv)
    past_k = inputs[4] if len(inputs) > 4 else None
    past_v = inputs[5] if len(inputs) > 5 else None
    if past_k is not None:
        k = concat([b.device(past_k, like=k.dtype), k], 2)
        v = concat([b.device(past_v, like=v.dtype), v], 2)
    present_k, present_v = k, v
    bq, hq_, sq, d = q.shape
    hk, skv = k.shape[1], k.shape[2]
    if hq_ != hk:  # grouped-query attention: each key/value head serves hq/hk query heads
        g = hq_ // hk
        k = k.reshape(bq, hk, 1, skv, k.shape[3]).broadcast_to((bq, hk, g, skv, k.shape[3])).reshape(bq, hq_, skv, -1)
        v = v.reshape(bq, hk, 1, skv, v.shape[3]).broadcast_to((bq, hk, g, skv, v.shape[3])).reshape(bq, hq_, skv, -1)
    scale = float(at["scale"]) if "scale" in at else 1.0 / np.sqrt(d)
    # Q and K each scaled by sqrt(scale), as onnx.reference does (the same rounding in float16)
    root = float(np.sqrt(scale))
    qs = ops.scale(b.graph, q, root, b.prog)
    ks = ops.scale(b.graph, k, root, b.prog)
    scores = matmul(b, qs, ks.transpose(0, 1, 3, 2))
    softcap = float(at.get("softcap", 0.0))
    if softcap > 0:
        scores = b.unary("tanh", ops.scale(b.graph, _nd(scores), 1.0 / softcap, b.prog).reshape(scores.shape))
        scores = ops.scale(b.graph, _nd(scores), softcap, b.prog).reshape(scores.shape)
    bias: Value | None = None
    mask = inputs[3] if len(inputs) > 3 else None
    if mask is not None:
        pad = skv - _shape(mask)[-1]
        if isinstance(mask, Tensor):
            is_bool = mask.dtype == np.bool_
            mt = b.map("MaskBias" if is_bool else "MaskFloor", _bool_bias if is_bool else _finite_bias, [mask],
                       (cost_model.binary("logical_and" if is_bool else "maximum"),), out_dtype=scores.dtype)  # fmt: skip
            if pad > 0:
                mt = pad_view(b, mt, [(0, 0)] * (mt.rank - 1) + [(0, pad)], "constant", _MASKED)
            bias = mt
        else:
            mh = np.asarray(mask)
            mh = _bool_bias(mh) if mh.dtype == np.bool_ else _finite_bias(mh.astype(np.float64))
            if pad > 0:
                mh = np.pad(mh, [(0, 0)] * (mh.ndim - 1) + [(0, pad)], constant_values=_MASKED)
            bias = mh.astype(np.float32)
    if at.get("is_causal", 0):
        offset = _shape(past_k)[2] if past_k is not None else 0
        causal = np.where(np.arange(skv)[None, :] <= np.arange(sq)[:, None] + offset, 0.0, _MASKED).astype(np.float32)
        if bias is None or not isinstance(bias, Tensor):
            bias = causal if bias is None else np.maximum(bias + causal, _MASKED).astype(np.float32)
        else:
            bias = b.binary("add", bias, causal)
    if bias is not None:
        scores = b.binary("add", scores, bias)
    probs = ops.softmax(b.graph, scores, b.prog, axis=-1)
    if bias is not None:  # rows masked everywhere: zero, not a uniform average
        if isinstance(bias, Tensor):
            kept = b.map("RowKept", _row_kept, [reduce(b, bias, [bias.rank - 1], "max", keepdims=True)],
                         (cost_model.binary("greater_than"),), out_dtype=probs.dtype)  # fmt: skip
            probs = b.binary("mul", probs, kept)
        else:
            kept = np.asarray(bias).max(axis=-1, keepdims=True) > _MASKED / 2
            if not kept.all():
                probs = b.binary("mul", probs, kept.astype(np.float32))
    y = matmul(b, probs, v)
    if three_d:
        y = y.transpose(0, 2, 1, 3).reshape(bq, sq, -1)
    outs: list[Any] = [y]
    if len(node.output) > 1:
        outs += [present_k, present_v]
    return outs


# -- rotary position embedding (opset 23) ------------------------------------------------------------
@handles("RotaryEmbedding")
def _rotary(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    """As onnx.reference: [B, S, H, D] heads, the first rotary_embedding_dim features rotated in
    halves (or interleaved pairs) by cos/sin rows picked by position (a gather, or a host table)."""
    at = attrs(node)
    x = b.device(inputs[0])
    four_d = x.rank == 4
    xs = x.transpose(0, 2, 1, 3) if four_d else x.reshape(x.shape[0], x.shape[1], int(at["num_heads"]), -1)
    bsz, seq, _, head = xs.shape
    rot = int(at.get("rotary_embedding_dim", 0)) or head
    half = rot // 2
    pos = inputs[3] if len(inputs) > 3 else None

    def table(v: Value) -> Value:
        if pos is None:
            return v.reshape(bsz, seq, 1, half) if isinstance(v, Tensor) else np.asarray(v).reshape(bsz, seq, 1, half)
        if isinstance(pos, Tensor):  # positions on the device: a row gather from the cache
            rows = ops.gather(b.graph, b.device(v, like=x.dtype), b.device(pos).reshape(-1), b.prog)
            return rows.reshape(bsz, seq, 1, half)
        if isinstance(v, Tensor):
            return v[np.asarray(pos)].reshape(bsz, seq, 1, half)
        return np.asarray(v)[np.asarray(pos)].reshape(bsz, seq, 1, half)

    cos, sin = table(inputs[1]), table(inputs[2])
    xr = xs[:, :, :, :rot]
    if at.get("interleaved", 0):
        x1, x2 = xr[:, :, :, 0::2], xr[:, :, :, 1::2]
    else:
        x1, x2 = xr[:, :, :, :half], xr[:, :, :, half:]
    real = b.binary("sub", b.binary("mul", x1, cos), b.binary("mul", x2, sin))
    imag = b.binary("add", b.binary("mul", x1, sin), b.binary("mul", x2, cos))
    if at.get("interleaved", 0):
        rotated = concat([real.reshape(*real.shape, 1), imag.reshape(*imag.shape, 1)], 4).reshape(bsz, seq, -1, rot)
    else:
        rotated = concat([real, imag], 3)
    out = concat([rotated, xs[:, :, :, rot:]], 3) if rot < head else rotated
    return [out.transpose(0, 2, 1, 3) if four_d else out.reshape(x.shape)]
