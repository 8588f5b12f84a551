"""Importing a model in FP8 (``--dtype float8``): weights stored in one byte, ONNX's float8 types."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from profiler.frontends.onnx import examples, random_inputs
from profiler.frontends.onnx.builder import WEIGHT_STREAM_PREFIX
from profiler.frontends.onnx.check import default_tolerance
from profiler.frontends.onnx.profile import ProfileError, ProfileOptions, profile_model

E4M3 = np.dtype(ml_dtypes.float8_e4m3fnuz)


def _weight_bytes(path: Path, dtype: str) -> tuple[dict[str, int], dict[str, np.dtype], np.ndarray]:
    """(compiled bytes of each weight variable, its element type, the output) of the MLP run on a C600."""
    result = profile_model(path, ProfileOptions(target="C600", batch=4, dtype=dtype, partials="float16"),
                           lambda s: random_inputs(s.model, 0))  # fmt: skip
    names = {k.removeprefix(WEIGHT_STREAM_PREFIX) for k in result.model.weights}
    memory = result.session.engine.memory
    assert memory is not None
    variables = result.model.graph.variables
    sizes = {v.name: int(memory.var_bytes[i]) for i, v in enumerate(variables) if v.name in names}
    types = {v.name: v.dtype for v in variables if v.name in names}
    return sizes, types, next(iter(result.outputs.values()))


def test_fp8_weights_take_half_the_bytes_of_float16(tmp_path: Path) -> None:
    path = tmp_path / "mlp.onnx"
    onnx.save(examples.mlp((64, 128, 32)), path)
    half_sizes, half_types, half_out = _weight_bytes(path, "float16")
    fp8_sizes, fp8_types, fp8_out = _weight_bytes(path, "float8")
    assert set(half_sizes) == set(fp8_sizes) and half_sizes
    matrices = [n for n in half_sizes if fp8_types[n] == E4M3]
    assert matrices, "the Gemm weights are FP8"
    for name in half_sizes:
        if name in matrices:  # the products' weights: one byte an element, cast on the host
            assert fp8_sizes[name] * 2 == half_sizes[name], name
        else:  # biases stay float16 (added after the product, in float16)
            assert fp8_types[name] == np.float16 and fp8_sizes[name] == half_sizes[name], name
    # the same model computing: FP8 within its --check tolerance of float16, but not equal to it
    scale = np.abs(half_out).max()
    assert np.abs(fp8_out.astype(np.float32) - half_out).max() <= default_tolerance("float8") * scale
    assert not np.array_equal(fp8_out, half_out)


def test_fp8_needs_a_c600(tmp_path: Path) -> None:
    path = tmp_path / "mlp.onnx"
    onnx.save(examples.mlp((16, 8)), path)
    with pytest.raises(ProfileError, match="no float8 AMP; float8 needs a C600"):
        profile_model(path, ProfileOptions(target="GC200", batch=2, dtype="float8"), lambda s: random_inputs(s.model))


def test_onnx_float8_initializer_and_cast_import(tmp_path: Path) -> None:
    """A model holding its weight as ONNX FLOAT8E4M3FNUZ (onnx >= 1.14) and casting it up before the
    product, as an FP8-quantised export does, runs and equals the product with the FP8 values."""
    r = np.random.default_rng(5)
    w8 = r.standard_normal((8, 3)).astype(E4M3)
    graph = helper.make_graph(
        [helper.make_node("Cast", ["w8"], ["w"], to=TensorProto.FLOAT), helper.make_node("MatMul", ["x", "w"], ["y"])],
        "fp8_weight",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 3])],
        [numpy_helper.from_array(w8, "w8")],
    )
    assert graph.initializer[0].data_type == TensorProto.FLOAT8E4M3FNUZ
    path = tmp_path / "fp8_weight.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)]), path)
    x = r.standard_normal((4, 8)).astype(np.float32)
    result = profile_model(path, ProfileOptions(target="IPUModel", dtype="float32"), lambda s: {"x": x})
    np.testing.assert_allclose(result.outputs["y"], x @ w8.astype(np.float32), rtol=1e-5, atol=1e-5)


def test_unknown_dtype_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "mlp.onnx"
    onnx.save(examples.mlp((16, 8)), path)
    with pytest.raises(ProfileError, match="dtype must be one of float32, float16, float8, float8_e5m2"):
        profile_model(path, ProfileOptions(target="C600", dtype="int4"), lambda s: random_inputs(s.model))


def test_fp8_scale_keeps_activations_past_the_format_in_range(tmp_path: Path) -> None:
    """Inputs of magnitude ~1000 (e4m3 holds up to 240) make NaN in FP8 unscaled; with fp8_log2_scale
    -4 (x / 16 in the cast, the product x 16) the result is within FP8's --check tolerance."""
    r = np.random.default_rng(6)
    w = (r.standard_normal((64, 32)) / 8).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "large_activations",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 32])],
        [numpy_helper.from_array(w, "w")],
    )
    path = tmp_path / "large.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    x = (r.standard_normal((8, 64)) * 1000).astype(np.float32)
    want = x @ w

    def run(scale: int) -> np.ndarray:
        options = ProfileOptions(target="C600", dtype="float8", partials="float16", fp8_log2_scale=scale)
        return profile_model(path, options, lambda s: {"x": x}).outputs["y"].astype(np.float32)

    assert np.isnan(run(0)).any()
    got = run(-4)
    assert np.isfinite(got).all()
    assert np.abs(got - want).max() <= default_tolerance("float8") * np.abs(want).max()
