"""Issue 40: layer norm in the decomposed form exporters write before opset 17 (ReduceMean, Sub, Pow,
ReduceMean, Add, Sqrt, Div, Mul, Add) is imported as popnn builds a layer norm: the chain becomes one
LayerNormalization (profiler.frontends.onnx.layer_norm_pattern), costs what that node costs, and its
results still match onnxruntime run on the model as written. Near misses stay as they are."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from profiler.chip.targets import get_target, ipu_model
from profiler.frontends.onnx import Session, import_model, load_model
from profiler.frontends.onnx import importer as importer_module
from profiler.frontends.onnx.check import compare, default_tolerance, reference_run
from profiler.frontends.onnx.layer_norm_pattern import as_written, fuse_layer_norms
from profiler.frontends.onnx.model import override_batch

SMALL = ipu_model(tiles_per_ipu=8, bytes_per_tile=16 << 20)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", "")


def _const(name: str, value: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value), name)


def decomposed(
    hidden: int = 16,
    rows: tuple[int, ...] = (2, 5),
    opset: int = 13,
    square: str = "Pow",
    scale: str = "Div",
    affine: str = "after",
    axis: int = -1,
    eps: np.ndarray | None = None,
    mean_also_out: bool = False,
) -> onnx.ModelProto:
    """A layer norm over the last axis as torch.onnx writes ``nn.LayerNorm`` at ``opset`` < 17, in its
    variants: ``square`` Pow or Mul; ``scale`` Div or Reciprocal (then Mul); ``affine`` "after" (x*g + b),
    "before" (g*x + b) or "none"; ``mean_also_out`` makes the mean a graph output too (a near miss)."""
    rng = np.random.default_rng(3)
    inits = [
        _const("two", np.array(2.0, np.float32)),
        _const("eps", np.array(1e-5, np.float32) if eps is None else eps),
        _const("gamma", rng.normal(1.0, 0.1, hidden).astype(np.float32)),
        _const("beta", rng.normal(0.0, 0.1, hidden).astype(np.float32)),
    ]
    nodes = []

    def mean(src: str, dst: str) -> None:
        if opset >= 18:
            nodes.append(helper.make_node("ReduceMean", [src, f"{dst}_axes"], [dst], name=f"/ln/{dst}"))
            inits.append(_const(f"{dst}_axes", np.array([axis], np.int64)))
        else:
            nodes.append(helper.make_node("ReduceMean", [src], [dst], name=f"/ln/{dst}", axes=[axis]))

    mean("x", "m")
    nodes.append(helper.make_node("Sub", ["x", "m"], ["d"], name="/ln/Sub"))
    if square == "Pow":
        nodes.append(helper.make_node("Pow", ["d", "two"], ["p"], name="/ln/Pow"))
    else:
        nodes.append(helper.make_node("Mul", ["d", "d"], ["p"], name="/ln/Square"))
    mean("p", "v")
    nodes.append(helper.make_node("Add", ["v", "eps"], ["a"], name="/ln/Add"))
    nodes.append(helper.make_node("Sqrt", ["a"], ["s"], name="/ln/Sqrt"))
    if scale == "Div":
        nodes.append(helper.make_node("Div", ["d", "s"], ["n"], name="/ln/Div"))
    else:
        nodes.append(helper.make_node("Reciprocal", ["s"], ["r"], name="/ln/Reciprocal"))
        nodes.append(helper.make_node("Mul", ["d", "r"], ["n"], name="/ln/Scale"))
    out = "n"
    if affine != "none":
        pair = ["n", "gamma"] if affine == "after" else ["gamma", "n"]
        nodes.append(helper.make_node("Mul", pair, ["y"], name="/ln/Mul"))
        nodes.append(helper.make_node("Add", ["y", "beta"], ["z"], name="/ln/Add_1"))
        out = "z"
    nodes.append(helper.make_node("Relu", [out], ["out"], name="/after/Relu"))  # a consumer past the chain
    shape = [*rows, hidden]
    outputs = [helper.make_tensor_value_info("out", TensorProto.FLOAT, shape)]
    if mean_also_out:
        outputs.append(helper.make_tensor_value_info("m", TensorProto.FLOAT, [*rows, 1]))
    graph = helper.make_graph(nodes, "ln", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              outputs, inits)  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="pytorch")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def fused_form(hidden: int, rows: tuple[int, ...], eps: float = 1e-5) -> onnx.ModelProto:
    """The same layer norm as ONNX's LayerNormalization (opset 17), the same weights."""
    ref = decomposed(hidden, rows)
    inits = [t for t in ref.graph.initializer if t.name in ("gamma", "beta")]
    nodes = [helper.make_node("LayerNormalization", ["x", "gamma", "beta"], ["z"], axis=-1, epsilon=eps),
             helper.make_node("Relu", ["z"], ["out"])]  # fmt: skip
    shape = [*rows, hidden]
    graph = helper.make_graph(nodes, "ln", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, shape)], inits)  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _fused_count(model: onnx.ModelProto) -> int:
    return fuse_layer_norms(override_batch(model, None))[1]


