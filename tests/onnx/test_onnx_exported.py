"""Issue 14: exporter-style models (opsets 7-13) import without a traceback and match onnxruntime,
the batch override rewrites hard-coded batch-1 shapes (or names the node that pins the batch), any
failure in import is one line naming node, op type and opset, and ``tilescope run --check``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from profiler.chip.targets import ipu_model
from profiler.frontends.onnx import FrontendError, Session, import_model, load_model, random_inputs
from profiler.frontends.onnx.check import compare, reference_run
from profiler.frontends.onnx.operators import HANDLERS
from tests.onnx.exported import alexnet_style, bert_style, densenet_style
from tilescope.cli import main

TARGET = ipu_model(tiles_per_ipu=8, bytes_per_tile=16 << 20)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", "")


def run_and_reference(model: onnx.ModelProto, batch: int | None = None) -> tuple[dict, dict]:
    imported = import_model(load_model(model), TARGET, batch)
    feeds = random_inputs(imported, seed=5)
    with Session(imported) as s:
        got = s.run(feeds)
    want, runtime = reference_run(imported.onnx_model, feeds)  # type: ignore[arg-type]
    assert runtime.startswith(("onnxruntime", "onnx.reference"))
    return got, want


@pytest.mark.parametrize("opset", [7, 9, 11, 13])
@pytest.mark.parametrize("build", [alexnet_style, densenet_style], ids=["alexnet", "densenet"])
@pytest.mark.parametrize("batch", [None, 3])
def test_exporter_style_models_match_onnxruntime(opset: int, build, batch: int | None) -> None:  # type: ignore[no-untyped-def]
    # attribute-style axes (Unsqueeze/Squeeze/ReduceMean before 13), initializers listed as graph
    # inputs, Constant nodes, Shape->Gather->Unsqueeze->Concat->Reshape folded with the model's opset
    got, want = run_and_reference(build(opset), batch)
    assert got["output"].shape == ((batch or 1),) + want["output"].shape[1:]
    np.testing.assert_allclose(got["output"], want["output"], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("opset", [10, 11, 12])
@pytest.mark.parametrize("batch", [None, 3])
def test_exporter_style_bert_layer_matches_onnxruntime(opset: int, batch: int | None) -> None:
    # symbolic batch; head reshapes from Shape->Gather->Unsqueeze->Concat chains; an int64 mask input
    got, want = run_and_reference(bert_style(opset), batch)
    assert got["output"].shape == (batch or 1, 8, 16)
    np.testing.assert_allclose(got["output"], want["output"], rtol=1e-4, atol=1e-5)


def test_folding_follows_the_declared_opset() -> None:
    # Unsqueeze with an axes attribute (opset 11) on host values: onnx.reference evaluated it with
    # the newest opset before (TypeError "Issues with types ... attributes ['axes']")
    from profiler.frontends.onnx.importer import _fold

    node = helper.make_node("Unsqueeze", ["x"], ["y"], axes=[0], name="Unsqueeze_13")
    (y,) = _fold(node, [np.array(3, np.int64)], 11)
    assert y.shape == (1,) and y[0] == 3
    node = helper.make_node("ReduceSum", ["x"], ["y"], axes=[1], keepdims=0)
    (y,) = _fold(node, [np.arange(6, dtype=np.float32).reshape(2, 3)], 11)
    np.testing.assert_array_equal(y, [3, 12])


@pytest.mark.parametrize("flatten", ["constant", "shape"])
def test_batch_override_rewrites_hard_coded_batch_one(flatten: str) -> None:
    model = alexnet_style(9, flatten=flatten)
    got, want = run_and_reference(model, batch=4)
    assert got["output"].shape == (4, 10)
    np.testing.assert_allclose(got["output"], want["output"], rtol=1e-4, atol=1e-5)
    # the rewritten model is a valid model that onnxruntime runs at batch 4 (reference_run did) and
    # the user's model is not modified
    assert [int(d.dim_value) for d in model.graph.input[0].type.tensor_type.shape.dim][0] == 1


def test_batch_override_reshape_with_allowzero_gets_the_batch_itself() -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6])
    shape = numpy_helper.from_array(np.array([1, 6], np.int64), "shape")
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["r"], allowzero=1, name="flat"),
             helper.make_node("Relu", ["r"], ["y"], name="relu")]  # fmt: skip
    m = helper.make_model(helper.make_graph(nodes, "m", [x], [y], [shape]), opset_imports=[helper.make_opsetid("", 14)])
    got, want = run_and_reference(m, batch=5)
    assert got["y"].shape == (5, 6)
    np.testing.assert_allclose(got["y"], want["y"])


def test_batch_override_names_the_node_that_pins_the_batch() -> None:
    with pytest.raises(FrontendError) as info:
        import_model(load_model(alexnet_style(9, flatten="pinned")), TARGET, batch_size=4)
    msg = str(info.value)
    assert "node 'Reshape_8' (Reshape) pins the batch" in msg and "[256]" in msg and "\n" not in msg
    import_model(load_model(alexnet_style(9, flatten="pinned")), TARGET, batch_size=1)  # batch 1 is fine


def _tiny(nodes: list, inits: list, opset: int = 11) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    return helper.make_model(
        helper.make_graph(nodes, "m", [x], [y], inits), opset_imports=[helper.make_opsetid("", opset)]
    )


def test_a_failing_fold_is_one_line_naming_node_op_and_opset() -> None:
    # a host Gather whose index is out of range: onnx.reference raises inside constant folding
    inits = [numpy_helper.from_array(np.array([1, 2, 3], np.int64), "table"),
             numpy_helper.from_array(np.array(7, np.int64), "i")]  # fmt: skip
    nodes = [helper.make_node("Gather", ["table", "i"], ["g"], name="bad_gather"),
             helper.make_node("Unsqueeze", ["g"], ["u"], axes=[0], name="u"),
             helper.make_node("Reshape", ["x", "u"], ["y"], name="r")]  # fmt: skip
    with pytest.raises(FrontendError) as info:
        import_model(load_model(_tiny(nodes, inits)), TARGET)
    msg = str(info.value)
    assert msg.startswith("node 'bad_gather' (Gather, opset 11): ") and "\n" not in msg


def test_a_handler_bug_is_one_line_naming_node_op_and_opset(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(b, node, inputs):  # type: ignore[no-untyped-def]
        raise KeyError("internal")

    monkeypatch.setitem(HANDLERS, "Relu", broken)
    with pytest.raises(FrontendError, match=r"^node 'act' \(Relu, opset 11\): KeyError: 'internal'$"):
        import_model(load_model(_tiny([helper.make_node("Relu", ["x"], ["y"], name="act")], [])), TARGET)


def test_compare_reports_abs_and_rel_differences() -> None:
    want = {"a": np.array([1.0, -2.0, 0.0], np.float32), "n": np.array([1, 2], np.int64)}
    (a, n) = compare({"a": want["a"] + np.float32([0.0, 0.02, 0.0]), "n": want["n"]}, want, 1e-3)
    assert a.max_abs_diff == pytest.approx(0.02, rel=1e-4) and a.max_rel_diff == pytest.approx(0.01, rel=1e-3)
    assert not a.within and n.within and n.max_abs_diff == 0
    (a2,) = compare({"a": want["a"] + np.float32(1e-5)}, {"a": want["a"]}, 1e-3)
    assert a2.within


def test_compare_counts_values_lost_to_nan_or_inf_apart_from_the_differences() -> None:
    """A float16 run whose activations overflowed: its NaN/inf outputs are counted, the difference
    is over the other elements (not an unhelpful "max abs diff inf"), and the check fails."""
    want = {"y": np.array([0.0, 1.0, 2.0, np.inf], np.float32)}
    (y,) = compare({"y": np.array([np.nan, 1.001, np.inf, np.inf], np.float32)}, want, 1e-2)
    assert (y.nonfinite, y.size) == (2, 4) and y.max_abs_diff == pytest.approx(0.001, rel=1e-3) and not y.within
    (ok,) = compare({"y": np.array([0.0, 1.0, 2.0, np.inf], np.float32)}, want, 1e-2)
    assert ok.nonfinite == 0 and ok.within


@pytest.fixture
def exported_file(tmp_path: Path) -> Path:
    path = tmp_path / "alexnet9.onnx"
    onnx.save(alexnet_style(9, flatten="constant"), path)
    return path


def test_run_check_passes_and_json_carries_it(exported_file: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    rc = main(["run", str(exported_file), "--target", "IPUModel", "--batch", "4", "--check", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and doc["batch_size"] == 4
    check = doc["check"]
    assert check["passed"] and check["runtime"] and check["tolerance"] == 1e-3
    assert set(check["outputs"]) == {"output"}
    assert 0 <= check["outputs"]["output"]["max_abs_diff"] < 1e-4 and check["outputs"]["output"]["within"]


def test_run_check_fails_on_a_wrong_kernel(exported_file: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    rc = main(["run", str(exported_file), "--target", "IPUModel", "--check", "--test-wrong-kernel", "Relu"])
    out = capsys.readouterr()
    assert rc == 1
    assert "check         FAILED" in out.out and "BEYOND TOLERANCE" in out.out
    assert "check failed: output(s) output differ" in out.err
    # a looser tolerance does not hide an error of this size either; a huge one does
    assert main(["run", str(exported_file), "--target", "IPUModel", "--check", "--check-tolerance", "0.05",
                 "--test-wrong-kernel", "Relu"]) == 1  # fmt: skip
    assert main(["run", str(exported_file), "--target", "IPUModel", "--check", "--check-tolerance", "1000",
                 "--test-wrong-kernel", "Relu"]) == 0  # fmt: skip


def test_run_import_errors_are_one_line_exit_2(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "pinned.onnx"
    onnx.save(alexnet_style(9, flatten="pinned"), path)
    rc = main(["run", str(path), "--target", "IPUModel", "--batch", "2"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert "Traceback" not in "\n".join(err) and "pins the batch" in err[-1]


def _vit_head(producer: str) -> onnx.ModelProto:
    """A ViT-style class token joined to the patch sequence, as exporters write it at batch 1."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5, 8])
    inits = [numpy_helper.from_array(np.linspace(-1, 1, 8, dtype=np.float32).reshape(1, 1, 8), "cls"),
             numpy_helper.from_array(np.array([1, 1, 8], np.int64), "cls_shape")]  # fmt: skip
    if producer == "Expand":
        first = helper.make_node("Expand", ["cls", "cls_shape"], ["tok"], name="expand_cls")
    elif producer == "ConstantOfShape":
        first = helper.make_node("ConstantOfShape", ["cls_shape"], ["tok"], name="zeros",
                                 value=numpy_helper.from_array(np.array([0.5], np.float32)))  # fmt: skip
    else:  # the token itself: nothing to rewrite
        first = helper.make_node("Identity", ["cls"], ["tok"], name="token")
    nodes = [first, helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Concat", ["tok", "r"], ["y"], name="join", axis=1)]  # fmt: skip
    return helper.make_model(
        helper.make_graph(nodes, "vit", [x], [y], inits), opset_imports=[helper.make_opsetid("", 13)]
    )


@pytest.mark.parametrize("producer", ["Expand", "ConstantOfShape"])
def test_batch_override_rewrites_expand_and_constant_of_shape_joined_to_the_batch(producer: str) -> None:
    got, want = run_and_reference(_vit_head(producer), batch=3)
    assert got["y"].shape == (3, 5, 8)
    np.testing.assert_allclose(got["y"], want["y"])


def test_batch_override_names_a_constant_joined_to_the_batch() -> None:
    with pytest.raises(FrontendError, match=r"node 'token' \(Identity\) pins the batch: its output 'tok'"):
        import_model(load_model(_vit_head("Identity")), TARGET, batch_size=3)


def test_a_failure_outside_any_node_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import profiler.frontends.onnx.importer as importer

    def broken(*args, **kw):  # type: ignore[no-untyped-def]
        raise RuntimeError("unexpected\nsecond line")

    monkeypatch.setattr(importer, "_input_specs", broken)
    with pytest.raises(FrontendError, match=r"^model 'alexnet_style': import failed: RuntimeError: unexpected$"):
        import_model(load_model(alexnet_style(9)), TARGET)


def test_a_fold_that_onnx_reference_cannot_do_falls_back_to_the_device(monkeypatch: pytest.MonkeyPatch) -> None:
    import profiler.frontends.onnx.importer as importer

    def no_reference(node, inputs, opset):  # type: ignore[no-untyped-def]
        raise NotImplementedError(f"no {node.op_type} at opset {opset}")  # as for an old operator version

    inits = [numpy_helper.from_array(np.array([-1.0, 2.0, -3.0], np.float32), "w")]
    nodes = [helper.make_node("Relu", ["w"], ["rw"], name="relu_w"), helper.make_node("Add", ["x", "rw"], ["y"])]
    model = _tiny(nodes, inits)
    model.graph.input[0].type.tensor_type.shape.dim[1].dim_value = 3
    monkeypatch.setattr(importer, "_fold", no_reference)
    got, want = run_and_reference(model)
    np.testing.assert_allclose(got["y"], want["y"])
    # a node the handler cannot take either: the fold's error, one line
    nodes = [
        helper.make_node("Range", ["a", "b", "c"], ["r"], name="range"),
        helper.make_node("Add", ["x", "r"], ["y"]),
    ]
    inits = [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in (("a", 0), ("b", 3), ("c", 1))]
    model = _tiny(nodes, inits)
    model.graph.input[0].type.tensor_type.shape.dim[1].dim_value = 3
    with pytest.raises(
        FrontendError, match=r"^node 'range' \(Range, opset 11\): NotImplementedError: no Range at opset 11$"
    ):
        import_model(load_model(model), TARGET)
