"""In-place elementwise nodes (Builder.overwritable): as PopART's inplace transform, an Add, Mul, Pow, Relu,
Sigmoid or Exp writes its result into an input that no later node reads, never into a graph input, a weight or
a variable another live value views; the results are those of the out-of-place ops."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto
from onnx import helper as h

from profiler.chip.targets import get_target
from profiler.frontends.onnx import Session, import_model
from profiler.frontends.onnx.importer import ImportedModel
from profiler.ops.poplibs_codelets import Map


def _vi(name: str, shape: list[int]) -> onnx.ValueInfoProto:
    return h.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _model(nodes: list[onnx.NodeProto], outputs: list[str], shapes: dict[str, list[int]]) -> onnx.ModelProto:
    inits = [h.make_tensor("three", TensorProto.FLOAT, [], [3.0]), h.make_tensor("shape", TensorProto.INT64, [1], [32])]
    graph = h.make_graph(nodes, "g", [_vi("x", [4, 8]), _vi("b", [1, 8])], [_vi(n, shapes[n]) for n in outputs], inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


def _in_place(im: ImportedModel) -> list[tuple[str, bool]]:
    """(compute set, whether its elementwise vertices write an operand) in program order."""
    return [
        (cs.name, cs.batches[0].codelet.in_place)
        for cs in im.graph.compute_sets
        if cs.batches and isinstance(cs.batches[0].codelet, Map)
    ]


def test_a_node_overwrites_an_input_only_when_no_later_node_reads_it() -> None:
    m = _model(
        [
            h.make_node("Mul", ["x", "three"], ["t1"]),  # x is a graph input: a new tensor
            h.make_node("Add", ["t1", "b"], ["t2"]),  # t1 dies here: written in place (b broadcast into it)
            h.make_node("Relu", ["t2"], ["t3"]),  # t2 dies here: in place
            h.make_node("Exp", ["t3"], ["u"]),  # t3 is read again below: a new tensor
            h.make_node("Add", ["t3", "u"], ["y"]),  # both die: into the left operand, t3
        ],
        ["y"],
        {"y": [4, 8]},
    )
    im = import_model(m, get_target("C600", 1))
    assert _in_place(im) == [("mul", False), ("add", True), ("relu", True), ("exp", False), ("add", True)]
    x = np.linspace(-2, 2, 32, dtype=np.float32).reshape(4, 8)
    b = np.linspace(-1, 1, 8, dtype=np.float32).reshape(1, 8)
    t3 = np.maximum(x * 3 + b, 0)
    got = Session(im).run({"x": x, "b": b})["y"]
    np.testing.assert_array_equal(got, t3 + np.exp(t3))


def test_the_right_operand_is_overwritten_only_when_the_left_is_broadcast() -> None:
    m = _model(
        [
            h.make_node("Mul", ["x", "three"], ["t1"]),
            h.make_node("Add", ["b", "t1"], ["t2"]),  # b is [1, 8] (and an input): into t1, the right operand
            h.make_node("Mul", ["t2", "t2"], ["t3"]),  # one variable on both sides: never in place
            h.make_node("Mul", ["x", "t3"], ["t4"]),  # x has the result's shape: the result is laid out as x
            h.make_node("ReduceSum", ["t4", "axis1"], ["s"], keepdims=1),  # [4, 1]
            h.make_node("Add", ["b", "s"], ["y"]),  # both broadcast to [4, 8]: a new tensor, though s dies
        ],
        ["y"],
        {"y": [4, 8]},
    )
    m.graph.initializer.append(h.make_tensor("axis1", TensorProto.INT64, [1], [1]))
    im = import_model(m, get_target("C600", 1))
    assert [e for e in _in_place(im) if e[0] in ("add", "mul")] == [
        ("mul", False), ("add", True), ("mul", False), ("mul", False), ("add", False)
    ]  # fmt: skip
    x = np.arange(32, dtype=np.float32).reshape(4, 8) / 7
    b = np.full((1, 8), 0.5, np.float32)
    t4 = x * (b + x * 3) ** 2
    np.testing.assert_allclose(Session(im).run({"x": x, "b": b})["y"], t4.sum(1, keepdims=True) + b, rtol=1e-6)


def test_a_view_of_the_same_variable_read_later_or_a_graph_output_keeps_it() -> None:
    m = _model(
        [
            h.make_node("Mul", ["x", "three"], ["t1"]),
            h.make_node("Reshape", ["t1", "shape"], ["flat"]),  # a view of t1's variable, an output
            h.make_node("Add", ["t1", "b"], ["y"]),  # t1's last reader by name, but flat is live: a new tensor
            h.make_node("Identity", ["x"], ["xi"]),  # a graph input under another name
            h.make_node("Relu", ["xi"], ["r"]),  # never written in place
            h.make_node("Sub", ["y", "r"], ["d"]),  # PopART has no in-place Sub
        ],
        ["flat", "y", "d"],
        {"flat": [32], "y": [4, 8], "d": [4, 8]},
    )
    im = import_model(m, get_target("C600", 1))
    assert not any(ip for _, ip in _in_place(im))
    x = np.linspace(-3, 3, 32, dtype=np.float32).reshape(4, 8)
    b = np.ones((1, 8), np.float32)
    out = Session(im).run({"x": x, "b": b})
    np.testing.assert_array_equal(out["flat"], (x * 3).reshape(-1))
    np.testing.assert_array_equal(out["y"], x * 3 + b)
    np.testing.assert_array_equal(out["d"], x * 3 + b - np.maximum(x, 0))
