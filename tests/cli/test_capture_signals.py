"""A whole capture (``tilescope run`` writing its report) started as nohup or a background job
starts it, with SIGINT ignored: SIGINTs during the run and the write leave it ignored (the run ends
normally with a whole report), and SIGTERM still ends it at once."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import onnx
import pytest

from profiler.frontends.onnx import examples
from report_format.reader import open_report

ROOT = Path(__file__).resolve().parents[2]


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _capture(tmp_path: Path, report: Path, runs: int) -> subprocess.Popen[bytes]:
    model = tmp_path / "mlp.onnx"
    onnx.save(examples.mlp((256, 256, 10)), model)
    argv = [sys.executable, "-m", "tilescope", "run", str(model), "--runs", str(runs), "--report-dir", str(report)]
    return subprocess.Popen(
        argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=_ignore_sigint
    )


@pytest.mark.slow  # ~10 s: two real captures in child processes
def test_a_capture_with_sigint_ignored_finishes_whole_and_sigterm_still_ends_it(tmp_path: Path) -> None:
    report = tmp_path / "report"
    child = _capture(tmp_path, report, runs=20)
    deadline = time.monotonic() + 120
    while child.poll() is None and time.monotonic() < deadline:  # SIGINTs all through import, run and write
        child.send_signal(signal.SIGINT)
        time.sleep(0.05)
    assert child.wait(timeout=60) == 0, child.stderr.read().decode()[-2000:] if child.stderr else ""
    open_report(report).verify()
    assert "inference 0" in set(open_report(report).runs()["name"])

    child = _capture(tmp_path, tmp_path / "second", runs=100_000)  # would run for minutes
    time.sleep(3)
    child.send_signal(signal.SIGTERM)
    assert child.wait(timeout=30) == -signal.SIGTERM
    assert not (tmp_path / "second" / "manifest.json").exists() or open_report(tmp_path / "second").verify() is None
