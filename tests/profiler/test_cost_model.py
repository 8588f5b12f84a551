"""Cost model: hand-worked values of each formula (written out independently here), the Bow AMP
calibration (reference/ipu_model.md §3.7) and the peak-rate bound."""

import math

import numpy as np
import pytest

from profiler.chip import cost_model as cm
from profiler.chip.targets import get_target, ipu_model

W = 6
T = ipu_model()  # 4 tiles, 6 workers, GC200 rates
BOW = get_target("Bow")
GC200 = get_target("GC200")


def ceil(a, b):
    return -(-a // b)


# -- elementwise -----------------------------------------------------------------------------------
def test_unary_hand_worked():
    # relu float, n = 100: per worker ceil(100/6) = 17; (c=3, unroll 2): ceil(17/2)*3 = 27.
    assert cm.unary_cycles("relu", np.array([100]), "float32", T).tolist() == [W * (17 + ceil(17, 2) * 3) + 9 + 11]
    # exp half, n = 50: worker base 33; (c=4, unroll 4) over ceil(50/6) = 9 elements.
    assert cm.unary_cycles("exp", 50, "half", T) == W * (33 + ceil(9, 4) * 4) + 20
    # abs float (1, not natural, no unroll) pays c + 4 per element; in place it is natural (per vector).
    assert cm.unary_cycles("absolute", 12, "float", T) == W * (17 + 2 * (1 + 4)) + 20
    assert cm.unary_cycles("abs", 12, "float", T, in_place=True) == W * (55 + ceil(2, 2) * (1 + 4)) + 20
    # sqrt half (23, unroll 4), n = 1000: ceil(1000/6) = 167.
    assert cm.unary_cycles("sqrt", 1000, "float16", T) == W * (17 + ceil(167, 4) * 23) + 20
    # ERF half (13, -, 1): one element per loop, 13 cycles (popopsCycleEstimators.hpp; float is 41).
    assert cm.unary_cycles("erf", 600, "float16", T) == W * (17 + 100 * 13) + 20
    assert cm.unary_cycles("erf", 600, "float32", T) == W * (17 + 100 * 41) + 20


def test_unary_is_vectorised_and_int64():
    n = np.array([[0, 1, 6], [7, 600, 6000]])
    out = cm.unary_cycles("tanh", n, "float32", T)
    assert out.dtype == np.int64 and out.shape == n.shape
    expected = [[W * (17 + ceil(ceil(int(v), 6), 2) * 12) + 20 for v in row] for row in n]
    assert out.tolist() == expected
    assert np.all(np.diff(out.ravel()) >= 0)


def test_unary_errors_are_one_line():
    with pytest.raises(ValueError, match="unknown unary op 'frobnicate'"):
        cm.unary_cycles("frobnicate", 4, "float", T)
    with pytest.raises(ValueError, match="'exponent' has no cost for int32"):
        cm.unary_cycles("exp", 4, "int32", T)
    with pytest.raises(ValueError, match="unknown element type"):
        cm.unary_cycles("relu", 4, "complex", T)
    with pytest.raises(ValueError, match=">= 0"):
        cm.unary_cycles("relu", -1, "float", T)


def test_binary_hand_worked():
    # The BinaryOp1D formula W*(29 + ceil(ceil(n/W)/2)*(c + k)) + 11 with c = 1, k = 2 (float add).
    for n in (1, 6, 7, 100, 12345):
        assert cm.binary_cycles("add", n, "float", T) == W * (29 + ceil(ceil(n, W), 2) * (1 + 2)) + 11
    # half: base 26, vw 4.
    assert cm.binary_cycles("multiply", 100, "half", T) == W * (26 + ceil(17, 4) * 3) + 11
    # divide half is not natural: (21, unroll 4) -> ceil(17/4)*21.
    assert cm.binary_cycles("div", 100, "half", T) == W * (26 + ceil(17, 4) * 21) + 11
    # in place: base 58; max float in place (4, unroll 2) (binaryOpInPlacePerfInfo) over ceil(30/6) = 5.
    assert cm.binary_cycles("max", 30, "float", T, in_place=True) == W * (58 + ceil(5, 2) * 4) + 11
    # integer add: 7 per element.
    assert cm.binary_cycles("add", 10, "int32", T) == W * (29 + 2 * 7) + 11
    with pytest.raises(ValueError, match="'divide' has no cost for int32"):
        cm.binary_cycles("divide", 10, "int32", T)


def test_broadcast_scalar_hand_worked():
    # W*(20 + ceil(ceil(n/W)/vw)*(c + o)) + 11; mul half: c = 1, o = 1.
    assert cm.broadcast_scalar_cycles("mul", 100, "half", T) == W * (20 + ceil(17, 4) * (1 + 1)) + 11
    assert cm.broadcast_scalar_cycles("add", 100, "half", T, in_place=True) == W * (20 + ceil(17, 4) * 1) + 11
    assert cm.broadcast_scalar_cycles("add", 100, "float", T, in_place=True) == W * (20 + ceil(17, 2) * 2) + 11
    # max float (3, unroll 2), o = 4.
    assert cm.broadcast_scalar_cycles("max", 24, "float", T) == W * (20 + ceil(4, 2) * (3 + 4)) + 11


def test_cast_hand_worked():
    # Cast1D = 12 + W*(core(ceil(n/W)) + 18); n = 60 -> 10 per worker.
    # float->half: opVW = min(2*2, 4) = 4, max(2 loads, 1 store) = 2 cycles per vector (aux pipeline).
    assert cm.cast_cycles(60, "float", "half", T) == 12 + W * (19 + 2 * ceil(10, 4) + 18)
    # half->float: opVW = min(8, 2) = 2, 1 cycle per vector.
    assert cm.cast_cycles(60, "half", "float", T) == 12 + W * (19 + 1 * ceil(10, 2) + 18)
    # int->float (not aux): opVW 2, max(1, 1) + 1 = 2.
    assert cm.cast_cycles(60, "int32", "float32", T) == 12 + W * (19 + 2 * ceil(10, 2) + 18)
    # u8->half atom loop: 14 + 9 per 4.
    assert cm.cast_cycles(60, "uint8", "half", T) == 12 + W * (14 + 9 * ceil(10, 4) + 18)
    assert cm.unary_cycles("cast", 60, "float", T, to_dtype="half") == cm.cast_cycles(60, "float", "half", T)


def test_fill_copy_scaled_add_hand_worked():
    assert cm.fill_cycles(np.array([10]), "float", T).tolist() == [16 + 5 + 6]
    assert cm.fill_cycles(np.array([1, 2, 10]), "half", T).tolist() == [15, 21, 26 + 3]
    assert cm.fill_cycles(np.array([10, 100]), "uint8", T).tolist() == [28 + 3, 39 + 13]
    assert cm.copy_cycles(np.array([0, 1, 800]), T).tolist() == [0, 288 + 1, 288 + 100]
    # scaled add float n = 26: 13 vectors, 3 per worker: worker 15 + (6 + 3*2) + 2; rem 0 -> +7.
    assert cm.scaled_add_cycles(26, "float", T) == (21 + 11 + 7 + 12 + 6) + W * (15 + 6 + 3 * 2 + 2)
    # half n = 7: 1 vector, remainder 3 -> supervisor +13, worker remainder 5 + 7 + 6.
    assert cm.scaled_add_cycles(7, "half", T) == (21 + 11 + 13 + 12 + 6) + W * (15 + 6 + 2 + 18)
    assert cm.scaled_add_cycles(7, "half", T, subtract=True) == cm.scaled_add_cycles(7, "half", T) + 7


def test_continuous_reduce_hand_worked():
    # getCycleEstimateReduceAllRegionsContinuous: k x (n // min(acc width, data-path elements))
    # + 2 if n odd + 12 k + 10 + 7 (call / return).
    # half, 5 outputs of 43: min(8, 4) = 4 a loop -> 5 x 10 + 2 + 60 + 17 = 129
    assert cm.continuous_reduce_cycles("add", 43, 5, "half") == 129
    # float max, 2 outputs of 8: min(4, 2) = 2 -> 2 x 4 + 0 + 24 + 17 = 49
    assert cm.continuous_reduce_cycles("max", 8, 2, "float") == 49
    # fewer partials than a loop takes: no loop, only the odd tail and the per-output cost
    assert cm.continuous_reduce_cycles("add", 1, 3, "half") == 0 + 2 + 36 + 17
    assert cm.continuous_reduce_cycles("add", np.array([8, 43]), np.array([2, 5]), "float").tolist() == [
        2 * 4 + 24 + 17,
        5 * 21 + 2 + 60 + 17,
    ]


def test_reduce_hand_worked():
    # One output: 3 + 6 + ceil(n/vw) + 5 + rem + 3 (+5 not float).
    assert cm.reduce_cycles("add", 10, 1, "float", T) == 3 + 6 + 5 + 5 + 0 + 3
    assert cm.reduce_cycles("add", 10, 1, "half", T) == 3 + 6 + 3 + 5 + 2 + 3 + 5
    # General vertex, float add, 40 -> 8: opW 4, 5 partials, 2 output vectors.
    region = 16 + 6 + 2 * 2 + 2
    assert cm.reduce_cycles("sum", 40, 8, "float", T) == 33 + region + 2 * (3 + 2 + 1) + 5 * 10 + 5 * 2 * (
        2 + 2 + 2 + 3
    )
    # half max, 64 -> 16: opW 8, 4 partials, 2 output vectors, no load overhead.
    region = 16 + 6 + 2 * 3 + 2
    assert cm.reduce_cycles("max", 64, 16, "half", T) == 33 + region + 2 * (5 + 2 + 1) + 4 * 10 + 4 * 2 * (
        0 + 2 + 2 + 3
    )
    assert cm.reduce_cycles("logical_and", 10, 1, "bool", T) == 33 + 16 * 10
    out = cm.reduce_cycles("add", np.array([10, 40]), np.array([1, 8]), "float", T)
    assert out.tolist() == [22, 213]
    with pytest.raises(ValueError, match="1 <= n_out <= n_in"):
        cm.reduce_cycles("add", 4, 8, "float", T)
    with pytest.raises(ValueError, match="unknown reduce op"):
        cm.reduce_cycles("median", 4, 1, "float", T)


# -- matmul -------------------------------------------------------------------------------------------
def test_amp_bow_calibration_within_10_percent():
    # ref §3.7: one ConvPartial1x1Out, [N,16] x [16,16] fp16 -> fp16 on Bow, measured 4N + ~330.
    n = np.arange(16, 2049)
    cycles = cm.amp_matmul_cycles(n, 16, 16, "half", "half", BOW)
    assert cycles.dtype == np.int64
    ratio = cycles / (4 * n + 330)
    assert ratio.min() > 0.9 and ratio.max() < 1.1
    # The measured points themselves (ref §3.7, per-tile cycles derived from the notebook's TFLOPS).
    measured = {16: 402, 32: 461, 64: 584, 128: 845, 256: 1352, 512: 2381, 1024: 4424, 2048: 8525}
    model = cm.amp_matmul_cycles(np.array(list(measured)), 16, 16, "half", "half", BOW)
    assert np.all(np.abs(model - np.array(list(measured.values()))) / np.array(list(measured.values())) < 0.05)
    # Achieved rate at N = 2048 is ~96% of peak, as on hardware (334.9 of 348.6 TF).
    frac = cm.matmul_flops(2048, 16, 16) / model[-1] / cm.peak_flops_per_cycle("half", "half", BOW)
    assert 0.9 < frac < 1.0


def test_amp_hand_worked():
    # N = 96 half/half: 16 positions per worker, c = 37 + 4*(16-3) - 7; inner = max(6c, 6c + 14).
    c = 37 + 4 * 13 - 7
    inner = max(W * c, W * c + 14)
    supervisor = 50 + W * 9 + 13
    assert cm.amp_matmul_cycles(96, 16, 16, "half", "half", BOW) == supervisor + 11 + (18 + 7 + 32 + inner) + 25
    # half/float partials on GC200: 8 units, 16 in x 8 out per group, loads 8*32/16 = 16.
    # 12 rows (2 per worker), K = 40 -> 3 in-groups, N = 20 -> 3 out-groups.
    cz, cnz = 37 + 4 * (2 - 3) - 7, 38 + 4 * (2 - 3) - 7
    iz, inz = max(W * cz, W * cz + 14), max(W * cnz, W * cnz + 14)
    later = (3 - 1) * (15 + 3 * (19 + 6 + 16 + inz))
    first = 11 + 3 * (18 + 7 + 16 + iz)
    assert cm.amp_matmul_cycles(12, 40, 20, "half", "float", GC200) == supervisor + later + first + 25
    # 0 rows: empty workers cost 21 (zeroing).
    assert cm.amp_matmul_cycles(0, 16, 16, "half", "half", BOW) == supervisor + 11 + 18 + 7 + 32 + (W * 21 + 14) + 25


def test_amp_type_support():
    c600 = get_target("C600")
    assert cm.amp_config("float8", "half", c600).in_chans_per_group == 32
    assert cm.amp_matmul_cycles(64, 32, 16, "float8", "half", c600) > 0
    with pytest.raises(ValueError, match="does not support float8"):
        cm.amp_matmul_cycles(64, 32, 16, "float8", "half", BOW)
    with pytest.raises(ValueError, match="no AMP rate for int32"):
        cm.amp_matmul_cycles(64, 16, 16, "int32", "int32", BOW)


def test_mac_hand_worked():
    # half, 12 rows (2 per worker), K = 4, N = 2: dot = ceil(4*2/8) + 6; worker = 13 + 2*(7 + 2*dot).
    dot = 1 + 6
    assert cm.mac_matmul_cycles(12, 4, 2, "half", "float", GC200) == (65 - 10 + 23 + 15 + 10) + W * (
        13 + 2 * (7 + 2 * dot)
    )
    # float adds 1 to dot and uses 58.
    dot = ceil(3 * 4, 8) + 6 + 1
    assert cm.mac_matmul_cycles(7, 3, 5, "float", "float", GC200) == (58 - 10 + 23 + 15 + 10) + W * (
        13 + 2 * (7 + 5 * dot)
    )


@pytest.mark.parametrize("target_name", ["GC2", "GC200", "Bow", "C600"])
def test_achieved_flops_never_above_peak(target_name):
    target = get_target(target_name)
    pairs = [("half", "half"), ("half", "float"), ("float", "float")]
    if target.fp8_flops_per_cycle:
        pairs.append(("float8", "half"))
    rows = np.concatenate([np.arange(0, 200), np.array([1000, 4096, 100_000])])
    for dt, pt in pairs:
        peak = cm.peak_flops_per_cycle(dt, pt, target)
        for k in (1, 8, 16, 32, 33, 64, 256):
            for n in (1, 8, 16, 17, 64):
                flops = cm.matmul_flops(rows, k, n)
                for fn in (cm.amp_matmul_cycles, cm.mac_matmul_cycles):
                    cycles = fn(rows, k, n, dt, pt, target)
                    assert np.all(cycles > 0)
                    assert np.all(flops <= peak * cycles), (fn.__name__, dt, pt, k, n)


def test_peak_flops_per_cycle():
    assert cm.peak_flops_per_cycle("half", "half", GC200) == 128
    assert cm.peak_flops_per_cycle(np.float16, np.float32, GC200) == 64
    assert cm.peak_flops_per_cycle("FLOAT", "float", GC200) == 32
    assert cm.peak_flops_per_cycle("quarter", "half", get_target("C600")) == 256
    with pytest.raises(ValueError, match="no AMP rate for float32 inputs with float16 partials"):
        cm.peak_flops_per_cycle("float", "half", GC200)


# -- per-tile compute --------------------------------------------------------------------------------
def test_tile_compute_cycles_hand_made_three_tiles():
    # tile 0: seven single-worker vertices of 5 cycles (the 7th wraps to context 0: sums 10,5,5,5,5,5);
    # tile 1: MultiVertex 100 and 50 run one after the other, plus one single-worker vertex of 7;
    # tile 2: idle. Vertices interleaved across tiles to check the per-tile round-robin order.
    tile = np.array([0, 1, 0, 0, 1, 0, 0, 1, 0, 0])
    cycles = np.array([5, 100, 5, 5, 7, 5, 5, 50, 5, 5])
    multi = np.array([False, True, False, False, False, False, False, True, False, False])
    out = cm.tile_compute_cycles(tile, cycles, multi, 3, T)
    overhead = cm.COMPUTE_SET_SUPERVISOR_CYCLES
    assert out.dtype == np.int64
    assert out.tolist() == [W * 10 + overhead, 100 + 50 + W * 7 + overhead, 0]


def test_tile_compute_round_robin_follows_given_order():
    tile = np.zeros(7, dtype=np.int64)
    multi = np.zeros(7, dtype=bool)
    late = cm.tile_compute_cycles(tile, np.array([1, 1, 1, 1, 1, 1, 10]), multi, 1, T)
    early = cm.tile_compute_cycles(tile, np.array([10, 1, 1, 1, 1, 1, 1]), multi, 1, T)
    # 10 shares context 0 with the first/seventh vertex either way: max context sum 11.
    assert late.tolist() == early.tolist() == [W * 11 + cm.COMPUTE_SET_SUPERVISOR_CYCLES]
    mid = cm.tile_compute_cycles(tile, np.array([1, 10, 1, 1, 1, 1, 1]), multi, 1, T)
    assert mid.tolist() == [W * 10 + cm.COMPUTE_SET_SUPERVISOR_CYCLES]


def test_tile_compute_edge_cases():
    empty = np.array([], dtype=np.int64)
    assert cm.tile_compute_cycles(empty, empty, empty.astype(bool), 2, T).tolist() == [0, 0]
    with pytest.raises(ValueError, match=r"tile ids must lie in \[0, 2\)"):
        cm.tile_compute_cycles(np.array([2]), np.array([1]), np.array([True]), 2, T)
    with pytest.raises(ValueError, match="equal length"):
        cm.tile_compute_cycles(np.array([0, 1]), np.array([1]), np.array([True]), 2, T)


@pytest.mark.parametrize("by_tile", [False, True])  # vertices in any order, or already by tile (no sort)
def test_tile_compute_large_matches_direct_computation(by_tile: bool):
    rng = np.random.default_rng(0)
    n, tiles = 20_000, 50
    tile = rng.integers(0, tiles, n)
    if by_tile:
        tile.sort()
    cycles = rng.integers(0, 500, n)
    multi = rng.random(n) < 0.3
    out = cm.tile_compute_cycles(tile, cycles, multi, tiles, T)
    for t in (0, 17, 49):  # direct per-tile computation for a few tiles
        on = tile == t
        singles = cycles[on & ~multi]
        contexts = [singles[i::W].sum() for i in range(W)]
        assert out[t] == cycles[on & multi].sum() + W * max(contexts) + cm.COMPUTE_SET_SUPERVISOR_CYCLES


# -- exchange, links, syncs -------------------------------------------------------------------------
def test_exchange_cycles():
    out = cm.exchange_cycles(np.array([0, 10, 4, 0]), np.array([0, 3, 9, 5]), T)
    fixed = cm.EXCHANGE_FIXED_CYCLES
    assert out.tolist() == [0, ceil(10, 4) + fixed, ceil(9, 4) + fixed, ceil(5, 4) + fixed]
    # Fixed-point form: ceil(16*b / round(16*3.3)) = ceil(1600/53).
    slow = ipu_model(exchange_bytes_per_cycle=3.3)
    assert cm.exchange_cycles(np.array([100]), np.array([0]), slow).tolist() == [ceil(1600, 53) + fixed]


def test_links_and_syncs():
    t2 = get_target("GC200", num_ipus=2)
    per_cycle = 4 * 128 * 2**30 / 8 * 0.85 / 1.33e9
    assert cm.global_exchange_cycles(np.array([0, 1000]), t2).tolist() == [
        0,
        math.ceil(1000 / per_cycle) + cm.GLOBAL_EXCHANGE_FIXED_CYCLES,
    ]
    assert cm.stream_copy_cycles(0, GC200) == 0
    # 1 us latency = 1330 cycles; 1e6 B at 6.25e9 B/s (per-IPU share of the M2000 gateway) = 160 us = 212,800
    # cycles (212,801 after the ceil of a float rate of 4.6992... B/cycle)
    assert cm.stream_copy_cycles(1_000_000, GC200) == 1330 + math.ceil(1_000_000 / (6.25e9 / 1.33e9))
    assert 1330 + 212_800 <= cm.stream_copy_cycles(1_000_000, GC200) <= 1330 + 212_801
    assert cm.sync_cycles("internal", GC200) == 126
    assert cm.sync_cycles("external", get_target("GC200", 16)) == 200
    with pytest.raises(ValueError, match="unknown sync kind"):
        cm.sync_cycles("local", GC200)


# -- FLOPs -----------------------------------------------------------------------------------------------
def test_flop_counting_rules():
    n = np.array([0, 10])
    assert cm.unary_flops("relu", n).tolist() == [0, 10]
    assert cm.unary_flops("exp", n, "half").tolist() == [0, 10]
    assert cm.unary_flops("logical_not", n, "bool").tolist() == [0, 0]
    assert cm.unary_flops("popcount", n, "int32").tolist() == [0, 0]
    assert cm.unary_flops("negate", n, "int32").tolist() == [0, 0]  # non-FP types count 0
    assert cm.unary_flops("cast", n, "half", to_dtype="int32").tolist() == [0, 10]
    assert cm.unary_flops("cast", n, "int32", to_dtype="uint8").tolist() == [0, 0]
    assert cm.binary_flops("add", n, "float").tolist() == [0, 10]
    assert cm.binary_flops("greater_than", n, "float").tolist() == [0, 10]
    assert cm.binary_flops("remainder", n, "float").tolist() == [0, 30]
    assert cm.binary_flops("variance_to_inv_std_dev", n, "float").tolist() == [0, 20]
    assert cm.binary_flops("add", n, "int32").tolist() == [0, 0]
    assert cm.scaled_add_flops(n, "half").tolist() == [0, 20]
    # (partials + isUpdate - 1) * outputs * opFlops: 40 -> 8 is 5 partials per output.
    assert cm.reduce_flops("add", 40, 8) == (5 - 1) * 8
    assert cm.reduce_flops("add", 40, 8, is_update=True) == 5 * 8
    assert cm.reduce_flops("square_add", 40, 8) == (5 - 1) * 8 * 2
    assert cm.reduce_flops("log_add", 40, 8) == (5 - 1) * 8 * 6
    assert cm.reduce_flops("max", 40, 8, "int32") == 0
    assert cm.reduce_flops("add", np.array([10, 40])).tolist() == [9, 39]
    assert cm.matmul_flops(2, 3, 4) == 2 * 2 * 3 * 4


def test_dtype_names():
    assert cm.dtype_name(np.dtype(np.float16)) == "float16"
    assert cm.dtype_name("HALF") == "float16"
    assert cm.dtype_name(np.float32) == "float32"
    assert cm.vector_width("half") == 4 and cm.vector_width("float") == 2
    with pytest.raises(ValueError, match="unknown element type"):
        cm.dtype_name("bfloat16")


def test_conv_reduce_cycles_hand_worked():
    # poplin getReduceCycleEstimate (PerformanceEstimation.hpp, sdk-release-3.0), multi-input:
    # W x (32 [+ 2 x depth + 13 float / 11 half for a part loop] + perWorker x (cpl x depth + tail)),
    # loops = outputs // accW + the set bits of outputs below accW; tail 7 (float out, float partials),
    # 8 (half, half). Single-input: W x (20 + ceil(outputs / accW / W) x (cpl' x (depth - 1) + tail')) + 33.
    # float partials, multi: accW 4, 2 floats per 64 bits -> cpl = 4/2 + 1 = 3.
    # 111 outputs: 27 + 2 (bits 0, 1) = 29 loops, 4 per worker, 29 % 6 != 0 and 111 % 4 != 0 -> a part
    # loop: 6 x (32 + 33 + 4 x (3 x 10 + 7)) = 6 x 213 = 1278.
    # 1 output: 1 loop, 0 per worker, a part loop: 6 x (32 + 33) = 390. 0 outputs: 0.
    # (111 and 1 are not whole accumulator vectors: PopLibs picks the multi-input vertex.)
    assert cm.conv_reduce_cycles(np.array([0, 1, 111]), 10, "float32", GC200).tolist() == [0, 390, 1278]
    # half partials, multi: accW 8, 4 halves per 64 bits -> cpl = 3; 111 -> 13 + 3 (bits 0-2) = 16 loops,
    # 2 per worker, a part loop 2 x 10 + 11 = 31: 6 x (32 + 31 + 2 x (3 x 10 + 8)) = 6 x 139 = 834
    assert cm.conv_reduce_cycles(np.array([111]), 10, "float16", GC200).tolist() == [834]
    # single-input (112 outputs are whole vectors; 112 x 9 x 4 B = 4,032 B -> one 16 KiB bank < 624 KiB / 16):
    # float: cpl' = 4/2 = 2, 28 loops -> 5 per worker: 6 x (20 + 5 x (2 x 9 + 8)) + 33 = 933
    assert cm.conv_reduce_single_input(np.array([112, 111, 4000]), 10, "float32", GC200).tolist() == [
        True,
        False,
        False,
    ]
    assert cm.conv_reduce_cycles(np.array([112]), 10, "float32", GC200).tolist() == [933]
    # half partials to a float result: cpl' = 8/4 = 2, 14 loops -> 3 per worker, tail' 10:
    # 6 x (20 + 3 x (2 x 9 + 10)) + 33 = 657
    assert cm.conv_reduce_cycles(np.array([112]), 10, "float16", GC200, "float32").tolist() == [657]
    # 4,000 outputs x 9 x 4 B = 144,000 B -> 9 banks = 147,456 B >= 39,936 B: multi-input even though whole
    # vectors: 1000 loops, 166 per worker + 1 (1000 % 6 != 0, no part loop): 6 x (32 + 167 x 37) = 37,266
    assert cm.conv_reduce_cycles(np.array([4000]), 10, "float32", GC200).tolist() == [37266]
    with pytest.raises(ValueError, match="depth"):
        cm.conv_reduce_cycles(np.array([4]), 0, "float32", GC200)


def test_exchange_code_bytes_per_region_multicast_once():
    # docs/fidelity.md exchange spec: 4 B x (6 + regions sent + regions received) per taking-part tile.
    # A tile multicasting 1 region to 15 others and receiving 15: 4 x (6 + 1 + 15) = 88 B; each
    # receiver of only that region: 4 x (6 + 0 + 1) = 28 B; idle tile 0 B.
    code = cm.exchange_code_bytes(np.array([1, 0, 0]), np.array([15, 1, 0]), GC200)
    assert code.tolist() == [88, 28, 0]


def test_amp_nx1_cycles_hand_worked():
    """A 3x3 convolution's ConvPartialnx1 on a GC200 tile, half in, float partials (AMP 8 units, 16 in
    and 8 out channels per group, 4 cycles a position, weight loads 8 x 32 B / 16 = 16 cycles): 20 output
    positions in rows of 8, 144 columns (one in-channel group x 9 kernel positions), 8 out channels.

    Workers take positions [i 20 / 6, (i + 1) 20 / 6): [0,3) [3,6) [6,10) [10,13) [13,16) [16,20), a
    worklist entry per output row met: 3 | 3 | 2 + 2 | 3 | 3 | 4 positions. An entry costs 3 + e(n) - 9
    with e(2) = 33 + 1 (half/float 8 units), e(n >= 3) = 34 + 4 (n - 3): 28 for n = 2 or 3, 32 for 4.
    Worker = 17 + its entries: 45, 45, 73, 45, 45, 49. Kernel loop = 9 positions x max(6 x 73 = 438,
    6 x 45 + 9 = 279) = 3,942; inner = 3 (14 + 3 (12 + 16 + 15 + 3)) + 3,942 = 4,398.
    Vertex = 109 + 6 x 9 + 6 x 9 + (17 + 1) + 1 + 16 + (14 + (14 + 4,398)) = 4,678; zeroing the partials
    = 6 x (ceil(ceil(20 x 8 / 6) / 2) + 14 - 9) = 6 x (14 + 5) = 114; total 4,792."""
    t = get_target("GC200")
    got = cm.amp_nx1_cycles(np.array([20]), 8, (3, 3), np.array([144]), np.array([8]), "float16", "float32", t)
    assert got.tolist() == [4792]
    # two in-channel groups run the kernel loop twice: + (14 + (14 + 4,398)) = 4,426
    two = cm.amp_nx1_cycles(np.array([20]), 8, (3, 3), np.array([288]), np.array([8]), "float16", "float32", t)
    assert two.tolist() == [4792 + 4426]


def test_amp_nx1_pads_three_input_channels_as_poplibs_does():
    """ResNet-50's stem on a C600 tile (7x7 kernel, 3 input channels: im2col columns (i, j, c), channel
    group 3), half in, half partials: AMP 16 units, 16 weights a conv unit, 16 out channels a group, 4
    cycles a position, weight loads 16 x 32 B / 16 = 32 cycles. 20 output positions in rows of 8, 147
    columns, 16 out channels. PopLibs' AMP candidates take 16, 8 or 4 input channels a group (divisors of
    the 16 weights that are multiples of the 4 input load elements) with 1, 2 or 4 kernel rows a pass.

    Workers as in the test above (entries 28, 28 for n = 2 or 3 with e(2) = 33 + 1 for half/half 16
    units; 32 for n = 4), starting at 17 + 1 (half partials): 46, 46, 74, 46, 46, 50; a pass is
    max(6 x 74, 6 x 46 + 9) = 444. Every candidate has one in-channel group (3 channels padded) and 7
    kernel columns; the vertex's fixed part is 109 + 6 x 9 + 6 x 10 + 17 + 1 + 1 + 16 = 258 plus
    14 + 14 + inner, and zeroing 6 x (ceil(ceil(20 x 16 / 6) / 2) + 14 - 9) = 192.

    * 4 channels, 4 rows a pass: 2 row passes (7 rows padded to 8), loads ld64 2 x 32 = 64 plus 60:
      inner = 2 (14 + 7 (12 + 64 + 60 + 3)) + 2 x 7 x 444 = 1,974 + 6,216 = 8,190 -> 8,668;
    * 8 channels, 2 rows a pass: 4 row passes, loads 32 + 46: inner = 4 (14 + 7 (12 + 81)) + 28 x 444
      = 2,660 + 12,432 -> 15,570;
    * 16 channels, a row a pass: 7 row passes, loads 32 + 15: inner = 7 (14 + 7 x 62) + 49 x 444
      = 3,136 + 21,756 -> 25,370.

    The fastest is 4 channels: its AMP performs 20 x 4 x 8 x 7 x 16 = 71,680 MACs for the block's
    20 x 147 x 16 = 47,040 (65.6 %). Packing the 147 columns into 10 groups of 16 as if the kernel
    positions were channels (the earlier model: 2 x 7 passes of 32 + 15 load cycles) gave 7,590."""
    t = get_target("C600")

    def cyc(**kw: object) -> int:
        got = cm.amp_nx1_cycles(np.array([20]), 8, (7, 7), np.array([147]), np.array([16]), "float16", "float16",
                                t, **kw)  # type: ignore[arg-type]  # fmt: skip
        return int(got[0])

    assert cm.amp_in_chans_per_group_candidates("float16", "float16", t) == [16, 8, 4]
    assert [cyc(channel_group=3, in_chans_per_group=c) for c in (4, 8, 16)] == [8668, 15570, 25370]
    assert cyc(channel_group=3) == 8668
    assert cm.amp_nx1_in_chans_per_group(20, 8, (7, 7), 147, 16, "float16", "float16", t, 3) == 4
    assert cm.amp_nx1_macs(20, (7, 7), 147, 16, "float16", "float16", t, 3, 4).tolist() == 71680
    assert cyc() == 7590
    # a channel group of 16 fills the conv units: unchanged by the grouping
    assert cyc(channel_group=16) == cyc()


def test_a_cost_operation_is_checked_when_written_and_costs_as_its_kind() -> None:
    # a misspelt operation fails where it is written, never costing as another kind
    with pytest.raises(ValueError, match="unknown unary op 'exponant'"):
        cm.unary("exponant")
    with pytest.raises(ValueError, match="unknown binary op 'tanh'"):
        cm.binary("tanh")
    n = np.array([1, 100, 1000])
    assert cm.unary("exp").cycles(n, "half", T).tolist() == cm.unary_cycles("exponent", n, "half", T).tolist()
    assert cm.binary("mul").flops(n, "float").tolist() == cm.binary_flops("multiply", n, "float").tolist()
    assert cm.CAST.cycles(n, "float", T, to_dtype="half").tolist() == cm.cast_cycles(n, "float", "half", T).tolist()


def test_an_hmac_convolution_runs_its_rows_once_per_kernel_position():
    """A depthwise 3x3 block on a GC200 tile, half (HMAC input channels in twos): 12 output positions,
    9 im2col columns (channel group 1: one channel at each kernel position), 1 output channel. PopLibs'
    ConvPartialHorizontalMac runs each worker's rows once per kernel position, a dot product over that
    position's channels (1 padded to 2): mac_matmul_cycles over 12 x 9 = 108 positions of 2 channels:
    dot = ceil(2 x 2 / 8) + 6 = 7, worker = 13 + ceil(108 / 6) (7 + 7) = 265, outer 65 - 10 + 23 + 15
    + 10 = 103: 103 + 6 x 265 = 1,693. One dot product over all 9 columns (the 1x1 vertex's form:
    dot = ceil(18 / 8) + 6 = 9, worker 13 + 2 (7 + 9) = 45) would be 373."""
    t = get_target("GC200")
    got = cm.mac_conv_cycles(np.array([12]), (3, 3), np.array([9]), np.array([1]), "float16", "float16", t, 1)
    assert got.tolist() == [1693]
    assert cm.mac_matmul_cycles(np.array([12]), 9, 1, "float16", "float16", t).tolist() == [373]
