"""Fixtures of the sweep tests: a tiny ONNX model (an MLP, ~1 s a point) written per test."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

from profiler.frontends.onnx import examples
from tests.app.conftest import chromium  # noqa: F401 - the headless browser of the viewer tests, for the Sweep page


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
    """A sweep directory of the MLP at batch 1, 4 and 16, computed in this process (no Dask): three
    reports, their records and the sweep table."""
    from report_format.sweep import write_sweep
    from tilescope.sweep import grid
    from tilescope.sweep.point import model_digest, run_point

    tmp = tmp_path_factory.mktemp("small_sweep")
    model = tmp / "mlp.onnx"
    onnx.save(examples.mlp((64, 32, 10)), model)
    sweep = tmp / "sweep"
    rows = [
        run_point({"sweep": str(sweep), "model": str(model), "model_sha256": model_digest(model), "index": pt.index,
                   "name": pt.name, "argv": pt.argv, "options": pt.options, "script": False})
        for pt in grid.points({"batch": "1,4,16"}, [], False)
    ]  # fmt: skip
    write_sweep(sweep, rows)
    return sweep
