"""Fixtures of the sweep tests: a tiny ONNX model (an MLP, ~1 s a point) written per test."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

from profiler.frontends.onnx import examples


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", "")  # the points merge their report directory into it


@pytest.fixture
def mlp_file(tmp_path: Path) -> Path:
    path = tmp_path / "mlp.onnx"
    onnx.save(examples.mlp((64, 32, 10)), path)
    return path


@pytest.fixture(scope="session")
def small_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.sweep.builders import small_sweep as make

    return make(tmp_path_factory.mktemp("small_sweep"))
