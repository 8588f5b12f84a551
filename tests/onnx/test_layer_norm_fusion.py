"""The decomposed layer norm exporters emit below opset 17 (ReduceMean, Sub, Pow or Mul, ReduceMean, Add eps,
Sqrt, Div or Reciprocal*Mul, optional Mul gamma and Add beta) is built as ONNX LayerNormalization is
(profiler.frontends.onnx.fusion): the same cycles on the same shapes, fewer than op by op, and the
results onnxruntime gives on the unfused graph; near misses stay unfused and still correct."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort  # type: ignore[import-untyped]
import pytest
from onnx import TensorProto, numpy_helper
from onnx import helper as h

from profiler.chip.targets import get_target
from profiler.frontends.onnx import Session, import_model, load_model
from profiler.frontends.onnx.fusion import layer_norms


def _decomposed(
    shape: list[int],
    opset: int = 14,
    square: str = "Pow",
    scale: str = "Div",
    affine: bool = True,
    axis: int = -1,
    eps: np.ndarray | None = None,
    leak: str | None = None,
    var_axis: int | None = None,
) -> onnx.ModelProto:
    """x -> decomposed layer norm -> y, as torch.onnx exports it at ``opset`` (axes an attribute before 18).
    ``leak``: an intermediate also made a graph output (a second consumer)."""
    hidden = shape[-1]
    rng = np.random.default_rng(1)
    inits = [
        numpy_helper.from_array(np.asarray(1e-5, np.float32) if eps is None else eps, "eps"),
        numpy_helper.from_array(np.asarray(2.0, np.float32), "two"),
        numpy_helper.from_array((1 + 0.1 * rng.standard_normal(hidden)).astype(np.float32), "gamma"),
        numpy_helper.from_array((0.1 * rng.standard_normal(hidden)).astype(np.float32), "beta"),
    ]

    def mean(inp: str, out: str, a: int) -> onnx.NodeProto:
        if opset >= 18:
            inits.append(numpy_helper.from_array(np.asarray([a], np.int64), f"{out}_axes"))
            return h.make_node("ReduceMean", [inp, f"{out}_axes"], [out])
        return h.make_node("ReduceMean", [inp], [out], axes=[a])

    nodes = [mean("x", "m", axis), h.make_node("Sub", ["x", "m"], ["d"])]
    nodes.append(h.make_node("Pow", ["d", "two"], ["s"]) if square == "Pow" else h.make_node("Mul", ["d", "d"], ["s"]))
    nodes += [
        mean("s", "v", axis if var_axis is None else var_axis),
        h.make_node("Add", ["v", "eps"], ["ve"]),
        h.make_node("Sqrt", ["ve"], ["q"]),
    ]
    if scale == "Div":
        nodes.append(h.make_node("Div", ["d", "q"], ["n"]))
    else:
        nodes += [h.make_node("Reciprocal", ["q"], ["r"]), h.make_node("Mul", ["d", "r"], ["n"])]
    out = "n"
    if affine:
        nodes += [h.make_node("Mul", ["n", "gamma"], ["g"]), h.make_node("Add", ["beta", "g"], ["y"])]
        out = "y"
    outputs = [h.make_tensor_value_info(out, TensorProto.FLOAT, shape)]
    if leak:
        outputs.append(h.make_tensor_value_info(leak, TensorProto.FLOAT, None))
    graph = h.make_graph(nodes, "ln", [h.make_tensor_value_info("x", TensorProto.FLOAT, shape)], outputs, inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])


def _native(shape: list[int]) -> onnx.ModelProto:
    """The same layer norm as one ONNX LayerNormalization (opset 17)."""
    m = _decomposed(shape)
    inits = [t for t in m.graph.initializer if t.name in ("gamma", "beta")]
    node = h.make_node("LayerNormalization", ["x", "gamma", "beta"], ["y"], axis=-1, epsilon=1e-5)
    graph = h.make_graph([node], "ln", list(m.graph.input), list(m.graph.output), inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


def _run(m: onnx.ModelProto, x: np.ndarray) -> tuple[dict[str, np.ndarray], int, int]:
    """(outputs, simulated cycles, compute sets) on one C600 IPU."""
    im = import_model(m, get_target("C600", 1))
    with Session(im) as s:
        got = s.run({"x": x})
        return got, s.cycles[-1], len(im.graph.compute_sets)


def _reference(m: onnx.ModelProto, x: np.ndarray) -> dict[str, np.ndarray]:
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, {"x": x}), strict=True))


def _x(shape: list[int]) -> np.ndarray:
    return (3 * np.random.default_rng(0).standard_normal(shape) + 0.5).astype(np.float32)


VARIANTS = [
    dict(square="Pow", scale="Div"),
    dict(square="Mul", scale="Reciprocal"),
    dict(square="Mul", scale="Div", affine=False),
    dict(square="Pow", scale="Reciprocal", axis=2),  # the explicit last axis of a rank-3 input
    dict(square="Pow", scale="Div", opset=18),  # axes as an input
]


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: "-".join(f"{k}={x}" for k, x in v.items()))
def test_each_exporter_variant_is_fused_and_matches_onnxruntime(variant: dict) -> None:
    shape = [2, 5, 16]
    m = _decomposed(shape, **variant)
    (fusion,) = layer_norms(m).values()
    assert fusion.first == 0 and len(fusion.skip) == len(m.graph.node) - 1
    x = _x(shape)
    got, _, _ = _run(m, x)
    want = _reference(m, x)
    out = m.graph.output[0].name
    np.testing.assert_allclose(got[out], want[out], rtol=1e-4, atol=1e-4)


def test_bert_size_fused_costs_what_layer_normalization_costs_and_less_than_op_by_op(monkeypatch) -> None:
    shape = [1, 128, 768]  # BERT-base: hidden 768
    x = _x(shape)
    fused, fused_cycles, fused_sets = _run(_decomposed(shape), x)
    native, native_cycles, native_sets = _run(_native(shape), x)
    assert (fused_cycles, fused_sets) == (native_cycles, native_sets)
    np.testing.assert_array_equal(fused["y"], native["y"])
    np.testing.assert_allclose(fused["y"], _reference(_decomposed(shape), x)["y"], rtol=1e-4, atol=1e-4)
    # op by op: the same graph with the matcher finding nothing
    monkeypatch.setattr("profiler.frontends.onnx.fusion.layer_norms", lambda model: {})
    unfused, unfused_cycles, unfused_sets = _run(_decomposed(shape), x)
    assert fused_cycles < unfused_cycles and fused_sets < unfused_sets
    np.testing.assert_allclose(fused["y"], unfused["y"], rtol=1e-4, atol=1e-4)


NEAR_MISSES = [
    dict(axis=1),  # the mean over another axis than the last (rank 3)
    dict(var_axis=1),  # the variance over another axis than the mean
    dict(leak="d"),  # the centred value read again (a graph output)
    dict(leak="q"),  # the standard deviation read again
    dict(eps=np.full(16, 1e-5, np.float32)),  # a per-element epsilon
]


@pytest.mark.parametrize("variant", NEAR_MISSES, ids=lambda v: next(iter(v)))
def test_a_near_miss_stays_unfused_and_correct(variant: dict) -> None:
    shape = [2, 5, 16]
    m = _decomposed(shape, **variant)
    x = _x(shape)
    im = import_model(m, get_target("C600", 1))
    ops = {cs.name for cs in im.graph.compute_sets}
    with Session(im) as s:
        got = s.run({"x": x})
    want = _reference(m, x)
    for name, w in want.items():
        np.testing.assert_allclose(got[name], w, rtol=1e-4, atol=1e-4)
    if variant.get("axis") == 1 or variant.get("var_axis") == 1:
        assert not layer_norms(m) or all(f.axis != 2 for f in layer_norms(m).values())
    else:
        assert layer_norms(m) == {}
    assert not any("fused" in n for n in ops)


def test_a_compile_only_load_still_fuses() -> None:
    """Without weight values (gamma and beta shapes only) the chain is recognised from the small constants."""
    shape = [1, 128, 768]
    m = load_model(_decomposed(shape), values=False)
    assert len(layer_norms(m)) == 1
    im = import_model(m, get_target("C600", 1), values=False)
    assert len(im.graph.compute_sets) == _run(_native(shape), _x(shape))[2]
