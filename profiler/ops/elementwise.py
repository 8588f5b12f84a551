"""Elementwise ops (popops): unary, binary (numpy broadcasting), in place, cast, fill, scaled add.

Each op runs one compute set with one vertex per tile that holds part of the result (per distinct
region size, one batch); the vertex works on the elements its tile holds, and inputs held on other
tiles are exchanged in first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from profiler.chip import cost_model
from profiler.chip.dtypes import as_dtype
from profiler.ops.core import OpError, add_like, check_same_graph, execute, op, vertex_fields
from profiler.ops.poplibs_codelets import EXACT_IN_STORED_TYPE, HALF_OPS, Map, map_codelet
from profiler.poplar.graph import Graph
from profiler.poplar.programs import Sequence as Prog
from profiler.poplar.tensor import Tensor


def erf(x: np.ndarray) -> np.ndarray:
    """Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7): numpy has no erf and scipy is not a dependency."""
    s = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    y = 1.0 - (
        ((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592
    ) * t * np.exp(-a * a)
    return s * y


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (np.tanh(0.5 * x) + 1.0)  # stable for large |x|


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))


def _relu(x: np.ndarray) -> np.ndarray:
    if x.dtype == np.float16:  # numpy's half maximum converts each element (~7 ns); on the bits ~0.4 ns
        bits = x.view(np.uint16)
        # the half values below zero are the bit patterns 0x8001 (-denorm_min) .. 0xFC00 (-inf): they
        # become +0; everything else (NaNs of either sign, -0) is kept, as np.maximum(x, 0) keeps it
        keep = (bits - np.uint16(0x8001)) > np.uint16(0xFC00 - 0x8001)
        return (bits * keep).view(np.float16)
    return np.maximum(x, 0)


EXACT_IN_STORED_TYPE.add(_relu)  # picks x or 0: no rounding to do
HALF_OPS[_relu] = "relu"


def _inverse(x: np.ndarray) -> np.ndarray:
    return 1.0 / x


def _rsqrt(x: np.ndarray) -> np.ndarray:
    return 1.0 / np.sqrt(x)


# name -> (numpy function, cost_model unary op)
UNARY: dict[str, tuple[Callable[..., np.ndarray], str]] = {
    "neg": (np.negative, "negate"),
    "exp": (np.exp, "exponent"),
    "log": (np.log, "logarithm"),
    "sqrt": (np.sqrt, "sqrt"),
    "rsqrt": (_rsqrt, "rsqrt"),
    "square": (np.square, "square"),
    "abs": (np.abs, "absolute"),
    "inv": (_inverse, "inverse"),
    "relu": (_relu, "relu"),
    "sigmoid": (_sigmoid, "sigmoid"),
    "tanh": (np.tanh, "tanh"),
    "gelu": (_gelu, "gelu_erf"),
    "erf": (erf, "erf"),
    "sign": (np.sign, "signum"),
}


def _greater(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a > b).astype(a.dtype)


def _equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a == b).astype(a.dtype)


BINARY: dict[str, tuple[Callable[..., np.ndarray], str]] = {
    "add": (np.add, "add"),
    "sub": (np.subtract, "subtract"),
    "mul": (np.multiply, "multiply"),
    "div": (np.divide, "divide"),
    "max": (np.maximum, "maximum"),
    "min": (np.minimum, "minimum"),
    "pow": (np.power, "power"),
    "greater": (_greater, "greater_than"),
    "equal": (_equal, "equal"),
}
_POPOPS_NAMES = {"neg": "Negate", "inv": "Inverse", "sub": "Subtract", "mul": "Multiply", "div": "Divide"}


def _popops_name(name: str) -> str:
    return "popops::" + _POPOPS_NAMES.get(name, name.capitalize())


def broadcast_shape(*shapes: tuple[int, ...], what: str) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise OpError(f"{what}: shapes {list(shapes)} do not broadcast") from None


def apply_map(
    graph: Graph,
    codelet: Map,
    inputs: Sequence[Tensor],
    prog: Prog,
    name: str,
    out_dtype: Any = None,
    out: Tensor | None = None,
    **params: Any,
) -> Tensor:
    """Run ``codelet`` elementwise over ``inputs`` (broadcast to a common shape) into a new tensor
    mapped like the largest input (or into ``out``; in place: into ``inputs[0]``)."""
    check_same_graph(graph, *inputs, what=name)
    shape = broadcast_shape(*(t.shape for t in inputs), what=name)
    if codelet.in_place:
        target = inputs[0]
        if target.shape != shape:
            raise OpError(f"{name}: in-place result {target.shape} cannot hold the broadcast shape {shape}")
    elif out is not None:
        target = out
    else:
        like = next((t for t in inputs if t.shape == shape), None)
        dt = inputs[0].dtype if out_dtype is None else as_dtype(out_dtype)
        if like is not None:
            target = add_like(graph, like, name, dt)
        else:
            target = graph.add_variable(dt, shape, name)
            graph.map_linearly(target)
    cs = execute(graph, prog, name)
    ins = [t if t.shape == shape else t.broadcast_to(shape) for t in inputs]
    fields = (("data",) + codelet.inputs) if codelet.in_place else codelet.inputs
    names = fields if codelet.in_place else ("out", *fields)
    for vtiles, f in vertex_fields(graph, ins if codelet.in_place else [target, *ins], names):
        graph.add_vertices(cs, codelet, f, vtiles, **params)
    whole = dict(zip(fields, ins, strict=True)) | ({} if codelet.in_place else {"out": target})
    graph.add_kernel(cs, codelet, {f: t.expand(0) for f, t in whole.items()}, **params)
    return target


def _unary_codelet(name: str, in_place: bool = False) -> Map:
    if name not in UNARY:
        raise OpError(f"unknown unary op {name!r}; known: {', '.join(UNARY)}")
    fn, cost = UNARY[name]
    return map_codelet(_popops_name(name), fn, 1, (cost_model.unary(cost),), in_place)


def _binary_codelet(name: str, in_place: bool = False) -> Map:
    if name not in BINARY:
        raise OpError(f"unknown binary op {name!r}; known: {', '.join(BINARY)}")
    fn, cost = BINARY[name]
    return map_codelet(_popops_name(name), fn, 2, (cost_model.binary(cost),), in_place)


@op("Unary")
def unary(graph: Graph, name: str, x: Tensor, prog: Prog) -> Tensor:
    """``name(x)`` elementwise (names: see UNARY)."""
    return apply_map(graph, _unary_codelet(name), [x], prog, name)


@op("UnaryInPlace")
def unary_in_place(graph: Graph, name: str, x: Tensor, prog: Prog) -> Tensor:
    return apply_map(graph, _unary_codelet(name, in_place=True), [x], prog, name)


@op("Binary")
def binary(graph: Graph, name: str, a: Tensor, b: Tensor, prog: Prog) -> Tensor:
    """``name(a, b)`` elementwise with numpy broadcasting (names: see BINARY)."""
    if a.dtype != b.dtype:
        raise OpError(f"{name}: operands have types {a.dtype.name} and {b.dtype.name}; cast one first")
    return apply_map(graph, _binary_codelet(name), [a, b], prog, name)


@op("BinaryInPlace")
def binary_in_place(graph: Graph, name: str, a: Tensor, b: Tensor, prog: Prog) -> Tensor:
    """``a = name(a, b)`` in place (``b`` broadcast to ``a``)."""
    if a.dtype != b.dtype:
        raise OpError(f"{name}: operands have types {a.dtype.name} and {b.dtype.name}; cast one first")
    return apply_map(graph, _binary_codelet(name, in_place=True), [a, b], prog, name)


def add(graph: Graph, a: Tensor, b: Tensor, prog: Prog, debug_name: str = "") -> Tensor:
    return binary(graph, "add", a, b, prog, debug_name=debug_name or "add")


def sub(graph: Graph, a: Tensor, b: Tensor, prog: Prog, debug_name: str = "") -> Tensor:
    return binary(graph, "sub", a, b, prog, debug_name=debug_name or "sub")


def mul(graph: Graph, a: Tensor, b: Tensor, prog: Prog, debug_name: str = "") -> Tensor:
    return binary(graph, "mul", a, b, prog, debug_name=debug_name or "mul")


def div(graph: Graph, a: Tensor, b: Tensor, prog: Prog, debug_name: str = "") -> Tensor:
    return binary(graph, "div", a, b, prog, debug_name=debug_name or "div")


def _scale(x: np.ndarray, scale: float) -> np.ndarray:
    return x * scale


def _add_scalar(x: np.ndarray, value: float) -> np.ndarray:
    return x + value


@op("Scale")
def scale(graph: Graph, x: Tensor, factor: float, prog: Prog) -> Tensor:
    """``x * factor`` (a broadcast-scalar multiply)."""
    cl = map_codelet("popops::MultiplyScalar", _scale, 1, (cost_model.binary("multiply"),))
    return apply_map(graph, cl, [x], prog, "scale", scale=float(factor))


@op("AddScalar")
def add_scalar(graph: Graph, x: Tensor, value: float, prog: Prog) -> Tensor:
    cl = map_codelet("popops::AddScalar", _add_scalar, 1, (cost_model.binary("add"),))
    return apply_map(graph, cl, [x], prog, "add_scalar", value=float(value))


def _cast(x: np.ndarray) -> np.ndarray:
    return x


HALF_OPS[_cast] = "cast"  # a chain's first step from float to half (profiler.executable.elementwise_chains)


@op("Cast")
def cast(graph: Graph, x: Tensor, dtype: object, prog: Prog) -> Tensor:
    """``x`` converted to ``dtype`` (popops::Cast)."""
    dt = as_dtype(dtype)
    cl = map_codelet("popops::Cast", _cast, 1, (cost_model.CAST,))
    return apply_map(graph, cl, [x], prog, f"cast to {dt.name}", out_dtype=dt)


def _pow2_scale(x: np.ndarray, log2_scale: int) -> np.ndarray:
    return x * np.float32(2.0**log2_scale)


@op("Pow2ScaleCast")
def pow2scale_cast(graph: Graph, x: Tensor, dtype: str | np.dtype, log2_scale: int, prog: Prog) -> Tensor:
    """``x * 2^log2_scale`` converted to ``dtype``, an FP8 format (PopXL's pow2scale_cast_to_fp8): one
    cast, the scale riding on the quarter type's metadata (popops::Cast's cost; named apart from the
    plain cast so that the two kernels stay two codelets)."""
    dt = as_dtype(dtype)
    cl = map_codelet("popops::CastPow2Scaled", _pow2_scale, 1, (cost_model.CAST,))
    return apply_map(graph, cl, [x], prog, f"cast to {dt.name} x 2^{log2_scale}", out_dtype=dt,
                     log2_scale=int(log2_scale))  # fmt: skip


@op("Fill")
def fill(graph: Graph, t: Tensor, value: float, prog: Prog) -> Tensor:
    """Set every element of ``t`` to ``value`` (popops::Fill), one vertex per tile."""
    cs = execute(graph, prog, f"fill {value}")
    for vtiles, f in vertex_fields(graph, [t], ("out",)):
        graph.add_vertices(cs, "popops::Fill", f, vtiles, value=value)
    graph.add_kernel(cs, "popops::Fill", {"out": t.expand(0)}, value=value)
    return t


@op("ScaledAdd")
def scaled_add(graph: Graph, a: Tensor, b: Tensor, factor: float, prog: Prog) -> Tensor:
    """``a += factor * b`` in place (popops::ScaledAdd); ``b`` is broadcast to ``a``."""
    check_same_graph(graph, a, b, what="scaled_add")
    bb = b if b.shape == a.shape else b.broadcast_to(a.shape)
    if bb.dtype != a.dtype:
        raise OpError(f"scaled_add: operands have types {a.dtype.name} and {b.dtype.name}; cast one first")
    cs = execute(graph, prog, "scaled add")
    for vtiles, f in vertex_fields(graph, [a, bb], ("data", "deltas")):
        graph.add_vertices(cs, "popops::ScaledAdd", f, vtiles, scale=float(factor))
    graph.add_kernel(cs, "popops::ScaledAdd", {"data": a.expand(0), "deltas": bb.expand(0)}, scale=float(factor))
    return a


@op("Copy")
def copy(graph: Graph, src: Tensor, prog: Prog, dst: Tensor | None = None) -> Tensor:
    """A copy of ``src`` (into ``dst`` if given, else a new tensor mapped like ``src``) done by
    on-tile copy vertices, so the steps carry this op's debug context."""
    target = dst if dst is not None else add_like(graph, src, "copy")
    if target.shape != src.shape:
        src = src.reshape(target.shape)
    cs = execute(graph, prog, "copy")
    for vtiles, f in vertex_fields(graph, [target, src], ("out", "in")):
        graph.add_vertices(cs, "popops::Copy", f, vtiles)
    graph.add_kernel(cs, "popops::Copy", {"in": src.expand(0), "out": target.expand(0)})
    return target


@op("Broadcast")
def broadcast(graph: Graph, t: Tensor, shape: Sequence[int], prog: Prog) -> Tensor:
    """A new tensor of ``shape`` holding ``t`` broadcast numpy-style (the gradient of a sum
    reduction), mapped linearly and filled by on-tile copy vertices."""
    shp = broadcast_shape(t.shape, tuple(shape), what="broadcast")
    if shp != tuple(shape):
        raise OpError(f"broadcast: {t.shape} does not broadcast to {tuple(shape)}")
    out = graph.add_variable(t.dtype, shp, "broadcast")
    graph.map_linearly(out)
    return copy(graph, t.broadcast_to(shp), prog, dst=out)
