"""Re-simulating a what-if from the viewer: ``tilescope whatif REPORT --apply N --json`` as a child process.

The viewer never imports the simulator (the dependency rule), so a what-if runs as its own process,
started by the Insights page's "re-simulate" button and polled by the page until it ends. It runs
work on the server, so it is off unless the viewer was started with ``tilescope serve
--allow-resimulate``; then at most one runs at a time (a second click while one runs is told so),
and one that runs longer than ``TIMEOUT_S`` is killed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: A what-if of ResNet-50 at batch 32 on C600 takes ~30 s of host time on this project's 2-core
#: machine (docs/whatif.md); a run beyond this has hung or the machine is far too busy.
TIMEOUT_S = 900.0

_allowed = False
_lock = threading.Lock()


@dataclass
class _Job:
    proposal: int
    process: subprocess.Popen[bytes]
    stdout: Path  # the child's own files: read by path, so the parent never moves the child's offset
    stderr: Path
    started: float = field(default_factory=time.monotonic)
    result: dict[str, Any] | None = None
    error: str = ""
    ended: float | None = None


_job: _Job | None = None


def allow(flag: bool) -> None:
    """Let the viewer start re-simulations (``tilescope serve --allow-resimulate``)."""
    global _allowed
    _allowed = bool(flag)


def allowed() -> bool:
    return _allowed


def command(report: str | Path, proposal: int) -> list[str]:
    """The child's command line: this Python running the tilescope CLI, so the same code answers."""
    return [sys.executable, "-m", "tilescope", "whatif", str(report), "--apply", str(int(proposal)), "--json"]


def start(report: str | Path, proposal: int) -> str:
    """Start re-simulating ``proposal`` of ``report``; "" when started, else why not (one line)."""
    global _job
    if not _allowed:
        return "re-simulation is off: start the viewer with tilescope serve --allow-resimulate"
    with _lock:
        if _job is not None and _job.ended is None:
            _poll(_job)
            if _job.ended is None:
                return f"what-if {_job.proposal} is still running; one at a time"
        work = Path(tempfile.mkdtemp(prefix="tilescope-whatif-"))
        out, err = work / "stdout", work / "stderr"
        with open(out, "wb") as o, open(err, "wb") as e:
            process = subprocess.Popen(command(report, proposal), stdout=o, stderr=e, stdin=subprocess.DEVNULL)
        _job = _Job(proposal, process, out, err)
    return ""


def _last_line(path: Path) -> str:
    try:
        text = path.read_bytes().decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [x for x in text.splitlines() if x.strip()]
    return lines[-1] if lines else ""


def _remove(job: _Job) -> None:
    for f in (job.stdout, job.stderr):
        f.unlink(missing_ok=True)
    job.stdout.parent.rmdir()


def _poll(job: _Job) -> None:
    """Finish ``job`` if its process ended or ran out of time."""
    if job.ended is not None:
        return
    code = job.process.poll()
    if code is None and time.monotonic() - job.started > TIMEOUT_S:
        job.process.kill()
        job.process.wait()
        job.error = f"stopped after {TIMEOUT_S:.0f} s (the time limit of a re-simulation)"
    elif code is None:
        return
    elif code == 0:
        try:
            job.result = json.loads(job.stdout.read_bytes())
        except (OSError, json.JSONDecodeError):
            job.error = "the what-if printed no result"
    else:
        job.error = _last_line(job.stderr) or f"the what-if exited with status {code}"
    job.ended = time.monotonic()
    _remove(job)  # what it said is kept in the job


def status() -> dict[str, Any]:
    """``{"state": "idle" | "running" | "done" | "failed", "proposal", "seconds", "progress",
    "result", "error"}`` of the latest re-simulation."""
    with _lock:
        job = _job
        if job is None:
            return {"state": "idle"}
        _poll(job)
        running = job.ended is None
        return {
            "state": "running" if running else "failed" if job.error else "done",
            "proposal": job.proposal,
            "seconds": (time.monotonic() if running else (job.ended or 0.0)) - job.started,
            "progress": _last_line(job.stderr).removeprefix("tilescope whatif: ") if running else "",
            "result": job.result,
            "error": job.error,
        }


def wait(timeout: float) -> dict[str, Any]:
    """The status once the latest re-simulation ends, or after ``timeout`` seconds (tests, the CLI)."""
    end = time.monotonic() + timeout
    while (s := status())["state"] == "running" and time.monotonic() < end:
        time.sleep(0.2)
    return s
