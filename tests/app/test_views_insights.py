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


def _mlp_report(path, batch: int, sizes: tuple[int, ...] = (64, 32, 10)):  # type: ignore[no-untyped-def]
    from profiler import ipu_model
    from profiler.frontends.onnx import Session, examples, import_model, random_inputs
    from report_format.reader import open_report

    model = import_model(examples.mlp(sizes), ipu_model(tiles_per_ipu=4, bytes_per_tile=1 << 14), batch)
    with Session(model, {"autoReport.all": "true", "autoReport.directory": str(path)}) as s:
        s.run(random_inputs(model))
    return open_report(path)


def test_execution_hints_name_host_io_and_a_buffer_making_the_peak(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A small MLP inference on a 4-tile IPU of 16 KiB tiles: at batch 1 its run spends more on
    stream copies than STREAM_COPY_SHARE; at batch 16 the operand block its first matmul receives is
    most of a liveness peak that is more than PEAK_MEMORY_SHARE of the IPU's memory."""
    from app.views.execution_trace import trace_steps
    from app.views.liveness import live_variables
    from app.views.summary import liveness_summary

    # a wide input and a narrow hidden layer: copying the input in is over a third of a batch-1 run (in-place nodes cost PopLibs' dearer in-place worker base, so the 64-32-10 MLP fell just under)
    b1 = _mlp_report(tmp_path / "b1", 1, (256, 16, 10))
    steps = trace_steps(b1, 1)
    copies = steps.loc[steps["type"].astype(str).str.startswith("StreamCopy"), "cycles"].sum()
    assert copies > view.STREAM_COPY_SHARE * steps["cycles"].sum()
    one = view.execution_hints(b1)
    assert any(h.startswith("Host I/O bound: stream copies take") and "of run 1's cycles" in h for h in one)
    report = _mlp_report(tmp_path / "b16", 16)
    lv = liveness_summary(report)
    top = live_variables(report, lv["peak_step"]).iloc[0]
    assert top["bytes"] > view.PEAK_VARIABLE_SHARE * lv["peak_not_always_live_bytes"] > 0
    assert lv["peak_not_always_live_bytes"] > view.PEAK_MEMORY_SHARE * 4 * (1 << 14)
    said = [h for h in view.execution_hints(report) if h.startswith("One variable makes the liveness peak")]
    # a receive buffer (SPEC.md: <compute set>/received) is named so, with the ONNX node it serves (the
    # MLP's first Gemm, examples.mlp: fc0_3)
    assert top["name"] == "matmul/received"
    assert said == [
        "One variable makes the liveness peak: matmul/received, the receive buffer of compute set matmul (ONNX "
        f"node fc0_3; what its tiles receive from other tiles before it runs), holds {top['bytes'] / 1024:.1f} KiB of the "
        f"{lv['peak_not_always_live_bytes'] / 1024:.1f} KiB live at step {lv['peak_step']} "
        f"({top['bytes'] / lv['peak_not_always_live_bytes']:.0%}); the peak falls with it."
    ]


def test_an_idle_ipu_is_named(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Every node placed on IPU 0 of 2 (PopART's __ipu_number): IPU 1 computes nothing in the run."""
    from onnx import helper

    from profiler import ipu_model
    from profiler.frontends.onnx import Session, examples, import_model, random_inputs
    from profiler.multi_ipu.sharding import IPU_ATTRIBUTE
    from report_format.reader import open_report

    onnx_model = examples.mlp((64, 32, 10))
    for node in onnx_model.graph.node:
        node.attribute.append(helper.make_attribute(IPU_ATTRIBUTE, 0))
    model = import_model(onnx_model, ipu_model(tiles_per_ipu=4, bytes_per_tile=1 << 16, num_ipus=2))
    with Session(model, {"autoReport.all": "true", "autoReport.directory": str(tmp_path / "r")}) as s:
        s.run(random_inputs(model))
    said = [h for h in view.execution_hints(open_report(tmp_path / "r")) if "nearly idle" in h]
    assert len(said) == 1 and said[0].startswith("IPU 1 is nearly idle: it computes 0.0% of run 1")
