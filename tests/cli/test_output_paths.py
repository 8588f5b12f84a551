"""Output files (tilescope/outputs.py): whatever path is given to --html, --trace or --save-outputs,
the command either writes the file it was asked for or refuses in one line (exit 2) — never
replaces a report's own file, a device (a FIFO of the test's own stands in), a directory, or a
symbolic link unless --force says to write through it. Everything lives in the test's own temporary
directory: a regression cannot touch the machine's real device files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from report_format.synthetic import synthetic_report
from tilescope.cli import main

_SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)


def _tree(root: Path) -> dict[str, tuple[str, bytes | str]]:
    """Every entry under root: its kind and its bytes (files) or target (links)."""
    out: dict[str, tuple[str, bytes | str]] = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_symlink():
            out[rel] = ("link", os.readlink(p))
        elif p.is_fifo():
            out[rel] = ("fifo", b"")
        elif p.is_file():
            out[rel] = ("file", p.read_bytes())
        elif p.is_dir():
            out[rel] = ("dir", b"")
    return out


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("outputs")
    synthetic_report(root / "report", tiles_per_ipu=16)
    (root / "mine.html").write_bytes(b"the user's page")
    (root / "dir").mkdir()
    os.mkfifo(root / "fifo")
    (root / "link-to-mine").symlink_to(root / "mine.html")
    (root / "link-to-fifo").symlink_to(root / "fifo")
    (root / "link-to-table").symlink_to(root / "report" / "manifest.json")
    (root / "dangling").symlink_to(root / "nowhere" / "x.html")
    return root


NAMES = st.sampled_from(
    ["report/manifest.json", "report/tile_memory.arrow", "report/new.html", "mine.html", "dir", "fifo",
     "link-to-mine", "link-to-fifo", "link-to-table", "dangling", "fresh.html", "sub/deeper/fresh.html",
     "mine.html/under", "x" * 300, "a\x00b", "dir/" + "y" * 255 + ".html"]
)  # fmt: skip


@pytest.mark.slow  # ~17 s: 60 exports and diffs of a small report
@_SETTINGS
@given(name=NAMES, verb=st.sampled_from(["html", "trace", "diff"]), force=st.booleans())
def test_an_output_path_is_written_as_asked_or_refused_in_one_line(
    workspace: Path, name: str, verb: str, force: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    out = workspace / name
    report = str(workspace / "report")
    argv = {
        "html": ["export", report, "--html", str(out)],
        "trace": ["export", report, "--trace", str(out)],
        "diff": ["diff", report, report, "--html", str(out)],
    }[verb] + (["--force"] if force else [])
    before = _tree(workspace)
    try:
        status = main(argv)
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    after = _tree(workspace)
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    if status != 0:
        assert status == 2 and err.strip().splitlines()[-1].startswith(f"tilescope {argv[0]}: error: ")
        assert not changed, f"refused, yet changed {changed}"
        return
    # written: only the asked file (or, through a link with --force, the file it points to) changed
    written = os.path.relpath(os.path.realpath(out), os.path.realpath(workspace)) if force else name
    assert changed - {written, *[str(Path(written).parents[i]) for i in range(len(Path(written).parents) - 1)]} == set()
    assert (workspace / written).is_file() and not (workspace / written).is_symlink()
    assert not name.startswith("report/") and "fifo" not in name and "table" not in name
    if name.startswith("link-"):
        assert force and (workspace / name).is_symlink()  # the link kept, its file replaced
    (workspace / written).unlink()  # the next example starts from the same workspace
    for parent in Path(written).parents:
        if str(parent) != "." and (workspace / parent).is_dir() and not before.get(str(parent)):
            (workspace / parent).rmdir()
    if written == "mine.html":  # written directly or through its link
        (workspace / "mine.html").write_bytes(b"the user's page")


def test_force_writes_through_a_link_and_keeps_it(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    link = workspace / "link-to-mine"
    assert main(["export", str(workspace / "report"), "--html", str(link)]) == 2
    assert "is a symbolic link; give the path of the file it points to, or --force" in capsys.readouterr().err
    assert (workspace / "mine.html").read_bytes() == b"the user's page"
    assert main(["export", str(workspace / "report"), "--html", str(link), "--force"]) == 0
    assert link.is_symlink() and (workspace / "mine.html").read_bytes().startswith(b"<!DOCTYPE html>")
    (workspace / "mine.html").write_bytes(b"the user's page")
    # --force follows a link, never past the other checks: a link to a report's manifest or a FIFO
    for name in ("link-to-table", "link-to-fifo"):
        assert main(["export", str(workspace / "report"), "--html", str(workspace / name), "--force"]) == 2
