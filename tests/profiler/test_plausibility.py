"""Plausibility of the simulated costs: no tile computes faster than its codelets' peak rate, and a
transformer's hotspots are its matmuls, as on the IPU.

The peak rates are the target's AMP figures (profiler/chip/targets.py, ref §1 "AMP peak" rows: Mk2
fp16 in and fp16 accumulate 128 FLOP a tile a cycle, tessellate-ipu's notebook "peak = clock x tiles x
128"; fp32 32, from GC200's 62.5 TFLOP/s); nothing on a tile is faster than its AMP.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest

from bench import op_costs
from profiler import Engine, Graph, Sequence, ops
from profiler.chip import cost_model
from profiler.chip.targets import get_target
from profiler.compiler.compile import Step
from report_format.vocabulary import StepType


def _compute_steps(e: Engine) -> list[Step]:
    return [s for s in e.compiled.steps if s.type == StepType.ON_TILE_EXECUTE]


def _over_peak(e: Engine, peak: float) -> list[str]:
    """Compute steps where some tile's FLOPs exceed ``peak`` x its cycles, named with the worst ratio."""
    bad = []
    for s in _compute_steps(e):
        if s.cost.flops is None:
            continue
        flops, cycles = s.cost.flops.astype(np.float64), s.cost.tile_cycles.astype(np.float64)
        over = flops > peak * cycles
        if over.any():
            rate = float((flops[over] / np.maximum(cycles[over], 1)).max())
            bad.append(f"{s.name}: {rate:.1f} FLOP/cycle on a tile, peak {peak}")
    return bad


@pytest.mark.parametrize(("dtype", "partials"), [("float16", "float16"), ("float32", "float32")])
def test_one_tile_matmul_is_below_the_amp_peak_and_near_it(dtype: str, partials: str) -> None:
    # [256,256]x[256,256] on one GC200-like tile: 33.5 MFLOP; the AMP's peak (128 FLOP/cycle fp16 with
    # half partials, 32 fp32) bounds the rate, and a product this size reaches at least half of it.
    g = Graph(op_costs.ONE_TILE)
    prog = Sequence()
    shapes = ((256, 256), (256, 256))
    a = ops.create_matmul_lhs(g, dtype, *shapes, "a", partials_dtype=partials)
    b = ops.create_matmul_rhs(g, dtype, *shapes, "b", partials_dtype=partials)
    ops.matmul(g, a, b, prog, partials_dtype=partials)
    e = Engine(g, [prog], options={"debug.instrument": "false"})
    e.compile()
    peak = cost_model.peak_flops_per_cycle(dtype, partials, op_costs.ONE_TILE)
    assert _over_peak(e, peak) == []
    flops = sum(float(s.cost.flops.sum()) for s in _compute_steps(e) if s.cost.flops is not None)
    cycles = sum(float(s.cost.tile_cycles.max()) for s in _compute_steps(e))
    assert flops >= 2 * 256**3
    assert 0.5 * peak <= flops / cycles <= peak


def test_elementwise_rate_is_far_below_the_amp_peak() -> None:
    # an elementwise op counts a FLOP an element and costs PopLibs at least ~0.75 cycles an element
    # (BinaryOp1D ADD half: (1 + 2) cycles per 4-element vector): ~1.3 FLOP a cycle, not 128.
    g = Graph(op_costs.ONE_TILE)
    prog = Sequence()
    x, y = ops.add_mapped(g, "float16", (6144,), "x"), ops.add_mapped(g, "float16", (6144,), "y")
    ops.add(g, x, y, prog)
    e = Engine(g, [prog], options={"debug.instrument": "false"})
    e.compile()
    (step,) = _compute_steps(e)
    assert float(step.cost.flops.sum()) / float(step.cost.tile_cycles.max()) < 1.4


@cache
def _bert_base_layer() -> Engine:
    """One BERT-base encoder layer at the real-size sample's shapes (tilescope demo --real-size's
    bert_base_b1: sequence 384, batch 1, float16, half partials, C600), compiled only."""
    from profiler.frontends.onnx import Session, examples, import_model, load_model

    model = import_model(load_model(examples.bert_layer(seq=384, layers=1)), get_target("C600"), 1, "float16",
                         partials="float16")  # fmt: skip
    session = Session(model, {"debug.instrument": "false"})
    session.engine.compile()
    return session.engine


@pytest.mark.slow  # ~5 s: a 1,472-tile graph
def test_bert_base_layer_no_tile_above_peak() -> None:
    e = _bert_base_layer()
    assert _over_peak(e, cost_model.peak_flops_per_cycle("float16", "float16", get_target("C600"))) == []


@pytest.mark.slow  # shares the compiled layer above
def test_bert_base_hotspots_are_its_matmuls() -> None:
    """The layer's costliest compute steps are matmuls (the feed-forward products, 384 x 768 x 3072),
    not the GELU's erf (issue 35: it was 34,346 cycles, costed at float's 41 cycles an element)."""
    steps = sorted(_compute_steps(_bert_base_layer()), key=lambda s: -int(s.cost.tile_cycles.max()))
    names = [s.name for s in steps]
    assert names[:2] == ["matmul", "matmul"], names[:5]
    cycles = {s.name: int(s.cost.tile_cycles.max()) for s in reversed(steps)}  # each name's largest step
    assert cycles["erf"] < cycles["matmul"] / 1.2
    # over the whole layer the products (and their partial-sum reductions) outweigh everything else
    mm = sum(int(s.cost.tile_cycles.max()) for s in steps if s.name.startswith("matmul"))
    assert mm > sum(int(s.cost.tile_cycles.max()) for s in steps) / 2
