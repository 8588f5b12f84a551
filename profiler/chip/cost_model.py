"""The cost model: every cycle and FLOP formula of the simulated IPU, in one place.

Formulas and constants come from PopLibs' cycle estimators and published figures, as collected in
/work/shared/reference/ipu_model.md ("ref §N"; the PopLibs file each comes from is named at each
formula). Markers as in the reference: [INF] inferred or derived, [3P] unverified third party,
[NF] not found (our assumption, chosen as stated).

Conventions (ref §2 "Cycle convention in PopLibs estimators"): the estimate of a MultiVertex or
supervisor vertex is ``W x max(worker cycles) + supervisor cycles`` (W = worker contexts, 6); the
estimate of a single-worker ("2D") vertex is that worker's own cycles. ``tile_compute_cycles``
turns per-vertex estimates into per-tile compute-set cycles. Which vertex kind each estimate is:

* MultiVertex / supervisor: unary, binary, broadcast scalar, cast, scaled add, copy, AMP and MAC
  matmul partials;
* single worker: reduce, fill.

Every function is vectorised: arrays of work sizes in, int64 arrays out (FLOPs likewise).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
from numpy.typing import DTypeLike

from profiler.chip.targets import Target

# Work sizes a cost function takes: an integer array (vectorised) or one count.
Counts = np.ndarray | int

# -- element types -------------------------------------------------------------------------------
# Canonical names; Poplar's and numpy's spellings are accepted (np.dtype objects too).
_DTYPE_ALIASES = {
    "float": "float32", "float32": "float32", "f32": "float32",
    "half": "float16", "float16": "float16", "f16": "float16",
    "quarter": "float8", "float8": "float8", "fp8": "float8", "f8": "float8",
    # Graphcore's two FP8 formats (profiler.chip.dtypes) cost alike: one byte, the quarter AMP path
    "float8_e4m3fnuz": "float8", "float8_e5m2fnuz": "float8",
    "int": "int32", "int32": "int32", "unsigned": "uint32", "uint32": "uint32",
    "short": "int16", "int16": "int16", "uint16": "uint16",
    "char": "int8", "int8": "int8", "uint8": "uint8", "bool": "bool",
}  # fmt: skip
_ELEM_BYTES = {"float32": 4, "float16": 2, "float8": 1, "int32": 4, "uint32": 4, "int16": 2, "uint16": 2}
_ELEM_BYTES |= {"int8": 1, "uint8": 1, "bool": 1}
_FLOAT_TYPES = frozenset({"float32", "float16", "float8"})
# ref §1 "Load/store datapath": 64-bit, so a natural vector is 4 halves or 2 floats.
DATAPATH_BYTES = 8


def dtype_name(dtype: DTypeLike) -> str:
    """Canonical element-type name ("float32", "float16", "float8", "int32", ...)."""
    key = dtype if isinstance(dtype, str) else np.dtype(dtype).name
    name = _DTYPE_ALIASES.get(str(key).strip().lower())
    if name is None:
        raise ValueError(f"cost model: unknown element type {dtype!r}; known: {', '.join(sorted(_DTYPE_ALIASES))}")
    return name


def elem_bytes(dtype: DTypeLike) -> int:
    return _ELEM_BYTES[dtype_name(dtype)]


def vector_width(dtype: DTypeLike) -> int:
    """Elements per 64-bit load (ref §3 notation vw: 4 for half, 2 for float)."""
    return DATAPATH_BYTES // elem_bytes(dtype)


def _is_float(dtype: str) -> bool:
    return dtype in _FLOAT_TYPES


def _i64(x: object, what: str) -> np.ndarray:
    a = np.asarray(x)
    if a.dtype.kind not in "iub":
        if a.dtype.kind == "f" and np.all(a == np.floor(a)):
            a = a.astype(np.int64)
        else:
            raise ValueError(f"cost model: {what} must be integers, got {a.dtype}")
    a = a.astype(np.int64, copy=False)
    if a.size and a.min() < 0:
        raise ValueError(f"cost model: {what} must be >= 0, got {int(a.min())}")
    return a


def _cdiv(a: np.ndarray | int, b: np.ndarray | int) -> np.ndarray:
    return -(-np.asarray(a, dtype=np.int64) // b)


# -- elementwise ops: PopLibs' OpPerformanceInfo tables (ref §3.1) ------------------------------------
@dataclass(frozen=True)
class _Loop:
    """``OpPerformanceInfo{cyclesPerLoop, naturalVectorWidth, loopUnrollFactor}`` (popopsCycleEstimators.cpp)."""

    cycles: int
    natural: bool = False
    unroll: int = 0


# Canonical op names are PopLibs' operation enums in lower case; short aliases are accepted.
_OP_ALIASES = {
    "exp": "exponent", "log": "logarithm", "neg": "negate", "abs": "absolute", "inv": "inverse",
    "reciprocal": "inverse", "sign": "signum", "log1p": "logarithm_one_plus", "expm1": "exponent_minus_one",
    "gelu": "gelu_erf", "not": "logical_not",
    "sub": "subtract", "mul": "multiply", "div": "divide", "max": "maximum", "min": "minimum", "pow": "power",
    "eq": "equal", "ne": "not_equal", "gt": "greater_than", "ge": "greater_than_equal", "lt": "less_than",
    "le": "less_than_equal", "greater": "greater_than", "less": "less_than", "and": "logical_and",
    "or": "logical_or", "rem": "remainder",
}  # fmt: skip


def _op_name(op: str) -> str:
    key = op.strip().lower()
    return _OP_ALIASES.get(key, key)


_INT = ("int32", "uint32")
# Unary (c, natural?, unroll) per type: PopLibs' own tables, lib/popops/popopsCycleEstimators.hpp
# ``unaryOpPerfInfo`` / ``unaryOpInPlacePerfInfo`` (graphcore/poplibs @ 7eac0f2, Aug 2023, the
# last public release; ref §3.1 quotes a subset). "The simulator was used to make an estimate of
# the average execution time, using a random distribution of input values" for the data-dependent
# ones (transcendentals). Types PopLibs has no entry for are not supported, except where marked [NF].
_UNARY: dict[str, dict[str, _Loop]] = {
    "exponent": {"float32": _Loop(6, unroll=2), "float16": _Loop(4, unroll=4)},
    "logarithm": {"float32": _Loop(12, unroll=2), "float16": _Loop(4, unroll=4)},
    "tanh": {"float32": _Loop(12, unroll=2), "float16": _Loop(4, unroll=4)},
    "sigmoid": {"float32": _Loop(12, unroll=2), "float16": _Loop(6, unroll=4)},
    "rsqrt": {"float32": _Loop(8, unroll=2), "float16": _Loop(19, unroll=4)},
    "sqrt": {"float32": _Loop(10, unroll=2), "float16": _Loop(23, unroll=4)},
    "relu": {"float32": _Loop(3, unroll=2), "float16": _Loop(3, unroll=4)},
    # one element per loop; half is computed in float ("Float + cast in and out")
    "gelu_erf": {"float32": _Loop(22, unroll=1), "float16": _Loop(16, unroll=1)},
    "erf": {"float32": _Loop(41, unroll=1), "float16": _Loop(13, unroll=1)},
    # data-dependent averages; float has no unroll, so it pays (2300 + 4) per element
    "sin": {"float32": _Loop(2300), "float16": _Loop(25, unroll=1)},
    "cos": {"float32": _Loop(2300), "float16": _Loop(25, unroll=1)},
    "negate": {"float32": _Loop(2, unroll=2), "float16": _Loop(2, unroll=4)} | dict.fromkeys(_INT, _Loop(2)),
    # (1, not natural, no unroll): (1 + 4) = 5 cycles per element out of place
    "absolute": {"float32": _Loop(1), "float16": _Loop(1)} | dict.fromkeys(_INT, _Loop(2)),
    "square": {"float32": _Loop(2, unroll=2), "float16": _Loop(2, unroll=4)}
    | dict.fromkeys(_INT, _Loop(1, natural=True)),
    "inverse": {"float32": _Loop(6, unroll=2), "float16": _Loop(15, unroll=4)},
    "exponent_minus_one": {"float32": _Loop(4), "float16": _Loop(5, natural=True)},
    "logarithm_one_plus": {"float32": _Loop(18, natural=True), "float16": _Loop(18, natural=True)},
    # "use mul with 1.0 and use correct rounding mode"
    "floor": {"float32": _Loop(2, natural=True), "float16": _Loop(2, natural=True)},
    "ceil": {"float32": _Loop(2, natural=True), "float16": _Loop(2, natural=True)},
    "round": {"float32": _Loop(2, natural=True), "float16": _Loop(2, natural=True)},
    "trunc": {"float32": _Loop(3, unroll=2), "float16": _Loop(11, unroll=4)},
    # INT (5): PopLibs has no unsigned entry; uint32 [NF] as int
    "signum": {"float32": _Loop(5, natural=True), "float16": _Loop(5, natural=True)} | dict.fromkeys(_INT, _Loop(5)),
    "logical_not": {"bool": _Loop(17)},
    "bitwise_not": dict.fromkeys(_INT, _Loop(1, natural=True)),
    "popcount": dict.fromkeys(_INT, _Loop(1)),
    "count_leading_zeros": dict.fromkeys(_INT, _Loop(1)),
}
# The in-place table, where it differs from the out-of-place one (same source, ``unaryOpInPlacePerfInfo``).
_UNARY_IN_PLACE = {
    "absolute": {"float32": _Loop(1, natural=True), "float16": _Loop(1, natural=True)},
    "logarithm": {"float32": _Loop(14, unroll=2), "float16": _Loop(6, unroll=4)},
    "logarithm_one_plus": {"float16": _Loop(17, natural=True)},
    "logical_not": {"bool": _Loop(17, natural=True)},
    "negate": {"float32": _Loop(3, unroll=2), "float16": _Loop(3, unroll=4)},
    "tanh": {"float32": _Loop(10, unroll=2), "float16": _Loop(2, unroll=4)},
    "trunc": {"float32": _Loop(4, unroll=2)},
    "sigmoid": {"float32": _Loop(10, unroll=2), "float16": _Loop(4, unroll=4)},
    "relu": {"float32": _Loop(2, unroll=2), "float16": _Loop(2, unroll=4)},
}

_INT_OP = _Loop(7, unroll=1)  # "Integer ADD/MUL 7 per element"; other integer ops [INF] the same
_COMPARE = {"float32": _Loop(14, unroll=4), "float16": _Loop(9, unroll=4)} | dict.fromkeys(_INT, _INT_OP)
_NOT_EQUAL = {"float32": _Loop(20, unroll=4), "float16": _Loop(11, unroll=4)} | dict.fromkeys(_INT, _INT_OP)
# Binary (c, natural?, unroll), ref §3.1.
_BINARY: dict[str, dict[str, _Loop]] = {
    "add": {"float32": _Loop(1, natural=True), "float16": _Loop(1, natural=True)} | dict.fromkeys(_INT, _INT_OP),
    "subtract": {"float32": _Loop(1, natural=True), "float16": _Loop(1, natural=True)} | dict.fromkeys(_INT, _INT_OP),
    "multiply": {"float32": _Loop(1, natural=True), "float16": _Loop(1, natural=True)} | dict.fromkeys(_INT, _INT_OP),
    "maximum": {"float32": _Loop(3, unroll=2), "float16": _Loop(4, unroll=4)} | dict.fromkeys(_INT, _INT_OP),
    "minimum": {"float32": _Loop(3, unroll=2), "float16": _Loop(4, unroll=4)} | dict.fromkeys(_INT, _INT_OP),
    "divide": {"float32": _Loop(10, unroll=2), "float16": _Loop(21, unroll=4)},
    # popopsCycleEstimators.hpp binaryOpPerfInfo: POWER FLOAT (312, -, 1), HALF (325, -, 1).
    "power": {"float32": _Loop(312, unroll=1), "float16": _Loop(325, unroll=1)},
    # "EQUAL/GT/LT/GE/LE f32 14, f16 9 (unroll 4)"; NOT_EQUAL f32 20, f16 11 (popopsCycleEstimators.hpp).
    "equal": _COMPARE, "not_equal": _NOT_EQUAL, "greater_than": _COMPARE, "greater_than_equal": _COMPARE,
    "less_than": _COMPARE, "less_than_equal": _COMPARE,
    "logical_and": {"bool": _Loop(5, unroll=4)}, "logical_or": {"bool": _Loop(5, unroll=4)},
}  # fmt: skip
# The in-place table where it differs (popopsCycleEstimators.hpp binaryOpInPlacePerfInfo).
_BINARY_IN_PLACE = {"maximum": {"float32": _Loop(4, unroll=2)}, "minimum": {"float32": _Loop(4, unroll=2)}}
# ref §3.1: natural-width binary ops cost (c + k) per vector, k = 2 for ADD/SUB/MUL half and float
# (hand-written codelets), 5 for other natural ops.
_FAST_BINARY = frozenset({"add", "subtract", "multiply"})

# ref §3.1, popopsCycleEstimators.cpp: worker bases and supervisor overheads of the 1D MultiVertices.
UNARY_WORKER_BASE = 17  # UnaryOp1D
UNARY_EXP_WORKER_BASE = 33  # "The worker base is 33 for EXPONENT"
UNARY_IN_PLACE_WORKER_BASE = 55  # UnaryOp1DInPlace
UNARY_SUPERVISOR = 9 + 11  # "+ 9 + 11": the 11 is basicOpSupervisorOverhead
BASIC_OP_SUPERVISOR_OVERHEAD = 11
BINARY_WORKER_BASE = {"float32": 29, "float16": 26}  # BinaryOp1D; other types [INF] as float
BINARY_IN_PLACE_WORKER_BASE = 58  # BinaryOp1DInPlace
BROADCAST_WORKER_BASE = 20  # broadcast scalar 1D


def _table(table: dict[str, dict[str, _Loop]], kind: str, op: str, dtype: str) -> _Loop:
    entries = table.get(op)
    if entries is None:
        raise ValueError(f"cost model: unknown {kind} op {op!r}; known: {', '.join(sorted(table))}")
    loop = entries.get(dtype)
    if loop is None:
        raise ValueError(f"cost model: {kind} op {op!r} has no cost for {dtype}; supported: {', '.join(entries)}")
    return loop


def _unary_inner(loop: _Loop, n: np.ndarray, vw: int) -> np.ndarray:
    # ref §3.1 "Inner loop, unary": unrolled (not natural, u > 0) costs ceil(n/u)*c; otherwise
    # ceil(n/v)*(c + 4) with v = vw if natural else 1.
    if not loop.natural and loop.unroll > 0:
        return _cdiv(n, loop.unroll) * loop.cycles
    return _cdiv(n, vw if loop.natural else 1) * (loop.cycles + 4)


def unary_cycles(
    op: str, n: Counts, dtype: DTypeLike, target: Target, in_place: bool = False, to_dtype: DTypeLike | None = None
) -> np.ndarray:
    """UnaryOp1D(InPlace) MultiVertex over ``n`` elements (ref §3.1). ``op="cast"`` needs ``to_dtype``."""
    name, dt = _op_name(op), dtype_name(dtype)
    if name == "cast":
        return cast_cycles(n, dt, dt if to_dtype is None else to_dtype, target)
    n = _i64(n, "element counts")
    loop = _table(_UNARY, "unary", name, dt)
    if in_place:
        loop = _UNARY_IN_PLACE.get(name, {}).get(dt, loop)
    w = target.num_worker_contexts
    base = (
        UNARY_IN_PLACE_WORKER_BASE if in_place else UNARY_EXP_WORKER_BASE if name == "exponent" else UNARY_WORKER_BASE
    )
    return w * (base + _unary_inner(loop, _cdiv(n, w), vector_width(dt))) + UNARY_SUPERVISOR


def _binary_inner(name: str, loop: _Loop, n: np.ndarray, dt: str) -> np.ndarray:
    # ref §3.1 "Inner loop, binary": natural ops ceil(n/vw)*(c + k); others ceil(n/u)*c.
    if loop.natural:
        k = 2 if name in _FAST_BINARY else 5
        return _cdiv(n, vector_width(dt)) * (loop.cycles + k)
    return _cdiv(n, max(loop.unroll, 1)) * loop.cycles


def binary_cycles(op: str, n: Counts, dtype: DTypeLike, target: Target, in_place: bool = False) -> np.ndarray:
    """BinaryOp1D / BinaryOp1DInPlace MultiVertex over ``n`` elements (ref §3.1)."""
    name, dt = _op_name(op), dtype_name(dtype)
    n = _i64(n, "element counts")
    loop = _table(_BINARY, "binary", name, dt)
    if in_place:
        loop = _BINARY_IN_PLACE.get(name, {}).get(dt, loop)
    w = target.num_worker_contexts
    base = BINARY_IN_PLACE_WORKER_BASE if in_place else BINARY_WORKER_BASE.get(dt, BINARY_WORKER_BASE["float32"])
    return w * (base + _binary_inner(name, loop, _cdiv(n, w), dt)) + BASIC_OP_SUPERVISOR_OVERHEAD


def broadcast_scalar_cycles(op: str, n: Counts, dtype: DTypeLike, target: Target, in_place: bool = False) -> np.ndarray:
    """Broadcast-scalar 1D MultiVertex (tensor op scalar) over ``n`` elements (ref §3.1).

    W*(20 + ceil(ceil(n/W)/g)*(c + o)) + 11 with g = vw for natural ops (else the unroll factor)
    and o = 1 for ADD/SUB/MUL half/float, 4 otherwise. In place the reference gives "0/1/4"; read
    [INF] as 0 for ADD/SUB/MUL half, 1 for ADD/SUB/MUL float, 4 otherwise.
    """
    name, dt = _op_name(op), dtype_name(dtype)
    n = _i64(n, "element counts")
    loop = _table(_BINARY, "binary", name, dt)
    fast = name in _FAST_BINARY and dt in ("float32", "float16")
    o_fast = (0 if dt == "float16" else 1) if in_place else 1
    o = o_fast if fast else 4
    group = vector_width(dt) if loop.natural else max(loop.unroll, 1)
    w = target.num_worker_contexts
    per_worker = _cdiv(n, w)
    return w * (BROADCAST_WORKER_BASE + _cdiv(per_worker, group) * (loop.cycles + o)) + BASIC_OP_SUPERVISOR_OVERHEAD


# -- cast, scaled add, fill, copy (ref §3.2-§3.4) -----------------------------------------------------
def _cast_core(n: np.ndarray, src: str, dst: str) -> np.ndarray:
    """Cast worker core over n elements, PerformanceEstimation.cpp (ref §3.3)."""
    sb, db = _ELEM_BYTES[src], _ELEM_BYTES[dst]
    # FP8 <-> half/float take the vector path below, FP8 <-> half on the aux pipeline: "Casting quarter
    # to/from half preforms the same as half to/from float" (graphcore/poplibs lib/popops/
    # PerformanceEstimation.cpp castWorkerCycles); FP8 <-> 8-bit integers keep the atom loop.
    fp8_float = "float8" in (src, dst) and {src, dst} <= _FLOAT_TYPES
    if (sb == 1 or db == 1) and not fp8_float:
        # Byte casts (FP8 <-> 8-bit integers too): atom loop of 4 elements. "u8->half 14 + 9 per 4; half->8-bit 19 + 16 per 4";
        # 8-bit -> other types [INF] as u8->half, other -> 8-bit [INF] as half->8-bit.
        return 14 + 9 * _cdiv(n, 4) if sb == 1 else 19 + 16 * _cdiv(n, 4)
    # opVectorWidth = min(2*loadWidth_from, storeWidth_to); cycles per vector = max(loads, stores),
    # +1 unless the float<->half aux pipeline is used. Remainder [INF]: one more (partial) vector.
    load_w, store_w = DATAPATH_BYTES // sb, DATAPATH_BYTES // db
    op_vw = min(2 * load_w, store_w)
    per_vector = max(math.ceil(op_vw / load_w), math.ceil(op_vw / store_w))
    if {src, dst} not in ({"float32", "float16"}, {"float8", "float16"}):
        per_vector += 1
    return 19 + per_vector * _cdiv(n, op_vw)


CAST_SUPERVISOR = 12  # Cast1D = 12 + W*(core(ceil(n/W)) + 18)
CAST_WORKER_OVERHEAD = 18


def cast_cycles(n: Counts, from_dtype: DTypeLike, to_dtype: DTypeLike, target: Target) -> np.ndarray:
    """Cast1D MultiVertex (ref §3.3): 12 + W*(core(ceil(n/W)) + 18)."""
    n = _i64(n, "element counts")
    w = target.num_worker_contexts
    core = _cast_core(_cdiv(n, w), dtype_name(from_dtype), dtype_name(to_dtype))
    return CAST_SUPERVISOR + w * (core + CAST_WORKER_OVERHEAD)


def scaled_add_cycles(n: Counts, dtype: DTypeLike, target: Target, subtract: bool = False) -> np.ndarray:
    """ScaledAdd supervisor vertex, data += scale * deltas, same types (ref §3.2,
    PerformanceEstimation.cpp::getScaledArithmeticSupervisorCycleEstimate).

    supervisor = 21 + 11 + (7 if rem == 0 else 13) + 12 + 6 (+7 SUBTRACT); worker = 15 + (6 + 3*(v - 1)
    if v > 0) + 2 + remainder handling (float 8, half 5 + 7 + 6), v = vectors per worker, inner cost 3
    per vector (not memory-constrained, same types); total = supervisor + W * worker.
    """
    dt = dtype_name(dtype)
    if dt not in ("float32", "float16"):
        raise ValueError(f"cost model: scaled add has no cost for {dt}; supported: float32, float16")
    n = _i64(n, "element counts")
    w, vw = target.num_worker_contexts, vector_width(dt)
    rem = n % vw
    supervisor = 21 + 11 + np.where(rem == 0, 7, 13) + 12 + 6 + (7 if subtract else 0)
    v = _cdiv(n // vw, w)
    remainder = 8 if dt == "float32" else 5 + 7 + 6
    worker = 15 + np.where(v > 0, 6 + 3 * (v - 1), 0) + 2 + np.where(rem > 0, remainder, 0)
    return supervisor + w * worker


def fill_cycles(n: Counts, dtype: DTypeLike, target: Target) -> np.ndarray:
    """Fill worker vertex over ``n`` elements (ref §3.3, PerformanceEstimation.cpp).

    float (and other 4-byte types): 16 + ceil(n/vw) + 6; half: 26 + ceil(n/4) (15 and 21 for 1 and 2
    elements); 8-bit: 28 + ceil(n/4) below 64 bytes, else 39 + ceil(n/8). 2-byte integers [INF] as half.
    The reference's trailing "…" terms are not known [NF] and left out.
    """
    n = _i64(n, "element counts")
    size = elem_bytes(dtype)
    if size == 4:
        return 16 + _cdiv(n, 2) + 6
    if size == 2:
        return np.where(n == 1, 15, np.where(n == 2, 21, 26 + _cdiv(n, 4)))
    return np.where(n < 64, 28 + _cdiv(n, 4), 39 + _cdiv(n, 8))


# ref §1 "Local copy (memcpy)" and §3.4: getMemcpyBytesPerCycle is [NF]; the only figure is
# "8 B/cycle plus 288 cycles per 6-worker copy call" [3P].
MEMCPY_BYTES_PER_CYCLE = 8
MEMCPY_CALL_CYCLES = 288


def copy_cycles(n_bytes: Counts, target: Target) -> np.ndarray:
    """On-tile copy (memcpy by all workers) of ``n_bytes``: 288 + ceil(bytes/8) [3P]; 0 bytes costs 0."""
    n_bytes = _i64(n_bytes, "byte counts")
    return np.where(n_bytes > 0, MEMCPY_CALL_CYCLES + _cdiv(n_bytes, MEMCPY_BYTES_PER_CYCLE), 0)


# -- reductions (ref §3.5, lib/popops/reduction/CycleEstimationFunctions.cpp) -----------------------
_REDUCE_VECTORISED = frozenset({"add", "square_add", "maximum", "minimum", "multiply"})
_REDUCE_ACCUMULATING = frozenset({"add", "square_add", "multiply"})  # loadOverhead 2
_REDUCE_SCALAR = frozenset({"logical_and", "logical_or", "log_add"})  # C++ codelets
_REDUCE_ALIASES = {"sum": "add", "max": "maximum", "min": "minimum", "mul": "multiply", "prod": "multiply"}
# "LOGICAL_AND/OR and LOG_ADD are C++ (about 12-20 cycles per element)": midpoint [INF].
REDUCE_SCALAR_CYCLES_PER_ELEMENT = 16


def _reduce_op(op: str) -> str:
    key = op.strip().lower()
    name = _REDUCE_ALIASES.get(key, key)
    if name not in _REDUCE_VECTORISED | _REDUCE_SCALAR:
        known = ", ".join(sorted(_REDUCE_VECTORISED | _REDUCE_SCALAR))
        raise ValueError(f"cost model: unknown reduce op {op!r}; known: {known}")
    return name


def reduce_cycles(op: str, n_in: Counts, n_out: Counts, dtype: DTypeLike, target: Target) -> np.ndarray:
    """A single-worker Reduce vertex folding ``n_in`` inputs into ``n_out`` outputs (one region,
    n_in/n_out partials per output) (ref §3.5).

    * one output (single-input / scalar-output vertex): 3 + 6 + ceil(n/vw)*max(loads, cyclesPerOp)
      + 5 + rem + 3 (+5 if the output is not float), streaming 64 bits per cycle; rem [INF] one
      cycle per element past the last full vector;
    * several outputs (general Reduce vertex): 7 + 26 + (16 + 6 + 2*log2(opW) + 2) per region
      + per output vector ((3 float | 5 half [INF]) + stores + 1) + per partial (7 + 3)
      + per partial x output vector (loadOverhead + 2 + opW/min(opW, vw) + 3), with accumulator width
      opW = 8 half / 4 float, loadOverhead 2 for accumulating ops (else 0), stores = 16 B / 8 B;
    * LOGICAL_AND/OR, LOG_ADD (C++): 7 + 26 + 16 per input element [INF].
    """
    name, dt = _reduce_op(op), dtype_name(dtype)
    n_in, n_out = np.broadcast_arrays(_i64(n_in, "input counts"), _i64(n_out, "output counts"))
    if n_out.size and (n_out.min() < 1 or np.any(n_in < n_out)):
        raise ValueError("cost model: a reduction needs 1 <= n_out <= n_in")
    if name in _REDUCE_SCALAR:
        return 7 + 26 + REDUCE_SCALAR_CYCLES_PER_ELEMENT * n_in
    vw = vector_width(dt)
    single = 3 + 6 + _cdiv(n_in, vw) + 5 + n_in % vw + 3 + (0 if dt == "float32" else 5)
    op_w = 8 if elem_bytes(dt) <= 2 else 4
    partials = _cdiv(n_in, n_out)
    out_vectors = _cdiv(n_out, op_w)
    per_region = 16 + 6 + 2 * int(math.log2(op_w)) + 2
    per_out_vector = (3 if dt == "float32" else 5) + (op_w * elem_bytes(dt)) // DATAPATH_BYTES + 1
    load_overhead = 2 if name in _REDUCE_ACCUMULATING else 0
    per_partial_vector = load_overhead + 2 + op_w // min(op_w, vw) + 3
    general = 7 + 26 + per_region + out_vectors * per_out_vector + partials * (7 + 3)
    general = general + partials * out_vectors * per_partial_vector
    return np.where(n_out == 1, single, general)


# popops::ContinuousReduce, the vertex popops gives a worker's run of reductions of equally many
# contiguous partials (ALL_REGIONS_CONTINUOUS): graphcore/poplibs lib/popops/reduction/
# CycleEstimationFunctions.cpp getCycleEstimateReduceAllRegionsContinuous, with its op vector width
# (8 half / 4 float accumulators), the 64-bit data path's elements and 1 cycle per op (getOpCyclesPerVector).
CONTINUOUS_REDUCE_PER_OUTPUT = 12
CONTINUOUS_REDUCE_BASE = 10 + 7  # set-up, then call / return


def continuous_reduce_cycles(op: str, n_partials: Counts, n_outputs: Counts, dtype: DTypeLike) -> np.ndarray:
    """A ContinuousReduce vertex: ``n_outputs`` outputs of ``n_partials`` contiguous partials each:
    outputs x (partials // min(accumulator width, data-path elements)) + 2 if partials is odd
    + 12 per output + 17. (PopLibs' estimator passes numOutputsM1 for the output count; the vertex's
    loop, which the formula follows, runs numOutputsM1 + 1 times, so this counts every output.)
    C++-only ops (logical, log-add) cost as ``reduce_cycles`` charges them, per element."""
    name, dt = _reduce_op(op), dtype_name(dtype)
    n_p, n_o = np.broadcast_arrays(_i64(n_partials, "partials"), _i64(n_outputs, "outputs"))
    if name in _REDUCE_SCALAR:
        return 7 + 26 + REDUCE_SCALAR_CYCLES_PER_ELEMENT * n_p * n_o
    acc_width = 8 if elem_bytes(dt) <= 2 else 4
    per_loop = min(acc_width, vector_width(dt))
    return n_o * (n_p // per_loop) + 2 * (n_p % 2) + CONTINUOUS_REDUCE_PER_OUTPUT * n_o + CONTINUOUS_REDUCE_BASE


# Conv/matmul partial-sum reduction as PopLibs estimates it: lib/poplin/PerformanceEstimation.hpp
# getReduceCycleEstimate at graphcore/poplibs sdk-release-3.0 (ref §3.5 gives its multi-input shape).
# Multi-input ReduceAdd: W x (32 + loops x (cyclesPerLoop x depth + tail)), tail by (out, partials)
# type, a partial last loop costing 2 x depth + 13 (float partials) / 11 (half) once.
CONV_REDUCE_WORKER_BASE = 32
CONV_REDUCE_TAIL = {
    (True, True): 7,
    (True, False): 9,
    (False, True): 6,
    (False, False): 8,
}  # (out float, partials float)
CONV_REDUCE_PART_LOOP = {True: 13, False: 11}  # by partials float
# Single-input ReduceAdd (ReduceAddSingleInput.S): W x (20 + loops x (cyclesPerLoop x (depth - 1) + tail)) + 33
CONV_REDUCE_SINGLE_WORKER_BASE = 20
CONV_REDUCE_SINGLE_SUPERVISOR = 33
CONV_REDUCE_SINGLE_TAIL = {(True, True): 8, (False, True): 7, (True, False): 10, (False, False): 9}
# poplin/ConvReducePlan.hpp checkPartialsSizeForSingleInputReduce: the exchanged partials, rounded up
# to whole memory elements, must fill less than 1/16 of the tile's memory.
SINGLE_INPUT_MEMORY_FRACTION = 16


def _acc_width(partials: str) -> int:
    return 8 if elem_bytes(partials) <= 2 else 4


def conv_reduce_single_input(outputs: Counts, depth: int, partials_dtype: DTypeLike, target: Target) -> np.ndarray:
    """Whether PopLibs reduces a tile's ``outputs`` outputs of ``depth`` partials with the single-input
    ReduceAdd (poplin/ConvReduce.cpp, enableFastReduce off): its outputs fill whole accumulator
    vectors (4 float / 8 half partials) and the ``depth - 1`` exchanged partials, rounded up to whole
    memory elements (the target's banks [INF]), fill less than 1/16 of the tile."""
    outputs = _i64(outputs, "outputs")
    pt = dtype_name(partials_dtype)
    exchanged = outputs * max(depth - 1, 0) * elem_bytes(pt)
    element = target.memory_bank_bytes
    occupied = _cdiv(exchanged, element) * element
    return (outputs % _acc_width(pt) == 0) & (occupied < target.bytes_per_tile // SINGLE_INPUT_MEMORY_FRACTION)


def conv_reduce_cycles(
    outputs: Counts,
    depth: int,
    partials_dtype: DTypeLike,
    target: Target,
    out_dtype: DTypeLike | None = None,
    single: np.ndarray | bool | None = None,
) -> np.ndarray:
    """One tile reducing ``depth`` partials into each of its ``outputs`` outputs (of ``out_dtype``,
    default the partials' type) with PopLibs' ReduceAdd MultiVertex, as getReduceCycleEstimate
    (sdk-release-3.0) costs it: the single-input variant where ``single`` (default: where PopLibs
    would pick it, ``conv_reduce_single_input``), else the multi-input one. 0 outputs cost 0.

    Multi-input: accW = 8 (half) / 4 (float) outputs per loop, loops = outputs // accW plus one per
    set bit below accW, cyclesPerLoop = accW / min(accW, partials per 64 bits) + 1. Single-input: the
    local partial is the first row, so ``depth - 1`` partials are loaded, cyclesPerLoop = accW /
    min(accW, partials per 64 bits), loops = outputs // accW.
    """
    outputs = _i64(outputs, "outputs")
    if depth < 1:
        raise ValueError(f"cost model: a reduction needs depth >= 1, got {depth}")
    pt = dtype_name(partials_dtype)
    ot = pt if out_dtype is None else dtype_name(out_dtype)
    pf, of = elem_bytes(pt) == 4, elem_bytes(ot) == 4
    acc_w, vw = _acc_width(pt), vector_width(pt)
    w = target.num_worker_contexts
    if single is None:
        single = conv_reduce_single_input(outputs, depth, pt, target)
    # multi-input
    loops = outputs // acc_w
    for i in range(int(math.log2(acc_w))):
        loops = loops + ((outputs >> i) & 1)
    per_worker = loops // w
    part = (loops % w != 0) & (outputs % acc_w != 0)
    per_worker = per_worker + ((loops % w != 0) & (outputs % acc_w == 0))
    multi = CONV_REDUCE_WORKER_BASE + np.where(part, 2 * depth + CONV_REDUCE_PART_LOOP[pf], 0)
    multi = w * (multi + (acc_w // min(acc_w, vw) + 1) * depth * per_worker + CONV_REDUCE_TAIL[(of, pf)] * per_worker)
    # single-input
    s_loops = _cdiv(outputs // acc_w, w)
    one = CONV_REDUCE_SINGLE_WORKER_BASE + s_loops * (
        (acc_w // min(acc_w, vw)) * (depth - 1) + CONV_REDUCE_SINGLE_TAIL[(of, pf)]
    )
    one = w * one + CONV_REDUCE_SINGLE_SUPERVISOR
    return np.where(outputs > 0, np.where(single, one, multi), 0)


# -- matmul partials (ref §3.7, lib/poplin/PerformanceEstimation.hpp, poplinCycleEstimators.cpp) -----
@dataclass(frozen=True)
class AmpConfig:
    """The AMP (ConvPartial1x1Out) configuration used for one input/partials type pair on a target."""

    num_conv_units: int
    in_chans_per_group: int
    out_chans_per_group: int
    core_cycles_per_position: int  # "4 cycles per output position for half and 8 for float"
    weight_load_cycles: int


# ref §3.7: "Weight load cycles = numConvUnits*weightBytesPerConvUnit/convUnitCoeffLoadBytesPerCycle";
# 16 B/cycle is the reference's assumption for the Bow evaluation.
CONV_UNIT_COEFF_LOAD_BYTES_PER_CYCLE = 16
# Worker cycles for n output positions with output zeroing (innerZero) / without (innerNoZero):
# "(37 with output zeroing | 38) + 4*(n - 3) - 7 (retention savings)", core 4 (half) or 8 (float).
AMP_WORKER_ZERO, AMP_WORKER_NO_ZERO = 37, 38
AMP_RETENTION_SAVINGS = 7
# n = 0 special case "21/22". The n = 1, 2 special cases (32/33, 41/42) exceed the n = 3 cost (30)
# when taken literally; the Bow sweep at N = 16 (2-3 positions per worker, 402 cycles measured) is
# matched by the linear form instead, so the linear form is used for n >= 1 [INF].
AMP_WORKER_EMPTY_ZERO, AMP_WORKER_EMPTY_NO_ZERO = 21, 22
AMP_WORKER_IMBALANCE = 14  # "max(max_w 6*c_w, min_w 6*c_w + 14)"
AMP_SUPERVISOR_BASE = 50
# "50 + W*(retention)": the retention term's value is not given [NF]; 9 puts the PopLibs part of the
# Bow case at 4N + 309 at N = 2048, inside the reference's "4N + 289...313" [INF].
AMP_SUPERVISOR_RETENTION = 9
# Calibration (ref §3.7, tessellate notebook on Bow): hardware measured 4N + ~330, PopLibs' formula
# is "about 10% optimistic on the fixed overhead and exact on the slope". With the terms above the
# model is 4N + 293 + (0 or 8, depending on N mod 6); measured minus model is 24 or 27 for every N in
# the sweep except N = 16 (37). 25 cycles close the gap.
AMP_CALIBRATION_CYCLES = 25


def amp_config(dtype: DTypeLike, partials_dtype: DTypeLike, target: Target) -> AmpConfig:
    """AMP vertex parameters, derived so that one position per core loop runs at the target's peak rate.

    ref §3.7: half/half uses 16 conv units, half/float and float 8 (tessellate: 16 for half->half,
    8 otherwise); MACs per cycle = peak FLOPs / 2; a position is inChans x outChans MACs with
    outChansPerGroup = numConvUnits. This gives 16x16 (half/half), 16x8 (half/float, the "16x8 AMP
    vertex"), 16x8 float in 8 cycles [INF: the float grouping is ambiguous in the sources; 16 makes the
    core loop reach the 32 FLOP/cycle peak], and 32x16 for FP8 ("32 quarter inputs x 16 units").
    """
    dt, pt = dtype_name(dtype), dtype_name(partials_dtype)
    peak = peak_flops_per_cycle(dt, pt, target)
    dt = _amp_input_type(dt, pt)
    core = 8 if dt == "float32" else 4
    units = 16 if (dt, pt) in (("float16", "float16"), ("float8", "float16")) and peak >= 128 else 8
    macs_per_position = int(peak // 2) * core
    in_chans = macs_per_position // units
    weight_bytes = in_chans * _ELEM_BYTES[dt]
    loads = units * weight_bytes // CONV_UNIT_COEFF_LOAD_BYTES_PER_CYCLE
    return AmpConfig(units, in_chans, units, core, loads)


def _amp_input_type(dtype: str, partials: str) -> str:
    """The type the AMP reads its inputs as. FP8 (quarter) runs the quarter AMP with half partials only:
    "Half is the only supported partials type for quarter activations" (graphcore/poplibs
    lib/poplin/ConvVertexType.cpp canUseConvolutionInstruction); with float partials the planner takes
    vertexInputType = HALF (getConvVertexAMPCandidates: no quarter conv units for float partials), the
    half/float AMP (64 FLOP/cycle on Mk2) [INF: the quarter -> half conversion itself not costed]."""
    return "float16" if dtype == "float8" and partials != "float16" else dtype


def _amp_worker(n: np.ndarray, core: int, zero: bool) -> np.ndarray:
    base, empty = (AMP_WORKER_ZERO, AMP_WORKER_EMPTY_ZERO) if zero else (AMP_WORKER_NO_ZERO, AMP_WORKER_EMPTY_NO_ZERO)
    return np.where(n == 0, empty, base + core * (n - 3) - AMP_RETENTION_SAVINGS)


def amp_matmul_cycles(
    rows: Counts, in_chans: int, out_chans: int, dtype: DTypeLike, partials_dtype: DTypeLike, target: Target
) -> np.ndarray:
    """One ConvPartial1x1Out (AMP) supervisor vertex computing ``[rows, in_chans] x [in_chans, out_chans]``
    on one tile (ref §3.7): rows are the output field positions, split evenly over the workers;
    channels are padded to whole groups.

    inner = max(W*c(max_w), W*c(min_w) + 14), c(n) = 37 + core*(n - 3) - 7 (38 without zeroing);
    cycles = 50 + W*retention + 13 + (inGroups - 1)*(15 + outGroups*(19 + 6 + loads + innerNoZero))
             + 11 + outGroups*(18 + 7 + loads + innerZero) + calibration   (convGroups = passes = 1).
    """
    cfg = amp_config(dtype, partials_dtype, target)
    rows = _i64(rows, "rows")
    w = target.num_worker_contexts
    # channel counts may be arrays too (the planner costs all its candidate blocks at once)
    in_groups = np.maximum(1, _cdiv(in_chans, cfg.in_chans_per_group))
    out_groups = np.maximum(1, _cdiv(out_chans, cfg.out_chans_per_group))
    max_w, min_w = _cdiv(rows, w), rows // w

    def inner(zero: bool) -> np.ndarray:
        return np.maximum(
            w * _amp_worker(max_w, cfg.core_cycles_per_position, zero),
            w * _amp_worker(min_w, cfg.core_cycles_per_position, zero) + AMP_WORKER_IMBALANCE,
        )

    loads = cfg.weight_load_cycles
    later_in_groups = (in_groups - 1) * (15 + out_groups * (19 + 6 + loads + inner(False)))
    first_in_group = 11 + out_groups * (18 + 7 + loads + inner(True))
    supervisor = AMP_SUPERVISOR_BASE + w * AMP_SUPERVISOR_RETENTION + 13
    return supervisor + later_in_groups + first_in_group + AMP_CALIBRATION_CYCLES


# ConvPartialnx1: the AMP vertex PopLibs runs for kernels wider than 1x1 (graphcore/poplibs sdk-release-3.0
# lib/poplin/PerformanceEstimation.hpp, as ConvModel.cpp costs an AMP partition that cannot use the 1x1
# vertex). Supervisor constant cycles (convNx1Overhead), worker state retention savings
# (convnx1WorkerRetentionSavings, zeroPartialsRetentionSavings float / half), the worker's start-up
# cycles to its partition loop, and the cycles of one worklist entry (a row piece of n positions) by
# activation type: n = 1, n = 2, n >= 3 base and per position (getConvPartialnx1WorkerCycles).
CONV_NX1_OVERHEAD = 109
CONV_NX1_RETENTION_SAVINGS = 9
ZERO_PARTIALS_RETENTION_SAVINGS = {True: 9, False: 10}
CONV_NX1_WORKER_START = 17
CONV_NX1_ENTRY = {True: (33, 44, 45), False: (29, 33, 34)}  # float activations: (n=1, n=2, n>=3 base)
CONV_NX1_IMBALANCE = 9  # "std::max(maxWorkerCycles, minWorkerCycles + 9)"


def _nx1_entries(
    begin: np.ndarray, end: np.ndarray, row_width: int, entry: Callable[[np.ndarray], np.ndarray]
) -> np.ndarray:
    """Sum of ``entry(n)`` over the row pieces of output positions [begin, end) (rows ``row_width`` long):
    PopLibs' partitionConvPartialByWorker gives a worker one worklist entry per output row its range meets."""
    first_row, last_row = begin // row_width, (end - 1) // row_width
    rows = np.where(end > begin, last_row - first_row + 1, 0)
    head = np.minimum(end, (first_row + 1) * row_width) - begin
    tail = end - last_row * row_width
    one = entry(np.maximum(end - begin, 1))
    many = (
        entry(np.maximum(head, 1)) + entry(np.maximum(tail, 1)) + np.maximum(rows - 2, 0) * entry(np.array(row_width))
    )
    return np.where(rows == 1, one, np.where(rows >= 2, many, 0))


def nx1_worklist_entries(rows: int, row_width: int, workers: int) -> int:
    """Worklist entries of a ConvPartialnx1 vertex for one kernel position: the row pieces its workers'
    ranges of ``rows`` consecutive output positions (rows ``row_width`` long) meet."""
    r = np.array([rows])
    return int(sum(int(_nx1_entries(i * r // workers, (i + 1) * r // workers, row_width, np.ones_like)[0])
                   for i in range(workers)))  # fmt: skip


# ConvPartialnx1 with fewer input channels per group than the weights a conv unit holds: PopLibs lets
# the AMP take inChansPerGroup = any divisor of weightsPerConvUnit that is a multiple of the conv
# unit's input load elements (ConvVertexType.cpp getConvVertexAMPCandidates with
# canUseConvolutionInstruction: usedWeightsPerConvUnit % inChansPerGroup == 0 and inChansPerGroup %
# convInputLoadElems == 0), and fills the rest of each conv unit with kernel rows: convUnitWeightHeight
# = weightsPerConvUnit / inChansPerGroup rows a pass, the kernel height padded up to a multiple of it
# (ConvModel.cpp getConvUnitWeightHeight; addTileLevelTransformEstimates: "AMP pads the kernel height
# dimension"). Input load elements per cycle: 2 float, 4 half, 8 quarter (ref §3.7 "Load elems are 2
# (float) and 4 (half)"; ConvVertexType.cpp smallestWidthLoad, quarter 8).
CONV_INPUT_LOAD_ELEMS = {"float32": 2, "float16": 4, "float8": 8}
# The supervisor's extra cycles per weight load by filter height (convUnitWeightHeight), and a filter
# height of 4 loading with ld64 (half the coefficient rate): getConvPartialnx1SupervisorInnerLoop-
# CycleEstimateHalfFloat and getConvPartialAmpSupervisorWeightLoadCycleEstimate (PerformanceEstimation.hpp).
CONV_NX1_FILTER_HEIGHT_LOAD = {1: 15, 2: 46, 4: 60}
CONV_NX1_LOAD_PER_FILTER_ROW = 20  # "default: innermostLoopCycles += 20 * filterHeight"


def amp_in_chans_per_group_candidates(dtype: DTypeLike, partials_dtype: DTypeLike, target: Target) -> list[int]:
    """The AMP's inChansPerGroup candidates for a type pair, largest first (see CONV_INPUT_LOAD_ELEMS)."""
    cfg = amp_config(dtype, partials_dtype, target)
    load = CONV_INPUT_LOAD_ELEMS[_amp_input_type(dtype_name(dtype), dtype_name(partials_dtype))]
    wpu = cfg.in_chans_per_group
    return [c for c in range(wpu, load - 1, -1) if wpu % c == 0 and c % load == 0]


def _nx1_tile_kernel(
    in_chans: np.ndarray, kernel: tuple[int, int], channel_group: int | None, in_chans_per_group: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(in-channel groups, kernel rows, kernel columns) of a tile's block of ``in_chans`` im2col columns.

    Columns run (c // grp, i, j, c % grp), grp = ``channel_group``. When grp fills whole AMP groups
    (None, or a multiple of ``in_chans_per_group``) the block is counted in (in-channel group, kernel
    position) pairs of in_chans_per_group columns. Otherwise each kernel position's channels on the
    tile are padded up to whole groups, as PopLibs pads the input channels to inChansPerGroup."""
    kh, kw = kernel
    positions = kh * kw
    if channel_group is None or channel_group % in_chans_per_group == 0:
        pairs = np.maximum(1, _cdiv(in_chans, in_chans_per_group))
        in_groups = _cdiv(pairs, positions)
        k_pos = np.minimum(pairs, positions)  # a tile given part of the kernel (an in-chan split inside a group)
    else:
        chunks = np.maximum(1, _cdiv(in_chans, channel_group))  # (channel group, kernel position) runs
        chans = _cdiv(chunks, positions) * channel_group  # channels per kernel position on the tile
        in_groups = _cdiv(chans, in_chans_per_group)
        k_pos = np.minimum(chunks, positions)
    return in_groups, _cdiv(k_pos, kw), np.minimum(k_pos, kw)


def amp_nx1_cycles(
    rows: Counts, row_width: int, kernel: tuple[int, int], in_chans: np.ndarray, out_chans: np.ndarray,
    dtype: DTypeLike, partials_dtype: DTypeLike, target: Target, channel_group: int | None = None,
    in_chans_per_group: int | None = None,
) -> np.ndarray:  # fmt: skip
    """One ConvPartialnx1 supervisor vertex (plus the partials' zeroing PopLibs costs with it) on one tile:
    ``rows`` output positions (consecutive, in output rows of ``row_width``), ``in_chans`` columns of the
    convolution's im2col view (in-channel groups x kernel positions x group, as tilescope orders them;
    ``channel_group`` the group, None when it fills whole AMP groups) and ``out_chans`` output channels.
    ``in_chans_per_group``: the AMP's input channel grouping; None takes the cheapest of PopLibs'
    candidates (``amp_in_chans_per_group_candidates``: the planner costs each vertex type and keeps the
    fastest). PopLibs' estimate, term by term (PerformanceEstimation.hpp
    getConvPartialnx1InnerLoopCycleEstimate and the functions it calls), with fh = convUnitWeightHeight
    = weightsPerConvUnit / inChansPerGroup kernel rows per AMP pass (1 when the channels fill a conv unit):

      worker  = 17 (+1 half partials) + sum over its row pieces of (3 + entry(n) - 9),
      entry(n) = 33 | 29 (n = 1), 44 | 33 (+1 for half/half 16 units and half/float 8) (n = 2),
                 45 + 8 (n - 3) | 34 + 4 (n - 3) (n >= 3)   (float | half activations);
      kernel  = ceil(kh / fh) kw passes max(W max_w, W min_w + 9);
      inner   = ceil(kh / fh) (14 + kw (12 + passes (loads(fh) + 15 | 46 | 60 (fh 1 | 2 | 4) + 3))) + kernel,
                loads(4) twice loads(1) (ld64);
      vertex  = 109 + 9 W + zeroRetention W + (oG 17 + (oG - 1) 6 + 1) + 1 + 16 + iG (14 + oG (14 + inner));
      zeroing = W oG (ceil(ceil(rows ocpg / W) / 2) + 14 - 9).
    """
    cfg = amp_config(dtype, partials_dtype, target)
    if in_chans_per_group is None:
        fills = channel_group is None or channel_group % cfg.in_chans_per_group == 0
        if fills:
            in_chans_per_group = cfg.in_chans_per_group
        else:
            each = [amp_nx1_cycles(rows, row_width, kernel, in_chans, out_chans, dtype, partials_dtype, target,
                                   channel_group, c)
                    for c in amp_in_chans_per_group_candidates(dtype, partials_dtype, target)]  # fmt: skip
            return np.minimum.reduce(each)
    if cfg.in_chans_per_group % in_chans_per_group:
        raise ValueError(f"cost model: {in_chans_per_group} input channels per group do not divide the "
                         f"{cfg.in_chans_per_group} weights of a conv unit")  # fmt: skip
    fh = cfg.in_chans_per_group // in_chans_per_group
    float_acts, float_partials = dtype_name(dtype) == "float32", dtype_name(partials_dtype) == "float32"
    rows = _i64(rows, "rows")
    w = target.num_worker_contexts
    n1, n2, n3 = CONV_NX1_ENTRY[float_acts]
    extra = int(not float_acts and (float_partials == (cfg.num_conv_units == 8)))

    def entry(n: np.ndarray) -> np.ndarray:
        cyc = np.where(n == 1, n1, np.where(n == 2, n2 + extra, n3 + (n - 3) * cfg.core_cycles_per_position))
        return 3 + cyc - CONV_NX1_RETENTION_SAVINGS

    start = CONV_NX1_WORKER_START + int(not float_partials)
    workers = [start + _nx1_entries(i * rows // w, (i + 1) * rows // w, row_width, entry) for i in range(w)]
    max_w, min_w = np.maximum.reduce(workers), np.minimum.reduce(workers)
    in_groups, k_h, k_w = _nx1_tile_kernel(np.asarray(in_chans), kernel, channel_group, in_chans_per_group)
    k_outer = _cdiv(k_h, fh)  # kernel rows in passes of fh, the last padded
    passes = max(1, cfg.out_chans_per_group // cfg.num_conv_units)
    loads = cfg.weight_load_cycles * (2 if fh == 4 else 1)
    per_load = CONV_NX1_FILTER_HEIGHT_LOAD.get(fh, CONV_NX1_LOAD_PER_FILTER_ROW * fh)
    kernel_loop = k_outer * k_w * passes * np.maximum(w * max_w, w * min_w + CONV_NX1_IMBALANCE)
    inner = k_outer * (14 + k_w * (12 + passes * (loads + per_load + 3))) + kernel_loop
    out_groups = np.maximum(1, _cdiv(out_chans, cfg.out_chans_per_group))
    vertex = (CONV_NX1_OVERHEAD + w * CONV_NX1_RETENTION_SAVINGS + w * ZERO_PARTIALS_RETENTION_SAVINGS[float_partials]
              + out_groups * 17 + (out_groups - 1) * 6 + 1 + 1 + 16 + in_groups * (14 + out_groups * (14 + inner)))  # fmt: skip
    zeroing = (
        w
        * out_groups
        * (_cdiv(_cdiv(rows * cfg.out_chans_per_group, w), 2) + 14 - ZERO_PARTIALS_RETENTION_SAVINGS[True])
    )
    return vertex + zeroing


def amp_nx1_macs(
    rows: Counts, kernel: tuple[int, int], in_chans: Counts, out_chans: Counts, dtype: DTypeLike,
    partials_dtype: DTypeLike, target: Target, channel_group: int | None, in_chans_per_group: int,
) -> np.ndarray:  # fmt: skip
    """The MACs a ConvPartialnx1 vertex's AMP performs on its block, padding included: positions x
    in-channel groups x inChansPerGroup x kernel rows padded to whole passes x kernel columns x
    out-channel groups x outChansPerGroup (PopLibs' FLOP estimate of an AMP vertex, ref §3.6:
    convGroups·outGroups·inGroups·inChansPerGroup·outChansPerGroup·fieldPositions·ampKernelHeight·2)."""
    cfg = amp_config(dtype, partials_dtype, target)
    fh = cfg.in_chans_per_group // in_chans_per_group
    in_groups, k_h, k_w = _nx1_tile_kernel(np.asarray(in_chans), kernel, channel_group, in_chans_per_group)
    out_groups = np.maximum(1, _cdiv(out_chans, cfg.out_chans_per_group))
    return (_i64(rows, "rows") * in_groups * in_chans_per_group * _cdiv(k_h, fh) * fh * k_w * out_groups
            * cfg.out_chans_per_group)  # fmt: skip


def amp_nx1_in_chans_per_group(
    rows: int, row_width: int, kernel: tuple[int, int], in_chans: int, out_chans: int, dtype: DTypeLike,
    partials_dtype: DTypeLike, target: Target, channel_group: int | None = None,
) -> int:  # fmt: skip
    """The AMP input channel grouping ``amp_nx1_cycles`` costs a block with (the fastest candidate, the
    largest of equals, as PopLibs' candidate order puts the least padded first)."""
    cfg = amp_config(dtype, partials_dtype, target)
    if channel_group is None or channel_group % cfg.in_chans_per_group == 0:
        return cfg.in_chans_per_group
    cands = amp_in_chans_per_group_candidates(dtype, partials_dtype, target)
    cyc = [int(amp_nx1_cycles(np.array([rows]), row_width, kernel, np.array([in_chans]), np.array([out_chans]),
                              dtype, partials_dtype, target, channel_group, c)[0]) for c in cands]  # fmt: skip
    return cands[int(np.argmin(cyc))]


# ConvPartial1x4SLIC: the vertex PopLibs plans for convolutions with few channels per conv group
# (depthwise, grouped), half or quarter inputs only (graphcore/poplibs lib/poplin/ConvVertexType.cpp
# getConvVertexSLICCandidates). It holds (convGroupsPerGroup, chansPerGroup) = (1, 4), (2, 2), (4, 1) and,
# with half partials on 16 conv units, (8, 1), (16, 1) - in and out channels padded to chansPerGroup, the
# tile's conv groups to whole groups of convGroupsPerGroup - and runs the kernel in 1x4 sub-kernels (the
# kernel width padded to 4, ConvModel.cpp numWeightBlocks). Conv unit chains: 2 with float partials; 4 (16
# units) or 2 with half partials. Cycles: PerformanceEstimation.hpp getConvPartialSlicSupervisor-
# {WeightLoad,OuterLoop,InnerLoop}CycleEstimate(HalfFloat), which poplinCycleEstimators.cpp's
# ConvPartial1x4SLIC estimator and ConvModel.cpp's SLIC plan cost both call; the constants below are
# theirs, named by what the comments beside them in PopLibs say they pay for.
SLIC_WINDOW_WIDTH = 4
SLIC_MAX_CHANS_PER_GROUP = 4  # the widest chansPerGroup of the candidates below


@dataclass(frozen=True)
class SlicConfig:
    """One ConvPartial1x4SLIC vertex variant: conv groups and channels per group, conv unit chains."""

    conv_groups_per_group: int
    chans_per_group: int
    chains: int


def slic_candidates(dtype: DTypeLike, partials_dtype: DTypeLike, target: Target) -> list[SlicConfig]:
    """PopLibs' SLIC vertex candidates for a half input type (none for other types: SLIC is half or
    quarter only, and tilescope costs quarter SLIC with the AMP it models for float8)."""
    if dtype_name(dtype) != "float16":
        return []
    half_partials = dtype_name(partials_dtype) == "float16"
    units = amp_config(dtype, partials_dtype, target).num_conv_units
    chains = ([4] if units == 16 else []) + [2] if half_partials else [2]
    groupings = [(1, 4), (2, 2), (4, 1)] + ([(8, 1), (16, 1)] if half_partials and units == 16 else [])
    return [SlicConfig(g, c, ch) for ch in chains for g, c in groupings]


def _brnzdec(n: np.ndarray | int) -> np.ndarray:
    return 6 * (np.asarray(n) - 1) + 1  # "6 cycles brnzdec stall for all but the last one"


def _brnzdec_int(n: int) -> int:
    return 6 * (n - 1) + 1


def slic_weight_load_cycles(cfg: SlicConfig, target: Target) -> int:
    """getConvPartialSlicSupervisorWeightLoadCycleEstimate (half): 16 ld64putcs after either a CCCSLOAD
    set-up (4 channels, one group) or the workers' rearrangement of the weights (10, 12 for 2 groups,
    +1 for 8 and 16 groups, per worker) between a runall and a sync."""
    if cfg.chans_per_group == 4:
        return 6 + 6 + 6 + 16
    worker = (12 if cfg.conv_groups_per_group == 2 else 10) + int(cfg.conv_groups_per_group > 4)
    return 9 + 6 + worker * target.num_worker_contexts + 6 + 16


def _slic_row(n: np.ndarray, zero: bool, h8: bool, stride: int) -> np.ndarray:
    """A worker's cycles for one worklist row piece of n output positions, one input pass
    (getConvPartialSlicSupervisorInnerLoopCycleEstimateHalfFloat's rowCycles). For n >= 2 without
    zeroing its short-row sum 1 + (n-1) + 2 + (4-n) + 2 + (3-(4-n)) + 3 is n + 10 (unsigned arithmetic)."""
    if stride == 2:
        return np.where(n < 3, 7 + np.where(n == 1, 3, 5) + 3, 15 + 2 * (n - 3))
    short = (10 + np.where(n > 1, n, 0) + 3) if zero else (7 + np.where(n == 1, 6, n + 10))
    long_ = 15 + (n - 5) + (0 if zero or not h8 else 3)
    return np.where(n < (6 if h8 else 5), short, long_)


def slic_inner_cycles(
    rows: Counts, row_width: int, cfg: SlicConfig, partials_dtype: DTypeLike, target: Target, zero: bool,
    stride: int = 1,
) -> np.ndarray:  # fmt: skip
    """getConvPartialSlicSupervisorInnerLoopCycleEstimateHalfFloat: W x the slowest worker over its row
    pieces of ``rows`` consecutive output positions (rows ``row_width`` long, split over the workers as
    ``_nx1_entries``), plus the half-8-conv merge copy on the zeroing pass."""
    rows = _i64(rows, "rows")
    w = target.num_worker_contexts
    float_partials = dtype_name(partials_dtype) == "float32"
    h8 = cfg.chains == 2 and not float_partials
    passes = 1 if cfg.chains == 4 else 2  # "inputDataPasses"
    preamble = 2 + (2 if h8 else 3) + 1 + 2 + 4 + 2 + 2 + 1 + int(h8) + (4 if cfg.conv_groups_per_group > 4 else 0)

    def piece(n: np.ndarray) -> np.ndarray:
        row = _slic_row(n, zero, h8, stride) - int(float_partials)
        return (9 if h8 else 10) + int(zero) + 3 * int(float_partials) + row * passes

    workers = [preamble + _nx1_entries(i * rows // w, (i + 1) * rows // w, row_width, piece) for i in range(w)]
    worst = np.maximum.reduce(workers) + (2 if h8 else 0)
    copy = 2 + 2 * rows if h8 and zero else 0
    return worst * w + copy


def slic_cycles(
    rows: Counts, row_width: int, kernel: tuple[int, int], conv_groups: Counts, cfg: SlicConfig,
    partials_dtype: DTypeLike, target: Target, stride: int = 1,
) -> np.ndarray:  # fmt: skip
    """One ConvPartial1x4SLIC vertex on a tile: ``conv_groups`` conv groups (in groups of
    cfg.conv_groups_per_group), each ``rows`` output positions, kernel ``kernel`` in ceil(kw/4) x kh
    sub-kernels (getConvPartialSlicSupervisorOuterLoopCycleEstimateHalfFloat):

      cycles = preamble + (ggBody T + brnzdec T) + (subBody S + brnzdec S) + T zeroInner + T (S-1) inner,
      T = ceil(conv_groups / convGroupsPerGroup), S = sub-kernels; 25 | 28 preamble and 12 | 15 ggBody
      (half-8-conv | otherwise); subBody = weightLoad + 17 (+4 unless half-8-conv) for up to 4 groups a
      group, else (cgpg/4 strides of weightLoad + 21, + brnzdec) + 15 with ggBody + 8 and the
      non-zeroing inner pass once per stride."""
    kh, kw = kernel
    float_partials = dtype_name(partials_dtype) == "float32"
    h8 = cfg.chains == 2 and not float_partials
    t = np.maximum(1, _cdiv(_i64(conv_groups, "conv groups"), cfg.conv_groups_per_group))
    subs = _cdiv(kw, SLIC_WINDOW_WIDTH) * kh
    zero_inner = slic_inner_cycles(rows, row_width, cfg, partials_dtype, target, True, stride)
    inner = slic_inner_cycles(rows, row_width, cfg, partials_dtype, target, False, stride)
    load = slic_weight_load_cycles(cfg, target)
    gg_body = 12 if h8 else 15
    if cfg.conv_groups_per_group <= 4:
        sub_body = load + (0 if h8 else 3) + 2 + (0 if h8 else 1) + 6 + 1 + 6 + 1
    else:
        strides = cfg.conv_groups_per_group // 4
        stride_loop = (load + 6 + 1 + 6 + 2 + 6) * strides + _brnzdec_int(strides)
        sub_body = stride_loop + 2 + 2 + 6 + 3 + 2
        gg_body += 2 + 6  # "numGroupCounter on the stack"
        inner = inner * strides
    sub_loop = sub_body * subs + _brnzdec(subs)
    gg_loop = gg_body * t + _brnzdec(t)
    return (25 if h8 else 28) + gg_loop + sub_loop + t * zero_inner + t * (subs - 1) * inner


def slic_best(
    rows: Counts, row_width: int, kernel: tuple[int, int], conv_groups: Counts, chans: int, dtype: DTypeLike,
    partials_dtype: DTypeLike, target: Target, stride: int = 1,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """(cycles, candidate index into ``slic_candidates``) of the fastest SLIC variant for blocks of
    ``conv_groups`` conv groups with ``chans`` in and out channels each (the larger of the two), as
    PopLibs' planner costs each vertex candidate and keeps the fastest (the first of equals). Empty
    arrays' shape with cycles -1 where no variant holds ``chans`` channels."""
    cands = slic_candidates(dtype, partials_dtype, target)
    shape = np.broadcast_shapes(np.shape(rows), np.shape(conv_groups))
    best = np.full(shape, -1, dtype=np.int64)
    which = np.full(shape, -1, dtype=np.int64)
    for i, cfg in enumerate(cands):
        if chans > cfg.chans_per_group:
            continue
        cyc = np.broadcast_to(slic_cycles(rows, row_width, kernel, conv_groups, cfg, partials_dtype, target,
                                          stride), shape)  # fmt: skip
        better = (best < 0) | (cyc < best)
        best, which = np.where(better, cyc, best), np.where(better, i, which)
    return best, which


# HMAC (ref §3.7): "dot(n) ~ 1 cycle per 64 bits of activations + 5-7, float +1": 6 [INF midpoint].
HMAC_DOT_OVERHEAD = 6


def mac_matmul_cycles(
    rows: Counts, in_chans: Counts, out_chans: Counts, dtype: DTypeLike, partials_dtype: DTypeLike, target: Target
) -> np.ndarray:
    """A 1x1 HMAC-style supervisor vertex ``[rows, in_chans] x [in_chans, out_chans]`` (ref §3.7), the
    fallback for channel counts too small for AMP; also used [INF] for integer types.

    worker(m) = 13 + m*(7 + out_chans*dot(in_chans)), dot(k) = ceil(k*bytes/8) + 6 (+1 float);
    cycles = (58 float | 65 half) - 10 + 23 + 15 + 10 + W*worker(ceil(rows/W))   (one group each).
    """
    dt = dtype_name(dtype)
    dtype_name(partials_dtype)  # validated; HMAC accumulates in the worker's registers
    rows = _i64(rows, "rows")
    w = target.num_worker_contexts
    # in_chans / out_chans may be arrays (the planner's candidates); ceil(k * bytes / 8) in integers
    dot = _cdiv(np.asarray(in_chans) * _ELEM_BYTES[dt], DATAPATH_BYTES) + HMAC_DOT_OVERHEAD + int(dt == "float32")
    worker = 13 + _cdiv(rows, w) * (7 + out_chans * dot)
    outer = (65 if dt == "float16" else 58) - 10 + 23 + 15 + 10
    return outer + w * worker


def mac_conv_cycles(
    rows: Counts, kernel: tuple[int, int], in_chans: Counts, out_chans: Counts, dtype: DTypeLike,
    partials_dtype: DTypeLike, target: Target, channel_group: int | None = None,
) -> np.ndarray:  # fmt: skip
    """The HMAC vertex of a convolution wider than 1x1 (ConvPartialHorizontalMac): its workers run their
    output positions once per kernel position, each a dot product over that position's input channels
    (PerformanceEstimation.hpp getConvPartialHorizontalMacSupervisorInnerLoopCycleEstimate: per kernel
    position and worklist row, convSize x (7 + outChans x dot(inChans))). Costed as ``mac_matmul_cycles``
    over rows x (kernel positions on the tile) positions of the channels a position holds (the block's
    ``in_chans`` im2col columns, runs of ``channel_group`` channels, None: any), not as one dot product
    over all the block's columns, which no HMAC vertex computes."""
    kh, kw = kernel
    grain = 2 if elem_bytes(dtype_name(dtype)) == 2 else 1  # HMAC inChansPerGroup: a multiple of 2 (half)
    run = grain if channel_group is None else channel_group
    chunks = np.maximum(1, _cdiv(in_chans, run))
    positions = np.minimum(chunks, kh * kw)
    chans = _cdiv(_cdiv(chunks, kh * kw) * run, grain) * grain
    return mac_matmul_cycles(_i64(rows, "rows") * positions, chans, out_chans, dtype, partials_dtype, target)


def peak_flops_per_cycle(dtype: DTypeLike, partials_dtype: DTypeLike, target: Target) -> float:
    """Peak FLOPs per tile per cycle for an input/partials type pair (ref §1 AMP peak rows)."""
    dt, pt = dtype_name(dtype), dtype_name(partials_dtype)
    rates = {
        ("float16", "float16"): target.fp16_flops_per_cycle,
        ("float16", "float32"): target.fp16_fp32acc_flops_per_cycle,
        ("float32", "float32"): target.fp32_flops_per_cycle,
        # FP8 AMP (C600, ipu21): 560 TFLOPS FP8 vs 280 FP16 (seed 000, C600 README) = 256 FLOP/tile/cycle,
        # twice the half rate, with half partials only; float partials run it as half in (_amp_input_type)
        ("float8", "float16"): target.fp8_flops_per_cycle,
        ("float8", "float32"): target.fp16_fp32acc_flops_per_cycle if target.fp8_flops_per_cycle > 0 else 0.0,
    }
    rate = rates.get((dt, pt))
    if rate is None:
        raise ValueError(f"cost model: no AMP rate for {dt} inputs with {pt} partials")
    if rate <= 0:
        raise ValueError(f"cost model: {target.name} ({target.architecture}) does not support {dt} AMP")
    return float(rate)


# -- per-tile compute-set cycles (ref §2, §8) -------------------------------------------------------
# [NF] Per compute set, the supervisor of every tile with work enters the compute-set function and
# returns to the sync; no figure is given. 30 cycles, the order of PopLibs' per-vertex supervisor
# overheads (11-50 cycles, ref §3.1, §3.7).
COMPUTE_SET_SUPERVISOR_CYCLES = 30


def tile_compute_cycles(
    tile: np.ndarray, cycles: np.ndarray, multi_worker: np.ndarray, num_tiles: int, target: Target
) -> np.ndarray:
    """Cycles of one compute set on every tile, from its vertices' estimates (ref §2, §8).

    MultiVertex / supervisor vertices (``multi_worker``) run one after another and add their
    estimates. Single-worker vertices are dealt round-robin, in the order given, over the tile's
    worker contexts; they cost W x max over contexts of the per-context sums. Tiles with any vertex
    add COMPUTE_SET_SUPERVISOR_CYCLES; idle tiles cost 0.
    """
    tile = np.asarray(tile, dtype=np.int64)
    cycles = _i64(cycles, "vertex cycles")
    multi = np.asarray(multi_worker, dtype=bool)
    if not (tile.shape == cycles.shape == multi.shape) or tile.ndim != 1:
        raise ValueError("cost model: tile, cycles and multi_worker must be 1-D arrays of equal length")
    if tile.size and (tile.min() < 0 or tile.max() >= num_tiles):
        raise ValueError(f"cost model: vertex tile ids must lie in [0, {num_tiles})")
    w = target.num_worker_contexts
    # float64 bincount sums are exact below 2**53 cycles.
    multi_sum = np.bincount(tile[multi], weights=cycles[multi], minlength=num_tiles).astype(np.int64)

    single_tile, single_cycles = tile[~multi], cycles[~multi]
    if single_tile.size > 1 and not bool((single_tile[1:] >= single_tile[:-1]).all()):
        order = np.argsort(single_tile, kind="stable")
        single_tile, single_cycles = single_tile[order], single_cycles[order]
    # (vertices come by tile, as a compute set's batches are made: then no sort is needed)
    single = np.zeros(num_tiles, dtype=np.int64)
    if single_tile.size:
        # counted over the tiles from the first to the last with such vertices (one IPU's of a POD's,
        # for a pipeline stage's compute set), not over every tile of the target
        lo = int(single_tile[0])
        local = single_tile - lo
        span = int(local[-1]) + 1
        count = np.bincount(local, minlength=span)
        starts = (np.cumsum(count) - count)[local]  # each tile's first vertex
        context = (np.arange(local.size) - starts) % w  # rank on the tile, round-robin
        per_context = np.bincount(local * w + context, weights=single_cycles, minlength=span * w).reshape(span, w)
        most = per_context[:, 0].copy()
        for c in range(1, w):  # a maximum over the few contexts, column by column
            np.maximum(most, per_context[:, c], out=most)
        single[lo : lo + span] = w * most.astype(np.int64)

    active = np.bincount(tile, minlength=num_tiles) > 0
    return multi_sum + single + np.where(active, COMPUTE_SET_SUPERVISOR_CYCLES, 0)


# -- exchange, links, syncs (ref §1, §3.8, §8) -----------------------------------------------------------
# [NF] Fixed cost of an exchange on each tile taking part (entering the compiled exchange code,
# setting up the first send/receive); no figure is given. 64 cycles, the Mk1 supervisorInstrFetchDelay
# (ref §1 "Instruction fetch"), as the cost of branching into the exchange code [INF].
EXCHANGE_FIXED_CYCLES = 64
# [NF] Fixed cost of an inter-IPU exchange per IPU taking part, taken as for on-IPU exchange.
GLOBAL_EXCHANGE_FIXED_CYCLES = EXCHANGE_FIXED_CYCLES
# [NF] Latency of a host stream copy (PCIe / gateway round trip): 1 microsecond.
HOST_LATENCY_SECONDS = 1e-6


# Exchange code as docs/fidelity.md "Exchange model" specifies it (profiler/compiler/exchange.py counts the
# regions). Per tile and exchange step: a fixed prologue of 6 instructions (sync, set-up; [INF]) plus one instruction (ref §1 IPUModel `instructionBytes`, 4 B [INF]) per region the tile sends - a
# multicast region once, however many tiles receive it - and one per region it receives (selecting the
# incoming source / setting the incoming pointer). A region is a run contiguous in both the source and
# the destination memory, from one source tile. Checked against the published dense 4096->1024 layer
# (ref §5: internalExchangeCode ~360 KiB): 414 KiB with a PopLibs-like plan, worked out in the doc [INF].
EXCHANGE_CODE_STEP_INSTRUCTIONS = 6
EXCHANGE_CODE_INSTRUCTIONS_PER_REGION = 1


def exchange_code_bytes(regions_sent: Counts, regions_received: Counts, target: Target) -> np.ndarray:
    """Per tile: instructionBytes x (6 + regions sent (multicast counted once) + regions received) on
    tiles taking part in the exchange step; 0 elsewhere."""
    sent, received = _i64(regions_sent, "regions sent"), _i64(regions_received, "regions received")
    n = EXCHANGE_CODE_STEP_INSTRUCTIONS + EXCHANGE_CODE_INSTRUCTIONS_PER_REGION * (sent + received)
    return np.where(sent + received > 0, target.instruction_bytes * n, 0)


def exchange_cycles(bytes_in: Counts, bytes_out: Counts, target: Target) -> np.ndarray:
    """Per tile: ceil(16*max(in, out) / round(16*exchangeBytesPerCycle)) (ExchangeEstimator.hpp's
    fixed-point form, ref §3.8) + EXCHANGE_FIXED_CYCLES on tiles that send or receive; 0 elsewhere.
    Supertile-shared receives (2x rate, ref §3.8) are the caller's to fold into ``bytes_in``; so is
    multicast: ``bytes_out`` should count a region sent to several tiles once (docs/fidelity.md,
    "Exchange model: what to change", item 2).
    """
    b = np.maximum(_i64(bytes_in, "bytes in"), _i64(bytes_out, "bytes out"))
    rate16 = round(16 * target.exchange_bytes_per_cycle)
    return np.where(b > 0, _cdiv(16 * b, rate16) + EXCHANGE_FIXED_CYCLES, 0)


def global_exchange_cycles(bytes_: Counts, target: Target) -> np.ndarray:
    """Inter-IPU exchange of ``bytes_`` per IPU over IPU-Links (ref §1 "IPU-Link"); 0 bytes costs 0."""
    b = _i64(bytes_, "bytes")
    link = np.ceil(b / target.ipu_link_bytes_per_cycle).astype(np.int64)
    return np.where(b > 0, link + GLOBAL_EXCHANGE_FIXED_CYCLES, 0)


def stream_copy_cycles(total_bytes: int, target: Target) -> int:
    """A host stream copy of ``total_bytes`` over the host link (ref §1 "Host link") plus its latency."""
    if total_bytes < 0:
        raise ValueError(f"cost model: stream copy bytes must be >= 0, got {total_bytes}")
    if total_bytes == 0:
        return 0
    latency = math.ceil(HOST_LATENCY_SECONDS * target.clock_hz)
    return latency + math.ceil(total_bytes / target.host_bytes_per_cycle)


def overlapped_io_step_cycles(compute: int, host_in: int, host_out: int, batches: int) -> int:
    """A step of ``batches`` iterations whose host loads and stores run on I/O tiles beside the compute.

    PopART's ``ExchangeStrategy.OverlapInnerLoop`` (graphcore/popart docs/user_guide/overlap_io.rst)
    "preload[s] values in the previous inner loop iteration for the next iteration. If the inner loop
    iteration count is N, then N-2 data exchanges will overlap, while the first and the last will not."
    So the first load and the last store stand alone (fill and drain), and iteration i computes while the
    I/O tiles load batch i+1 (not in the last) and store batch i-1 (not in the first), one after the
    other over the one host link: host_in + sum_i max(compute, io_i) + host_out. ``compute`` is one
    batch's cycles without its host copies (its I/O-tile to compute-tile exchanges included); one batch
    is the serial sum."""
    for what, v in (("compute", compute), ("host_in", host_in), ("host_out", host_out)):
        if v < 0:
            raise ValueError(f"cost model: {what} cycles must be >= 0, got {v}")
    if batches < 1:
        raise ValueError(f"cost model: batches per step must be >= 1, got {batches}")
    if batches == 1:
        return host_in + compute + host_out
    ends = max(compute, host_in) + max(compute, host_out)  # first and last iterations
    return host_in + ends + (batches - 2) * max(compute, host_in + host_out) + host_out


def sync_cycles(kind: str, target: Target) -> int:
    """Sync latency: "internal" (one IPU) or "external" (all IPUs of the device; "global" [INF] alike)."""
    key = kind.strip().lower()
    if key == "internal":
        return target.internal_sync_cycles
    if key in ("external", "global"):
        return target.external_sync_cycles
    raise ValueError(f"cost model: unknown sync kind {kind!r}; known: internal, external, global")


# -- FLOPs (ref §3.6, include/poplibs_support/FlopEstimation.hpp) --------------------------------------
# Non-FP types count 0 FLOPs. Unary ops count 1 per element except bitwise, CLZ, logical-not and
# popcount (0). Binary ops count 1 except bitwise and shift (0), REMAINDER (3) and
# variance<->inverse-stddev (2). add = mul = div = sqrt = 1, MAC = 2, LogAdd = 6.
_UNARY_ZERO_FLOPS = frozenset({"bitwise_not", "count_leading_zeros", "logical_not", "popcount"})
_BINARY_FLOPS = {
    "bitwise_and": 0, "bitwise_or": 0, "bitwise_xor": 0, "bitwise_xnor": 0,
    "shift_left": 0, "shift_right": 0, "shift_right_sign_extend": 0,
    "remainder": 3, "variance_to_inv_std_dev": 2, "inv_std_dev_to_variance": 2,
}  # fmt: skip
_REDUCE_OP_FLOPS = {"add": 1, "multiply": 1, "maximum": 1, "minimum": 1, "square_add": 2, "log_add": 6}
_REDUCE_OP_FLOPS |= {"logical_and": 0, "logical_or": 0}


def unary_flops(op: str, n: Counts, dtype: DTypeLike = "float32", to_dtype: DTypeLike | None = None) -> np.ndarray:
    """FLOPs of a unary op over ``n`` elements; a cast counts 1 per element if either type is FP."""
    name, dt = _op_name(op), dtype_name(dtype)
    n = _i64(n, "element counts")
    if name == "cast":
        fp = _is_float(dt) or (to_dtype is not None and _is_float(dtype_name(to_dtype)))
        return n * int(fp)
    return n * int(_is_float(dt) and name not in _UNARY_ZERO_FLOPS)


def binary_flops(op: str, n: Counts, dtype: DTypeLike = "float32") -> np.ndarray:
    """FLOPs of a binary op over ``n`` elements (comparisons of FP inputs count 1)."""
    name, dt = _op_name(op), dtype_name(dtype)
    n = _i64(n, "element counts")
    return n * (_BINARY_FLOPS.get(name, 1) if _is_float(dt) else 0)


def scaled_add_flops(n: Counts, dtype: DTypeLike = "float32") -> np.ndarray:
    """ScaledAdd: 2 FLOPs per element (ref §3.2, §3.6)."""
    return _i64(n, "element counts") * (2 if _is_float(dtype_name(dtype)) else 0)


# popnn pooling vertex, per worker (PopLibs popnn PerformanceEstimation.hpp getPoolingCycles, with its
# default unpack costs): the set-up before the row loop, the row loop's overhead per output row, the
# work loop's per (row, kernel position) item, per channel group and per 64-bit channel vector, and
# the inner repeat loop: 4 + 3n cycles for max (5 + 3n sum) over n + 1 outputs.
POOL_WORKER_SETUP_CYCLES = 14 + 2 + 6 + 3 + 2 + 1 + 2 + 1 + 1  # + 1 more for sum pooling (scale load)
POOL_ROW_CYCLES = 13 + 2 + 2
POOL_ITEM_CYCLES = 20 + 3
POOL_CHAN_GROUP_CYCLES = 2 + 2 + 2 + 2 + 4 + 1
POOL_VECTOR_CYCLES = 2 + 1


def pool_cycles(is_max: bool, rows: int, segments: int, channels: int, kernel: int, dtype: DTypeLike) -> int:
    """One worker's pooling of ``rows`` output positions (lying in ``segments`` output rows) over
    ``channels`` channels in one channel group and a ``kernel``-element window: one work item per
    segment and kernel position, each a repeat loop over its outputs per 64-bit channel vector."""
    vectors = -(-channels // (DATAPATH_BYTES // elem_bytes(dtype)))
    rpt_base = 4 if is_max else 5
    item = POOL_ITEM_CYCLES + POOL_CHAN_GROUP_CYCLES + vectors * (POOL_VECTOR_CYCLES + rpt_base)
    setup = POOL_WORKER_SETUP_CYCLES + (0 if is_max else 1)
    return setup + segments * (POOL_ROW_CYCLES + kernel * item) + 3 * kernel * vectors * (rows - segments) + 1


def reduce_flops(
    op: str, n_in: Counts, n_out: Counts = 1, dtype: DTypeLike = "float32", is_update: bool = False
) -> np.ndarray:
    """(partials + isUpdate - 1) * outputs * opFlops, partials = n_in / n_out (ref §3.6)."""
    name, dt = _reduce_op(op), dtype_name(dtype)
    n_in, n_out = _i64(n_in, "input counts"), _i64(n_out, "output counts")
    if not _is_float(dt):
        return np.zeros(np.broadcast_shapes(n_in.shape, n_out.shape), dtype=np.int64)
    return (n_in + (int(is_update) - 1) * n_out) * _REDUCE_OP_FLOPS[name]


def matmul_flops(m: Counts, k: Counts, n: Counts) -> np.ndarray:
    """``[m, k] x [k, n]``: one MAC (2 FLOPs) per m*k*n (ref §3.6, getNumberOfMACs in §3.7)."""
    return 2 * _i64(m, "m") * _i64(k, "k") * _i64(n, "n")


# -- the elementwise operations a map codelet performs, typed --------------------------------------


class OpKind(StrEnum):
    """Which PopLibs elementwise vertex family costs an operation (ref §3.1, §3.3)."""

    UNARY = "unary"  # UnaryOp1D
    BINARY = "binary"  # BinaryOp1D
    CAST = "cast"  # Cast1D


@dataclass(frozen=True)
class CostOp:
    """One elementwise operation a vertex performs on every element, costed as PopLibs' vertex of
    its kind. The name is checked against the cost tables when the record is made, so a misspelt
    operation fails where it is written rather than costing as something else."""

    kind: OpKind
    name: str

    def __post_init__(self) -> None:
        key = _op_name(self.name)
        tables: dict[OpKind, dict[str, dict[str, _Loop]]] = {
            OpKind.UNARY: _UNARY,
            OpKind.BINARY: _BINARY,
            OpKind.CAST: {"cast": {}},
        }
        known = tables[OpKind(self.kind)]
        if key not in known:
            raise ValueError(f"cost model: unknown {self.kind} op {self.name!r}; known: {', '.join(sorted(known))}")

    def cycles(
        self, n: Counts, dtype: DTypeLike, target: Target, in_place: bool = False, to_dtype: DTypeLike | None = None
    ) -> np.ndarray:
        """Cycles of one vertex over ``n`` elements of ``dtype`` (``to_dtype``: a cast's result type)."""
        if self.kind == OpKind.UNARY:
            return unary_cycles(self.name, n, dtype, target, in_place=in_place)
        if self.kind == OpKind.CAST:
            return cast_cycles(n, dtype, dtype if to_dtype is None else to_dtype, target)
        return binary_cycles(self.name, n, dtype, target, in_place=in_place)

    def flops(self, n: Counts, dtype: DTypeLike, to_dtype: DTypeLike | None = None) -> np.ndarray:
        if self.kind == OpKind.UNARY:
            return unary_flops(self.name, n, dtype)
        if self.kind == OpKind.CAST:
            return unary_flops("cast", n, dtype, dtype if to_dtype is None else to_dtype)
        return binary_flops(self.name, n, dtype)


def unary(name: str) -> CostOp:
    """A unary operation (``exponent``, ``tanh``, ...) costed as UnaryOp1D."""
    return CostOp(OpKind.UNARY, name)


def binary(name: str) -> CostOp:
    """A binary operation (``add``, ``multiply``, ...) costed as BinaryOp1D."""
    return CostOp(OpKind.BINARY, name)


#: A type conversion, costed as Cast1D.
CAST = CostOp(OpKind.CAST, "cast")
