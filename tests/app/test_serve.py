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


def test_the_warm_up_reads_what_the_memory_tabs_read(tmp_path, monkeypatch):
    """`tilescope serve`'s start-up warm-up reads the tables the Memory page's per-tile tabs read, so
    their first visit reads none (on the POD16 Llama-2-7B-shaped report, 5.8 M vertex rows: the
    Compute Sets tab's first visit was 1.17 s, bench/viewer.py --warm)."""
    from app import server, state
    from report_format.reader import Report
    from report_format.synthetic import synthetic_report

    path = synthetic_report(tmp_path / "r", num_ipus=2, tiles_per_ipu=16)
    server.create_app(path)
    from app.pages import memory  # a page registers with an app: imported after one is made

    server.warm_caches()
    reads: list[str] = []
    real = Report._read
    monkeypatch.setattr(Report, "_read", lambda self, name, *a: reads.append(name) or real(self, name, *a))
    for tab in ("compute_sets", "vertices", "exchanges", "variables"):
        memory.tab_body(tab, None, ["gaps", "max"])
    assert reads == []
    assert state.report().num_rows("vertices") > 0  # the tabs had rows to read
