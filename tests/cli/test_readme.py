"""The README's example program runs as the README says and yields the report it promises."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from report_format.reader import open_report

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # ~3 s at load 4: the README's program in a fresh process on a GC200
def test_readme_program_writes_a_report(tmp_path: Path) -> None:
    block = re.search(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    (tmp_path / "my_program.py").write_text(block)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "POPLAR_ENGINE_OPTIONS": json.dumps({"autoReport.all": "true", "autoReport.directory": "./report"}),
    }
    subprocess.run([sys.executable, "my_program.py"], cwd=tmp_path, env=env, check=True, timeout=300)
    report = open_report(tmp_path / "report")
    assert report.target().name == "GC200" and len(report.runs()) == 1
    # FLOPs by PopLibs' counting rules: the matmul 2*M*K*N; casting its float32 partials to the
    # half output one per element (popopsCycleEstimators.cpp castFlops); the relu one per element
    m, k, n = 128, 256, 64
    assert int(report.runs()["flops"][0]) == 2 * m * k * n + m * n + m * n


def test_readme_states_the_current_format_version() -> None:
    from report_format import schema

    said = re.search(
        r"\(format version (\d+); versions? ([\d, and]+) stays? readable\)", (ROOT / "README.md").read_text()
    )
    assert said, "README no longer states the report format version"
    assert int(said.group(1)) == schema.FORMAT_VERSION
    older = [int(v) for v in re.findall(r"\d+", said.group(2))]
    assert older == [v for v in schema.SUPPORTED_VERSIONS if v != schema.FORMAT_VERSION]
