"""`tilescope sweep` on Dask: a LocalCluster of 2 workers, a real scheduler and worker started as
processes on loopback, a worker killed mid-point, and a sweep interrupted and resumed."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from report_format.reader import open_report
from report_format.sweep import open_sweep
from tilescope.cli import main

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _manifests(sweep: Path) -> dict[str, tuple[int, int, str]]:
    """Each point's report manifest: inode, mtime and created (a recomputed report changes all three)."""
    out = {}
    for row in open_sweep(sweep).sweep().itertuples():
        m = sweep / row.report / "manifest.json"
        out[row.name] = (m.stat().st_ino, m.stat().st_mtime_ns, json.loads(m.read_text())["created"])
    return out


def _all_whole(sweep: Path, points: int) -> None:
    df = open_sweep(sweep).sweep()
    assert df["point"].tolist() == list(range(points)) and (df["status"] == "ok").all()
    for rel in df["report"]:
        open_report(sweep / rel).verify()  # every table read whole: checksums and invariants


def test_six_points_on_a_local_cluster_of_two(mlp_file: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "sweep"
    args = ["sweep", str(mlp_file), "--batch", "1,2,4", "--partials", "float32,float16", "--out", str(out)]
    assert main([*args, "--workers", "2", "--json"]) == 0
    captured = capsys.readouterr()
    rows = json.loads(captured.out)["points"]
    assert len(rows) == 6 and {r["status"] for r in rows} == {"ok"}
    assert [(r["batch"], r["partials"]) for r in rows] == [(b, p) for b in (1, 2, 4) for p in ("float32", "float16")]
    assert len({r["worker"] for r in rows}) == 2  # both workers computed points
    assert "6/6 points" in captured.err and "ETA" in captured.err and "LocalCluster of 2 worker" in captured.err
    _all_whole(out, 6)
    df = open_sweep(out).sweep()
    for b in (1, 2, 4):  # more samples a run, more samples a second (the run's fixed costs shared)
        assert df[df["batch"] == b]["samples_per_second"].min() > 0
    assert df[df["batch"] == 4]["samples_per_second"].max() > df[df["batch"] == 1]["samples_per_second"].max()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for(check, seconds: float, what: str) -> None:  # type: ignore[no-untyped-def]
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_on_a_scheduler_and_worker_started_as_processes(mlp_file: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    py = sys.executable
    procs = []
    try:
        procs.append(subprocess.Popen([py, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                                       "--port", str(port), "--no-dashboard"], cwd=ROOT, env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))  # fmt: skip
        procs.append(subprocess.Popen([py, "-m", "distributed.cli.dask_worker", f"tcp://127.0.0.1:{port}",
                                       "--nthreads", "1", "--nworkers", "1", "--no-dashboard",
                                       "--host", "127.0.0.1"], cwd=ROOT, env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))  # fmt: skip
        out = tmp_path / "sweep"
        from distributed import Client

        with Client(f"tcp://127.0.0.1:{port}", timeout="30s") as c:
            _wait_for(lambda: len(c.scheduler_info()["workers"]) == 1, 60, "the worker to join")
        rc = main(
            ["sweep", str(mlp_file), "--batch", "1,2", "--out", str(out), "--scheduler", f"tcp://127.0.0.1:{port}"]
        )
        assert rc == 0, capsys.readouterr().err
        assert f"scheduler tcp://127.0.0.1:{port}" in capsys.readouterr().err
        _all_whole(out, 2)
        workers = set(open_sweep(out).sweep()["worker"])
        assert len(workers) == 1 and not workers & {f"{socket.gethostname()}:{os.getpid()}"}  # not this process
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def test_a_worker_killed_mid_point_is_retried_and_the_sweep_completes(mlp_file: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    out, marker = tmp_path / "sweep", tmp_path / "killed-once"
    rc = main(["sweep", str(mlp_file), "--batch", "1,2", "--out", str(out), "--workers", "2",
               "--test-kill-worker-once", str(marker)])  # fmt: skip
    assert rc == 0, capsys.readouterr().err
    assert marker.exists()  # a worker did die in a point
    _all_whole(out, 2)
    assert not [p for p in (out / "reports").iterdir() if p.name.startswith(".")]  # no temporaries left behind


def test_an_interrupted_sweep_resumes_without_recomputing_finished_points(
    mlp_file: Path, tmp_path: Path, capsys
) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "sweep"
    args = ["sweep", str(mlp_file), "--batch", "1,2,3,4", "--out", str(out), "--workers", "1"]
    proc = subprocess.Popen([sys.executable, "-m", "tilescope", *args, "--test-point-delay", "2"], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        # a first row in the table (its point's record is written before it, by the worker): waiting
        # for the record alone could kill the sweep before the client wrote the row _manifests reads
        _wait_for(lambda: (out / "sweep.arrow").exists() and len(open_sweep(out).sweep()) >= 1, 120, "a first row")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the sweep and its cluster, as a power cut would
        proc.wait()
    before = _manifests(out)
    assert 1 <= len(before) < 4
    assert main(args) == 0
    err = capsys.readouterr().err
    assert f"4 points, {len(before)} reused" in err
    after = _manifests(out)
    assert len(after) == 4 and {k: after[k] for k in before} == before  # the finished reports untouched
    _all_whole(out, 4)


def test_ctrl_c_ends_a_sweep_with_130_leaving_finished_reports_and_the_table_whole(
    mlp_file: Path, tmp_path: Path
) -> None:
    # Ctrl-C sends SIGINT to the terminal's whole process group: the sweep and its cluster's workers.
    # The command line's convention for an interrupted command (tilescope/cli.py): one line, exit 130.
    # The sweep starts with SIGINT at its default, as from a terminal: pytest run from a background shell
    # or nohup has it ignored, and the child would inherit that (and never see the Ctrl-C).
    out = tmp_path / "sweep"
    args = ["sweep", str(mlp_file), "--batch", "1,2,3,4", "--out", str(out), "--workers", "1"]
    proc = subprocess.Popen([sys.executable, "-m", "tilescope", *args, "--test-point-delay", "2"], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        _wait_for(lambda: (out / "sweep.arrow").exists() and len(open_sweep(out).sweep()) >= 1, 120, "a first row")
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == "tilescope sweep: interrupted"
    assert "Traceback" not in err
    df = open_sweep(out).sweep()  # the table is whole (written by temporary file and rename)
    assert 1 <= len(df) < 4 and (df["status"] == "ok").all()
    for rel in df["report"]:
        open_report(out / rel).verify()
    assert not [p for p in out.rglob(".*")]  # no half-written table or report left behind
