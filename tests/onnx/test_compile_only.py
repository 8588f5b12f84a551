"""Compile-only profiles (tilescope.compileOnly, ``tilescope run --compile-only``): no values, and an
estimated trace equal, step by step, to the simulated one wherever nothing depends on data."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from profiler import Engine, Execute, Graph, If, Sequence, ipu_model
from profiler.frontends.onnx import examples, random_inputs
from profiler.frontends.onnx.profile import ProfileOptions, profile_model
from report_format.reader import Report, open_report
from tilescope.cli import main


def _profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: onnx.ModelProto, name: str,
             **options: object) -> tuple[Report, Report]:  # fmt: skip
    """The model profiled with values and compile-only, each report opened."""
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, path)
    reports = []
    for compile_only in (False, True):
        where = tmp_path / f"{name}-{'estimated' if compile_only else 'simulated'}"
        monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", json.dumps({"autoReport.all": "true",
                                                                "autoReport.directory": str(where)}))  # fmt: skip
        opts = ProfileOptions(compile_only=compile_only, **options)  # type: ignore[arg-type]
        result = profile_model(path, opts, lambda s: random_inputs(s.model, 0, rows=s.replicas * s.micro_batches))
        result.session.close()
        reports.append(open_report(where))
    return reports[0], reports[1]


CASES = {
    "mlp": (examples.mlp((64, 32, 10)), {"target": "IPUModel", "batch": 4}),
    "cnn": (
        examples.resnet(image=16, blocks=(1, 1), widths=(8, 16), stem=8, classes=10),
        {"target": "IPUModel", "batch": 2, "dtype": "float16"},
    ),
    "bert_layer": (examples.bert_layer(seq=8, hidden=32, heads=4, ff=64), {"target": "IPUModel", "batch": 1}),
    "pipelined": (
        examples.mlp((64, 48, 32, 10)),
        {"target": "IPUModel", "batch": 2, "ipus": 2, "pipeline": True, "micro_batches": 4},
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_estimated_cycles_equal_executed_cycles_step_by_step(tmp_path, monkeypatch, case) -> None:
    """Nothing in these models depends on data: the compile-only trace is the simulated one, every
    run, step, IPU and tile; only the runs' provenance differs (and the estimated run has no outputs)."""
    model, options = CASES[case]
    simulated, estimated = _profile(tmp_path, monkeypatch, model, case, **options)
    assert simulated.estimated_runs == [] and estimated.estimated_runs == [0, 1]  # weights upload, inference
    assert simulated.runs().equals(estimated.runs())
    sim, est = simulated.execution_steps(), estimated.execution_steps()
    assert len(sim) > 20 and sim.equals(est)
    assert simulated.table("tile_cycles").equals(estimated.table("tile_cycles"))
    assert simulated.table("liveness").equals(estimated.table("liveness"))
    assert simulated.tile_memory().equals(estimated.tile_memory())
    assert estimated.data_dependent_programs().empty


def _if_engine(options: dict[str, str]) -> tuple[Engine, int, int]:
    """An If whose then-branch (4 squares) costs more than its else (one negation); the cycles of each."""
    g = Graph(ipu_model(tiles_per_ipu=4))
    a, flag = g.add_variable("float", [64], "a"), g.add_variable("int", [1], "flag")
    for v in (a, flag):
        g.set_tile_mapping(v, 0)
    g.create_host_write("flag", flag)
    neg, sq = g.add_compute_set("neg"), g.add_compute_set("square")
    g.add_vertex(neg, "popops::Neg", {"in": a, "out": a}, tile=0)
    g.add_vertex(sq, "popops::Square", {"in": a, "out": a}, tile=0)
    heavy = Sequence(*[Execute(sq) for _ in range(4)])
    e = Engine(g, [Sequence(If(flag, heavy, Execute(neg)))], options)
    e.compile()
    by_name = {st.name: int(st.cost.tile_cycles.max()) for st in e.compiled.steps}
    return e, 4 * by_name["square"], by_name["neg"]


def test_an_if_is_data_dependent_and_compile_only_takes_its_longest_branch(tmp_path) -> None:
    opts = {"autoReport.all": "true", "autoReport.directory": str(tmp_path / "r")}
    e, heavy, light = _if_engine(opts)
    e.load()
    e.write_tensor("flag", [0])
    e.run(0)
    simulated = e.last_run_cycles
    co, _, _ = _if_engine(opts | {"tilescope.compileOnly": "true", "autoReport.directory": str(tmp_path / "c")})
    co.run(0)
    assert heavy > light and co.last_run_cycles - simulated == heavy - light  # the then-branch, not the taken else
    co.close()
    report = open_report(tmp_path / "c")
    dd = report.data_dependent_programs()
    assert dd["reason"].tolist() == ["If: which branch runs depends on a tensor's value (a compile-only estimate "
                                     "takes the longest)"]  # fmt: skip
    assert report.programs().set_index("program_id").loc[dd["program_id"][0], "type"] == "If"
    assert report.estimated_runs == [0] and len(report.execution_steps()) == 4  # the four squares
    with pytest.raises(Exception, match="compile-only"):
        co.read_tensor("flag")


