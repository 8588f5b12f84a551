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
from profiler.frontends.onnx.profile import ProfileError, ProfileOptions, profile_model
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


def _embedding_model(rows: int, cols: int, external: Path | None) -> onnx.ModelProto:
    """ids [1, 8] -> Gather from a [rows, cols] float32 table -> ReduceSum: the table's data held in
    ``external`` (not written: the file is absent) or inline."""
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 8])
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, [])
    nodes = [helper.make_node("Gather", ["table", "ids"], ["emb"], axis=0),
             helper.make_node("ReduceSum", ["emb"], ["out"], keepdims=0)]  # fmt: skip
    init = TensorProto(name="table", data_type=TensorProto.FLOAT, dims=[rows, cols])
    if external is None:
        init.raw_data = np.zeros((rows, cols), np.float32).tobytes()
    else:
        init.data_location = TensorProto.EXTERNAL
        init.external_data.add(key="location", value=external.name)
    graph = helper.make_graph(nodes, "embedding", [ids], [out], initializer=[init])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def test_a_1_gib_table_whose_external_data_is_absent_profiles_without_values(tmp_path, monkeypatch) -> None:
    """[262,144 x 1,024] float32 declared (1 GiB) in weights.bin, which does not exist: compile-only
    imports, compiles and estimates it holding far less than the table (no value pool, no upload,
    no numerics); a run with values says in one line that the file is missing."""
    path = tmp_path / "embedding.onnx"
    onnx.save(_embedding_model(262_144, 1024, tmp_path / "weights.bin"), path)
    assert not (tmp_path / "weights.bin").exists()
    where = tmp_path / "report"
    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", json.dumps({"autoReport.all": "true",
                                                            "autoReport.directory": str(where)}))  # fmt: skip
    options = ProfileOptions(target="GC200", dtype="float16", compile_only=True)
    tracemalloc.start()
    try:
        result = profile_model(path, options, lambda s: pytest.fail("compile-only makes no inputs"))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    e = result.session.engine
    assert not e.out_of_memory and result.cycles and result.outputs == {}
    assert e._states == [] and len(e._values) == 0  # no value of any tensor was made
    assert peak < 64 * 2**20, f"{peak / 2**20:.0f} MiB traced for a 1 GiB table"
    report = open_report(where)
    assert report.estimated_runs == [0, 1]
    table = report.variables().set_index("name").loc["table"]
    assert int(table["bytes"]) == 262_144 * 1024 * 2  # placed in float16, as with values
    reasons = report.data_dependent_programs()["reason"].tolist()
    assert reasons and all(r.startswith("MultiSlice") for r in reasons)  # the gather follows the ids
    with pytest.raises(ProfileError, match=r"weight 'table' is held in 'weights.bin', which is missing"):
        profile_model(path, ProfileOptions(target="GC200", dtype="float16"), lambda s: {})


def test_a_folded_weight_gets_its_shape_by_inference(tmp_path, monkeypatch) -> None:
    """A weight Transposed and Cast on the host (as exporters write them) folds by shape alone: the
    compile-only profile equals the simulated one."""
    w = helper.make_tensor("w", TensorProto.FLOAT, [32, 64], np.ones(32 * 64, np.float32))
    nodes = [helper.make_node("Transpose", ["w"], ["wt"], perm=[1, 0]),
             helper.make_node("Cast", ["wt"], ["w16"], to=TensorProto.FLOAT16),
             helper.make_node("MatMul", ["x", "w16"], ["y"])]  # fmt: skip
    graph = helper.make_graph(nodes, "folded", [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [4, 32])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT16, None)], initializer=[w])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    simulated, estimated = _profile(tmp_path, monkeypatch, model, "folded", target="IPUModel")
    assert simulated.execution_steps().equals(estimated.execution_steps())
    assert estimated.variables().set_index("name").loc["w16", "shape"].tolist() == [32, 64]


def test_cli_compile_only_end_to_end(tmp_path, capsys) -> None:
    path = tmp_path / "mlp.onnx"
    onnx.save(examples.mlp((64, 32, 10)), path)
    rc = main(["run", str(path), "--target", "IPUModel", "--compile-only", "--report-dir", str(tmp_path / "r"),
               "--json"])  # fmt: skip
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and doc["execution"]["estimated"] is True and doc["outputs"] == {}
    assert doc["execution"]["cycles_per_run"][0] > 0
    assert open_report(tmp_path / "r").estimated_runs == [0, 1]
    assert main(["run", str(path), "--target", "IPUModel", "--compile-only"]) == 0
    assert "estimated, compile-only" in capsys.readouterr().out
    assert main(["run", str(path), "--compile-only", "--check"]) == 2
    assert "--check needs values; --compile-only computes none" in capsys.readouterr().err
