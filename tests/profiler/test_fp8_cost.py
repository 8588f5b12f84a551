"""The C600's FP8 AMP rate and a quarter-precision AMP vertex costed by hand."""

from __future__ import annotations

import pytest

from profiler.chip import cost_model as cm
from profiler.chip.targets import get_target

C600 = get_target("C600")


def test_c600_fp8_rate_is_twice_fp16_from_the_spec_sheet():
    """Seed 000 (C600 README): 560 TFLOPS FP8, 280 FP16 over 1,472 tiles: 256 and 128 FLOP a tile a cycle."""
    tiles_x_clock = C600.tiles_per_ipu * C600.clock_hz
    assert C600.fp8_flops_per_cycle == pytest.approx(560e12 / tiles_x_clock, rel=2e-3)
    assert C600.fp16_flops_per_cycle == pytest.approx(280e12 / tiles_x_clock, rel=2e-3)
    assert cm.peak_flops_per_cycle("float8_e4m3fnuz", "float16", C600) == 2 * cm.peak_flops_per_cycle(
        "float16", "float16", C600
    )
    # quarter inputs with float partials: PopLibs runs the half/float AMP (ConvVertexType.cpp)
    assert cm.peak_flops_per_cycle("float8", "float32", C600) == C600.fp16_fp32acc_flops_per_cycle
    with pytest.raises(ValueError, match="does not support float8"):
        cm.peak_flops_per_cycle("float8", "float16", get_target("GC200"))


def test_fp8_amp_config_is_32_quarter_inputs_by_16_units_in_4_cycles():
    cfg = cm.amp_config("float8_e5m2fnuz", "float16", C600)
    assert (cfg.in_chans_per_group, cfg.num_conv_units, cfg.core_cycles_per_position) == (32, 16, 4)
    # the core loop runs at the peak: 32 x 16 MACs = 1,024 FLOPs in 4 cycles
    assert 2 * cfg.in_chans_per_group * cfg.num_conv_units / cfg.core_cycles_per_position == 256
    assert cfg.weight_load_cycles == 16 * 32 * 1 // 16  # 16 units x 32 one-byte weights at 16 B a cycle


def test_fp8_amp_vertex_by_hand():
    """[48 rows, 64 in] x [64, 16 out], float8 in, half partials: 8 rows per worker, 2 in-chan groups of
    32, 1 out group of 16. Worker c(8) = 37 + 4 x (8 - 3) - 7 = 50 zeroing, 51 not; inner = max(6 c,
    6 c + 14) (even rows: the second) = 314 / 320. Weight loads 32 cycles.
      supervisor 50 + 6 x 9 + 13 = 117
      later in-groups 1 x (15 + 1 x (19 + 6 + 32 + 320)) = 392
      first in-group 11 + 1 x (18 + 7 + 32 + 314) = 382
      calibration 25                                  -> 916 cycles.
    The same in half: 4 in-chan groups of 16, so 117 + 3 x 392 + 382 + 25 = 1,700."""
    assert int(cm.amp_matmul_cycles(48, 64, 16, "float8", "float16", C600)) == 916
    assert int(cm.amp_matmul_cycles(48, 64, 16, "float16", "float16", C600)) == 1700


def test_half_to_fp8_cast_runs_on_the_aux_pipeline_like_half_to_float():
    """castWorkerCycles (PerformanceEstimation.cpp): half -> quarter loads 2 x 4 halves and stores 8
    quarters a vector, opVectorWidth = min(4 x 2, 8) = 8 at max(8/4, 8/8) = 2 cycles: 19 + 2 x n/8 per
    worker. Cast1D over 6 workers of 800 elements each: 12 + 6 x (19 + 200 + 18)."""
    assert int(cm.cast_cycles(4800, "float16", "float8", C600)) == 12 + 6 * (19 + 2 * 800 // 8 + 18)
    # quarter -> half: opVectorWidth = min(8 x 2, 4) = 4 at 1 cycle
    assert int(cm.cast_cycles(4800, "float8", "float16", C600)) == 12 + 6 * (19 + 800 // 4 + 18)
