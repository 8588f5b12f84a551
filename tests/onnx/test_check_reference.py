"""--check's reference run: computed before the simulation compiles (its copy of the model let go
first), one session for every micro-batch, and the same numbers as a reference computed apart."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from profiler.frontends.onnx import examples, random_inputs
from profiler.frontends.onnx.check import compare, reference_run
from profiler.frontends.onnx.profile import ProfileOptions, profile_model
from profiler.frontends.onnx.shapes import VALUE_LIMIT
from tilescope.cli import main

MICRO_BATCHES = 4


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", "")


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """BERT-shaped (2 layers, hidden 32, 4 heads, seq 8), batch 1 per micro-batch; its word
    embeddings (160 x 32) are above the size whose data a dropped model keeps (shapes.VALUE_LIMIT)."""
    path = tmp_path_factory.mktemp("bert") / "bert.onnx"
    onnx.save(examples.bert(layers=2, hidden=32, heads=4, ff=64, vocab=160, seq=8, max_positions=16, batch=1), path)
    return path


def _inputs(rows: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    return {
        "input_ids": rng.integers(0, 50, (rows, 8)).astype(np.int64),
        "attention_mask": (rng.random((rows, 8)) < 0.8).astype(np.int64),
        "token_type_ids": rng.integers(0, 2, (rows, 8)).astype(np.int64),
    }


def _onnxruntime(path: Path, feeds: dict[str, np.ndarray]) -> np.ndarray:
    """The reference computed apart: onnxruntime itself, one micro-batch at a time, in its own session each."""
    parts = []
    for i in range(MICRO_BATCHES):
        sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        parts.append(sess.run(None, {k: v[i : i + 1] for k, v in feeds.items()})[0])
    return np.concatenate(parts)


def test_one_session_for_every_part_gives_the_numbers_a_session_each_gives(tiny_bert: Path) -> None:
    model = onnx.load(tiny_bert)
    feeds = _inputs(MICRO_BATCHES)
    joined, runtime = reference_run(model, feeds, parts=MICRO_BATCHES)
    assert runtime.startswith("onnxruntime")
    assert joined["output"].shape == (MICRO_BATCHES, 8, 2)
    np.testing.assert_array_equal(joined["output"], _onnxruntime(tiny_bert, feeds))  # bit for bit


def test_the_reference_runs_before_compiling_and_the_onnx_weights_are_let_go(tiny_bert: Path) -> None:
    seen: list[tuple[bool, dict[str, np.ndarray]]] = []
    sizes: list[int] = []
    stages: list[str] = []

    def reference(model, inputs) -> None:  # noqa: ANN001
        seen.append((not any(line.startswith("compiling") for line in stages), dict(inputs)))
        sizes.extend(len(t.raw_data) for t in model.onnx_model.graph.initializer)
        want, _ = reference_run(model.onnx_model, inputs, parts=MICRO_BATCHES)
        seen.append((True, want))

    options = ProfileOptions(ipus=2, pipeline=True, micro_batches=MICRO_BATCHES, dtype="float32")
    result = profile_model(tiny_bert, options, lambda s: random_inputs(s.model, 0, rows=MICRO_BATCHES),
                           progress=stages.append, reference=reference)  # fmt: skip
    # called once with the very inputs the simulation ran, before the compile (progress says "compiling" after)
    assert len(seen) == 2 and seen[0][0] and seen[0][1].keys() == result.inputs.keys()
    assert all(np.array_equal(seen[0][1][k], result.inputs[k]) for k in result.inputs)
    assert max(sizes) > 4 * VALUE_LIMIT  # the reference saw the weights...
    big = [t for t in result.model.onnx_model.graph.initializer if int(np.prod(t.dims)) > VALUE_LIMIT]
    assert big and all(not t.raw_data and not t.float_data for t in big)  # ...the result holds none of them
    checks = compare(result.outputs, seen[1][1], 1e-3)
    assert all(c.within for c in checks) and checks[0].max_abs_diff > 0  # float32 both, different summation orders


def test_check_reports_the_difference_to_a_reference_computed_apart(
    tiny_bert: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    feeds = _inputs(MICRO_BATCHES)
    inputs, outputs = tmp_path / "in.npz", tmp_path / "out.npz"
    np.savez(inputs, **feeds)
    argv = ["run", str(tiny_bert), "--ipus", "2", "--pipeline", "--micro-batches", str(MICRO_BATCHES),
            "--inputs", str(inputs), "--save-outputs", str(outputs), "--check", "--json"]  # fmt: skip
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    want = _onnxruntime(tiny_bert, feeds)
    with np.load(outputs) as saved:
        got = saved["output"]
    (expected,) = compare({"output": got}, {"output": want}, doc["check"]["tolerance"])
    assert doc["check"]["passed"] and doc["check"]["runtime"].startswith("onnxruntime")
    assert doc["check"]["outputs"]["output"]["max_abs_diff"] == expected.max_abs_diff > 0
    assert doc["check"]["outputs"]["output"]["max_rel_diff"] == expected.max_rel_diff


def test_pipelined_outputs_equal_each_micro_batch_run_alone(tiny_bert: Path, tmp_path: Path) -> None:
    """Host values made and dropped per micro-batch (a Repeat body) leave the numbers as running
    each micro-batch on its own does, bit for bit."""
    feeds = _inputs(MICRO_BATCHES)
    piped = profile_model(tiny_bert, ProfileOptions(ipus=2, pipeline=True, micro_batches=MICRO_BATCHES),
                          lambda s: feeds)  # fmt: skip
    alone = [
        profile_model(tiny_bert, ProfileOptions(ipus=2), lambda s, i=i: {k: v[i : i + 1] for k, v in feeds.items()})
        for i in range(MICRO_BATCHES)
    ]
    np.testing.assert_array_equal(piped.outputs["output"], np.concatenate([r.outputs["output"] for r in alone]))
    engine = piped.session.engine
    assert engine.liveness is not None and engine._dropped - engine.liveness.carried  # some made per micro-batch


def _matmul_model(w: np.ndarray, b: np.ndarray) -> onnx.ModelProto:
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Add", ["h", "b"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, w.shape[0]])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, w.shape[1]])],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "b")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_large_weights_reach_onnxruntime_as_arrays_and_give_the_same_numbers() -> None:
    from profiler.frontends.onnx.check import WEIGHTS_APART_BYTES, _without_weights

    rng = np.random.default_rng(0)
    w = rng.standard_normal((256, 128)).astype(np.float32)  # 128 KiB: given apart
    b = rng.standard_normal(128).astype(np.float32)  # 512 B: stays in the model
    assert w.nbytes >= WEIGHTS_APART_BYTES > b.nbytes
    model = _matmul_model(w, b)
    light, weights = _without_weights(model)
    assert list(weights) == ["W"] and np.array_equal(weights["W"], w)
    assert len(light.SerializeToString()) < 2048 < w.nbytes  # the graph without the large weight's bytes
    assert len(model.graph.initializer[0].raw_data) == w.nbytes  # the caller's model is left whole
    x = rng.standard_normal((3, 256)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got, runtime = reference_run(model, {"x": x})
    assert runtime.startswith("onnxruntime")
    np.testing.assert_array_equal(got["y"], want)  # bit for bit
    np.testing.assert_allclose(got["y"], x @ w + b, rtol=1e-4, atol=1e-4)


def test_a_fallback_to_onnx_reference_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise RuntimeError("no memory for the session")

    monkeypatch.setattr(ort, "InferenceSession", refuse)
    w = np.eye(4, dtype=np.float32)
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    got, runtime = reference_run(_matmul_model(w, np.ones(4, np.float32)), {"x": x})
    assert runtime.startswith("onnx.reference") and "no memory for the session" in runtime
    np.testing.assert_array_equal(got["y"], x + 1)