def _run(model: onnx.ModelProto, target=SMALL, dtype: str = "float32") -> tuple[np.ndarray, int]:  # type: ignore[no-untyped-def]
    imported = import_model(load_model(model), target, dtype=dtype)
    x = np.random.default_rng(7).normal(0.5, 2.0, imported.inputs[0].shape).astype(np.float32)
    with Session(imported, {"debug.instrument": "false"}) as s:
        got = s.run({"x": x})
        cycles = s.cycles[-1]
    want, _ = reference_run(model, {"x": x})  # onnxruntime on the model as written, not the rewrite
    assert set(got) == set(want)
    checks = compare(got, want, default_tolerance(dtype))  # --check's own test and tolerance
    assert all(c.within for c in checks), checks
    return got["out"], cycles


@pytest.mark.parametrize(
    ("opset", "square", "scale", "affine"),
    [
        (11, "Pow", "Div", "after"),
        (13, "Mul", "Div", "before"),
        (13, "Pow", "Reciprocal", "after"),
        (18, "Pow", "Div", "none"),
        (12, "Mul", "Reciprocal", "before"),
    ],  # fmt: skip
)
def test_each_exporter_variant_is_fused_and_matches_onnxruntime(
    opset: int, square: str, scale: str, affine: str
) -> None:
    model = decomposed(opset=opset, square=square, scale=scale, affine=affine)
    assert _fused_count(model) == 1
    _run(model)


def test_the_rewrite_is_one_layer_norm_named_for_its_module_and_undone_for_the_reference() -> None:
    model = override_batch(decomposed(), None)
    fused, n = fuse_layer_norms(model)
    assert n == 1
    assert [nd.op_type for nd in fused.graph.node] == ["LayerNormalization", "Relu"]
    ln = fused.graph.node[0]
    assert ln.name == "/ln"  # the exporter's module scope, as Operations shows it
    assert list(ln.input) == ["x", "gamma", "beta"] and list(ln.output) == ["z"]
    eps = next(a for a in ln.attribute if a.name == "epsilon")
    assert eps.f == pytest.approx(1e-5)
    as_written(fused)
    assert [nd.op_type for nd in fused.graph.node] == [nd.op_type for nd in decomposed().graph.node]


@pytest.mark.parametrize(
    "near_miss",
    [{"axis": 0}, {"mean_also_out": True}, {"eps": np.full(16, 1e-5, np.float32)}],
    ids=["first-axis", "mean-read-outside", "vector-eps"],
)
def test_near_misses_stay_unfused_and_still_match(near_miss: dict) -> None:
    model = decomposed(**near_miss)
    assert _fused_count(model) == 0
    _run(model)


def test_at_bert_size_the_fused_chain_costs_what_layer_normalization_costs(monkeypatch: pytest.MonkeyPatch) -> None:
    # BERT-base's hidden 768 over 128 tokens, float16 on a C600 as the bench runs it
    target = get_target("C600")
    _, fused = _run(decomposed(768, (1, 128)), target, "float16")
    _, native = _run(fused_form(768, (1, 128)), target, "float16")
    assert fused == native
    monkeypatch.setattr(importer_module, "fuse_layer_norms", lambda m: (m, 0))
    _, op_by_op = _run(decomposed(768, (1, 128)), target, "float16")
    assert fused < op_by_op
