"""`tilescope run`: ONNX models and workload scripts, reports, summary, inputs/outputs, errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx.reference import ReferenceEvaluator

from profiler.frontends.onnx import examples
from report_format.reader import open_report
from tilescope.cli import main

ROOT = Path(__file__).resolve().parents[2]
JSON_KEYS = ["execution.total_cycles", "execution.samples_per_second", "memory.max_tile_bytes",
             "memory.out_of_memory_tiles", "timing.compile_s", "timing.run_s", "timing.report_write_s"]  # fmt: skip


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", "")  # restored after each test (run merges into it)


@pytest.fixture
def mlp_file(tmp_path: Path) -> Path:
    path = tmp_path / "mlp.onnx"
    onnx.save(examples.mlp((64, 32, 10)), path)
    return path


def _get(doc: dict, dotted: str) -> object:
    for part in dotted.split("."):
        doc = doc[part]
    return doc


def test_run_json_summary_matches_the_report(mlp_file: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    rc = main(["run", str(mlp_file), "--target", "GC200", "--batch", "4", "--runs", "2",
               "--report-dir", str(tmp_path / "rep"), "--json"])  # fmt: skip
    out = capsys.readouterr()
    assert rc == 0
    doc = json.loads(out.out)
    assert all(isinstance(_get(doc, k), int | float) for k in JSON_KEYS)
    for stage in ("importing", "compiling", "running inference 1/2", "running inference 2/2", "writing report"):
        assert stage in out.err
    report = open_report(tmp_path / "rep")
    runs = report.runs()
    # run 0 uploads the weights; the inference runs follow
    assert list(runs["name"]) == ["WeightsFromHost", "inference 0"]  # executionProfileProgramRunCount = 2
    assert doc["execution"]["cycles_per_run"][0] == int(runs["cycles"].iloc[1])
    assert doc["execution"]["total_cycles"] == sum(doc["execution"]["cycles_per_run"])
    clock = report.target().clock_hz
    assert doc["execution"]["samples_per_second"] == pytest.approx(
        4 * clock / np.mean(doc["execution"]["cycles_per_run"])
    )
    mem = report.tile_memory()["total_bytes_including_gaps"]
    assert doc["memory"]["max_tile_bytes"] == mem.max()
    assert doc["memory"]["out_of_memory_tiles"] == 0


def test_run_with_half_partials_says_so(mlp_file: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """--partials float16 is taken (the summary and the JSON say it; the plans are checked in test_onnx_models)."""
    assert main(["run", str(mlp_file), "--dtype", "float16", "--partials", "float16", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["partials"] == "float16"
    assert main(["run", str(mlp_file), "--dtype", "float16", "--partials", "float16"]) == 0
    assert "(batch 1, float16, partials float16)" in capsys.readouterr().out


def test_float16_values_out_of_range_are_named_once(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """A float32 weight of 1e6 has no float16 value: it saturates to 65,504 on the device (as the
    float16 converters for exported models do), and the run says which tensor, once (no warning per
    element); a float32 run says nothing."""
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.array([[1e6, 1.0, 2.0, 3.0]], np.float32), "big_w")
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "big_w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], [w],
    )  # fmt: skip
    path = tmp_path / "big.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    x = tmp_path / "x.npz"
    np.savez(x, x=np.ones((2, 4), np.float32))
    assert main(["run", str(path), "--dtype", "float16", "--inputs", str(x), "--save-outputs", str(tmp_path / "y.npz"),
                 "--json"]) == 0  # fmt: skip
    out = capsys.readouterr()
    assert (
        "note: values beyond float16's range saturated to its largest finite value in 1 tensor(s): 'big_w'" in out.err
    )
    assert json.loads(out.out)["saturated"] == ["big_w"]
    assert np.load(tmp_path / "y.npz")["y"][0].tolist() == [65504.0, 1.0, 2.0, 3.0]
    assert main(["run", str(path), "--random-inputs", "--json"]) == 0
    out = capsys.readouterr()
    assert "note:" not in out.err and json.loads(out.out)["saturated"] == []


def test_float16_softmax_row_masked_whole_by_float32_lowest_is_uniform(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """Hugging Face's exports mask attention with Where(mask, float32's lowest, scores). In float16 the
    constant saturates to -65,504, so a row masked whole softmaxes to uniform, as in float32 (an
    IEEE cast to -inf would make the row NaN); a row masked in part gives its masked places 0."""
    from onnx import TensorProto, helper, numpy_helper

    lowest = numpy_helper.from_array(np.array(np.finfo(np.float32).min, np.float32), "mask_value")
    graph = helper.make_graph(
        [helper.make_node("Where", ["m", "mask_value", "x"], ["s"]), helper.make_node("Softmax", ["s"], ["y"], axis=-1)],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4]),
         helper.make_tensor_value_info("m", TensorProto.BOOL, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], [lowest],
    )  # fmt: skip
    path = tmp_path / "masked.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    x = np.array([[0.5, 1.0, -2.0, 3.0], [1.0, 2.0, 3.0, 4.0]], np.float32)
    m = np.array([[True, True, True, True], [False, True, False, True]])
    np.savez(tmp_path / "in.npz", x=x, m=m)
    assert main(["run", str(path), "--dtype", "float16", "--inputs", str(tmp_path / "in.npz"),
                 "--save-outputs", str(tmp_path / "out.npz")]) == 0  # fmt: skip
    capsys.readouterr()
    y = np.load(tmp_path / "out.npz")["y"]
    e = np.exp(np.array([1.0, 3.0]) - 3.0)  # the unmasked places of row 1, by hand
    np.testing.assert_allclose(y[0], [0.25] * 4, atol=1e-3)
    np.testing.assert_allclose(y[1], [e[0] / e.sum(), 0.0, e[1] / e.sum(), 0.0], atol=1e-3)


def test_run_takes_an_available_memory_proportion(mlp_file: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """--available-memory-proportion reaches the plans (the JSON says it; the plans' budgets are checked in
    test_onnx_models); a value outside (0, 1] is refused in one line."""
    assert main(["run", str(mlp_file), "--available-memory-proportion", "0.3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["available_memory_proportion"] == 0.3
    assert main(["run", str(mlp_file), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["available_memory_proportion"] == 0.6
    with pytest.raises(SystemExit):
        main(["run", str(mlp_file), "--available-memory-proportion", "0"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.endswith("argument --available-memory-proportion: must be in (0, 1], got 0")


def test_inputs_and_saved_outputs_by_name(mlp_file: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    x = np.random.default_rng(3).standard_normal((5, 64)).astype(np.float32)
    np.savez(tmp_path / "in.npz", input=x)
    rc = main(["run", str(mlp_file), "--batch", "5", "--inputs", str(tmp_path / "in.npz"),
               "--save-outputs", str(tmp_path / "out.npz")])  # fmt: skip
    assert rc == 0
    assert "samples/s" in capsys.readouterr().out
    expected = ReferenceEvaluator(onnx.load(mlp_file)).run(None, {"input": x})[0]
    with np.load(tmp_path / "out.npz") as got:
        assert list(got.files) == ["output"]
        np.testing.assert_allclose(got["output"], expected, rtol=1e-4, atol=1e-6)


def test_engine_options_from_the_environment(mlp_file: Path, tmp_path: Path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    opts = {"autoReport.all": "true", "autoReport.directory": str(tmp_path / "env_report")}
    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", json.dumps(opts))
    assert main(["run", str(mlp_file), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["report"] == str(tmp_path / "env_report")
    assert (tmp_path / "env_report" / "manifest.json").is_file()


@pytest.mark.parametrize(
    ("make", "args", "message"),
    [
        (lambda d: d.joinpath("x.onnx").write_text("nope"), [], "not a readable ONNX model"),
        (lambda d: None, [], "no such file"),
        (lambda d: onnx.save(examples.mlp((4, 2)), d / "x.onnx"), ["--inputs", "{d}/in.npz"], "missing ['input']"),
        (lambda d: onnx.save(examples.mlp((4, 2)), d / "x.onnx"), ["--target", "Mk9"], "unknown target 'Mk9'"),
        (
            lambda d: onnx.save(examples.mlp((4, 2)), d / "x.onnx"),
            ["--runs", "0"],
            "--runs must be between 1 and 100,000",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2(make, args, message, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    make(tmp_path)
    np.savez(tmp_path / "in.npz", wrong=np.zeros(4, np.float32))
    rc = main(["run", str(tmp_path / "x.onnx"), *[a.format(d=tmp_path) for a in args]])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert err[-1].startswith("tilescope run: error:") and message in err[-1]


def test_too_little_host_memory_is_one_line_exit_2(mlp_file: Path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    # the matmul's vertex fields would not fit: a clear line, not the kernel's OOM killer
    monkeypatch.setattr("profiler.host.host_memory.available_bytes", lambda: 1000)
    assert main(["run", str(mlp_file), "--random-inputs"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("tilescope run: error: matmul [1,")
    assert "more host memory and 0.5 GB kept free; 0 MB is available" in err[-1]


@pytest.mark.parametrize("as_json", [False, True])
def test_a_model_that_does_not_fit_gives_its_memory_report_and_exit_1(
    mlp_file: Path, tmp_path: Path, monkeypatch, capsys, as_json: bool
) -> None:  # type: ignore[no-untyped-def]
    from profiler.chip.targets import ipu_model

    monkeypatch.setattr(
        "profiler.chip.targets.get_target", lambda name, ipus=1: ipu_model(tiles_per_ipu=2, bytes_per_tile=4096)
    )
    report = tmp_path / "oom_report"
    rc = main(["run", str(mlp_file), "--random-inputs", "--report-dir", str(report), *(["--json"] if as_json else [])])
    out, err = capsys.readouterr()
    assert rc == 1
    assert err.strip().splitlines()[-1].startswith("tilescope run: not executed: out of memory on 2 tile(s)")
    if as_json:
        doc = json.loads(out)
        assert doc["execution"]["executed"] is False and doc["execution"]["runs"] == 0
        assert doc["memory"]["out_of_memory_tiles"] == 2 and doc["report"] == str(report)
        assert doc["execution"]["identical_blocks"] is None  # nothing to outline in an MLP
    else:
        assert "not executed: the graph does not fit in tile memory" in out and "outputs       none" in out
    mem = open_report(report).tile_memory()
    assert (mem["total_bytes_including_gaps"] > 4096).all()
    # both tiles over: together they need more than the 2 x 4096 B they hold, whatever the mapping,
    # and the line says so (and how many IPUs' memory it needs) rather than propose a memory proportion
    total = int(mem["total_bytes_including_gaps"].sum())
    ipus = -(-total // 8192)
    assert ipus >= 2
    if as_json:
        assert doc["memory"]["total_bytes"] == total and doc["memory"]["tiles"] == 2
    else:
        line = next(x for x in out.splitlines() if x.startswith("cycles/run"))
        assert f"{total / 8192:.1f}x the 8.0 KiB that 1 IPU holds" in line, line
        assert f"the memory of at least {ipus:,} IPUs" in line and "--available-memory-proportion" not in line


def test_unsupported_operators_listed_before_anything_runs(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    m = examples.mlp((4, 2))
    m.graph.node[0].op_type = "Unique"
    m.graph.node[-1].op_type = "NonZero"
    onnx.save(m, tmp_path / "x.onnx")
    assert main(["run", str(tmp_path / "x.onnx")]) == 2
    err = capsys.readouterr().err
    assert "unsupported ONNX operator(s): Unique at fc0_3; NonZero at softmax_4" in err
    assert "compiling" not in err


def test_run_a_workload_script_with_a_report(tmp_path: Path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))
    rc = main(["run", "--report-dir", str(tmp_path / "script_report"), str(ROOT / "examples" / "matvec.py")])
    assert rc == 0
    assert "y[:4]" in capsys.readouterr().out
    assert open_report(tmp_path / "script_report").runs()["cycles"].iloc[0] > 0


def test_progress_counts_nodes_and_compute_sets_on_a_terminal() -> None:
    import io

    from profiler.chip.targets import ipu_model
    from profiler.frontends.onnx import Session, import_model, load_model
    from tilescope.progress import Counter

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    seen: dict[str, list[tuple[int, int]]] = {"nodes": [], "cs": []}
    model = import_model(load_model(examples.mlp((8, 4, 2))), ipu_model(tiles_per_ipu=4),
                         progress=lambda d, t: seen["nodes"].append((d, t)))  # fmt: skip
    # callbacks of (done, total) alone, as before the import and compile reported their work: still called
    Session(model).compile(progress=lambda d, t: seen["cs"].append((d, t)))
    n = len(examples.mlp((8, 4, 2)).graph.node)
    assert seen["nodes"] == [(i, n) for i in range(1, n + 1)]
    done = [d for d, _ in seen["cs"]]
    assert done == list(range(1, len(done) + 1)) and seen["cs"][-1] == (done[-1], done[-1])  # ends at total
    term, log = Terminal(), io.StringIO()
    for stream in (term, log):
        counter = Counter("nodes", stream)
        for i in range(1, 101):
            counter(i, 100)  # a fast loop: throttled, but the last count always shows
        counter.close()
    assert term.getvalue().startswith("\rtilescope run:   1/100 nodes (1%)")
    assert term.getvalue().rstrip(" \n").endswith("100/100 nodes")  # spaces clear the longer line before
    assert term.getvalue().count("\r") < 10 and log.getvalue() == ""


def test_progress_shows_the_fraction_and_the_time_left() -> None:
    """A fake clock: 10 of 40 compute sets in 30 s leaves ~90 s at that rate; a log (not a terminal)
    gets a line only once the work has run 15 s, and at most every 15 s."""
    import io

    from tilescope.progress import Counter, format_eta

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    now = [100.0]
    term, log = Terminal(), io.StringIO()
    counters = [Counter("compute sets planned", s, clock=lambda: now[0]) for s in (term, log)]
    for done, t in ((1, 101.0), (10, 130.0), (20, 140.0), (30, 150.0), (40, 160.0)):
        now[0] = t
        for c in counters:
            c(done, 40)
    lines = term.getvalue().split("\r")
    assert lines[1].rstrip() == "tilescope run:   1/40 compute sets planned (2%)"  # too early for a rate
    assert lines[2].rstrip() == "tilescope run:   10/40 compute sets planned (25%, ~1 min 30 s left)"
    assert lines[-1].rstrip() == "tilescope run:   40/40 compute sets planned"
    assert log.getvalue().splitlines() == [
        "tilescope run:   10/40 compute sets planned (25%, ~1 min 30 s left)",  # at 30 s
        "tilescope run:   30/40 compute sets planned (75%, ~17 s left)",  # 15 s later, not at 40 s
    ]
    assert (format_eta(59.4), format_eta(3725)) == ("59 s", "1 h 2 min")


@pytest.mark.slow  # ~3.4 s at load 4
def test_run_outline_calls_one_body_per_layer(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """--outline: the report's program tree holds a Call per layer, the code held once (the report's
    exchange code below the inline build's); with --ipus 2 it is refused in one line."""
    path = tmp_path / "bert.onnx"
    onnx.save(examples.bert_layer(seq=8, hidden=32, heads=4, ff=64, layers=3), path)
    exchange = {}
    for flag in ([], ["--outline"]):
        rep = tmp_path / f"rep{len(flag)}"
        assert main(["run", str(path), "--batch", "2", "--report-dir", str(rep), "--json", "--check", *flag]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["outline"] is bool(flag)
        assert main(["run", str(path), "--batch", "2", *flag]) == 0
        assert ("float32, partials float32, outlined)" in capsys.readouterr().out) is bool(flag)
        report = open_report(rep)
        calls = int((report.programs()["type"] == "Call").sum())
        assert calls == (3 if flag else 0)
        mem = report.tile_memory_by_category()
        exchange[bool(flag)] = int(mem.loc[mem["category"] == "internalExchangeCode", "bytes"].sum())
    assert exchange[True] < exchange[False]
    assert main(["run", str(path), "--outline", "--ipus", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("tilescope run: error: --outline builds on one IPU")


def test_a_transformer_that_does_not_fit_is_pointed_to_outline(tmp_path: Path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    from profiler.chip.targets import ipu_model

    monkeypatch.setattr(
        "profiler.chip.targets.get_target", lambda name, ipus=1: ipu_model(tiles_per_ipu=4, bytes_per_tile=8192)
    )
    path = tmp_path / "bert.onnx"
    model = examples.bert_layer(seq=8, hidden=32, heads=4, ff=64, layers=3)
    onnx.save(model, path)
    assert main(["run", str(path), "--batch", "2"]) == 1
    per_layer = len(model.graph.node) // 3
    assert f"try --outline: 3 identical blocks of {per_layer} nodes)" in capsys.readouterr().out


def test_an_onnx_report_opens_on_its_inference_not_the_weight_upload(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """The weight upload (run 0) is the longest run of a small-batch model; the viewer, the
    exports and the summary's marker still open on the inference run, the one that computes."""
    from app.render.html import report_html
    from app.views.runs import longest_run, opening_run

    onnx.save(examples.mlp((512, 512, 10)), tmp_path / "wide.onnx")  # 1 MiB of weights, batch 1
    assert main(["run", str(tmp_path / "wide.onnx"), "--report-dir", str(tmp_path / "r")]) == 0
    report = open_report(tmp_path / "r")
    runs = report.runs()
    assert list(runs["name"]) == ["WeightsFromHost", "inference 0"]
    assert longest_run(report) == 0, "precondition: the upload is the longer run here"
    assert opening_run(report) == 1
    capsys.readouterr()
    assert main(["summary", str(tmp_path / "r")]) == 0
    marked = [line for line in capsys.readouterr().out.splitlines() if "the viewer opens on it" in line]
    assert len(marked) == 1 and marked[0].lstrip().startswith("run 1")
    assert f"Run 1 ({runs['name'][1]}, the longest that computes)" in report_html(report)
