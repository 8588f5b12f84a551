"""Depthwise and grouped convolutions on PopLibs' SLIC vertex (ConvPartial1x4SLIC): its cycle formula on a
hand-worked case, where the planner chooses it, and that the convolutions it computes stay exact."""

import json

import numpy as np
import pytest

from profiler import ops
from profiler.chip import cost_model
from profiler.chip.targets import get_target
from profiler.ops.matmul import plan_matmul
from tests.ops.helpers import rng, run
from tests.ops.test_conv import ref_conv


def test_slic_cycles_match_a_hand_worked_case() -> None:
    """8 conv groups of a 3x3 kernel, 8 output positions in rows of 4, on the (4 groups, 1 channel, 4 chains)
    variant with half partials; 6 workers (PerformanceEstimation.hpp getConvPartialSlicSupervisor*):

    workers take positions [0,1) [1,2) [2,4) [4,5) [5,6) [6,8): one row piece each, n = 1 or 2.
    preamble 2+3+1+2+4+2+2+1 = 17; zeroing pass piece 10+1+(10+(n>1?n:0)+3): 24 | 26 -> 6*(17+26) = 258;
    later passes piece 10+(7+(n==1 ? 6 : n+10)): 23 | 29 -> 6*(17+29) = 276;
    weight load 9+6+10*6+6+16 = 97; sub-kernel body 97+3+2+1+6+1+6+1 = 117, ceil(3/4)*3 = 3 sub-kernels:
    117*3 + (6*2+1) = 364; T = 8/4 = 2 group groups: 15*2 + (6+1) = 37;
    total 28 + 37 + 364 + 2*258 + 2*(3-1)*276 = 2049."""
    t = get_target("C600")
    assert t.num_worker_contexts == 6
    cfg = cost_model.SlicConfig(conv_groups_per_group=4, chans_per_group=1, chains=4)
    assert cost_model.slic_inner_cycles(np.array([8]), 4, cfg, "float16", t, zero=True)[0] == 258
    assert cost_model.slic_inner_cycles(np.array([8]), 4, cfg, "float16", t, zero=False)[0] == 276
    assert cost_model.slic_weight_load_cycles(cfg, t) == 97
    assert cost_model.slic_cycles(np.array([8]), 4, (3, 3), 8, cfg, "float16", t)[0] == 2049


def test_slic_variants_follow_poplibs_candidates() -> None:
    """Half only; 8 and 16 conv groups a group only with half partials on 16 conv units; float partials run
    2 chains (ConvVertexType.cpp getConvVertexSLICCandidates)."""
    t = get_target("C600")
    half = {
        (c.conv_groups_per_group, c.chans_per_group, c.chains)
        for c in cost_model.slic_candidates("float16", "float16", t)
    }
    assert half == {(g, c, ch) for ch in (4, 2) for g, c in [(1, 4), (2, 2), (4, 1), (8, 1), (16, 1)]}
    fl = {(c.conv_groups_per_group, c.chains) for c in cost_model.slic_candidates("float16", "float32", t)}
    assert fl == {(1, 2), (2, 2), (4, 2)}
    assert cost_model.slic_candidates("float32", "float32", t) == []


def _depthwise_plan(slic_stride: int, dtype: str = "float16", partials: str = "float16", channels: int = 256):
    t = get_target("C600")
    m = 32 * 56 * 56
    return plan_matmul(t, channels, m, 9, 1, np.dtype(dtype), partials, 0.6, conv=(3, 3, 56, 1),
                       slic_stride=slic_stride)  # fmt: skip


def test_the_planner_chooses_slic_for_a_depthwise_convolution() -> None:
    """A 3x3 depthwise conv (256 channels, 56x56, batch 32) plans SLIC when its geometry allows it, several
    conv groups a tile, much faster than the one-group-a-vertex AMP it took before; not for float inputs
    (SLIC is half or quarter only), nor where the geometry rules SLIC out (slic_stride 0)."""
    slic, amp = _depthwise_plan(1), _depthwise_plan(0)
    assert slic.method == "SLIC" and slic.block[0] > 1 and slic.slic_stride == 1
    assert amp.method != "SLIC" and slic.cycles * 4 < amp.cycles
    assert _depthwise_plan(1, "float32", "float32").method != "SLIC"
    assert "slic_stride" not in amp.attributes() and slic.attributes()["slic_stride"] == 1


