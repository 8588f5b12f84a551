"""Insights view."""

from __future__ import annotations

from app.views import insights as view


def test_top_lists(small_report):
    assert view.top_tiles(small_report, 2)["tile"].tolist() == [0, 1]
    assert view.top_tiles(small_report, 1)["percent_of_tile"].iat[0] == 21.0  # 210 of 1000 B
    assert view.over_memory_tiles(small_report).empty
    tv = view.top_vertices(small_report).set_index("name")
    assert tv.loc["poplin::MatMul<half>", "bytes"] == 6 * 24 + 6 * 100
    assert view.top_exchanges(small_report)["program_id"].tolist() == [7, 3]


def test_hints_name_real_numbers(small_report, tmp_path):
    # cycle-weighted tile balance of compute steps: (0.625*40 + 0.458*60 + 1*5 + 1*5) / 110 = 0.57 >= 0.5;
    # fullest tile 210 B is 1.3x the mean; gaps are 8 of 1308 B: nothing to say
    assert view.hints(small_report) == ["No memory or balance problems stand out."]
    from report_format.reader import open_report
    from report_format.synthetic import synthetic_report

    oom = open_report(synthetic_report(tmp_path / "oom", num_ipus=1, tiles_per_ipu=16, oom_tiles=2))
    assert len(view.over_memory_tiles(oom)) == 2
    assert view.hints(oom)[0].startswith("2 tiles are out of memory")


def test_distinct_notes_drops_repeats_and_notes_another_contains() -> None:
    from app.views.summary import MAX_COMPARED_NOTES, distinct_notes

    notes = ["out of memory on 2 tiles", " execution not captured: out of memory on 2 tiles", "a", "a ", "b"]
    assert distinct_notes(notes) == ["execution not captured: out of memory on 2 tiles", "b"]
    many = [f"note {i:05d}" for i in range(MAX_COMPARED_NOTES + 1)] * 2  # past the cap: exact repeats only
    assert distinct_notes(many) == many[: MAX_COMPARED_NOTES + 1]
