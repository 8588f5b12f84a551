"""FP8 matmul and convolution on the C600 against references written here with ml_dtypes.

The references quantise the inputs with ml_dtypes (Graphcore's "fnuz" e4m3 / e5m2), multiply in float32
numpy and round to float16, the result type. The tolerance is the one half-precision partials imply:
the quarter AMP sums a pass of 32 input channels per conv unit (ref §3.7: "32 quarter inputs x 16
units") and writes its float16 partial once per pass, each write rounding by at most half a float16
step (2^-11) of the running sum; with the final rounding, |error| <= (passes + 1) x 2^-11 x
sum_k |a_k b_k| elementwise (a convolution makes a pass per kernel position and in-channel group).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from profiler import get_target, ops
from tests.ops.helpers import rng, run

C600 = get_target("C600")
FORMATS = [ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2fnuz]


def quantise(x: np.ndarray, fmt: type) -> np.ndarray:
    """x rounded to the FP8 format, back in float32 (ml_dtypes: round to nearest even)."""
    return x.astype(fmt).astype(np.float32)


QUARTER_INPUTS_PER_PASS = 32


def half_accumulation_bound(passes: int, magnitude: np.ndarray) -> np.ndarray:
    return (passes + 1) * 2.0**-11 * magnitude + float(np.finfo(np.float16).smallest_subnormal)


@pytest.mark.parametrize("fmt", FORMATS)
def test_fp8_matmul_matches_ml_dtypes_reference(fmt):
    r = rng(80)
    m, k, n = 24, 96, 40
    a = r.standard_normal((m, k)).astype(np.float16)  # an activation: cast to FP8 on the device
    w = r.standard_normal((k, n)).astype(fmt)  # a weight: FP8 already (cast on the host)
    name = np.dtype(fmt).name

    def build(g, t, p):
        a8 = ops.cast(g, t["a"], name, p)
        assert a8.dtype == np.dtype(fmt) and a8.dtype.itemsize == 1
        return {"y": ops.matmul(g, a8, t["w"], p, partials_dtype="float16")}

    out, _, _ = run({"a": a, "w": w}, build, target=C600)
    y = out["y"]
    assert y.dtype == np.float16  # the quarter AMP returns half
    qa, qw = quantise(a.astype(np.float32), fmt), w.astype(np.float32)
    want = (qa @ qw).astype(np.float16).astype(np.float32)
    bound = half_accumulation_bound(-(-k // QUARTER_INPUTS_PER_PASS), np.abs(qa) @ np.abs(qw))
    assert np.all(np.abs(y.astype(np.float32) - want) <= bound)
    # the quantisation is real: the unquantised product is further off than the bound somewhere
    exact = a.astype(np.float32) @ qw
    assert np.any(np.abs(exact - want) > bound)


def ref_conv_nchw(x: np.ndarray, w: np.ndarray, pad: int, stride: int) -> np.ndarray:
    """Direct convolution in float32: a sum over kernel positions of strided input windows."""
    bsz, _, h, wd = x.shape
    co, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    ho, wo = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    y = np.zeros((bsz, co, ho, wo), np.float32)
    for i in range(kh):
        for j in range(kw):
            win = xp[:, :, i : i + stride * (ho - 1) + 1 : stride, j : j + stride * (wo - 1) + 1 : stride]
            y += np.einsum("bchw,oc->bohw", win, w[:, :, i, j])
    return y


@pytest.mark.parametrize("fmt", FORMATS)
def test_fp8_conv_matches_ml_dtypes_reference(fmt):
    r = rng(81)
    x = r.standard_normal((2, 16, 10, 10)).astype(np.float16)
    w = (r.standard_normal((32, 16, 3, 3)) / 4).astype(fmt)

    def build(g, t, p):
        x8 = ops.cast(g, t["x"], np.dtype(fmt).name, p)
        return {"y": ops.conv2d(g, x8, t["w"], p, stride=1, padding=1, partials_dtype="float16")}

    out, _, _ = run({"x": x, "w": w}, build, target=C600)
    y = out["y"]
    assert y.dtype == np.float16 and y.shape == (2, 32, 10, 10)
    qx, qw = quantise(x.astype(np.float32), fmt), w.astype(np.float32)
    want = ref_conv_nchw(qx, qw, 1, 1).astype(np.float16).astype(np.float32)
    bound = half_accumulation_bound(9 * -(-16 // QUARTER_INPUTS_PER_PASS), ref_conv_nchw(np.abs(qx), np.abs(qw), 1, 1))
    assert np.all(np.abs(y.astype(np.float32) - want) <= bound)
    exact = ref_conv_nchw(x.astype(np.float32), qw, 1, 1)
    assert np.any(np.abs(exact - want) > bound)


def test_fp8_cast_is_graphcores_fnuz_format():
    """The device cast rounds as ml_dtypes' e4m3fnuz: 3 mantissa bits, largest 240, overflow is NaN."""
    x = np.array([1.0, 1.0625, 1.1875, 240.0, 244.0, 250.0, -0.0, 2.0**-10], np.float16)

    def build(g, t, p):
        return {"q": ops.cast(g, t["x"], "float8", p)}

    out, _, _ = run({"x": x}, build, target=C600)
    q = out["q"].astype(np.float32)
    # 1.0625 is a tie between 1 and 1.125 (even: 1); 1.1875 rounds up to 1.25; 244 to 240; 250 is past the
    # midpoint (248) between 240 and 256, which the format does not hold: NaN
    np.testing.assert_array_equal(q[:5], [1.0, 1.0, 1.25, 240.0, 240.0])
    assert np.isnan(q[5]) and q[6] == 0.0 and q[7] == 2.0**-10


def test_pow2_scaled_fp8_matmul_keeps_large_activations():
    """Activations past e4m3's 240 become NaN unscaled; cast as x * 2^-4 (PopXL's pow2scale cast) and
    the product scaled back by 2^4 (matmul_pow2scaled), they match the reference quantised the same way."""
    r = rng(82)
    m, k, n = 8, 64, 16
    a = (r.standard_normal((m, k)) * 1000).astype(np.float16)
    w = (r.standard_normal((k, n)) / 8).astype(ml_dtypes.float8_e4m3fnuz)

    def build(g, t, p):
        plain = ops.matmul(g, ops.cast(g, t["a"], "float8", p), t["w"], p, partials_dtype="float16")
        a8 = ops.pow2scale_cast(g, t["a"], "float8", -4, p)
        scaled = ops.matmul(g, a8, t["w"], p, partials_dtype="float16", log2_scale=4)
        return {"plain": plain, "scaled": scaled}

    out, _, _ = run({"a": a, "w": w}, build, target=C600)
    assert np.isnan(out["plain"]).any()
    qa = quantise(a.astype(np.float32) * 2.0**-4, ml_dtypes.float8_e4m3fnuz)
    qw = w.astype(np.float32)
    want = ((qa @ qw) * 2.0**4).astype(np.float16).astype(np.float32)
    bound = half_accumulation_bound(-(-k // QUARTER_INPUTS_PER_PASS), (np.abs(qa) @ np.abs(qw)) * 2.0**4)
    assert np.all(np.abs(out["scaled"].astype(np.float32) - want) <= bound)