def test_an_ordinary_convolution_keeps_its_amp_plan() -> None:
    """64 -> 64 channels, 3x3, one group: more than 4 channels a group, so SLIC is not a candidate and the
    plan is the AMP plan it was."""
    t = get_target("C600")
    args = (t, 1, 2 * 14 * 14, 64 * 9, 64, np.dtype(np.float16), "float16", 0.6)
    conv = (3, 3, 14, 64)
    assert plan_matmul(*args, conv=conv, slic_stride=1) == plan_matmul(*args, conv=conv)
    assert plan_matmul(*args, conv=conv).method == "AMP"


def test_conv2d_passes_the_slic_geometry() -> None:
    assert ops.conv.slic_stride((1, 1), (1, 1)) == 1 and ops.conv.slic_stride((2, 2), (1, 1)) == 2
    assert ops.conv.slic_stride((1, 3), (1, 1)) == 0 and ops.conv.slic_stride((1, 1), (2, 2)) == 0


@pytest.mark.parametrize("groups,co", [(16, 16), (8, 16)])
def test_a_slic_convolution_is_exact_and_costed_as_one_vertex_a_tile(groups: int, co: int) -> None:
    """Depthwise (16 groups of 1) and grouped (8 groups of 2 in, 2 out) half convolutions run on
    ConvPartial1x4SLIC vertices; their results match a direct convolution, and the vertices of a tile's
    block add up to the one SLIC vertex the planner costs for its conv groups."""
    r = rng(7)
    x = r.standard_normal((2, 16, 6, 6)).astype(np.float16)
    wt = (r.standard_normal((co, 16 // groups, 3, 3)) * 0.3).astype(np.float16)

    def build(g, ts, p):
        return {"y": ops.conv2d(g, ts["x"], ts["w"], p, padding=1, groups=groups, partials_dtype="float16")}

    out, g, e = run({"x": x, "w": wt}, build, tiles=4)
    assert e.compiled is not None
    ref = ref_conv(x.astype(np.float64), wt.astype(np.float64), 1, 1, 1, groups)
    np.testing.assert_allclose(out["y"], ref, rtol=2e-2, atol=3e-2)
    plan = json.loads(next(c for c in g.debug_contexts if c.op_type == "MatMul").attributes)
    assert plan["method"] == "SLIC"
    conv_plan = json.loads(next(c for c in g.debug_contexts if c.op_type == "Conv").attributes)["plan"]
    assert conv_plan["chans_per_group"] >= 16 // groups and conv_plan["conv_unit_chains"] in (2, 4)
    gb, mb, kb, nb = plan["block"]
    batches = [b for p in e.compiled.cs_plans.values() for b in p.compute_set.batches
               if b.codelet.name == "poplin::ConvPartial1x4SLIC"]  # fmt: skip
    assert batches
    t = g.target
    whole = int(ops.poplibs_codelets.slic_tile_cycles(gb, mb, kb, nb, np.dtype(np.float16), np.dtype(np.float16), t,
                                                      tuple(plan["conv"]), 1))  # fmt: skip
    shares = []
    for b in batches:
        (m, k), n = b.fields["a"].shape[1:], b.fields["b"].shape[2]
        cyc, _ = b.codelet.estimate({"a": (m, k), "b": (k, n), "out": (m, n)},
                                    {"a": np.dtype(np.float16), "out": np.dtype(np.float16)}, b.params, t)  # fmt: skip
        if (m, b.params["slic"][1]) == (mb, gb):
            shares.append((cyc, b.params["slic"][2], b.fields["a"].shape[0]))
    first = [c for c, f, _ in shares if f]
    rest = [c for c, f, _ in shares if not f]
    assert first and sum(first[:1]) + (gb - 1) * (rest[0] if rest else 0) == whole
