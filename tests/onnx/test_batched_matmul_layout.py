"""How the importer holds a batched MatMul's result ([G, M, K] x [G, K, N], attention's two products).
PopLibs holds every product's result channel-grouped (lib/poplin/Convolution.cpp getPartialOutputShape:
``{C/ocpg, batch, ocpg}``); tilescope does so for a product that narrows (N <= K: the attention's context,
whose reader is the output projection's lhs) and keeps one that widens (N > K: the scores, whose rows the
softmax reduces) row by row, for the host's time."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from profiler.chip.targets import ipu_model
from profiler.frontends.onnx import Session, import_model, load_model


def _product(g: int, m: int, k: int, n: int) -> onnx.ModelProto:
    a = helper.make_tensor_value_info("a", TensorProto.FLOAT16, [g, m, k])
    b = helper.make_tensor_value_info("b", TensorProto.FLOAT16, [g, k, n])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT16, [g, m, n])
    graph = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "bmm", [a, b], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _run(g: int, m: int, k: int, n: int) -> tuple[Session, np.ndarray, np.ndarray]:
    r = np.random.default_rng(0)
    av = r.standard_normal((g, m, k)).astype(np.float16)
    bv = r.standard_normal((g, k, n)).astype(np.float16)
    session = Session(import_model(load_model(_product(g, m, k, n)), ipu_model(tiles_per_ipu=16)))
    got = session.run({"a": av, "b": bv})["y"]
    return session, got, av.astype(np.float64) @ bv.astype(np.float64)


def test_a_narrowing_batched_product_is_held_channel_grouped_and_a_widening_one_row_by_row() -> None:
    # the context: [4, 64, 128] x [4, 128, 32] (N 32 <= K 128), held [G, N/8, M, 8] (fp16 AMP, float partials: 8 out
    # channels a group, ops.matmul._store_group); the scores: [4, 64, 32] x [4, 32, 128] (N 128 > K 32), held [G, M, N]
    for (m, k, n), want in (((64, 128, 32), (4, 4, 64, 8)), ((64, 32, 128), (4, 64, 128))):
        session, got, ref = _run(4, m, k, n)
        np.testing.assert_allclose(got.astype(np.float64), ref, rtol=2e-2, atol=2e-2 * np.sqrt(k))
        shapes = [tuple(v.shape) for v in session.model.graph.variables if v.name == "matmul out"]
        assert shapes == [want]
