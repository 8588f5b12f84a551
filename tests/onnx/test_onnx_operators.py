"""Issue 14 operators in the forms real models use, checked against onnxruntime / onnx.reference
(the ONNX node tests of each operator run in test_onnx_conformance.py)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from profiler.chip.targets import ipu_model
from profiler.frontends.onnx import Session, import_model, load_model
from profiler.frontends.onnx.check import reference_run

TARGET = ipu_model(tiles_per_ipu=4, bytes_per_tile=16 << 20)


@pytest.fixture(autouse=True)
def _no_env_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POPLAR_ENGINE_OPTIONS", raising=False)


def _check(node: onnx.NodeProto, feeds: dict[str, np.ndarray], inits: list | None = None, opset: int = 17,
           rtol: float = 1e-5, atol: float = 1e-6) -> dict[str, np.ndarray]:  # fmt: skip
    """Build a one-node model, run it on tilescope and on the reference, compare every output."""
    inputs = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
              for k, v in feeds.items()]  # fmt: skip
    probe = helper.make_model(helper.make_graph([node], "probe", inputs, [
        helper.make_empty_tensor_value_info(o) for o in node.output], inits or []),
        opset_imports=[helper.make_opsetid("", opset)])  # fmt: skip
    probe.ir_version = 8
    probe = onnx.shape_inference.infer_shapes(probe)  # output types, for onnxruntime
    want, _ = reference_run(probe, feeds)
    outputs = [helper.make_tensor_value_info(o, helper.np_dtype_to_tensor_dtype(want[o].dtype), want[o].shape)
               for o in node.output]  # fmt: skip
    model = helper.make_model(helper.make_graph([node], "m", inputs, outputs, inits or []),
                              opset_imports=[helper.make_opsetid("", opset)])  # fmt: skip
    model.ir_version = 8
    imported = import_model(load_model(model), TARGET)
    assert imported.host_outputs == {}, "the op must run on the device"
    with Session(imported) as s:
        got = s.run(feeds)
    for o in node.output:
        assert got[o].shape == want[o].shape, o
        np.testing.assert_allclose(got[o], want[o], rtol=rtol, atol=atol, err_msg=o)
    return got


RNG = np.random.default_rng(0)


def _x(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("equation,shapes", [
    ("bhid,bhjd->bhij", [(2, 3, 4, 5), (2, 3, 6, 5)]),  # attention scores
    ("bhij,bhjd->bihd", [(2, 3, 4, 6), (2, 3, 6, 5)]),  # context, heads moved next to the sequence
    ("bid,jd->bij", [(2, 4, 5), (6, 5)]),  # a projection with the weight as [out, in]
    ("...ij,...jk->...ik", [(1, 3, 4, 5), (2, 1, 5, 6)]),  # broadcast batch dimensions
    ("ij->ji", [(3, 4)]),
    ("bii->bi", [(2, 3, 3)]),  # a diagonal: a view
    ("bij->b", [(2, 3, 4)]),
])  # fmt: skip
def test_einsum_transformer_forms(equation: str, shapes: list) -> None:
    names = ["a", "b"][: len(shapes)]
    _check(helper.make_node("Einsum", names, ["y"], equation=equation),
           {n: _x(*s) for n, s in zip(names, shapes, strict=True)}, rtol=1e-5, atol=1e-5)  # fmt: skip


@pytest.mark.parametrize("mode,coord", [("nearest", "asymmetric"), ("nearest", "half_pixel"),
                                        ("linear", "half_pixel"), ("linear", "align_corners")])  # fmt: skip
def test_resize_by_scales(mode: str, coord: str) -> None:
    scales = numpy_helper.from_array(np.array([1, 1, 2, 1.5], np.float32), "scales")
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode=mode, coordinate_transformation_mode=coord)
    _check(node, {"x": _x(1, 2, 3, 4)}, [scales])


def test_upsample_opset9_and_conv_transpose_with_output_padding() -> None:
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    _check(helper.make_node("Upsample", ["x", "scales"], ["y"], mode="nearest"), {"x": _x(1, 2, 3, 3)}, [scales],
           opset=9)  # fmt: skip
    w = numpy_helper.from_array(_x(4, 3, 3, 3), "w")
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], pads=[1, 1, 1, 1],
                            output_padding=[1, 1], group=2)  # fmt: skip
    _check(node, {"x": _x(2, 4, 5, 5)}, [w], atol=1e-5)


def test_maxpool_indices_and_topk_and_argmax() -> None:
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    _check(node, {"x": _x(2, 3, 7, 7)})
    k = numpy_helper.from_array(np.array([3], np.int64), "k")
    _check(helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1), {"x": _x(4, 10)}, [k])
    _check(helper.make_node("ArgMax", ["x"], ["i"], axis=-1, keepdims=0), {"x": _x(3, 4, 5)})


def test_scan_mask_and_logic_ops() -> None:
    axis = numpy_helper.from_array(np.array(1, np.int64), "axis")
    _check(helper.make_node("CumSum", ["x", "axis"], ["y"], exclusive=1, reverse=1), {"x": _x(3, 9)}, [axis],
           atol=1e-5)  # fmt: skip
    _check(helper.make_node("Trilu", ["x"], ["y"], upper=0), {"x": _x(2, 5, 5)})
    a, b = RNG.random((3, 4)) < 0.5, RNG.random((4,)) < 0.5
    _check(helper.make_node("Xor", ["a", "b"], ["y"]), {"a": a, "b": b})
    _check(helper.make_node("Max", ["a", "b"], ["y"]), {"a": _x(3, 1, 4), "b": _x(5, 1)})


def test_activations() -> None:
    x = {"x": _x(2, 3, 4) * 3}
    for op, kw in (("HardSigmoid", {}), ("HardSwish", {}), ("Selu", {}), ("Elu", {"alpha": 0.5}),
                   ("Softplus", {}), ("Floor", {}), ("Round", {})):  # fmt: skip
        _check(helper.make_node(op, ["x"], ["y"], **kw), x, atol=1e-5)
    slope = numpy_helper.from_array(np.array([0.1, 0.2, 0.3], np.float32).reshape(3, 1), "slope")
    _check(helper.make_node("PRelu", ["x", "slope"], ["y"]), x, [slope])
    _check(helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"]), {"x": _x(2, 3, 4, 5)},
           [numpy_helper.from_array(_x(3), "s"), numpy_helper.from_array(_x(3), "b")], atol=1e-5)  # fmt: skip


def test_tile_onehot_and_constant_index_ops() -> None:
    reps = numpy_helper.from_array(np.array([2, 1, 3], np.int64), "reps")
    _check(helper.make_node("Tile", ["x", "reps"], ["y"]), {"x": _x(2, 3, 4)}, [reps])
    depth = numpy_helper.from_array(np.array(5, np.int64), "depth")
    values = numpy_helper.from_array(np.array([0, 1], np.float32), "values")
    _check(helper.make_node("OneHot", ["i", "depth", "values"], ["y"], axis=1),
           {"i": np.array([[0, 4, -1], [2, 3, 1]], np.int64)}, [depth, values])  # fmt: skip
    idx = numpy_helper.from_array(np.array([[0, 1], [2, 0]], np.int64), "idx")
    _check(helper.make_node("GatherND", ["x", "idx"], ["y"]), {"x": _x(3, 2, 4)}, [idx])
    upd = _x(2, 4)
    _check(helper.make_node("ScatterND", ["x", "idx", "u"], ["y"]), {"x": _x(3, 2, 4), "u": upd}, [idx])


def test_3d_convolution_and_pooling() -> None:
    w = numpy_helper.from_array(_x(4, 2, 3, 3, 3), "w")
    b = numpy_helper.from_array(_x(4), "b")
    _check(helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1, 1, 1], strides=[2, 1, 1]),
           {"x": _x(1, 2, 5, 6, 6)}, [w, b], atol=1e-5)  # fmt: skip
    _check(
        helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2, 2], strides=[2, 2, 2]), {"x": _x(1, 2, 4, 4, 4)}
    )
    _check(helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3, 3]), {"x": _x(1, 2, 4, 5, 5)}, atol=1e-6)


def test_3d_conv_transpose() -> None:
    w = numpy_helper.from_array(_x(2, 3, 2, 3, 3), "w")
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 1, 2], pads=[0, 1, 1, 0, 1, 0])
    _check(node, {"x": _x(1, 2, 3, 4, 4)}, [w], atol=1e-5)


@pytest.mark.parametrize("op", ["LSTM", "GRU"])
def test_recurrent_bidirectional_with_shorter_sequences(op: str) -> None:
    gates, hidden, seq, batch, feat = (4 if op == "LSTM" else 3), 5, 4, 3, 6
    inits = [numpy_helper.from_array(_x(2, gates * hidden, feat) * 0.5, "w"),
             numpy_helper.from_array(_x(2, gates * hidden, hidden) * 0.5, "r"),
             numpy_helper.from_array(_x(2, 2 * gates * hidden) * 0.1, "b")]  # fmt: skip
    outs = ["y", "yh"] + (["yc"] if op == "LSTM" else [])
    node = helper.make_node(op, ["x", "w", "r", "b", "lens"], outs, hidden_size=hidden, direction="bidirectional")
    _check(node, {"x": _x(seq, batch, feat), "lens": np.array([4, 1, 3], np.int32)}, inits, atol=1e-5)
