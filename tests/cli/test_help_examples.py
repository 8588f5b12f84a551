"""Every example `tilescope --help` prints runs as shown once `tilescope demo` has made the samples,
from a fresh directory (the samples go to ./tilescope-demo) as from a checkout (sample_reports/demo):
the paths are where the demo writes from the current directory."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from tilescope.cli import build_parser, main


def examples() -> list[list[str]]:
    """The command lines of the epilog's examples, split as a shell would."""
    epilog = build_parser().epilog or ""
    return [shlex.split(m) for m in re.findall(r"^  tilescope (.+?)\s*$", epilog, re.M)]


@pytest.mark.slow
def test_help_examples_run_after_the_demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)  # a new user's directory: no sample_reports/ here
    lines = examples()
    assert [argv[0] for argv in lines] == ["demo", "summary", "diff", "export", "dump", "serve", "whatif"]
    assert main(["demo", "--no-serve"]) == 0
    for argv in lines:
        if argv[0] == "demo":
            continue
        if argv[0] == "serve":  # it would block: its reports exist and open
            reports = [a for a in argv[1:] if not a.startswith("-")]
            assert all((Path(r) / "manifest.json").is_file() for r in reports), argv
            continue
        assert main(argv) == 0, argv
        assert capsys.readouterr().out, argv
    assert (tmp_path / "mlp.html").is_file()
    assert all(a.startswith("tilescope-demo/") for argv in lines[1:] for a in argv[1:2])


def test_help_examples_in_a_checkout_point_at_sample_reports(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    summary = next(argv for argv in examples() if argv[0] == "summary")
    assert summary[1] == "sample_reports/demo/mlp"
