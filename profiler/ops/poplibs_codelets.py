"""The ops library's codelets: vectorised over every vertex of a batch, costed by ``profiler.chip.cost_model``.

They subclass ``profiler.chip.codelets.Codelet`` (built-in style: ``run_batch`` runs one numpy kernel over
all vertices of a batch; ``estimate`` gives one vertex's cycles and FLOPs) and are passed to
``Graph.add_vertices`` as objects, so no change to the built-in table is needed.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from profiler.chip import cost_model
from profiler.chip.codelets import (
    MATMUL_CODE_BYTES,
    ONE_PTR_BYTES,
    SPAN_BYTES,
    Codelet,
    VertexBytes,
    elementwise_state_bytes,
    vertex_state_bytes,
)
from profiler.chip.targets import Target
from profiler.host import blas, parallel, scratch
from profiler.poplar.layout import memory_order

# Code sizes counted from PopLibs' own assembly (graphcore/poplibs lib/poplin/codelets/asm, the mk2
# main branch): instructions after macro and .if expansion x 4 B, plus .align padding. A
# ConvPartial1x1Out is its supervisor (conv_partial_1x1_supervisor.S CONV_1x1_SUPERVISOR, the
# 64-bit weight-load variant without stochastic-rounding control) plus the worker it runs
# (convPartialFlattenedField_*): float/float 8 units 420 + 496 B (conv_partial_1x1_float_float.S),
# half/float 8 units 420 + 628 B and half/half 16 units 548 + 628 B
# (conv_partial_1x1_half_float_8_and_half_half_h16.S), half/half 8 units 420 + 356 B
# (conv_partial_1x1_half_half.S). Keyed (in type, partials type, conv units).
AMP_CODE_BYTES = {
    ("float32", "float32", 8): 420 + 496,
    ("float16", "float32", 8): 420 + 628,
    ("float16", "float16", 16): 548 + 628,
    ("float16", "float16", 8): 420 + 356,
}
# ConvPartialnx1, the AMP vertex for kernels wider than 1x1, counted the same way: its supervisor
# (conv_partial_nx1_supervisor.S, the 64-bit weight-load variant without stochastic-rounding control),
# the worker it runs (convPartialNx1Flattened_*: float/float 640 B, half/float and half/half 16 units
# 532 B, half/half 8 units 452 B) and the partials' zeroing (conv_partial_nx1_zero_output.S, 68 B).
AMP_NX1_CODE_BYTES = {
    ("float32", "float32", 8): 1004 + 640 + 68,
    ("float16", "float32", 8): 1004 + 532 + 68,
    ("float16", "float16", 16): 1388 + 532 + 68,
    ("float16", "float16", 8): 1004 + 452 + 68,
}
# poplin::ReduceAdd<out, partials> (ReduceAdd.S, one section per type pair), counted the same way.
REDUCE_ADD_CODE_BYTES = {
    ("float32", "float32"): 224,
    ("float32", "float16"): 424,
    ("float16", "float32"): 320,
    ("float16", "float16"): 400,
}
# Its single-input variant (ReduceAddSingleInput.S, the partialsMemConstraints=false sections that
# enableFastReduce off selects): the worker preamble (12 instructions with compact pointers) and one
# loop body per type pair.
REDUCE_ADD_SINGLE_CODE_BYTES = {
    ("float32", "float32"): 4 * 42,
    ("float32", "float16"): 4 * 47,
    ("float16", "float32"): 4 * 42,
    ("float16", "float16"): 4 * 44,
}


def _n(shape: tuple[int, ...]) -> int:
    return math.prod(shape)


def _compute_dtype(dt: np.dtype) -> np.dtype:
    # half is computed in float and rounded once at the end, as the IPU's f16 ALU rounds each result
    return np.dtype(np.float32) if dt == np.float16 else dt


def _computed_in(dtypes: Mapping[str, np.dtype], fields: tuple[str, ...]) -> dict[str, np.dtype]:
    """``dtypes`` with ``fields`` read in their compute type (half as float)."""
    return {f: _compute_dtype(d) if f in fields else d for f, d in dtypes.items()}


# Functions whose result is exactly one of their operands (or its negation): computed in the
# stored type they give what float then rounding would, with no conversion either way.
EXACT_IN_STORED_TYPE: set[Callable[..., np.ndarray]] = {np.negative, np.abs, np.maximum, np.minimum}
# Functions ``profiler.executable.half_maps`` computes on stored halves in one compiled pass, by name.
# (ops.elementwise adds its relu; and its cast, which no half loop runs: half_maps.LOOPS names the ones that do)
HALF_OPS: dict[Callable[..., np.ndarray], str] = {
    np.add: "add", np.subtract: "subtract", np.multiply: "multiply", np.divide: "divide"
}  # fmt: skip


class Map(Codelet):
    """An elementwise MultiVertex: ``out = fn(in1, ..., **params)`` (or in place on ``data``).

    ``cost`` lists (kind, op) pairs of ``cost_model`` elementwise entries whose cycles and FLOPs add
    up to this vertex's; fused vertices that PopLibs has no single entry for (e.g. NonLinearityGrad)
    are costed [INF] as the sequence of the simple ops they perform.
    """

    builtin = True
    kind = "MultiVertex"
    reads_outputs = False  # out is only written
    positionwise = True

    def __init__(
        self,
        name: str,
        fn: Callable[..., np.ndarray],
        arity: int,
        cost: tuple[cost_model.CostOp, ...],
        in_place: bool = False,
        out_dtype: np.dtype | None = None,
    ) -> None:
        self.name, self.fn, self.arity, self.cost, self.in_place = name, fn, arity, cost, in_place
        names = ("in",) if arity == 1 else tuple(f"in{i + 1}" for i in range(arity))
        if in_place:
            self.inouts, self.inputs, self.outputs = ("data",), names[1:], ()
        else:
            self.inputs, self.outputs, self.inouts = names, ("out",), ()
        self.out_dtype = out_dtype
        self.half_op = None if in_place else HALF_OPS.get(fn)
        self.chain_op = HALF_OPS.get(fn)

    @property
    def result(self) -> str:
        return "data" if self.in_place else "out"

    def type_name(self, dtypes: Mapping[str, np.dtype]) -> str:
        return f"{self.name}{'InPlace' if self.in_place else ''}<{dtypes[self.result].name}>"

    def check_fields(self, where: str, shapes: Mapping[str, tuple[int, ...]], params: Mapping[str, Any]) -> None:
        super().check_fields(where, shapes, params)
        if len({shapes[f] for f in self.fields}) != 1:
            raise ValueError(f"compute set {where!r}: {self.name} fields must have equal shapes, got {dict(shapes)}")

    @property
    def exact(self) -> bool:
        return self.fn in EXACT_IN_STORED_TYPE

    def read_dtypes(self, dtypes: Mapping[str, np.dtype]) -> Mapping[str, np.dtype]:
        return dtypes if self.exact else _computed_in(dtypes, self.reads)

    def run_batch(self, values: dict[str, np.ndarray], params: Mapping[str, Any]) -> dict[str, np.ndarray]:
        args = [values[f] for f in ((("data",) + self.inputs) if self.in_place else self.inputs)]
        if not self.exact:  # read in the compute type already when the engine gathers them
            args = [a.astype(_compute_dtype(a.dtype), copy=False) for a in args]
        with np.errstate(all="ignore"):
            out = self.fn(*args, **params)
        # left in the compute type: the engine's scatter rounds it into the stored type in its copy
        return {self.result: np.asarray(out)}

    def vertex_bytes(self, shapes, dtypes, params, target):  # type: ignore[override]
        return VertexBytes(elementwise_state_bytes(self.arity, self.in_place))

    def estimate(self, shapes, dtypes, params, target):  # type: ignore[override]
        n = _n(shapes[self.result])
        dt = dtypes[self.fields[0]]
        cycles = flops = 0
        for op in self.cost:
            cycles += int(op.cycles(n, dt, target, in_place=self.in_place, to_dtype=dtypes[self.result]))
            flops += int(op.flops(n, dt, to_dtype=dtypes[self.result]))
        return cycles, flops


@functools.cache
def map_codelet(
    name: str, fn: Callable[..., np.ndarray], arity: int, cost: tuple[cost_model.CostOp, ...], in_place: bool = False
) -> Map:
    """One shared codelet object per (name, in-place) so the compiler lists it once."""
    return Map(name, fn, arity, cost, in_place)


def _inverse_std_dev(mean: np.ndarray, power: np.ndarray, eps: float = 0.0, scale_var: float = 1.0) -> np.ndarray:
    # non-stable estimate: E[x^2] - E[x]^2, clamped at 0 as rounding can take it below
    var = np.maximum(power - mean * mean, 0) + np.float32(eps)
    return 1 / np.sqrt(var * np.float32(scale_var))


class InverseStdDeviation(Map):
    """poplin::InverseStdDeviation (lib/poplin/codelets/InverseStdDeviation.cpp, the non-stable form):
    ``iStdDev = 1 / sqrt((max(power - mean^2, 0) + eps) * scaleVar)`` in float from a norm's mean and
    mean square (``in1``, ``in2``); one vertex a tile here (PopLibs splits a tile's regions between
    workers, ``computeInvStdDev``). Cycles are PopLibs' estimate (lib/poplin/poplinCycleEstimators.cpp
    ``InverseStdDeviation``): 6 + per region 4 + (3 + w) x ceil(n / w), w = dataPathWidth / 32 = 2."""

    kind = "Vertex"

    def __init__(self) -> None:
        super().__init__("poplin::InverseStdDeviation", _inverse_std_dev, 2, ())

    def type_name(self, dtypes):  # type: ignore[override]
        return f"{self.name}<{dtypes['in1'].name},{dtypes['in2'].name},{dtypes['out'].name},false>"

    def estimate(self, shapes, dtypes, params, target):  # type: ignore[override]
        n = _n(shapes["out"])
        w = 2  # 64-bit data path / 32: float intermediates
        return 6 + 4 + (3 + w) * -(-n // w), 4 * n  # FLOPs: eps, scale, division, inverse square root

    def vertex_bytes(self, shapes, dtypes, params, target):  # type: ignore[override]
        # mean a Vector of SPAN regions, power and iStdDev ONE_PTR Vectors, scaleVar and eps floats
        return VertexBytes(vertex_state_bytes(one_ptr=2, words=2) + SPAN_BYTES)


INVERSE_STD_DEVIATION = InverseStdDeviation()


class ReducePartial(Codelet):
    """A single-worker Reduce vertex: ``out[0] = op(in[:])`` accumulated in float (ref §3.5)."""

    builtin = True
    kind = "Vertex"
    inputs = ("in",)
    outputs = ("out",)
    reads_outputs = False  # only out's shape and dtype
    vertex = "popops::Reduce{op}"

    def __init__(self, op: str, fn: Callable[..., np.ndarray]) -> None:
        self.op, self.fn = op, fn
        self.name = self.vertex.format(op=op.title().replace("_", ""))  # square_add: ReduceSquareAdd

    def type_name(self, dtypes):  # type: ignore[override]
        return f"{self.name}<{dtypes['in'].name},{dtypes['out'].name}>"

    def check_fields(self, where, shapes, params):  # type: ignore[override]
        super().check_fields(where, shapes, params)
        if shapes["out"] != (1,):
            raise ValueError(f"compute set {where!r}: {self.name} writes one element per vertex, got {shapes['out']}")

    def read_dtypes(self, dtypes):  # type: ignore[override]
        return dtypes | {"in": _accumulator_dtype(dtypes["in"], self.op, np.float64)}

    def run_batch(self, values, params):  # type: ignore[override]
        v, out = values["in"], values["out"]
        result = np.empty(v.shape[:-1], dtype=out.dtype)

        def part(rows: slice) -> None:  # each vertex's row on its own: any split gives the same values
            result[rows] = _scaled(self.fn(_accumulator(v[rows], self.op, np.float64), axis=-1), params)

        # split over the run's threads: a layer norm's or softmax's vertices were ~6 % of a BERT-large
        # layer's run, on the main thread alone (py-spy)
        parallel.in_row_chunks(part, v.shape[0], v.size, parallel.chunk_for(v.size, parallel.CHUNK_ELEMENTS))
        return {"out": result.reshape(out.shape)}

    def estimate(self, shapes, dtypes, params, target):  # type: ignore[override]
        n = _n(shapes["in"])
        cyc = cost_model.reduce_cycles(self.op, n, 1, dtypes["in"], target)
        return int(cyc), int(cost_model.reduce_flops(self.op, n, 1, dtypes["in"]))

    def vertex_bytes(self, shapes, dtypes, params, target):  # type: ignore[override]
        # popops' single-input reduction: its partials and output pointers and its count (lib/popops/
        # reduction/ReductionConnection.cpp specialSingleInputBaseMemoryCost = 12)
        return VertexBytes(vertex_state_bytes(one_ptr=2, words=1))


class ContinuousReduce(ReducePartial):
    """popops::ContinuousReduce: ``out[o] = op(in[o, :])`` for a worker's run of outputs, each of as many
    contiguous partials (lib/popops/codelets/ContinuousReduce.cpp; popops builds one per worker's run of
    reductions: ReductionConnection.cpp ALL_REGIONS_CONTINUOUS), accumulated in float."""

    vertex = "popops::ContinuousReduce<popops::Reduce{op}>"

    def type_name(self, dtypes):  # type: ignore[override]
        return f"{self.name[:-1]},{dtypes['in'].name},{dtypes['out'].name}>"

    def check_fields(self, where, shapes, params):  # type: ignore[override]
        Codelet.check_fields(self, where, shapes, params)
        if len(shapes["in"]) != 2 or shapes["out"] != shapes["in"][:1]:
            raise ValueError(
                f"compute set {where!r}: {self.name} reduces in[outputs, partials] into out[outputs], got "
                f"in {shapes['in']} and out {shapes['out']}"
            )

    def estimate(self, shapes, dtypes, params, target):  # type: ignore[override]
        k, n = shapes["in"]
        cyc = cost_model.continuous_reduce_cycles(self.op, n, k, dtypes["in"])
        return int(cyc), int(cost_model.reduce_flops(self.op, k * n, k, dtypes["in"]))

    def vertex_bytes(self, shapes, dtypes, params, target):  # type: ignore[override]
        # partials and out pointers, numOutputsM1 and numPartials (ContinuousReduce.cpp; popops' own
        # cost, specialContinuousBaseMemoryCost = 12)
        return VertexBytes(vertex_state_bytes(one_ptr=2, shorts=2))


def _scaled(r: np.ndarray, params: Mapping[str, Any]) -> np.ndarray:
    """A reduction's result times the scale PopLibs fuses into Reduce; unscaled results keep their
    type (an int64 maximum through a float multiply would lose its low bits)."""
    scale = params.get("scale", 1.0)
    return r if scale == 1.0 else r * scale


def reduce_identity(op: str, dtype: np.dtype) -> float | int:
    """The value that never changes a reduction: 0, or the type's lowest / highest for max / min."""
    if op in ("add", "square_add"):
        return 0
    if dtype.kind == "b":
        return int(op == "min")
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return int(info.min if op == "max" else info.max)
    return -np.inf if op == "max" else np.inf


