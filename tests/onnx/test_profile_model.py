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


def test_the_origin_hashed_beside_the_import_is_the_file_s(mlp_path: Path) -> None:
    """The model is hashed on a thread while it is imported; the report's origin is still the
    file's own sha256 and size (hashlib over the bytes, worked here apart)."""
    import hashlib

    result = profile_model(mlp_path, ProfileOptions(target="GC200", batch=2), lambda s: random_inputs(s.model, 0))
    origin = result.session.engine.origin
    assert origin is not None and origin.sha256 == hashlib.sha256(mlp_path.read_bytes()).hexdigest()
    assert origin.bytes == mlp_path.stat().st_size and origin.options["batch"] == 2


def test_a_model_changed_while_it_is_imported_is_refused(mlp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The hash might be of other bytes than those imported: one line, no report named after it."""
    import os

    from profiler.frontends.onnx import profile

    real = profile.import_model

    def import_then_touch(*args: object, **kwargs: object):  # noqa: ANN202
        model = real(*args, **kwargs)
        st = mlp_path.stat()
        os.utime(mlp_path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # as a save would
        return model

    monkeypatch.setattr(profile, "import_model", import_then_touch)
    with pytest.raises(ProfileError, match="changed while it was being imported"):
        profile_model(mlp_path, ProfileOptions(target="GC200"), lambda s: random_inputs(s.model, 0))
