"""The writer never deletes a file tilescope did not write, and a killed write loses nothing.

Inventory rows (docs/robustness.md): a project directory given as the report directory, a note
kept inside a report, stale temporaries after kill -9, a path under a regular file or in a place
that cannot be written, a full disk, SIGINT / SIGTERM / SIGKILL at random points of a write.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from report_format import ownership, writer
from report_format.errors import ReportError
from report_format.reader import open_report
from report_format.synthetic import synthetic_report
from report_format.writer import ReportWriter, check_destination

ROOT = Path(__file__).resolve().parents[2]
TARGET = {
    "name": ["IPUModel"], "type": ["IPUModel"], "architecture": ["ipu2"], "num_ipus": [2], "tiles_per_ipu": [16],
    "num_tiles": [32], "bytes_per_tile": [65536], "bytes_per_ipu": [16 * 65536], "total_memory": [32 * 65536],
    "clock_hz": [1.33e9], "num_replicas": [1], "ipus_per_replica": [2], "num_worker_contexts": [6],
    "exchange_bytes_per_cycle": [4.0], "interleaved_memory_start": [32768], "fp16_flops_per_cycle": [64.0],
    "fp32_flops_per_cycle": [16.0],
}  # fmt: skip


def _small(w: ReportWriter) -> None:
    """A whole report with nothing captured but its target (2 IPUs x 16 tiles)."""
    w.write("target", TARGET)
    for profile in ("graph", "execution", "debug_info"):
        w.set_profile(profile, False)


def _tree(path: Path) -> dict[str, str]:
    return {str(p.relative_to(path)): p.read_text() for p in sorted(path.rglob("*")) if p.is_file()}


def _web_project(path: Path) -> Path:
    (path / "src").mkdir(parents=True)
    (path / "manifest.json").write_text('{"name": "my app", "start_url": "/"}')
    (path / "index.html").write_text("<html></html>")
    (path / "src" / "app.js").write_text("console.log(1)")
    return path


def test_a_web_project_directory_is_refused_and_keeps_every_file(tmp_path: Path) -> None:
    project = _web_project(tmp_path / "site")
    before = _tree(project)
    with pytest.raises(ReportError, match="refusing to overwrite.*manifest.json is not a tilescope report manifest"):
        synthetic_report(project)
    assert _tree(project) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]  # no temporary left beside it


@pytest.mark.parametrize(
    "manifest",
    [
        {"format": "tilescope.report"},  # no version
        {"format": "tilescope.report", "format_version": "2"},  # version not an integer
        {"format": "other", "format_version": 2},
        [1, 2],
    ],
)
def test_only_tilescopes_own_manifest_makes_a_report(tmp_path: Path, manifest: object) -> None:
    d = tmp_path / "d"
    d.mkdir()
    (d / "manifest.json").write_text(json.dumps(manifest))
    (d / "data.csv").write_text("keep me")
    with pytest.raises(ReportError, match="refusing to overwrite"):
        check_destination(d)
    assert (d / "data.csv").read_text() == "keep me"


def test_a_note_kept_in_a_report_survives_the_next_capture(tmp_path: Path) -> None:
    path = synthetic_report(tmp_path / "r", seed=1)
    (path / "notes.txt").write_text("precious")
    (path / "screens").mkdir()
    (path / "screens" / "a.png").write_bytes(b"png")
    before = open_report(path).runs()
    with ReportWriter(path, engine="second") as w:
        _small(w)
    assert (path / "notes.txt").read_text() == "precious"
    assert (path / "screens" / "a.png").read_bytes() == b"png"
    assert w.messages == [f"kept 2 entries tilescope did not write in {path}: notes.txt, screens"]
    report = open_report(path)
    report.verify()
    assert report.manifest.engine == "second" and not report.runs().equals(before)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r"]
    assert not (path / ownership.MARKER).exists()


def test_a_crafted_manifest_cannot_claim_a_users_file(tmp_path: Path) -> None:
    path = synthetic_report(tmp_path / "r")
    doc = json.loads((path / "manifest.json").read_text())
    doc["tables"]["runs"]["file"] = "notes.txt"
    (path / "manifest.json").write_text(json.dumps(doc))
    (path / "notes.txt").write_text("precious")
    with ReportWriter(path) as w:
        _small(w)
    assert (path / "notes.txt").read_text() == "precious"
    open_report(path).verify()  # the unlisted old runs.arrow did not replace the new one...
    assert any("could not tidy" in m and "runs.arrow" in m for m in w.messages)  # ...it is kept aside, and said


@pytest.mark.parametrize("where", ["under_a_file", "proc"])
def test_a_path_that_cannot_be_written_is_one_line(tmp_path: Path, where: str) -> None:
    if where == "under_a_file":
        (tmp_path / "plain").write_text("x")
        path = tmp_path / "plain" / "sub" / "report"
        expect = "is a file, not a directory"
    else:  # /proc refuses new entries even to root (chmod would not stop root)
        path = Path("/proc/tilescope-report")
        expect = "cannot write a report here"
    with pytest.raises(ReportError, match=expect) as info:
        synthetic_report(path)
    assert "\n" not in str(info.value)
    if where == "under_a_file":
        assert (tmp_path / "plain").read_text() == "x"


def test_a_full_disk_is_one_line_and_keeps_the_previous_report(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    path = synthetic_report(tmp_path / "r", seed=1)
    before = open_report(path).runs()

    class Full:
        """A file that takes 2 KiB and then fails as a full disk does."""

        def __init__(self) -> None:
            self.written = 0

        def write(self, data: bytes) -> int:
            self.written += len(data)
            if self.written > 2048:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return len(data)

        def flush(self) -> None:
            pass

        def close(self) -> None:
            pass

        closed = False

    monkeypatch.setattr(writer, "_open_sink", lambda p: (p.write_bytes(b""), pa.PythonFile(Full(), mode="w"))[1])
    with pytest.raises(ReportError, match="No space left on device") as info:
        synthetic_report(path, seed=2)
    assert "\n" not in str(info.value)
    assert open_report(path).runs().equals(before)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r"]  # the temporary was removed


# -- stale temporaries ----------------------------------------------------------------------------
def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _fake_tmp(parent: Path, dest: Path, pid: int, *, marker: bool = True, extra: str = "") -> Path:
    tmp = parent / f".{dest.name}.tmp-abc{pid}{extra}"
    tmp.mkdir()
    (tmp / "runs.arrow").write_bytes(b"half")
    if marker:
        doc = {"pid": pid, "host": os.uname().nodename, "destination": str(dest), "role": "new"}
        (tmp / ownership.MARKER).write_text(json.dumps(doc))
    return tmp


def test_stale_temporaries_are_cleaned_only_when_provably_ours(tmp_path: Path) -> None:
    dest = tmp_path / "r"
    dead = _fake_tmp(tmp_path, dest, _dead_pid())
    alive = _fake_tmp(tmp_path, dest, os.getppid())  # a writer that is still running
    # its own suffix: a test run whose parent has exited has parent pid 1, the alive one's name
    unmarked = _fake_tmp(tmp_path, dest, 1, marker=False, extra="n")
    with_user_file = _fake_tmp(tmp_path, dest, _dead_pid(), extra="u")
    (with_user_file / "mine.txt").write_text("keep")
    with ReportWriter(dest) as w:
        _small(w)
    assert not dead.exists()
    assert alive.exists() and unmarked.exists()
    assert (with_user_file / "mine.txt").read_text() == "keep"
    assert any("removed" in m for m in w.messages)
    assert any("mine.txt" in m for m in w.messages)


def test_a_previous_report_swapped_out_by_a_killed_write_is_restored(tmp_path: Path) -> None:
    dest = synthetic_report(tmp_path / "r", seed=1)
    (dest / "notes.txt").write_text("precious")
    before = open_report(dest).runs()
    old = tmp_path / ".r.old-xyz"
    old.mkdir()
    (old / ownership.MARKER).write_text(
        json.dumps({"pid": _dead_pid(), "host": os.uname().nodename, "destination": str(dest), "role": "old"})
    )
    os.rename(dest, old / "report")  # as a write killed between its two renames leaves it
    with pytest.raises(ReportError, match="no such file or directory.*interrupted write.*" + old.name):
        open_report(dest)
    w = ReportWriter(dest)  # the next write puts it back before doing anything else
    assert any("restored the previous report" in m for m in w.messages)
    assert open_report(dest).runs().equals(before)
    _small(w)
    w.commit()
    assert (dest / "notes.txt").read_text() == "precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r"]


# -- interrupted writes in a real process ---------------------------------------------------------
# The child sets its own SIGINT disposition: it would otherwise inherit pytest's, and pytest run under
# nohup or from a background shell has SIGINT ignored (the child then never saw the test's Ctrl+C).
_CHILD = textwrap.dedent(
    """
    import signal
    import sys
    signal.signal(signal.SIGINT, {sigint})
    sys.path.insert(0, {root!r})
    from report_format.synthetic import synthetic_report
    print("ready", flush=True)
    seed = 10
    while True:
        synthetic_report({path!r}, num_ipus=2, tiles_per_ipu=64, seed=seed)
        seed += 1
    """
)
#: SIGINT as a terminal's Ctrl+C delivers it (KeyboardInterrupt), or as nohup / a background job leaves it.
CTRL_C, IGNORED = "signal.default_int_handler", "signal.SIG_IGN"


@contextlib.contextmanager
def _writing_child(path: Path, sigint: str = CTRL_C) -> Iterator[subprocess.Popen[bytes]]:
    """A process writing reports to ``path`` over and over; killed on the way out whatever happened."""
    # its stderr goes to a file outside the test's directory: a child that outlives its signal says
    # why in the failure (a KeyboardInterrupt swallowed somewhere prints "Exception ignored in")
    with tempfile.TemporaryFile() as stderr:
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD.format(root=str(ROOT), path=str(path), sigint=sigint)],
            stdout=subprocess.PIPE,
            stderr=stderr,
        )
        try:
            assert child.stdout is not None and child.stdout.readline() == b"ready\n"
            yield child
        except subprocess.TimeoutExpired as exc:
            child.kill()
            child.wait()
            stderr.seek(0)
            raise AssertionError(
                f"the writer outlived its signal; its stderr:\n{stderr.read()[-4000:].decode()}"
            ) from exc
        finally:
            if child.poll() is None:
                child.kill()
            child.wait()
            assert child.stdout is not None
            child.stdout.close()


def _whole_or_between_renames(path: Path) -> None:
    try:
        report = open_report(path)
    except ReportError as exc:  # only in the instant between the two renames of the swap
        assert "interrupted write" in str(exc)
    else:
        report.verify()  # whatever reads as a report is whole: old or new, never half


def _next_write_cleans_up(tmp_path: Path, path: Path) -> None:
    with ReportWriter(path) as w:  # the next write cleans up after the killed ones
        _small(w)
    open_report(path).verify()
    assert (path / "notes.txt").read_text() == "precious"
    left = {str(p.relative_to(tmp_path)): p.stat().st_size for p in tmp_path.rglob("*") if not p.is_relative_to(path)}
    assert not left, (left, w.messages)


@pytest.mark.slow  # 4-6 s each at load 4: four writer processes killed at random points
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_killed_at_random_points_the_report_stays_whole(tmp_path: Path, sig: signal.Signals) -> None:
    path = synthetic_report(tmp_path / "r", num_ipus=2, tiles_per_ipu=64, seed=1)
    (path / "notes.txt").write_text("precious")
    rng = random.Random(int(sig))
    for _ in range(4):
        with _writing_child(path) as child:
            time.sleep(rng.uniform(0.02, 0.4))  # a few writes of ~0.1 s each: lands anywhere in one
            child.send_signal(sig)
            child.wait(timeout=30)
        _whole_or_between_renames(path)
        if sig == signal.SIGINT:  # Python unwinds: the writer removes its own temporary
            left = {
                str(p.relative_to(tmp_path)): p.stat().st_size
                for p in tmp_path.rglob("*")
                if not p.is_relative_to(path)
            }
            assert not left, left
    _next_write_cleans_up(tmp_path, path)


@pytest.mark.slow  # ~2.6 s at load 4
def test_a_writer_with_sigint_ignored_keeps_ignoring_it_and_sigterm_still_ends_it(tmp_path: Path) -> None:
    """nohup and background jobs start with SIGINT ignored: the writer's held blocks must leave it
    ignored (not catch it and act on it later) and must not keep SIGTERM from ending the process."""
    path = synthetic_report(tmp_path / "r", num_ipus=2, tiles_per_ipu=64, seed=1)
    (path / "notes.txt").write_text("precious")
    rng = random.Random(2)
    for _ in range(2):
        with _writing_child(path, sigint=IGNORED) as child:
            for _ in range(3):  # at random points of the writes, held blocks included
                time.sleep(rng.uniform(0.02, 0.2))
                child.send_signal(signal.SIGINT)
            time.sleep(0.2)
            assert child.poll() is None, "an ignored SIGINT ended the writer"
            child.send_signal(signal.SIGTERM)
            assert child.wait(timeout=30) == -signal.SIGTERM
        _whole_or_between_renames(path)
    _next_write_cleans_up(tmp_path, path)


@pytest.mark.slow
def test_the_sigint_case_passes_when_pytest_itself_runs_with_sigint_ignored(tmp_path: Path) -> None:
    """As under nohup or from a background shell: pytest's children inherit SIGINT ignored."""
    case = f"{Path(__file__).relative_to(ROOT)}::test_killed_at_random_points_the_report_stays_whole[2]"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp", str(tmp_path / "t"), case]
    run = subprocess.run(
        ["bash", "-c", 'trap "" INT; exec "$@"', "bash", *cmd], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "1 passed" in run.stdout


class _Interrupted(Exception):
    pass


def test_ctrl_c_while_a_held_block_ends_never_leaves_sigterm_swallowed() -> None:
    """SIGINT and SIGTERM landing at every point of many held blocks (a thread sends them as fast as
    it can). ``signal.signal`` runs pending handlers before it changes one, so a SIGINT handler that
    raises could stop the handlers being put back with SIGTERM's still the recorder: the process
    ignored SIGTERM from then on. Afterwards both must still reach their own handlers."""
    armed, terms = [False], [0]

    def on_int(_n: int, _frame: object) -> None:
        if armed[0]:  # raises once per block (then disarmed), only inside the try below
            armed[0] = False
            raise _Interrupted

    def on_term(_n: int, _frame: object) -> None:
        terms[0] += 1

    ours = {signal.SIGINT: on_int, signal.SIGTERM: on_term}
    before = {s: signal.signal(s, h) for s, h in ours.items()}
    stop = threading.Event()

    def send() -> None:
        rng = random.Random(0)
        while not stop.is_set():
            os.kill(os.getpid(), rng.choice(list(ours)))
            time.sleep(rng.uniform(0, 2e-4))

    sender = threading.Thread(target=send)
    # no collection during the storm: a handler raising inside a gc callback (hypothesis installs
    # one) is only printed as "exception ignored", a warning of the test's own making
    gc_was_enabled = gc.isenabled()
    gc.disable()
    sender.start()
    interrupted = 0
    try:
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            try:
                armed[0] = True
                with writer._signals_deferred():
                    pass
                armed[0] = False
            except _Interrupted:
                interrupted += 1
        stop.set()
        sender.join()
        time.sleep(0.05)  # the last signals sent are handled
        sent_terms = terms[0]
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
        assert terms[0] == sent_terms + 1, "SIGTERM no longer reaches its handler"
        armed[0] = True
        with pytest.raises(_Interrupted):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
        assert interrupted  # Ctrl+C did land in held blocks
    finally:
        armed[0] = False
        stop.set()
        sender.join()
        for s, h in before.items():
            signal.signal(s, h)
        if gc_was_enabled:
            gc.enable()


def test_a_signal_held_in_a_block_is_delivered_by_its_own_handler_after_it() -> None:
    seen: list[int] = []
    before = {
        signal.SIGINT: signal.signal(signal.SIGINT, signal.default_int_handler),  # even if pytest's is ignored
        signal.SIGTERM: signal.signal(signal.SIGTERM, lambda n, _f: seen.append(n)),
    }
    try:
        with writer._signals_deferred():
            signal.raise_signal(signal.SIGTERM)
            assert seen == []  # held
        assert seen == [signal.SIGTERM]
        with pytest.raises(KeyboardInterrupt), writer._signals_deferred():
            signal.raise_signal(signal.SIGINT)
            signal.raise_signal(signal.SIGTERM)
        assert seen == [signal.SIGTERM] * 2  # the KeyboardInterrupt did not drop the held SIGTERM
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        with writer._signals_deferred():  # an ignored signal is left ignored, not caught meanwhile
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            signal.raise_signal(signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        for s, h in before.items():
            signal.signal(s, h)


def test_a_report_directory_gets_the_umask_mode_and_a_rewrite_keeps_the_users(tmp_path: Path) -> None:
    # mkdtemp makes its directory 0700; a report must be readable as the user's umask allows
    old = os.umask(0o022)
    try:
        dest = tmp_path / "shared"
        with ReportWriter(dest) as w:
            _small(w)
        assert dest.stat().st_mode & 0o777 == 0o755
        os.chmod(dest, 0o750)  # the user narrows it; rewriting the report keeps that
        with ReportWriter(dest) as w:
            _small(w)
        assert dest.stat().st_mode & 0o777 == 0o750
        os.umask(0o077)
        with ReportWriter(tmp_path / "private") as w:
            _small(w)
        assert (tmp_path / "private").stat().st_mode & 0o777 == 0o700
    finally:
        os.umask(old)