def _accumulator_dtype(dtype: np.dtype, op: str, float_acc: type) -> np.dtype:
    """The type a reduction accumulates in: sums of floats in at least ``float_acc``, of integers in
    int64; max and min need no wider type (they pick an element)."""
    if op not in ("add", "square_add"):
        return dtype
    return np.promote_types(dtype, float_acc) if dtype.kind == "f" else np.dtype(np.int64)


def _accumulator(v: np.ndarray, op: str, float_acc: type) -> np.ndarray:
    """``v`` in its ``_accumulator_dtype`` (no copy when it is read in that type already)."""
    return v.astype(_accumulator_dtype(v.dtype, op, float_acc), copy=False)


class ReduceSegments(Codelet):
    """A kernel codelet (ComputeSet.kernel; never a vertex of its own): ``out[g] = scale *
    op(in[starts[g]:starts[g + 1]])`` for members sorted by group - a whole ragged reduction
    (pooling windows clipped by padding, col2im) in one numpy call."""

    builtin = True
    inputs = ("in",)
    outputs = ("out",)
    reads_outputs = False

    def __init__(self, op: str, ufunc: np.ufunc) -> None:
        self.op, self.ufunc = op, ufunc
        self.name = f"popops::Reduce{op.title().replace('_', '')}Segments"

    def read_dtypes(self, dtypes):  # type: ignore[override]
        return dtypes | {"in": _accumulator_dtype(dtypes["in"], self.op, np.float64)}

    def run_batch(self, values, params):  # type: ignore[override]
        v, out = values["in"], values["out"]
        acc = _accumulator(v, self.op, np.float64)
        if self.op == "square_add":
            acc = acc * acc
        r = self.ufunc.reduceat(acc, params["starts"], axis=1)
        return {"out": _scaled(r, params).astype(out.dtype).reshape(out.shape)}


