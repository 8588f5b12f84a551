"""The operation cost table: each operation class tilescope lowers to, run on one tile, next to PopLibs' figure.

Every row builds the real operation with tilescope's public API (``profiler.ops``) on a one-tile IPU
model (GC200 constants, memory not limiting), compiles it and reads the simulated cycles of its
compute steps: what the op's lowering, its codelets and the tile's worker schedule make of it. It does
not call the cost model's formula directly, so a wrong codelet, element type, extra stage or vertex
split shows up as a ratio away from 1.

The published side is PopLibs' own figure for the same work on one tile, worked out here from
PopLibs' sources (graphcore/poplibs @ 7eac0f2, Aug 2023, the last public release; "hpp" is
lib/popops/popopsCycleEstimators.hpp, "cpp" lib/popops/popopsCycleEstimators.cpp): the codelet's
``getCyclesEstimate`` for single-codelet classes, and for composite operations (softmax, the
normalisations) the sum of the estimates of the vertices PopLibs' own implementation runs, stage by
stage as its source lists them. Matmul and convolution rows compare with the measured AMP rate.
The figures are cycles per element (per output element for pooling and gathers, per MAC for
matmul and convolutions) on the tile.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import numpy as np

from profiler import Engine, Graph, Sequence, ops
from profiler.chip.targets import Target, ipu_model
from profiler.poplar.programs import Sequence as Prog
from profiler.poplar.tensor import Tensor
from report_format.vocabulary import StepType

# One tile with GC200's constants; 8 MiB so that no row is limited by memory (the cycles do not
# depend on the tile's size).
ONE_TILE: Target = ipu_model(tiles_per_ipu=1, bytes_per_tile=8 * 1024 * 1024)
W = ONE_TILE.num_worker_contexts  # 6
N = 6 * 1024  # elements of the elementwise rows: 1024 per worker, so fixed overheads weigh ~1 %
SOURCE = "graphcore/poplibs @ 7eac0f2"


def simulated_cycles(build: Callable[[Graph, Prog], object]) -> float:
    """Cycles of the compute (and, on one tile, on-tile exchange) steps ``build`` makes on ONE_TILE."""
    g = Graph(ONE_TILE)
    prog = Sequence()
    build(g, prog)
    e = Engine(g, [prog], options={"debug.instrument": "false"})
    e.compile()
    kinds = (StepType.ON_TILE_EXECUTE, StepType.DO_EXCHANGE)
    return float(sum(int(s.cost.tile_cycles.max()) for s in e.compiled.steps if s.type in kinds))


# -- PopLibs' estimates (the published side) ------------------------------------------------------------
VW = {"float16": 4, "float32": 2}  # target.getVectorWidth: 64 bits of the type


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _loop(c: int, natural: bool, unroll: int, n: int, vw: int, overhead: int) -> int:
    """An OpPerformanceInfo inner loop over ``n`` elements (cpp unaryOpInnerLoopCycles /
    binaryOpInnerLoopCycles; PerformanceEstimation.cpp basicOpLoopCycles = cycles * (n + v - 1) / v)."""
    if not natural and unroll > 0:
        return _cdiv(n, unroll) * c
    v = vw if natural else 1
    return (c + overhead) * (n + v - 1) // v


# hpp unaryOpPerfInfo / unaryOpInPlacePerfInfo entries: (cyclesPerLoop, naturalVectorWidth, loopUnrollFactor).
POPLIBS_UNARY = {
    ("ERF", "float16"): (13, False, 1), ("ERF", "float32"): (41, False, 1),
    ("GELU_ERF", "float16"): (16, False, 1), ("TANH", "float16"): (4, False, 4),
    ("EXPONENT", "float16"): (4, False, 4), ("LOGARITHM", "float16"): (4, False, 4),
    ("SIGMOID", "float16"): (6, False, 4), ("RELU", "float16"): (3, False, 4),
    ("INVERSE", "float32"): (6, False, 2), ("SQUARE", "float16"): (2, False, 4),
}  # fmt: skip
POPLIBS_UNARY_IN_PLACE = {("EXPONENT", "float16"): (4, False, 4)}
# hpp binaryOpPerfInfo / binaryOpInPlacePerfInfo: ADD/SUB/MUL (1, natural), DIVIDE half (21, -, 4).
POPLIBS_BINARY = {"ADD": (1, True, 0), "SUBTRACT": (1, True, 0), "MULTIPLY": (1, True, 0), "DIVIDE": (21, False, 4)}


def unary_1d(op: str, n: int, dtype: str = "float16", in_place: bool = False) -> int:
    """cpp UnaryOp1D: W x (17 (33 for EXPONENT) + inner(ceil(n/W))) + 9 + basicOpSupervisorOverhead (11);
    UnaryOp1DInPlace: worker base 55."""
    c, nat, u = (POPLIBS_UNARY_IN_PLACE if in_place else POPLIBS_UNARY)[(op, dtype)]
    base = 55 if in_place else (33 if op == "EXPONENT" else 17)
    return W * (base + _loop(c, nat, u, _cdiv(n, W), VW[dtype], 4)) + 9 + 11


def binary_1d(op: str, n: int, dtype: str = "float16", in_place: bool = False) -> int:
    """cpp BinaryOp1D: W x ((29 float | 26 half) + inner(ceil(n/W))) + 11; BinaryOp1DInPlace
    (getBinaryOp1DInPlaceEstimate): worker base 58. Natural ADD/SUB/MUL have assembly codelets:
    2 cycles of overhead per vector (hasExternalCodelet), 5 for other natural ops."""
    c, nat, u = POPLIBS_BINARY[op]
    base = 58 if in_place else (26 if dtype == "float16" else 29)
    return W * (base + _loop(c, nat, u, _cdiv(n, W), VW[dtype], 2)) + 11


def cast_1d(n: int) -> int:
    """popops PerformanceEstimation.cpp getCast1DEstimate, float -> half: 12 + W x (core + 18), core =
    19 + 2 x ceil(n/4) (opVectorWidth min(2 x 2, 4) = 4; max(2 loads, 1 store) per vector; the
    float<->half aux pipeline adds no cycle)."""
    return 12 + W * (19 + 2 * _cdiv(_cdiv(n, W), 4) + 18)


def continuous_reduce(outputs: int, partials: int, partials_dtype: str) -> int:
    """popops reduction/CycleEstimationFunctions.cpp getCycleEstimateReduceAllRegionsContinuous, one
    single-worker ContinuousReduce per worker's share of the outputs, W x the longest: cyclesPerOp (1) x
    outputs x (partials / min(accVectorWidth, dataPathWidth)) + 2 if partials is odd + 12 x outputs + 10
    + 7. The estimator is passed numOutputsM1 as its output count; kept as PopLibs has it."""
    acc = 8 if partials_dtype == "float16" else 4
    per_loop = min(acc, VW[partials_dtype])
    o = _cdiv(outputs, W) - 1  # numOutputsM1 of the longest worker's vertex
    return W * (o * (partials // per_loop) + 2 * (partials % 2) + 12 * o + 10 + 7)


def multi_slice(offsets: int, elems: int) -> int:
    """popops PerformanceEstimation.cpp getMultiSliceCycleEstimate, half (2 halves a vector, 2 cycles
    each), every offset in range (cpp multiSlicer's worst case): (30 + offsets x (19 + 2 x ceil(elems/2))) x W."""
    return (30 + offsets * (19 + 2 * _cdiv(elems, 2))) * W


def max_pool(rows: int, segments: int, channels: int, kernel: int) -> int:
    """popnn PerformanceEstimation.hpp getPoolingCycles for max pooling, half, one worker's ``rows``
    output positions in ``segments`` output rows, all ``channels`` in one group: set-up 14+2+6+3+2+1+2+1+1,
    per row 13+2+2, per (row, kernel position) 20+3 + channel group 2+2+2+2+4+1 + per 64-bit vector
    (2+1) + 4, and the inner repeat 3 cycles a further output."""
    vectors = _cdiv(channels, 4)
    item = 23 + 13 + vectors * (3 + 4)
    return 32 + segments * (17 + kernel * item) + 3 * kernel * vectors * (rows - segments) + 1


def transpose_half(rows: int, cols: int) -> int:
    """popops Transpose2d estimate, half fast path (popopsCycleEstimators.cpp at sdk/poplar/2.0.0, the last
    release that kept it in PopLibs; later Poplar runs its own poplar_rt::Transpose vertices):
    39 + matrices x (12 + rows/4 x (15 + 4 x (cols/4 - 2))) for one single-worker vertex; the rows split
    over the W workers [INF], W x the longest."""
    r = _cdiv(rows, W)
    return W * (39 + 12 + (r // 4) * (15 + 4 * (cols // 4 - 2)))


# ref §1 "Local copy (memcpy)": 8 B a cycle plus 288 cycles per 6-worker copy call [3P]; no first-party figure.
def memcpy(n_bytes: int) -> int:
    return 288 + _cdiv(n_bytes, 8)


# The AMP rate measured on hardware (bench.calibrate AMP_SWEEP, ref §3.7: tessellate-ipu's IPU Peak Flops
# notebook on Bow): ConvPartial1x1Out [2048,16]x[16,16] fp16 -> fp16 in 8,525 cycles a tile.
AMP_CYCLES_PER_MAC = 8525 / (2048 * 16 * 16)


# -- the cases ------------------------------------------------------------------------------------------
def _vec(g: Graph, dtype: str, n: int = N, name: str = "x") -> Tensor:
    return ops.add_mapped(g, dtype, (n,), name)


def _unary_case(name: str, dtype: str) -> Callable[[Graph, Prog], object]:
    return lambda g, p: ops.unary(g, name, _vec(g, dtype), p)


def _binary_case(name: str) -> Callable[[Graph, Prog], object]:
    return lambda g, p: ops.binary(g, name, _vec(g, "float16"), _vec(g, "float16", name="y"), p)


SOFTMAX_ROWS, SOFTMAX_COLS = 48, 128  # BERT's attention rows are 384 long; 128 keeps the tile busy
NORM_ROWS, NORM_COLS = 8, 768  # BERT-base's hidden size


def _softmax(g: Graph, p: Prog) -> object:
    return ops.softmax(g, ops.add_mapped(g, "float16", (SOFTMAX_ROWS, SOFTMAX_COLS), "x"), p)


def popnn_softmax() -> int:
    """popnn NonLinearity.cpp softmaxImpl (stable): reduce MAX over each row; subInPlace the max; expInPlace;
    reduce ADD into float; invInPlace the sums; cast them to half; mulInPlace every element by its row's."""
    n, r, c = SOFTMAX_ROWS * SOFTMAX_COLS, SOFTMAX_ROWS, SOFTMAX_COLS
    return (continuous_reduce(r, c, "float16") + binary_1d("SUBTRACT", n, in_place=True)
            + unary_1d("EXPONENT", n, in_place=True) + continuous_reduce(r, c, "float16")
            + unary_1d("INVERSE", r, "float32") + cast_1d(r) + binary_1d("MULTIPLY", n, in_place=True))  # fmt: skip


def _layer_norm(g: Graph, p: Prog) -> object:
    x = ops.add_mapped(g, "float16", (NORM_ROWS, NORM_COLS), "x")
    gamma, beta = (
        ops.add_mapped(g, "float16", (NORM_COLS,), "gamma"),
        ops.add_mapped(g, "float16", (NORM_COLS,), "beta"),
    )
    return ops.layer_norm(g, x, gamma, beta, p)


def popnn_norm(outputs: int, partials: int) -> int:
    """poplin Norms.cpp as popnn's layer and batch norms call it: normStatistics reduces ADD and SQUARE_ADD
    over the activations (reduceMany, float partials); normWhiten: sub, then mulInPlace by the inverse
    standard deviation; normalise: mul by gamma, then addInPlace beta. The per-channel statistics (a few
    elements) are left out."""
    n = outputs * partials
    return (2 * continuous_reduce(outputs, partials, "float32") + binary_1d("SUBTRACT", n)
            + binary_1d("MULTIPLY", n, in_place=True) + binary_1d("MULTIPLY", n) + binary_1d("ADD", n, in_place=True))  # fmt: skip


BN_SHAPE = (4, 64, 8, 8)  # batch, channels, height, width


def _batch_norm(g: Graph, p: Prog) -> object:
    b, c, h, w = BN_SHAPE
    store = ops.add_mapped(g, "float16", (b, h, w, c), "x")  # channels innermost, as a convolution leaves it
    gamma, beta = ops.add_mapped(g, "float16", (c,), "gamma"), ops.add_mapped(g, "float16", (c,), "beta")
    return ops.batch_norm(g, store.transpose(0, 3, 1, 2), gamma, beta, p)


POOL = (1, 64, 32, 32)  # batch, channels, height, width; 3x3 windows, stride 2, padding 1 -> 16 x 16


def _max_pool(g: Graph, p: Prog) -> object:
    b, c, h, w = POOL
    store = ops.add_mapped(g, "float16", (b, h, w, c), "x")  # channels innermost, as a convolution leaves it
    return ops.max_pool2d(g, store.transpose(0, 3, 1, 2), 3, p, stride=2, padding=1)


def popnn_max_pool() -> int:
    """The 256 output positions over the 6 workers (43 at most, in 3 output rows of 16), 3x3 windows: W x
    the longest worker's getPoolingCycles."""
    return W * max_pool(rows=43, segments=3, channels=POOL[1], kernel=9)


GATHER = (1000, 64, 96)  # table rows, row length, indices


def _gather(g: Graph, p: Prog) -> object:
    v, d, n = GATHER
    table = ops.embedding_table(g, "float16", v, d, "table")
    return ops.gather(g, table, ops.add_mapped(g, "int32", (n,), "indices"), p)


MM = (256, 256, 256)


def _matmul(g: Graph, p: Prog) -> object:
    m, k, n = MM
    a = ops.create_matmul_lhs(g, "float16", (m, k), (k, n), "a", partials_dtype="float16")
    b = ops.create_matmul_rhs(g, "float16", (m, k), (k, n), "b", partials_dtype="float16")
    return ops.matmul(g, a, b, p, partials_dtype="float16")


TRANSPOSE = (96, 64)


def _transpose(g: Graph, p: Prog) -> object:
    return ops.copy(g, ops.add_mapped(g, "float16", TRANSPOSE, "x").transpose(1, 0), p)


# (key, what, batch, in channels, field, out channels, kernel, stride, padding, groups)
CONVS = (
    ("conv_1x1", "1×1", 1, 64, 16, 64, 1, 1, 0, 1),
    ("conv_3x3", "3×3", 1, 64, 16, 64, 3, 1, 1, 1),
    ("conv_few_in_chans", "7×7 stride 2, 3 input channels (ResNet's stem)", 1, 3, 32, 64, 7, 2, 3, 1),
    ("conv_depthwise", "3×3 depthwise (64 groups of 1)", 1, 64, 16, 64, 3, 1, 1, 64),
    ("conv_strided_1x1", "1×1 stride 2", 1, 64, 16, 128, 1, 2, 0, 1),
)


def _conv_case(
    b: int, c: int, h: int, co: int, k: int, s: int, pad: int, groups: int
) -> Callable[[Graph, Prog], object]:
    def build(g: Graph, p: Prog) -> object:
        store = ops.add_mapped(g, "float16", (b, h, h, c), "x")  # channels innermost, as a convolution leaves it
        x = store.transpose(0, 3, 1, 2)
        w = ops.create_conv_weights(g, "float16", x.shape, (co, c // groups, k, k), "w", stride=s, padding=pad,
                                    groups=groups, partials_dtype="float16")  # fmt: skip
        return ops.conv2d(g, x, w, p, stride=s, padding=pad, groups=groups, partials_dtype="float16")

    return build


def _at_amp_rate(macs: int) -> Callable[[], float]:
    return lambda: AMP_CYCLES_PER_MAC * macs


def _conv_macs(b: int, c: int, h: int, co: int, k: int, s: int, pad: int, groups: int) -> int:
    ho = (h + 2 * pad - k) // s + 1
    return b * ho * ho * co * (c // groups) * k * k


# -- rows -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class OpCase:
    key: str
    op_class: str
    setting: str
    per: str  # "element", "output" or "MAC"
    count: int  # elements, outputs or MACs the figures are divided by
    build: Callable[[Graph, Prog], object]
    poplibs: Callable[[], float]  # PopLibs' cycles for the whole case
    source: str
    tolerance: float
    why: str
    known_off: str = ""

    def simulated(self) -> float:
        return _simulated(self.key) / self.count

    def published(self) -> float:
        return float(self.poplibs()) / self.count


_cache: dict[str, float] = {}


def _simulated(key: str) -> float:
    if key not in _cache:
        _cache[key] = simulated_cycles(CASES_BY_KEY[key].build)
    return _cache[key]


_SAME = (
    "the same PopLibs estimator the cost model follows, so the row checks the operation's lowering (its "
    "codelet, element type, stages and vertex split on the tile) and the compute set's own overhead (30 cycles)"
)
_COMPOSITE = (
    "PopLibs' figure is the sum of the estimates of the vertices its implementation runs, each over the whole "
    "tile's elements; tilescope composes the operation from its own ops (stage for stage where it can) "
    "and each stage may split its vertices differently"
)
_AMP = (
    "the AMP vertex's measured rate is the best any plan can reach; a plan adds operand rearrangement, "
    "partial-sum reductions and short vertices. The issue's acceptance bound for a layer"
)


def _unary_row(name: str, poplibs_op: str, dtype: str = "float16") -> OpCase:
    return OpCase(
        f"op_unary_{name}{'' if dtype == 'float16' else '_float'}", f"elementwise unary: {name}",
        f"ops.unary({name!r}) over {N:,} {dtype} elements", "element", N, _unary_case(name, dtype),
        lambda: unary_1d(poplibs_op, N, dtype),
        f"PopLibs UnaryOp1D estimate, {poplibs_op} {dtype} {POPLIBS_UNARY[(poplibs_op, dtype)]} (popopsCycleEstimators.hpp/.cpp, {SOURCE})",
        0.10, _SAME,
    )  # fmt: skip


def _binary_row(name: str, poplibs_op: str) -> OpCase:
    return OpCase(
        f"op_binary_{name}", f"elementwise binary: {name}", f"ops.binary({name!r}) of two {N:,}-element half tensors",
        "element", N, _binary_case(name), lambda: binary_1d(poplibs_op, N),
        f"PopLibs BinaryOp1D estimate, {poplibs_op} half {POPLIBS_BINARY[poplibs_op]} (popopsCycleEstimators.hpp/.cpp, {SOURCE})",
        0.10, _SAME,
    )  # fmt: skip


CASES: tuple[OpCase, ...] = (
    _unary_row("erf", "ERF"),
    _unary_row("erf", "ERF", "float32"),
    _unary_row("gelu", "GELU_ERF"),
    _unary_row("tanh", "TANH"),
    _unary_row("exp", "EXPONENT"),
    _unary_row("log", "LOGARITHM"),
    _unary_row("sigmoid", "SIGMOID"),
    _unary_row("relu", "RELU"),
    _binary_row("add", "ADD"),
    _binary_row("mul", "MULTIPLY"),
    _binary_row("div", "DIVIDE"),
    OpCase(
        "op_cast",
        "cast",
        f"ops.cast of {N:,} float elements to half",
        "element",
        N,
        lambda g, p: ops.cast(g, _vec(g, "float32"), "float16", p),
        lambda: cast_1d(N),
        f"PopLibs Cast1D estimate, float -> half (popops PerformanceEstimation.cpp, {SOURCE})",
        0.10,
        _SAME,
    ),
    OpCase(
        "op_reduce_add",
        "reduction",
        "ops.reduce (add) of half [96, 64] over its rows",
        "element",
        N,
        lambda g, p: ops.reduce(g, ops.add_mapped(g, "float16", (96, 64), "x"), 1, p),
        lambda: continuous_reduce(96, 64, "float16"),
        f"PopLibs ContinuousReduce estimate (popops reduction/CycleEstimationFunctions.cpp, {SOURCE})",
        0.10,
        _SAME + "; PopLibs' estimator counts one output fewer per vertex (numOutputsM1), tilescope each",
    ),
    OpCase(
        "op_softmax",
        "softmax",
        f"ops.softmax of half [{SOFTMAX_ROWS}, {SOFTMAX_COLS}] over its rows",
        "element",
        SOFTMAX_ROWS * SOFTMAX_COLS,
        _softmax,
        popnn_softmax,
        f"popnn NonLinearity.cpp softmaxImpl's stages, each PopLibs' vertex estimate ({SOURCE})",
        0.25,
        _COMPOSITE,
    ),
    OpCase(
        "op_layer_norm",
        "layer norm",
        f"ops.layer_norm of half [{NORM_ROWS}, {NORM_COLS}] with gamma and beta",
        "element",
        NORM_ROWS * NORM_COLS,
        _layer_norm,
        lambda: popnn_norm(NORM_ROWS, NORM_COLS),
        f"poplin Norms.cpp normStatistics / normWhiten / normalise stages, each PopLibs' vertex estimate ({SOURCE})",
        0.25,
        _COMPOSITE,
    ),
    OpCase(
        "op_batch_norm",
        "batch norm",
        f"ops.batch_norm of half {list(BN_SHAPE)} (channels innermost)",
        "element",
        int(np.prod(BN_SHAPE)),
        _batch_norm,
        lambda: popnn_norm(BN_SHAPE[1], BN_SHAPE[0] * BN_SHAPE[2] * BN_SHAPE[3]),
        f"poplin Norms.cpp normStatistics / normWhiten / normalise stages, each PopLibs' vertex estimate ({SOURCE})",
        0.25,
        _COMPOSITE,
    ),
    OpCase(
        "op_gather",
        "gather",
        f"ops.gather of {GATHER[2]} rows of a half [{GATHER[0]}, {GATHER[1]}] table",
        "element",
        GATHER[1] * GATHER[2],
        _gather,
        lambda: multi_slice(GATHER[2], GATHER[1]),
        f"PopLibs MultiSlice estimate (popops PerformanceEstimation.cpp getMultiSliceCycleEstimate, {SOURCE})",
        0.10,
        _SAME,
    ),
    OpCase(
        "op_max_pool",
        "pooling",
        f"ops.max_pool2d 3×3 stride 2 of half {list(POOL)} (channels innermost)",
        "output",
        POOL[1] * 16 * 16,
        _max_pool,
        popnn_max_pool,
        f"popnn PerformanceEstimation.hpp getPoolingCycles ({SOURCE})",
        0.10,
        _SAME,
    ),
    OpCase(
        "op_copy",
        "copy",
        f"ops.copy of {N:,} half elements on the tile",
        "element",
        N,
        lambda g, p: ops.copy(g, _vec(g, "float16"), p),
        lambda: memcpy(2 * N),
        "8 B a cycle + 288 per copy call, third-party [3P] (ref §1 'Local copy'); no first-party figure",
        0.10,
        "a consistency check on the model's own constant: Poplar's copy vertices are not in PopLibs and no "
        "first-party copy rate was found",
    ),
    OpCase(
        "op_transpose",
        "rearrangement (transpose)",
        f"ops.copy of a half [{TRANSPOSE[0]}, {TRANSPOSE[1]}] into its transpose on the tile",
        "element",
        TRANSPOSE[0] * TRANSPOSE[1],
        _transpose,
        lambda: transpose_half(*TRANSPOSE),
        "popops Transpose2d estimate, half fast path (popopsCycleEstimators.cpp, graphcore/poplibs sdk/poplar/2.0.0)",
        0.25,
        "tilescope costs an on-tile rearranging copy as a copy of its bytes; PopLibs' regroupTensor "
        "transposes 4×4 blocks with Transpose vertices (the figure here: its rows split over the workers [INF])",
    ),
    OpCase(
        "op_matmul",
        "matmul",
        f"ops.matmul [{MM[0]},{MM[1]}]·[{MM[1]},{MM[2]}] half, half partials, operands created for it",
        "MAC",
        int(np.prod(MM)),
        _matmul,
        lambda: AMP_CYCLES_PER_MAC * float(np.prod(MM)),
        "AMP ConvPartial1x1Out measured on Bow: 8,525 cycles for [2048,16]·[16,16] (tessellate-ipu IPU Peak "
        "Flops notebook; ref §3.7)",
        0.25,
        _AMP,
    ),
    *(
        OpCase(
            f"op_{key}",
            f"convolution: {what}",
            f"ops.conv2d, half [{b},{c},{h},{h}] -> {co} channels, half partials",
            "MAC",
            _conv_macs(b, c, h, co, k, s, pad, gr),
            _conv_case(b, c, h, co, k, s, pad, gr),
            _at_amp_rate(_conv_macs(b, c, h, co, k, s, pad, gr)),
            "AMP ConvPartial1x1Out measured on Bow (as the matmul row)",
            0.25,
            _AMP,
        )  # fmt: skip
        for key, what, b, c, h, co, k, s, pad, gr in CONVS
    ),
)
CASES_BY_KEY = {c.key: c for c in CASES}


@cache
def table() -> list[tuple[OpCase, float, float]]:
    """(case, PopLibs' figure, tilescope's) for every case, per element / output / MAC."""
    return [(c, c.published(), c.simulated()) for c in CASES]
