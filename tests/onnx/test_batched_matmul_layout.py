"""How the importer lays out products. A batched MatMul's result ([G, M, K] x [G, K, N], attention's two
products): PopLibs holds every product's result channel-grouped (lib/poplin/Convolution.cpp getPartialOutputShape:
``{C/ocpg, batch, ocpg}``); tilescope does so for a product that narrows (N <= K: the attention's context,
whose reader is the output projection's lhs) and keeps one that widens (N > K: the scores, whose rows the
softmax reduces) row by row, for the host's time. A serial product's weights: stored per serial slice."""

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


def test_an_imported_weight_of_a_serial_product_is_stored_per_serial_slice_and_the_product_is_exact() -> None:
    # x[128, 256] @ w[256, 256] in fp16 with half partials at AMP 0.05 on a 16-tile IPU-Model: the plan runs
    # 8 out-chan serial steps (ops.plan_matmul), so the importer creates w as PopLibs creates a serial plan's
    # weights (createWeightsImpl: a grouped store per serial slice, ops.matmul.serial_rhs_store) and the
    # loops slice it where it lies; the weights' host values land in that order and the product is numpy's
    from profiler import ops

    t = ipu_model(tiles_per_ipu=16, bytes_per_tile=262144)
    plan = ops.plan_matmul(t, 1, 128, 256, 256, "float16", "float16", 0.05)
    assert (plan.in_chan_serial, plan.out_chan_serial) == (1, 8)
    r = np.random.default_rng(3)
    wv = r.standard_normal((256, 256)).astype(np.float32)
    xv = r.standard_normal((128, 256)).astype(np.float32)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [128, 256])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [128, 256])
    w = onnx.numpy_helper.from_array(wv, "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "mm", [x], [y], initializer=[w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    imported = import_model(load_model(model), t, dtype="float16", partials="float16", available_memory_proportion=0.05)
    session = Session(imported)
    got = session.run({"x": xv})["y"]
    (var,) = [v for v in session.model.graph.variables if v.name.startswith("w")]
    assert tuple(var.shape) == (1, 8, 2, 16, 16, 16)  # [sk, sn, N/sn/16, K/16, 16, 16]
    assert not [v for v in session.model.graph.variables if v.name == "serial operand"]  # no copy of w
    ref = xv.astype(np.float16).astype(np.float64) @ wv.astype(np.float16).astype(np.float64)
    np.testing.assert_allclose(got.astype(np.float64), ref, rtol=2e-2, atol=2e-2 * np.sqrt(256))