def _sum_of_squares(v: np.ndarray, axis: int) -> np.ndarray:
    return np.sum(v * v, axis=axis)


REDUCE_SEGMENT_CODELETS = {
    "add": ReduceSegments("add", np.add),
    "square_add": ReduceSegments("square_add", np.add),  # squares first (run_batch)
    "max": ReduceSegments("max", np.maximum),
    "min": ReduceSegments("min", np.minimum),
}

REDUCE_CODELETS = {
    "add": ReducePartial("add", np.sum),
    # popops' SQUARE_ADD: the sum of the squares (popnn's layer-norm statistics, Norms.cpp)
    "square_add": ReducePartial("square_add", _sum_of_squares),
    "max": ReducePartial("max", np.max),
    "min": ReducePartial("min", np.min),
}
CONTINUOUS_REDUCE_CODELETS = {
    "add": ContinuousReduce("add", np.sum),
    "square_add": ContinuousReduce("square_add", _sum_of_squares),
    "max": ContinuousReduce("max", np.max),
    "min": ContinuousReduce("min", np.min),
}


class Pooling(Codelet):
    """popnn::MaxPooling / SumPooling on one worker: ``in[rows, C * k]`` holds each output
    position's window (channel-major, as the im2col view gives it), ``out[rows, C]`` its maximum or
    scaled sum over the k window elements. Params: ``segments`` (output rows the positions lie in,
    for the estimate) and ``scale``."""

    builtin = True
    kind = "Vertex"
    inputs = ("in",)
    outputs = ("out",)
    reads_outputs = False

    def __init__(self, op: str, fn: Callable[..., np.ndarray]) -> None:
        self.op, self.fn = op, fn
        self.name = "popnn::MaxPooling" if op == "max" else "popnn::SumPooling"
        # a maximum is taken over the windows as they lie in the input (no columns copied); a sum
        # keeps numpy's summation order over the copied columns
        self.window_field = "in" if op == "max" else None

    def type_name(self, dtypes):  # type: ignore[override]
        return f"{self.name}<{dtypes['in'].name}>"

    def read_dtypes(self, dtypes):  # type: ignore[override]
        if self.op == "max":  # a half maximum in float (exact: it picks an element); numpy compares halves slowly
            return dtypes | {"in": np.dtype(np.float32)} if dtypes["in"] == np.float16 else dtypes
        return dtypes | {"in": _accumulator_dtype(dtypes["in"], self.op, np.float32)}

    def run_batch(self, values, params):  # type: ignore[override]
        v, out = values["in"], values["out"]
        windows = _accumulator(v.reshape(*out.shape, -1), self.op, np.float32)  # [vertices, rows, C, k]
        if self.op == "max":  # one pass per window element: numpy reduces a short last axis slowly
            r = windows[..., 0].copy()
            for i in range(1, windows.shape[-1]):
                np.maximum(r, windows[..., i], out=r)
        else:
            r = _scaled(self.fn(windows, axis=-1), params)
        return {"out": r.reshape(out.shape)}  # rounded into out's type by the engine's scatter

    def run_windows(self, values, params):  # type: ignore[override]
        win, out = values["in"], values["out"]  # win [G, B.., Ho, Wo, C.., kh, kw]
        first = win[..., 0, 0]
        # the running maximum laid out as the input is (each pass then streams both)
        perm = memory_order(first)
        r = np.empty([first.shape[d] for d in perm], first.dtype).transpose(np.argsort(perm))
        # in slabs of r's outermost dim on the run's threads, each slab's passes while it is in
        # cache (ResNet-50's 3x3 max pool: 9 passes over 200 Ki elements, ~3 ms on one thread)
        axis = next((d for d in perm if r.shape[d] > 1), perm[0])  # the outermost dim of several (not batch 1's)

        def slab(part: slice) -> None:
            at = (slice(None),) * axis + (part,)
            rs, ws = r[at], win[at]
            rs[...] = ws[..., 0, 0]
            for i, j in itertools.product(range(win.shape[-2]), range(win.shape[-1])):
                if i or j:
                    np.maximum(rs, ws[..., i, j], out=rs)

        rows = r.shape[axis]
        parallel.in_row_chunks(slab, rows, r.size, max(POOL_PART_ELEMENTS, r.size // parallel.threads()))
        return {"out": r.reshape(out.shape)}  # [G, B*Ho*Wo, C] as the columns would give it

    def estimate(self, shapes, dtypes, params, target):  # type: ignore[override]
        rows, channels = shapes["out"]
        kernel = shapes["in"][1] // max(channels, 1)
        cyc = cost_model.pool_cycles(self.op == "max", rows, int(params.get("segments", rows)), channels, kernel,
                                     dtypes["in"])  # fmt: skip
        flops = cost_model.reduce_flops(self.op, rows * channels * kernel, rows * channels, dtypes["in"])
        return int(cyc), int(flops)


# Fewest result elements a slab of a max pooling's windows has on a thread of its own: each takes a
# pass per window element (9 for 3x3), ~9x a single pass's work, so a split pays from a ninth of a
# single pass's part (parallel.PART_ELEMENTS)
POOL_PART_ELEMENTS = 1 << 14

POOLING_CODELETS = {"max": Pooling("max", np.max), "add": Pooling("add", np.sum)}


class MatMulPartial(Codelet):
    """``out[m, n] = a[m, k] @ b[k, n]`` on one tile: the planner's vertex for one block (ref §3.7).

    method "AMP" is ConvPartial1x1Out (partials type as given), "HMAC" ConvPartialHorizontalMac.
    Floating-point blocks accumulate in float32 (at least), like the AMP/MAC partials, then round to
    the partials type; float32 is also several times faster on the host than float64.
    """

    builtin = True
    kind = "SupervisorVertex"
    inputs = ("a", "b")
    outputs = ("out",)
    reads_outputs = False  # only out's shape and dtype
    code_bytes = MATMUL_CODE_BYTES
    rows_field = "a"  # a product's rows are computed alike whatever rows they are computed with (blas.matmul)

    def __init__(self, method: str, nx1: bool = False) -> None:
        self.method, self.nx1 = method, nx1
        if method == "AMP":
            self.name = "poplin::ConvPartialnx1" if nx1 else "poplin::ConvPartial1x1Out"
        elif method == "SLIC":
            self.name = "poplin::ConvPartial1x4SLIC"
        else:
            self.name = "poplin::ConvPartialHorizontalMac"

    def code_size(self, dtypes, target):  # type: ignore[override]
        if self.method != "AMP":
            return self.code_bytes
        units = cost_model.amp_config(dtypes["a"], dtypes["out"], target).num_conv_units
        table = AMP_NX1_CODE_BYTES if self.nx1 else AMP_CODE_BYTES
        return table.get((dtypes["a"].name, dtypes["out"].name, units), self.code_bytes)

    def type_name(self, dtypes):  # type: ignore[override]
        return f"{self.name}<{dtypes['a'].name},{dtypes['out'].name}>"

    def check_fields(self, where, shapes, params):  # type: ignore[override]
        super().check_fields(where, shapes, params)
        a, b, o = shapes["a"], shapes["b"], shapes["out"]
        # out may also be flat (m*n, row-major or in out-chan groups): a split matmul's partials, held block-major
        if len(a) != 2 or len(b) != 2 or a[1] != b[0] or o not in ((a[0], b[1]), (a[0] * b[1],)):
            raise ValueError(f"compute set {where!r}: {self.name} needs a[m,k], b[k,n], out[m,n]; got {a}, {b}, {o}")

    @staticmethod
    def _accumulates_in(out: np.dtype) -> np.dtype:
        return np.promote_types(out, np.float32) if out.kind == "f" else np.dtype(np.int64)

    def read_dtypes(self, dtypes):  # type: ignore[override]
        acc = self._accumulates_in(dtypes["out"])
        return dtypes | {"a": acc, "b": acc}

    def run_batch(self, values, params):  # type: ignore[override]
        acc = self._accumulates_in(values["out"].dtype)
        a, b = values["a"].astype(acc, copy=False), values["b"].astype(acc, copy=False)  # read as acc already
        # into a reused buffer (the engine's scatter consumes it before the next batch) and rounded
        # into out's type by that scatter; a flat out (block-major partials) takes it flat, in out-chan
        # groups of ``out_group`` when given (positions (n // group, m, n % group), as PopLibs holds a
        # conv's partials: {..., OC/ocpg, N, ocpg}, lib/poplin/Convolution.cpp createPartials)
        product = scratch.buffer(
            "product", (*np.broadcast_shapes(a.shape[:-2], b.shape[:-2]), a.shape[-2], b.shape[-1]), acc
        )
        r = blas.matmul(a, b, product)  # rows over the run's threads while BLAS is held to one
        if params and params.get("log2_scale"):  # FP8 operands' power-of-two scales undone (ops.matmul)
            r *= 2.0 ** int(params["log2_scale"])
        group = params.get("out_group", 0) if params else 0
        if group and len(values["out"].shape) < r.ndim and group < r.shape[-1]:
            r = r.reshape(*r.shape[:-1], r.shape[-1] // group, group).swapaxes(-3, -2)
        return {"out": r.reshape(values["out"].shape)}

    @staticmethod
    def _mkn(shapes: Any, params: Any) -> tuple[int, int, int]:
        """(field rows, in chans, out chans) of the vertex: with ``swap_operands`` (PopLibs'
        swapOperands transform, ConvPlan.cpp) it computes out^T = b^T a^T, so its field runs over the
        block's out chans (n) and its out channels over the block's rows (m)."""
        (m, k), (_, n) = shapes["a"], shapes["b"]
        return (n, k, m) if params and params.get("swap_operands") else (m, k, n)

    def estimate(self, shapes, dtypes, params, target):  # type: ignore[override]
        m, k, n = self._mkn(shapes, params)
        conv = params.get("conv") if params else None
        if self.method == "SLIC":  # this conv group's share of its tile's SLIC vertex (matmul._run_step)
            stride, groups, first = params["slic"]
            whole = int(slic_tile_cycles(groups, m, k, n, dtypes["a"], dtypes["out"], target, conv, stride))
            return whole // groups + (whole % groups if first else 0), int(cost_model.matmul_flops(m, k, n))
        return int(block_cycles(self.method, m, k, n, dtypes["a"], dtypes["out"], target, conv)), int(
            cost_model.matmul_flops(m, k, n)
        )

    def vertex_bytes(self, shapes, dtypes, params, target):  # type: ignore[override]
        if self.method != "AMP":
            return super().vertex_bytes(shapes, dtypes, params, target)
        # PopLibs ConvPartial1x1Out's fields as of Poplar SDK 3.0 (graphcore/poplibs
        # lib/poplin/codelets/ConvPartial1x1Out.cpp at 87b8558f, July 2022): in, weights and out are
        # ONE_PTR vectors of ONE_PTR vectors, worklists one ONE_PTR edge, and 7 unsigned-short scalars
        # (numConvGroupsM1, numOutGroupsM1, numInGroups, transformedInStride, outChansPerGroup,
        # transformedOutStride, inChansPerGroup). The state is the fixed-size struct: its assembly
        # reads the four vectors as one word each at offsets 0-12 and the scalars from 16 on
        # (conv_partial_1x1_supervisor.S SUP_INCHAN_VECTORS ... SUP_OUTSTRIDE), 30 B padded to 32.
        # Out of line: the arrays of in, weights and out, one 32-bit pointer per in group, per in
        # group x out group and per out group (the supervisor steps through each with ld32step).
        # The worklists the vertex's field connects to are a graph constant PopLibs adds per vertex
        # (lib/poplin/ConvVertices.cpp: graph.addConstant(worklistEntryType, ...) then
        # graph.connect(v["worklists"], t)), 3 unsigned shorts per worker context (out offset, field
        # elements, in offset).
        m, k, n = self._mkn(shapes, params)
        cfg = cost_model.amp_config(dtypes["a"], dtypes["out"], target)
        ig, og = -(-k // cfg.in_chans_per_group), -(-n // cfg.out_chans_per_group)
        if self.nx1:
            # ConvPartialnx1's fields (lib/poplin/codelets/ConvPartialnx1.cpp, SDK 3.0, the limited version):
            # transformedInStride, transformedOutStride and zerosInfo (32-bit), the in, weights and out
            # vectors and the worklists' VectorList (a word each), 9 unsigned shorts (numOutGroupsM1,
            # numInGroups, kernelOuterSizeM1, kernelInnerElementsM1, numConvGroupsM1, ampKernelHeightM1,
            # transformedInRowStride, outChansPerGroup, inChansPerGroup): 46 B padded to 48. Out of line
            # the pointer arrays as ConvPartial1x1Out's (per in group, in x out group, out group), and a
            # worklist per worker and kernel position: 3 unsigned shorts per output-row piece.
            kh, kw, wo = params["conv"][:3]
            positions = min(ig, kh * kw)
            ig = -(-ig // (kh * kw))
            entries = cost_model.nx1_worklist_entries(m, wo, target.num_worker_contexts)
            return VertexBytes(
                vertex_state_bytes(one_ptr=4, words=3, shorts=9),
                ONE_PTR_BYTES * (ig + ig * og + og),
                3 * 2 * entries * positions,
            )
        return VertexBytes(
            vertex_state_bytes(one_ptr=4, shorts=7),
            ONE_PTR_BYTES * (ig + ig * og + og),
            3 * target.num_worker_contexts * 2,
        )


# A convolution's window geometry as its im2col matmul's vertices need it: (kernel height, kernel width,
# output row width, channel group), the channel group being the im2col columns' innermost run of input
# channels at one kernel position (ops.conv.channel_group; 0 when it is not known, taken as filling whole
# AMP groups). None for a plain matmul.
ConvWindow = tuple[int, int, int, int]


def conv_channel_group(conv: ConvWindow) -> int | None:
    """The channel group of a ConvWindow (None: whole AMP groups; a 3-long window from before it was
    recorded)."""
    return int(conv[3]) if len(conv) > 3 and conv[3] > 0 else None


def runs_nx1(conv: ConvWindow | None) -> bool:
    """Whether a convolution's AMP blocks run ConvPartialnx1 rather than ConvPartial1x1Out: a kernel
    wider than 1x1 (ConvModel.cpp canUseConvPartial1x1Vertex)."""
    return conv is not None and conv[0] * conv[1] > 1


def block_cycles(
    method: str, m: Any, k: Any, n: Any, dtype: Any, partials: Any, target: Target, conv: ConvWindow | None = None
) -> Any:
    """Cycles of one matmul-partials vertex (vectorised over ``m``, ``k``, ``n``). A block of a
    convolution with a kernel wider than 1x1 (``conv``) runs ConvPartialnx1 (AMP) or the HMAC's loop over
    kernel positions, as PopLibs runs them."""
    if method == "AMP" and runs_nx1(conv):
        assert conv is not None
        return cost_model.amp_nx1_cycles(
            m, conv[2], (conv[0], conv[1]), k, n, dtype, partials, target, conv_channel_group(conv)
        )
    if method == "AMP":
        return cost_model.amp_matmul_cycles(m, k, n, dtype, partials, target)
    if runs_nx1(conv):
        assert conv is not None
        return cost_model.mac_conv_cycles(
            m, (conv[0], conv[1]), k, n, dtype, partials, target, conv_channel_group(conv)
        )
    return cost_model.mac_matmul_cycles(m, k, n, dtype, partials, target)


def slic_allowed(conv: ConvWindow | None, slic_stride: int, k: int, n: int) -> bool:
    """Whether PopLibs could run a convolution's im2col product ``[k] x [n]`` a group on the SLIC vertex:
    a convolution whose geometry allows it (``slic_stride`` 1 or 2) with at most 4 in and out channels a
    conv group (the largest SLIC chansPerGroup, ConvVertexType.cpp getConvVertexSLICCandidates)."""
    if conv is None or slic_stride not in (1, 2):
        return False
    return max(k // (conv[0] * conv[1]), n) <= cost_model.SLIC_MAX_CHANS_PER_GROUP


def slic_tile_cycles(
    groups: Any, m: Any, k: Any, n: Any, dtype: Any, partials: Any, target: Target, conv: ConvWindow, stride: int
) -> Any:
    """Cycles of the SLIC vertex computing ``groups`` conv groups of ``m`` output positions (a tile's
    block), each ``[k] x [n]`` (k = in chans x kernel positions): the fastest of PopLibs' SLIC variants
    that hold the group's channels (cost_model.slic_best); a huge figure where none does, so the planner
    never picks it."""
    kh, kw, wo = conv[0], conv[1], conv[2]
    chans = int(max(np.max(k) // (kh * kw), np.max(n)))
    cyc, _ = cost_model.slic_best(m, wo, (kh, kw), groups, chans, dtype, partials, target, stride)
    return np.where(cyc < 0, np.iinfo(np.int64).max // 4, cyc)


MATMUL_CODELETS = {
    "SLIC": MatMulPartial("SLIC"),
    "AMP": MatMulPartial("AMP"),
    "AMP_NX1": MatMulPartial("AMP", nx1=True),
    "HMAC": MatMulPartial("HMAC"),
}


# DynamicSlice / MultiSlice figures, ref §3.4.
def multi_slice_cycles(n_indices: int, elems: int, dtype: np.dtype, target: Target) -> int:
    """MultiSlice: (30 + inRange*(19 + ceil(elems/vw')*cpv))*W, vw' = 2 (half) or 64/32 (float), cpv 2."""
    vw = 2 if dtype.itemsize == 2 else (4 if dtype.itemsize == 1 else 2)
    cpv = 3 if dtype.itemsize == 1 else 2
    return (30 + n_indices * (19 + -(-elems // vw) * cpv)) * target.num_worker_contexts


class MultiSlice(Codelet):
    """out[i, :] = table[indices[i] - offset, :] for indices inside this tile's rows (ref §3.4)."""

    name = "popops::MultiSlice"
    data_dependent = (
        "MultiSlice: how many indices fall in a tile's rows decides its copies (the estimate assumes all do)"
    )
    builtin = True
    kind = "MultiVertex"
    inputs = ("table", "indices")
    outputs = ("out",)

    def type_name(self, dtypes):  # type: ignore[override]
        return f"{self.name}<{dtypes['table'].name}>"

    def run_batch(self, values, params):  # type: ignore[override]
        # ``offset``: the first table row this vertex holds (a split dictionary, PopLibs' baseOffset);
        # an index outside its rows gives zeros, so the second stage can add the candidates
        table, idx = values["table"], values["indices"].astype(np.int64) - int(params.get("offset", 0))
        out = np.empty((*idx.shape, table.shape[2]), dtype=values["out"].dtype)

        def part(v: slice) -> None:  # each vertex's slices from its own table rows: any split, the same values
            i = idx[v]
            got = np.take_along_axis(table[v], np.clip(i, 0, table.shape[1] - 1)[:, :, None], axis=1)
            if "offset" in params:
                got = np.where(((i >= 0) & (i < table.shape[1]))[:, :, None], got, 0)
            out[v] = got

        # split over the run's threads (an embedding lookup's slices: ~4 % of a BERT-large layer's run,
        # on the main thread alone)
        parallel.in_row_chunks(part, idx.shape[0], out.size, parallel.chunk_for(out.size, parallel.CHUNK_ELEMENTS))
        return {"out": out}

    def estimate(self, shapes, dtypes, params, target):  # type: ignore[override]
        n, d = shapes["out"]
        return multi_slice_cycles(n, d, dtypes["table"], target), 0


class MultiUpdateAdd(Codelet):
    """table[indices[i], :] += scale * updates[i, :] (popops::MultiUpdateAdd; costed as MultiSlice
    plus one multiply-add per element [INF])."""

    name = "popops::MultiUpdateAdd"
    data_dependent = (
        "MultiUpdateAdd: how many indices fall in a tile's rows decides its updates (the estimate assumes all do)"
    )
    builtin = True
    kind = "MultiVertex"
    inputs = ("updates", "indices")
    inouts = ("table",)

    def type_name(self, dtypes):  # type: ignore[override]
        return f"{self.name}<{dtypes['table'].name}>"

    def run_batch(self, values, params):  # type: ignore[override]
        table = values["table"].astype(np.float64)
        idx = values["indices"].astype(np.int64)
        upd = values["updates"].astype(np.float64) * params.get("scale", 1.0)
        v = np.arange(table.shape[0])[:, None]
        np.add.at(table, (np.broadcast_to(v, idx.shape), idx), upd)
        return {"table": table.astype(values["table"].dtype)}

    def estimate(self, shapes, dtypes, params, target):  # type: ignore[override]
        n, d = shapes["updates"]
        return multi_slice_cycles(n, d, dtypes["table"], target) + int(
            cost_model.scaled_add_cycles(n * d, dtypes["table"], target)
        ), 2 * n * d


class DynamicSlice(Codelet):
    """out = in[index - offset] over this tile's slice candidates in[S, L] (DynamicSlice1D, ref §3.4)."""

    name = "popops::DynamicSlice1D"
    data_dependent = (
        "DynamicSlice: the index decides which candidate each tile copies (the estimate charges a full copy)"
    )
    builtin = True
    kind = "MultiVertex"
    inputs = ("in", "index")
    outputs = ("out",)

    def type_name(self, dtypes):  # type: ignore[override]
        return f"{self.name}<{dtypes['in'].name}>"

    def run_batch(self, values, params):  # type: ignore[override]
        src, idx = values["in"], values["index"].astype(np.int64).reshape(-1)
        s = np.clip(idx, 0, src.shape[1] - 1)
        return {"out": src[np.arange(src.shape[0]), s].astype(values["out"].dtype)}

    def estimate(self, shapes, dtypes, params, target):  # type: ignore[override]
        return dynamic_slice_cycles(_n(shapes["out"]), dtypes["in"], target), 0


class DynamicUpdate(Codelet):
    """base[index] = update over this tile's slice candidates (DynamicUpdateSlice1D, costed as the slice)."""

    name = "popops::DynamicUpdateSlice1D"
    data_dependent = (
        "DynamicUpdateSlice: the index decides which candidate each tile updates (the estimate charges a full copy)"
    )
    builtin = True
    kind = "MultiVertex"
    inputs = ("update", "index")
    inouts = ("base",)

    def type_name(self, dtypes):  # type: ignore[override]
        return f"{self.name}<{dtypes['base'].name}>"

    def run_batch(self, values, params):  # type: ignore[override]
        base, idx = values["base"].copy(), values["index"].astype(np.int64).reshape(-1)
        s = np.clip(idx, 0, base.shape[1] - 1)
        base[np.arange(base.shape[0]), s] = values["update"]
        return {"base": base}

    def estimate(self, shapes, dtypes, params, target):  # type: ignore[override]
        return dynamic_slice_cycles(_n(shapes["update"]), dtypes["base"], target), 0


def dynamic_slice_cycles(region: int, dtype: np.dtype, target: Target) -> int:
    """DynamicSlice1D: 11 + 14 + W*(39 + (24 + 2*nCopies)*numSub), nCopies = ceil(region/W)/vw (ref §3.4)."""
    w = target.num_worker_contexts
    vw = cost_model.vector_width(dtype) if dtype.kind == "f" else 2
    n_copies = -(-((region + w - 1) // w) // vw)
    return 11 + 14 + w * (39 + (24 + 2 * n_copies))


class ConvReduce(Codelet):
    """poplin::ReduceAdd: a MultiVertex summing ``in[depth, L]`` down its partials into ``out[L]``
    (the conv/matmul partial-sum reduction, ref §3.5 ``getReduceCycleEstimate``); float
    accumulation, output cast to the output's type. ``single_input``: PopLibs' single-input variant
    (``ReduceAdd<out, partials, true, false>``): the tile's own partial row and the exchanged rows
    are two vectors rather than a vector of pointers, one per partial."""

    builtin = True
    kind = "MultiVertex"
    name = "poplin::ReduceAdd"
    inputs = ("in",)
    outputs = ("out",)
    reads_outputs = False  # only out's shape and dtype

    def __init__(self, single_input: bool) -> None:
        self.single_input = single_input

    def type_name(self, dtypes):  # type: ignore[override]
        flag = "true" if self.single_input else "false"
        return f"{self.name}<{dtypes['out'].name},{dtypes['in'].name},{flag},false>"

    def code_size(self, dtypes, target):  # type: ignore[override]
        table = REDUCE_ADD_SINGLE_CODE_BYTES if self.single_input else REDUCE_ADD_CODE_BYTES
        return table.get((dtypes["out"].name, dtypes["in"].name), self.code_bytes)

    def check_fields(self, where, shapes, params):  # type: ignore[override]
        super().check_fields(where, shapes, params)
        if len(shapes["in"]) != 2 or shapes["out"] != shapes["in"][1:]:
            raise ValueError(f"compute set {where!r}: {self.name} needs in[depth, L], out[L]; got {dict(shapes)}")

    def read_dtypes(self, dtypes):  # type: ignore[override]
        return dtypes | {"in": np.dtype(np.float32)}  # float accumulation, whatever the partials' type

    def run_batch(self, values, params):  # type: ignore[override]
        return {"out": values["in"].astype(np.float32, copy=False).sum(axis=1)}  # rounded by the scatter

    def estimate(self, shapes, dtypes, params, target):  # type: ignore[override]
        depth, length = shapes["in"]
        cyc = cost_model.conv_reduce_cycles(length, depth, dtypes["in"], target, dtypes["out"], self.single_input)
        return int(cyc), int(cost_model.reduce_flops("add", depth * length, length, dtypes["in"]))

    def vertex_bytes(self, shapes, dtypes, params, target):  # type: ignore[override]
        # PopLibs' poplin::ReduceAdd fields as its assembly reads them with compact pointers
        # (ReduceAdd.S / ReduceAddSingleInput.S: VOFF_PARTIALS 0, VOFF_OUT 2, VOFF_NUM_PARTIALS 4,
        # VOFF_NUM_ELEMS 6, and for the single-input variant VOFF_INITIAL_PARTIAL 8): multi-input
        # 8 B, its partials an out-of-line array of one 32-bit pointer per partial (read with
        # ld32step); single-input 10 B, padded to 12, every partial row reached by a stride
        if self.single_input:
            return VertexBytes(vertex_state_bytes(scaled=3, shorts=2))
        return VertexBytes(vertex_state_bytes(scaled=2, shorts=2), ONE_PTR_BYTES * shapes["in"][0])


CONV_REDUCE = ConvReduce(single_input=False)
CONV_REDUCE_SINGLE = ConvReduce(single_input=True)


def conv_reduce_codelet(outputs: int, depth: int, partials: np.dtype, target: Target) -> ConvReduce:
    """The ReduceAdd variant PopLibs gives a tile reducing ``depth`` partials of ``outputs`` outputs
    (poplin/ConvReduce.cpp; cost_model.conv_reduce_single_input)."""
    single = bool(cost_model.conv_reduce_single_input(np.int64(outputs), depth, partials, target))
    return CONV_REDUCE_SINGLE if single else CONV_REDUCE


class SetSeed(Codelet):
    """poprand::SetSeed: seeds the tile's hardware PRNG from the two-word master seed and warms it
    up (lib/poprand/codelets/SetSeed.cpp, asm/Seeds.S). Nothing a program reads changes (tilescope
    does not model the hardware PRNG), so it computes nothing.

    Cycles: poprandCycleEstimators.cpp ``SetSeed``: 14 + 27 x worker contexts. Its struct is 12 B
    (Seeds.S word offsets: seed ONE_PTR 0, seedModifierUser 1, seedModifierHw 2) and its worker code
    17 instructions, ~72 B (Seeds.S, with the bundles' 8 B and the .align 8). What a tile holds for
    the whole seed operation is more: a measured PopTorch report's ``randomSeed___fromHost``
    operation holds 276,840 B of vertex code and 53,016 B of vertex state on 1,472 tiles (graphcore/
    popliner tests/test_profile.py, SDK 2), 188 B and 36 B a tile; the 2019 TensorFlow report's
    adder 140 B of code a tile (graphcore/tensorflow docs/logging.rst: 170,788 B on 1,216 tiles,
    mostly SetSeedSupervisor); Graphcore's auto-pipeline tool takes "random seed and supervisor
    vertex state" as "usually 48 KB" (ipu_tensorflow_addons), 33 B a tile of a GC200. No source
    breaks the operation's share down by vertex (Poplar's runtime supervisor code for a MultiVertex,
    the seed copy's vertices), so the vertex carries the measured operation's per-tile figures:
    calibrated on popliner's profile, checked on the other two."""

    name = "poprand::SetSeed"
    builtin = True
    kind = "MultiVertex"
    inputs = ("seed",)
    reads_outputs = False
    code_bytes = 276_840 // 1_472  # 188 B: popliner's seed operation per tile (docstring)
    STATE_BYTES = 53_016 // 1_472  # 36 B: the same operation's vertex state per tile

    def run_batch(self, values, params):  # type: ignore[override]
        return {}

    def vertex_bytes(self, shapes, dtypes, params, target):  # type: ignore[override]
        return VertexBytes(self.STATE_BYTES)

    def estimate(self, shapes, dtypes, params, target):  # type: ignore[override]
        return 14 + 27 * target.num_worker_contexts, 0