def _matmul_model(n: int, external: str | None) -> onnx.ModelProto:
    """x [1, n] @ w [n, n] float32: w's data in the file ``external`` (not written: absent), or inline."""
    w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[n, n])
    if external is None:
        w.raw_data = np.random.default_rng(0).standard_normal((n, n), np.float32).tobytes()
    else:
        w.data_location = TensorProto.EXTERNAL
        w.external_data.add(key="location", value=external)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n])
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "mm", [x], [y], initializer=[w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def test_a_1_gib_weight_whose_external_data_is_absent_imports_without_values(tmp_path) -> None:
    """w [16,384 x 16,384] float32 declared (1 GiB) in weights.bin, which does not exist: a
    compile-only load and import hold far less than it (the weight and its float16 upload are
    shape-only placeholders); a load with values says in one line that the file is missing."""
    from profiler.chip.targets import get_target
    from profiler.frontends.onnx import import_model, load_model
    from profiler.frontends.onnx.errors import FrontendError
    from profiler.poplar.shape_only import is_placeholder

    path = tmp_path / "mm.onnx"
    onnx.save(_matmul_model(16_384, "weights.bin"), path)
    assert not (tmp_path / "weights.bin").exists()
    tracemalloc.start()
    try:
        model = import_model(load_model(path, values=False), get_target("GC200"), dtype="float16", values=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # what remains is the graph: the weight's tile mapping and the matmul's plan (72 MiB measured)
    assert peak < 2**30 // 8, f"{peak / 2**20:.0f} MiB traced for a 1 GiB weight"
    (upload,) = model.weights.values()
    assert is_placeholder(upload) and upload.shape == (16_384, 16_384) and upload.dtype == np.float16
    with pytest.raises(FrontendError, match=r"^\S+mm.onnx: weight 'w' is held in 'weights.bin', which is missing; "):
        load_model(path)


def test_small_external_weights_absent_with_a_batch_override(tmp_path, capsys, monkeypatch) -> None:
    """An MLP (symbolic batch N) with every weight, small ones included, in an external file that is
    absent: a compile-only run at --batch 4 imports (the batch tracing reads no small weight's values)
    and profiles batch 4."""
    # the command merges its options into POPLAR_ENGINE_OPTIONS (for a script's engines): restored after
    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", "{}")
    path = tmp_path / "m.onnx"
    onnx.save(examples.mlp((64, 32, 10)), path, save_as_external_data=True, all_tensors_to_one_file=True,
              location="m.bin", size_threshold=0)  # fmt: skip
    (tmp_path / "m.bin").unlink()
    assert main(["run", str(path), "--compile-only", "--batch", "4", "--json",
                 "--report-dir", str(tmp_path / "r")]) == 0  # fmt: skip
    doc = json.loads(capsys.readouterr().out)
    assert doc["batch_size"] == 4 and doc["execution"]["estimated"]


def test_compile_only_holds_no_values(tmp_path, monkeypatch) -> None:
    """The same model profiled with values holds at least its float16 weight's bytes more at its peak
    (the weight read, converted, uploaded, every value computed); compile-only holds no tensor value."""
    n = 2048  # a 16 MiB float32 weight
    path = tmp_path / "mm.onnx"
    onnx.save(_matmul_model(n, None), path)
    monkeypatch.delenv("POPLAR_ENGINE_OPTIONS", raising=False)
    peaks, cycles = [], []
    for compile_only in (False, True):
        tracemalloc.start()
        try:
            options = ProfileOptions(target="GC200", dtype="float16", compile_only=compile_only)
            result = profile_model(path, options, lambda s: random_inputs(s.model, 0))
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
        e = result.session.engine
        if compile_only:
            assert e._states == [] and result.outputs == {}
        else:
            assert result.outputs["y"].shape == (1, n)
        cycles.append(e.last_run_cycles)
        result.session.close()
    assert cycles[0] == cycles[1]  # the same estimate as the run with values
    assert peaks[0] - peaks[1] >= n * n * 2, [p / 2**20 for p in peaks]  # at least the float16 weight


def test_compile_only_builds_no_value_accessors(tmp_path, monkeypatch) -> None:
    """A compile-only engine's steps carry no value accessor (an element index for any view numpy
    strides cannot describe: gigabytes at an LLM's attention sizes): copies and stream copies have no
    action, and no compute-set batch built its fields. With values, the same graph has them all."""
    from profiler.executable import actions

    model, options = CASES["pipelined"]  # its stages' copies between IPUs, and a kernel per compute set
    path = tmp_path / "mlp.onnx"
    onnx.save(model, path)
    monkeypatch.delenv("POPLAR_ENGINE_OPTIONS", raising=False)
    for compile_only in (False, True):
        opts = ProfileOptions(compile_only=compile_only, **options)  # type: ignore[arg-type]
        result = profile_model(path, opts, lambda s: random_inputs(s.model, 0, rows=s.replicas * s.micro_batches))
        steps = result.session.engine.compiled.steps
        kinds = [type(st.action) for st in steps if st.action is not None]
        built = [b for st in steps if isinstance(st.action, actions.Execute) for b in st.action.plan.kernel or []
                 if b._fields is not None]  # fmt: skip
        if compile_only:
            assert not any(k in (actions.Copy, actions.FromHost, actions.ToHost) for k in kinds) and built == []
        else:
            assert actions.Copy in kinds and actions.FromHost in kinds and actions.ToHost in kinds and built
        result.session.close()


def test_data_dependent_steps_are_named_in_both_kinds_of_report(tmp_path, monkeypatch) -> None:
    """A Gather from a table (an embedding) runs popops::MultiSlice, whose real cycles follow the
    indices: simulated and compile-only reports both name those steps, and their traces agree."""
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 8])
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 8, 64])
    table = helper.make_tensor("table", TensorProto.FLOAT, [512, 64], np.ones(512 * 64, np.float32))
    graph = helper.make_graph([helper.make_node("Gather", ["table", "ids"], ["out"], axis=0)], "embedding", [ids],
                              [out], initializer=[table])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    simulated, estimated = _profile(tmp_path, monkeypatch, model, "embedding", target="IPUModel")
    for report in (simulated, estimated):
        reasons = report.data_dependent_programs()["reason"].tolist()
        assert reasons and all(r.startswith("MultiSlice: how many indices fall in a tile's rows") for r in reasons)
    assert simulated.data_dependent_programs().equals(estimated.data_dependent_programs())
    assert simulated.execution_steps().equals(estimated.execution_steps())


