"""Outlining (import_model(outline=True)): identical blocks found, built once as a function, called
with copies; results match onnx.reference and the non-outlined import; the code is held once."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from profiler.chip.targets import ipu_model
from profiler.frontends.onnx import Session, examples, import_model, random_inputs
from profiler.frontends.onnx.builder import SMALL_CONSTANT
from profiler.frontends.onnx.outline import Repeat, find_repeat

TARGET = ipu_model(tiles_per_ipu=16, bytes_per_tile=1 << 20)


def _bert(layers: int) -> onnx.ModelProto:
    return examples.bert_layer(seq=8, hidden=32, heads=4, ff=64, layers=layers)


def test_identical_layers_are_found_as_one_run_of_blocks():
    one = len(_bert(1).graph.node)
    # layer 0 reads the graph input, the others the previous layer: both are outside inputs
    assert find_repeat(_bert(3), SMALL_CONSTANT) == Repeat(0, one, 3)
    assert find_repeat(_bert(1), SMALL_CONSTANT) is None  # nothing repeats


def _chain(sums: list[float]) -> onnx.ModelProto:
    """Blocks of MatMul(x, W_j) + ReduceSum(c_j): the sum is folded on the host (c_j is a weight-sized
    initializer) and added on the device as a small constant, so blocks differ only in host values."""
    rng = np.random.default_rng(0)
    nodes, inits = [], []
    x = "input"
    for j, total in enumerate(sums):
        w = rng.standard_normal((8, 8)).astype(np.float32) / 3
        c = np.full(SMALL_CONSTANT + 4, total / (SMALL_CONSTANT + 4), np.float32)
        inits += [numpy_helper.from_array(w, f"w{j}"), numpy_helper.from_array(c, f"c{j}")]
        nodes += [
            helper.make_node("MatMul", [x, f"w{j}"], [f"h{j}"], name=f"mm{j}"),
            helper.make_node("ReduceSum", [f"c{j}"], [f"s{j}"], name=f"sum{j}", keepdims=0),
            helper.make_node("Add", [f"h{j}", f"s{j}"], [f"y{j}"], name=f"add{j}"),
        ]
        x = f"y{j}"
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [4, 8])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [4, 8])], inits,
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _run(model: onnx.ModelProto, outline: bool, batch: int | None = None):
    imp = import_model(model, TARGET, batch_size=batch, outline=outline)
    s = Session(imp, {"debug.instrument": "false"})
    s.compile()
    x = random_inputs(imp)
    out = s.run(x)
    return s, x, out


def _category(s: Session, name: str) -> int:
    bc = s.engine.memory.by_category
    return int(bc["bytes"][bc["category"] == name].sum())


def test_outlined_layers_match_the_reference_and_hold_their_code_once():
    model = _bert(3)
    inline, x, ref_out = _run(model, outline=False, batch=2)
    outlined, _, out = _run(model, outline=True, batch=2)
    expected = ReferenceEvaluator(model).run(None, {"input": x["input"]})[0]
    np.testing.assert_allclose(out["output"], expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out["output"], ref_out["output"], rtol=1e-5, atol=1e-6)
    calls = [n for n in outlined.engine.compiled.nodes if n.type == "Call"]
    assert len(calls) == 3
    g = outlined.model.graph
    assert len(g.functions) == 1
    # the three layers' compute sets are the body's: a third of the vertex state, and the exchange
    # code of one layer plus the calls' copies, well under the three layers' own
    assert _category(outlined, "vertexInstanceState") * 3 == _category(inline, "vertexInstanceState")
    assert _category(outlined, "internalExchangeCode") < 0.6 * _category(inline, "internalExchangeCode")
    # each layer keeps its own weights (uploaded), plus one working copy the calls write
    assert set(outlined.model.weights) == set(inline.model.weights)
    working = sorted(v.name for v in g.variables if v.name.startswith(g.functions[0].name + "/") and "/in/" not in v.name
                     and "/out" not in v.name)  # fmt: skip
    assert len(working) == len(inline.model.weights) // 3


def test_a_block_whose_host_values_differ_is_built_inline():
    model = _chain([1.0, 2.0, 1.0])  # block 1's folded sum differs from block 0's
    assert find_repeat(model, SMALL_CONSTANT) == Repeat(0, 3, 3)
    s, x, out = _run(model, outline=True)
    expected = ReferenceEvaluator(model).run(None, {"input": x["input"]})[0]
    np.testing.assert_allclose(out["y2"], expected, rtol=1e-5, atol=1e-5)
    assert [n.type for n in s.engine.compiled.nodes].count("Call") == 2  # blocks 0 and 2


def test_outline_refuses_what_it_cannot_build_in_one_line():
    from profiler.chip.targets import ipu_model as model_target
    from profiler.frontends.onnx import FrontendError

    with pytest.raises(FrontendError, match="outline needs weights as variables"):
        import_model(_bert(2), TARGET, weights="constants", outline=True)
    with pytest.raises(FrontendError, match="outline builds on one IPU; the model would be split over 2"):
        import_model(_bert(2), model_target(tiles_per_ipu=16, num_ipus=2), outline=True)


def test_blocks_whose_weights_are_computed_on_the_host_are_called_with_their_own():
    # bottlenecks with BatchNormalization: the importer folds each one's statistics into a scale and
    # shift on the host, so a block's weights are not its initializers; they are found by building
    # the node again on the block's values (and taking that back), and every block is called
    model = examples.resnet(image=16, blocks=(3,), widths=(32,), stem=32, classes=10)
    rep = find_repeat(model, SMALL_CONSTANT)
    assert rep is not None and rep.count == 2
    s, x, out = _run(model, outline=True, batch=2)
    expected = ReferenceEvaluator(model).run(None, {"input": x["input"]})[0]
    np.testing.assert_allclose(next(iter(out.values())), expected, rtol=1e-4, atol=1e-5)
    assert [n.type for n in s.engine.compiled.nodes].count("Call") == rep.count
    # nothing is left of the rebuilds: every compute set runs, every weight is uploaded
    g = s.model.graph
    assert {cs.id for cs in g.compute_sets} == set(s.engine.compiled.cs_plans)
    inline, _, _ = _run(model, outline=False, batch=2)
    assert len(s.model.weights) == len(inline.model.weights)
