"""Shared fixtures: small synthetic reports written once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from report_format.synthetic import synthetic_report


@pytest.fixture(scope="session")
def small_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """2 IPUs x 16 tiles, 60 program steps, ~174 executed steps, 2 runs, 2 tiles out of memory."""
    return synthetic_report(tmp_path_factory.mktemp("reports") / "small", num_ipus=2, tiles_per_ipu=16, oom_tiles=2)
