"""What-if proposals as data, on hand-made reports whose manifest says how they were made."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.views import insights
from app.views.whatif import Proposal, figures, predicted_line, predicted_phrase, predicted_text, result_rows
from report_format.reader import open_report
from report_format.synthetic import synthetic_report


def with_origin(report: Path, model: Path, **options: object) -> Path:
    """Give a report an origin (the manifest's checksums cover the tables, not the manifest)."""
    from report_format.origin import make_origin

    m = report / "manifest.json"
    doc = json.loads(m.read_text())
    doc["origin"] = make_origin("model", model, {"batch": 1, **options}).to_json()
    m.write_text(json.dumps(doc))
    return report


@pytest.fixture
def oom(tmp_path: Path) -> Path:
    model = tmp_path / "m.onnx"
    model.write_bytes(b"model")
    return with_origin(synthetic_report(tmp_path / "r", num_ipus=1, tiles_per_ipu=16, oom_tiles=2), model,
                       available_memory_proportion=0.6, ipus=1)  # fmt: skip


def test_out_of_memory_proposes_half_the_memory_proportion_and_twice_the_ipus(oom: Path) -> None:
    report = open_report(oom)
    first = insights.insights(report)[0]
    assert first.text.startswith("2 tiles are out of memory")
    amp, ipus = first.proposals
    assert amp.change == {"available_memory_proportion": 0.3} and ipus.change == {"ipus": 2}
    bpt, tiles = report.target_info.bytes_per_tile, report.target_info.num_tiles
    # a tile can lose at most the two plan budgets' difference: (0.6 - 0.3) x bytes_per_tile
    assert amp.predicted["max_tile_bytes"] == (pytest.approx(-0.3 * bpt), None)
    assert amp.predicted["total_bytes"] == (pytest.approx(-0.3 * bpt * tiles), None)
    assert amp.predicted["cycles"] == (0.0, None)
    assert ipus.predicted == {}
    assert insights.proposals(report) == [amp, ipus]  # numbered in this order by whatif and the page


def test_no_origin_no_proposals(tmp_path: Path) -> None:
    report = open_report(synthetic_report(tmp_path / "r", num_ipus=1, tiles_per_ipu=16, oom_tiles=2))
    assert insights.proposals(report) == []
    assert insights.hints(report)[0].startswith("2 tiles are out of memory")  # the hints are unchanged


def test_the_floor_of_the_memory_proportion(tmp_path: Path) -> None:
    model = tmp_path / "m.onnx"
    model.write_bytes(b"model")
    r = with_origin(synthetic_report(tmp_path / "r", num_ipus=1, tiles_per_ipu=16, oom_tiles=2), model,
                    available_memory_proportion=0.05)  # fmt: skip
    assert [p.change for p in insights.proposals(open_report(r))] == [{"ipus": 2}]  # 0.05 is as low as proposed


def test_figures_of_a_report(oom: Path) -> None:
    report = open_report(oom)
    tm = report.tile_memory()["total_bytes_including_gaps"]
    f = figures(report)
    assert f["max_tile_bytes"] == tm.max() and f["total_bytes"] == tm.sum()


def test_predicted_text() -> None:
    assert predicted_text("max_tile_bytes", (-2048.0, None)) == "≥ −2.0 KiB"
    assert predicted_text("cycles", (0.0, None)) == "≥ 0"
    assert predicted_text("cycles", (None, 5.0)) == "≤ +5"
    assert predicted_text("cycles", (10.0, 20.0)) == "+10 to +20"
    assert predicted_text("cycles", None) == "—"
    # a fall is written with the minus sign, as the rest of the app and the CLI write it
    assert predicted_text("samples_per_second", (-3.25, -1.0)) == "−3.2 to −1.0"
    assert predicted_text("total_bytes", (-1536.0, -1536.0)) == "≈ −1.5 KiB"
    assert "-" not in predicted_text("cycles", (-20.0, -10.0))


def test_result_rows_say_whether_the_measured_change_is_within() -> None:
    doc = {"figures": {
        "cycles": {"label": "cycles per run", "before": 100.0, "after": 90.0, "measured_change": -10.0,
                   "predicted": {"low": 0.0, "high": None}, "within_prediction": False},
        "total_bytes": {"label": "total memory", "before": 1024.0, "after": 1024.0, "measured_change": 0.0,
                        "predicted": None, "within_prediction": None},
    }}  # fmt: skip
    rows = result_rows(doc)
    assert rows[0] == {"figure": "cycles per run", "before": "100", "predicted change": "≥ 0",
                       "re-simulated": "90", "measured change": "−10", "within": "NO"}  # fmt: skip
    assert rows[1]["predicted change"] == "—" and rows[1]["within"] == "—"


def test_predicted_phrase_never_reads_as_a_negative_figure() -> None:
    # "memory peak ≥ -2.0 KiB" read as a negative peak; the sentence form says the change in words.
    assert predicted_phrase("max_tile_bytes", (-2048.0, None)) == "falls by at most 2.0 KiB"
    assert predicted_phrase("cycles", (0.0, None)) == "does not fall"
    assert predicted_phrase("samples_per_second", (None, 0.0)) == "does not rise"
    assert predicted_phrase("cycles", (None, 5.0)) == "rises by at most 5"
    assert predicted_phrase("cycles", (3.0, None)) == "rises by at least 3"
    assert predicted_phrase("cycles", (None, -4.0)) == "falls by at least 4"
    assert predicted_phrase("cycles", (10.0, 20.0)) == "rises by 10 to 20"
    assert predicted_phrase("cycles", (-20.0, -10.0)) == "falls by 10 to 20"
    assert predicted_phrase("cycles", (-5.0, 5.0)) == "changes by −5 to +5"
    assert predicted_phrase("cycles", (-7.0, -7.0)) == "falls by about 7"
    assert predicted_phrase("cycles", None) == "—"
    p = Proposal("x", {"batch": 2}, {"max_tile_bytes": (-2048.0, None), "cycles": (0.0, None)})
    line = predicted_line(p)
    assert line == "memory peak falls by at most 2.0 KiB, cycles per run does not fall"
    assert "-" not in line and "−" not in line


def test_the_cli_table_writes_a_fall_with_the_minus_sign() -> None:
    from tilescope.commands.whatif import render

    doc = {"proposal": 1, "change": {"batch": 8}, "insight": "i", "basis": "b", "report": "r", "whatif_report": "w",
           "executed": True, "notes": [], "figures": {
               "max_tile_bytes": {"label": "memory peak (fullest tile)", "before": 4096.0, "after": 2048.0,
                                  "measured_change": -2048.0, "predicted": {"low": -3072.0, "high": None},
                                  "within_prediction": True}}}  # fmt: skip
    row = render(doc).splitlines()[-1]
    assert row.split() == ["memory", "peak", "(fullest", "tile)", "4.0", "KiB", "≥", "\u22123.0", "KiB", "2.0", "KiB",
                           "\u22122.0", "KiB", "yes"]  # fmt: skip


def test_a_graph_over_its_ipus_memory_in_all_is_not_proposed_a_memory_proportion(tmp_path: Path) -> None:
    """Every tile over: together they need more than they hold, so no memory proportion (which frees
    at most a plan budget's difference a tile) can make it fit; the insight says how many IPUs'
    memory it needs at least (total / (bytes per tile x tiles per IPU), rounded up)."""
    model = tmp_path / "m.onnx"
    model.write_bytes(b"model")
    r = with_origin(synthetic_report(tmp_path / "r", num_ipus=1, tiles_per_ipu=16, oom_tiles=16), model,
                    available_memory_proportion=0.6, ipus=1)  # fmt: skip
    report = open_report(r)
    total = int(report.tile_memory()["total_bytes_including_gaps"].sum())
    bpt = report.target_info.bytes_per_tile
    assert total > 16 * bpt  # precondition: every tile over
    first = insights.insights(report)[0]
    assert first.text.startswith("16 tiles are out of memory")
    assert f"{total / (16 * bpt):.1f}x the " in first.text and "that 1 IPU holds" in first.text
    assert f"the memory of at least {-(-total // (16 * bpt))} IPUs" in first.text
    assert [p.change for p in first.proposals] == [{"ipus": 2}]
