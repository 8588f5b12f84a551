"""The profiler façade ``profile_model``: what ``tilescope run`` calls, usable without the CLI."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from profiler.frontends.onnx import examples, random_inputs
from profiler.frontends.onnx.profile import ProfileError, ProfileOptions, profile_model


@pytest.fixture
def mlp_path(tmp_path: Path) -> Path:
    path = tmp_path / "mlp.onnx"
    onnx.save(examples.mlp((16, 8, 4)), path)
    return path


def test_profile_model_runs_and_its_summary_is_the_engine_s(mlp_path: Path) -> None:
    lines: list[str] = []
    stages: list[str] = []

    class Stage:
        def __init__(self, what: str) -> None:
            stages.append(what)

        def __enter__(self):  # noqa: ANN204
            return lambda done, total: None

        def __exit__(self, *exc: object) -> None:
            pass

    saved: list[dict] = []
    result = profile_model(mlp_path, ProfileOptions(target="GC200", batch=2, runs=2),
                           lambda s: random_inputs(s.model, 0), progress=lines.append, stage=Stage,
                           before_report=lambda out: saved.append(dict(out)))  # fmt: skip
    doc = result.summary()
    engine = result.session.engine
    # two runs on the same inputs: the same cycles, the engine's own count each time
    assert len(result.cycles) == 2 and result.cycles[0] == result.cycles[1] == engine.last_run_cycles
    assert doc["execution"]["total_cycles"] == sum(result.cycles)
    # samples/s by its definition: batch x replicas x micro-batches at the target's clock
    assert doc["execution"]["samples_per_second"] == pytest.approx(2 * result.target.clock_hz / result.cycles[0])
    assert doc["memory"]["max_tile_bytes"] == int(engine.memory.tile_memory["total_bytes_including_gaps"].max())
    assert stages == ["nodes", "compute sets planned"] and lines[0].startswith(f"importing {mlp_path}")
    assert saved and np.array_equal(saved[0]["output"], result.outputs["output"])
    assert doc["report"] is None  # no engine option asked for one


def test_profile_model_says_what_is_wrong_in_one_line(mlp_path: Path) -> None:
    with pytest.raises(ProfileError, match="--replicas must be >= 1, got 0"):
        profile_model(mlp_path, ProfileOptions(replicas=0), lambda s: {})
    with pytest.raises(ProfileError, match="--outline builds on one IPU"):
        profile_model(mlp_path, ProfileOptions(ipus=2, outline=True), lambda s: {})
