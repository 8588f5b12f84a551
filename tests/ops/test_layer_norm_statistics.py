"""popnn's layer norm structure (lib/poplin/Norms.cpp): the mean and the mean square in one
popops::reduceMany (each stage one compute set for both), the inverse deviation in one compute set of
poplin::InverseStdDeviation, then whiten (subtract, multiply in place) and normalise (gamma, beta in
place). Values against numpy written here."""

from __future__ import annotations

import numpy as np
import pytest

from profiler import ops
from tests.ops.helpers import rng, run, tol


def _executed(g) -> list[str]:  # type: ignore[no-untyped-def]
    return [cs.name for cs in g.compute_sets]


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_reduce_many_takes_both_moments_in_the_stages_of_one_reduction(dtype):
    # x[6, 40] spread linearly over 4 tiles: rows straddle tiles, so each reduction has two stages
    x = (rng(7).standard_normal((6, 40)) + 0.5).astype(dtype)

    def one(g, t, p):
        return {"m": ops.reduce_mean(g, t["x"], [1], p)}

    def both(g, t, p):
        m, s = ops.reduce_many(g, t["x"], [1], p, [("add", 1 / 40, None), ("square_add", 1 / 40, "float32")])
        return {"m": m, "s": s}

    _, g1, _ = run({"x": x}, one, tiles=4)
    out, g2, _ = run({"x": x}, both, tiles=4)
    assert _executed(g1) == ["reduce/stage1", "reduce/stage2"]
    assert _executed(g2) == _executed(g1)  # the square's vertices join the mean's compute sets
    first = {b.codelet.name for b in g2.compute_sets[0].batches}
    assert any("SquareAdd" in n for n in first) and any(n.startswith("popops::ReduceAdd") or "ReduceAdd" in n
                                                        for n in first)  # fmt: skip
    x64 = x.astype(np.float64)
    assert out["s"].dtype == np.float32
    np.testing.assert_allclose(out["m"], x64.mean(1), rtol=tol(dtype), atol=tol(dtype))
    np.testing.assert_allclose(out["s"], (x64 * x64).mean(1), rtol=1e-5, atol=1e-5)  # float sums of x's values


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_layer_norm_is_one_statistics_reduction_the_inverse_deviation_then_four_maps(dtype):
    r = rng(8)
    x = (r.standard_normal((6, 40)) * 2 + 1).astype(dtype)
    gamma, beta = r.standard_normal(40).astype(dtype), r.standard_normal(40).astype(dtype)

    def build(g, t, p):
        y, _, inv = ops.layer_norm(g, t["x"], t["g"], t["b"], p, eps=1e-5)
        return {"y": y, "inv": inv}

    out, g, _ = run({"x": x, "g": gamma, "b": beta}, build, tiles=4)
    assert _executed(g) == ["reduce/stage1", "reduce/stage2", "iStdDev", "sub", "mul", "mul", "add"]
    assert {b.codelet.name for cs in g.compute_sets if cs.name == "iStdDev" for b in cs.batches} == {
        "poplin::InverseStdDeviation"
    }
    # the statistics lie where their rows do (createBroadcastOperand): x's 240 elements 60 a tile, so
    # rows 0 (0-39) on tile 0; 1 (40-79: 20 on tile 0, 20 on 1, the first) 0; 2 (80-119) 1; 3 (120-159:
    # 120-179 on tile 2) 2; 4 (160-199: 20 on 2, 20 on 3) 2; 5 (200-239) 3. No sub or mul reads them
    # from another tile.
    (mean,) = [v for v in g.variables if v.name == "reduce add"]
    assert mean.mapping.dense().tolist() == [0, 0, 1, 2, 2, 3]
    x64 = x.astype(np.float64)
    mean, var = x64.mean(1, keepdims=True), x64.var(1, keepdims=True)
    ref = (x64 - mean) / np.sqrt(var + 1e-5) * gamma.astype(np.float64) + beta.astype(np.float64)
    np.testing.assert_allclose(out["inv"], 1 / np.sqrt(var + 1e-5), rtol=tol(dtype), atol=tol(dtype))
    np.testing.assert_allclose(out["y"], ref, rtol=tol(dtype) * 2, atol=tol(dtype) * 4)


def test_the_inverse_deviation_costs_poplibs_estimate():
    # poplinCycleEstimators.cpp InverseStdDeviation: 6 + 4 + (3 + 2) * ceil(n / 2) for one region of n
    from profiler.ops.poplibs_codelets import INVERSE_STD_DEVIATION as c

    f32 = np.dtype(np.float32)
    dts = {"in1": f32, "in2": f32, "out": f32}
    assert c.estimate({"in1": (7,), "in2": (7,), "out": (7,)}, dts, {}, None)[0] == 6 + 4 + 5 * 4
    assert c.estimate({"in1": (8,), "in2": (8,), "out": (8,)}, dts, {}, None)[0] == 6 + 4 + 5 * 4
