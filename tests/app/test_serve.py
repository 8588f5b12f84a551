"""`tilescope serve` refuses a path that is not a report, with one line and exit code 2."""

from __future__ import annotations

from tilescope.cli import main


def test_serve_rejects_a_non_report(tmp_path, capsys):
    assert main(["serve", str(tmp_path), "--no-browser"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "manifest.json" in err[0] and err[0].startswith("tilescope serve: error:")


def test_serve_rejects_a_bad_baseline(small_report, tmp_path, capsys):
    assert main(["serve", str(small_report.path), "--compare", str(tmp_path / "nope"), "--no-browser"]) == 2
    assert "no such file" in capsys.readouterr().err