def test_a_folded_weight_gets_its_shape_by_inference(tmp_path, monkeypatch) -> None:
    """A weight Transposed and Cast on the host (as exporters write them) folds by shape alone: the
    compile-only profile equals the simulated one."""
    w = helper.make_tensor("w", TensorProto.FLOAT, [128, 64], np.ones(128 * 64, np.float32))  # > VALUE_LIMIT
    nodes = [helper.make_node("Transpose", ["w"], ["wt"], perm=[1, 0]),
             helper.make_node("Cast", ["wt"], ["w16"], to=TensorProto.FLOAT16),
             helper.make_node("MatMul", ["x", "w16"], ["y"])]  # fmt: skip
    graph = helper.make_graph(nodes, "folded", [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [4, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [4, 128])],
                              initializer=[w])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    simulated, estimated = _profile(tmp_path, monkeypatch, model, "folded", target="IPUModel")
    assert simulated.execution_steps().equals(estimated.execution_steps())
    assert estimated.variables().set_index("name").loc["w16", "shape"].tolist() == [64, 128]


def test_cli_compile_only_end_to_end(tmp_path, capsys, monkeypatch) -> None:
    # the command merges its options into POPLAR_ENGINE_OPTIONS (for a script's engines): restored after
    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", "{}")
    path = tmp_path / "mlp.onnx"
    onnx.save(examples.mlp((64, 32, 10)), path)
    rc = main(["run", str(path), "--target", "IPUModel", "--compile-only", "--report-dir", str(tmp_path / "r"),
               "--json"])  # fmt: skip
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and doc["execution"]["estimated"] is True and doc["outputs"] == {}
    assert doc["execution"]["cycles_per_run"][0] > 0
    assert open_report(tmp_path / "r").estimated_runs == [0, 1]
    assert main(["summary", str(tmp_path / "r")]) == 0
    assert "; ESTIMATED (compile-only: no values)" in capsys.readouterr().out
    assert main(["summary", str(tmp_path / "r"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["execution"]["estimated"] is True
    assert main(["run", str(path), "--target", "IPUModel", "--compile-only"]) == 0
    assert "estimated, compile-only" in capsys.readouterr().out
    assert main(["run", str(path), "--compile-only", "--check"]) == 2
    assert "--check needs values; --compile-only computes none" in capsys.readouterr().err
