"""Models built with onnx.helper run through the importer match onnx.reference, and their reports
list the ONNX nodes as debug contexts."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from profiler.chip.targets import ipu_model
from profiler.frontends.onnx import (
    FrontendError,
    Session,
    UnsupportedError,
    examples,
    import_model,
    load_model,
    random_inputs,
)
from profiler.frontends.onnx.builder import INPUT_OP, OUTPUT_OP, WEIGHT_UPLOAD_OP
from report_format.reader import open_report

TARGET = ipu_model(tiles_per_ipu=16, bytes_per_tile=1 << 20)
MODELS = {
    "resnet": lambda: examples.resnet(image=32, blocks=(1, 1), widths=(8, 16), stem=8, classes=10),
    "transformer": lambda: examples.bert_layer(seq=16, hidden=32, heads=4, ff=64),
    "mlp": lambda: examples.mlp((64, 32, 10)),
    "mobilenet": lambda: examples.mobilenet(
        image=32, blocks=((1, 8, 1, 1), (4, 16, 2, 2)), stem=8, head=32, classes=10
    ),  # fmt: skip
    "unet": lambda: examples.unet(image=16, base=4, depth=2),
    "gpt2": lambda: examples.gpt2_block(seq=16, hidden=32, heads=4),
}
# float16 keeps ~3 significant digits per op; errors grow with depth
TOLERANCE = {"float32": (1e-4, 1e-5), "float16": (2e-2, 2e-2)}


@pytest.fixture(autouse=True)
def _no_env_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POPLAR_ENGINE_OPTIONS", raising=False)


def _run(
    model: onnx.ModelProto, inputs: dict | None = None, options: dict | None = None, **kw: object
) -> tuple[dict, dict, Session]:
    imported = import_model(load_model(model), TARGET, **kw)  # type: ignore[arg-type]
    feeds = inputs or random_inputs(imported)
    with Session(imported, options) as s:
        return s.run(feeds), feeds, s


# the compute sets' kernels (default) and every vertex's codelet must both match the reference
EXECUTION = {"kernels": {}, "vertices": {"tilescope.executeVertices": "true"}}


@pytest.mark.parametrize("execution", list(EXECUTION))
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("name", list(MODELS))
def test_model_matches_reference_evaluator(name: str, dtype: str, execution: str) -> None:
    model = MODELS[name]()
    got, feeds, session = _run(model, batch_size=2, dtype=dtype, options=EXECUTION[execution])
    expected = ReferenceEvaluator(model).run(None, feeds)[0]
    assert got["output"].shape == expected.shape and got["output"].dtype == np.float32
    rtol, atol = TOLERANCE[dtype]
    np.testing.assert_allclose(got["output"], expected, rtol=rtol, atol=atol * np.abs(expected).max())
    assert session.cycles and session.cycles[0] > 0


@pytest.mark.parametrize("name", list(MODELS))
def test_report_debug_contexts_list_the_onnx_nodes(name: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    model = MODELS[name]()
    imported = import_model(load_model(model), TARGET, batch_size=2)
    options = {"autoReport.all": "true", "autoReport.directory": str(tmp_path / "r")}
    with Session(imported, options) as s:
        s.run(random_inputs(imported))
    ctx = open_report(tmp_path / "r").debug_contexts()
    transfers = ctx["op_type"].isin([INPUT_OP, OUTPUT_OP, WEIGHT_UPLOAD_OP])
    onnx_ctx = ctx[(ctx["layer"] == "onnx") & ~transfers]
    nodes = {n.name: n.op_type for n in model.graph.node}
    assert dict(zip(onnx_ctx["name"], onnx_ctx["op_type"], strict=True)) == nodes
    # host transfers are operations of their own, named by the model: its inputs, outputs, weights
    by_op = {op: set(ctx[ctx["op_type"] == op]["name"]) for op in (INPUT_OP, OUTPUT_OP, WEIGHT_UPLOAD_OP)}
    assert by_op[INPUT_OP] == {i.name for i in model.graph.input} - {t.name for t in model.graph.initializer}
    assert by_op[OUTPUT_OP] == {o.name for o in model.graph.output}
    assert by_op[WEIGHT_UPLOAD_OP] and (ctx[transfers]["parent_id"] == -1).all()
    programs = open_report(tmp_path / "r").programs()
    copies = programs[programs["type"] == "StreamCopyMid"]
    assert len(copies) and set(copies["debug_context_id"]) <= set(ctx[transfers]["debug_context_id"])
    # the poplibs contexts of each op hang below an ONNX node's context
    poplibs = ctx[ctx["layer"] == "poplibs"]
    by_id = ctx.set_index("debug_context_id")

    def onnx_ancestor(i: int) -> str | None:
        while i >= 0:
            row = by_id.loc[i]
            if row["layer"] == "onnx":
                return str(row["name"])
            i = int(row["parent_id"])
        return None

    owners = {onnx_ancestor(int(i)) for i in poplibs["debug_context_id"]}
    assert owners - {None} >= {n for n, t in nodes.items() if t in ("Conv", "MatMul", "Gemm", "Softmax")}


def test_weights_are_uploaded_by_the_weights_program_or_constants() -> None:
    model = MODELS["mlp"]()
    feeds = random_inputs(import_model(load_model(model), TARGET, batch_size=3))
    as_vars = import_model(load_model(model), TARGET, batch_size=3)
    big = {t.name for t in model.graph.initializer if int(np.prod(t.dims)) > 16}
    assert set(as_vars.weights) == {f"weights/{n}" for n in big}
    assert {s.name for s in as_vars.graph.streams} >= set(as_vars.weights)
    as_consts = import_model(load_model(model), TARGET, batch_size=3, weights="constants")
    assert as_consts.weights == {}
    with Session(as_vars) as a, Session(as_consts) as c:
        np.testing.assert_array_equal(a.run(feeds)["output"], c.run(feeds)["output"])


def _model(nodes: list, inputs: list, outputs: list, inits: list | None = None, opset: int = 17) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "m", inputs, outputs, inits or [])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def test_batch_override_for_symbolic_and_unit_batch() -> None:
    for dim in ("N", 1):
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [dim, 5])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [dim, 5])
        m = _model([helper.make_node("Softmax", ["x"], ["y"], name="sm")], [x], [y])
        imported = import_model(load_model(m), TARGET, batch_size=6)
        assert imported.inputs[0].shape == (6, 5) and imported.batch_size == 6
        feeds = random_inputs(imported)
        with Session(imported) as s:
            np.testing.assert_allclose(s.run(feeds)["y"], ReferenceEvaluator(m).run(None, feeds)[0], rtol=1e-5)


@pytest.mark.parametrize("opset", [11, 13])
def test_softmax_axis_default_follows_the_opset(opset: int) -> None:
    # opset 11: softmax over the input flattened at axis 1; opset 13: over the last axis only
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 4])
    m = _model([helper.make_node("Softmax", ["x"], ["y"], name="sm")], [x], [y], opset=opset)
    got, feeds, _ = _run(m)
    flat = np.exp(feeds["x"].reshape(2, 12))
    manual = (flat / flat.sum(1, keepdims=True)).reshape(2, 3, 4) if opset < 13 else None
    if manual is None:
        e = np.exp(feeds["x"])
        manual = e / e.sum(-1, keepdims=True)
    np.testing.assert_allclose(got["y"], manual, rtol=1e-5)


def test_shape_ops_are_folded_at_import() -> None:
    # Reshape x[B, 4, 6] to [B, 24] through Shape -> Gather -> Unsqueeze -> Concat: all on the host
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4, 6])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 24])
    inits = [numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array([0], np.int64), "axes"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus_one")]  # fmt: skip
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"], name="shape"),
        helper.make_node("Gather", ["shape", "zero"], ["batch"], name="batch"),
        helper.make_node("Unsqueeze", ["batch", "axes"], ["batch1"], name="unsqueeze"),
        helper.make_node("Concat", ["batch1", "minus_one"], ["target"], name="concat", axis=0),
        helper.make_node("Reshape", ["x", "target"], ["r"], name="reshape"),
        helper.make_node("Relu", ["r"], ["y"], name="relu"),
    ]
    m = _model(nodes, [x], [y], inits)
    imported = import_model(load_model(m), TARGET)
    assert imported.folded_nodes == 3  # Gather, Unsqueeze, Concat of host values (Shape reads a static shape)
    nodes = {
        c.name for c in imported.graph.debug_contexts if c.layer == "onnx" and c.op_type not in (INPUT_OP, OUTPUT_OP)
    }
    assert nodes == {"shape", "reshape", "relu"}
    got, feeds, _ = _run(m)
    np.testing.assert_array_equal(got["y"], np.maximum(feeds["x"].reshape(3, 24), 0))


def test_unsupported_operators_are_listed_all_at_once() -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r"), helper.make_node("NonZero", ["a"], ["b"], name="c1"),
             helper.make_node("Foo", ["b"], ["c"], name="f", domain="my.ops"),
             helper.make_node("NonZero", ["c"], ["y"], name="c2")]  # fmt: skip
    g = helper.make_graph(nodes, "m", [x], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("my.ops", 1)])
    with pytest.raises(UnsupportedError) as info:
        load_model(m)
    assert info.value.items == [("NonZero", "c1", ""), ("my.ops.Foo", "f", ""), ("NonZero", "c2", "")]
    assert "NonZero at c1, c2" in str(info.value) and "my.ops.Foo at f" in str(info.value)


def test_bad_model_files_give_one_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    good = MODELS["mlp"]()
    (tmp_path / "text.onnx").write_text("not a model")
    (tmp_path / "cut.onnx").write_bytes(good.SerializeToString()[:200])
    broken = onnx.ModelProto()
    broken.CopyFrom(good)
    broken.graph.node[0].input[0] = "nowhere"
    onnx.save(broken, tmp_path / "invalid.onnx")
    for name, words in (("text", "not a readable ONNX model"), ("cut", "not a readable ONNX model"),
                        ("invalid", "invalid ONNX model"), ("missing", "no such file")):  # fmt: skip
        with pytest.raises(FrontendError) as info:
            load_model(tmp_path / f"{name}.onnx")
        assert words in str(info.value) and "\n" not in str(info.value)


def test_inputs_are_checked_by_name_and_shape() -> None:
    imported = import_model(load_model(MODELS["mlp"]()), TARGET, batch_size=2)
    with Session(imported) as s:
        with pytest.raises(FrontendError, match=r"missing \['input'\], unexpected \['x'\]"):
            s.run({"x": np.zeros((2, 64), np.float32)})
        with pytest.raises(FrontendError, match=r"input 'input': shape \(3, 64\)"):
            s.run({"input": np.zeros((3, 64), np.float32)})


def test_padding_reads_constants_on_the_tile_of_the_nearest_element() -> None:
    # MaxPool with pads: each window's padding must come from its own tile, not from one tile
    # serving every border window (that tile would run a reduce vertex for each of them)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 16, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 8, 8])
    pool = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    model = helper.make_model(helper.make_graph([pool], "pool", [x], [y]), opset_imports=[helper.make_opsetid("", 13)])
    got, feeds, session = _run(model)
    expected = ReferenceEvaluator(model).run(None, feeds)[0]
    np.testing.assert_array_equal(got["y"], expected)
    plans = session.engine.compiled.cs_plans.values()  # type: ignore[union-attr]
    for plan in plans:
        per_tile = np.bincount(plan.v_tile, weights=plan.v_count, minlength=TARGET.num_tiles)
        assert per_tile.max() <= 2 * per_tile[per_tile > 0].mean(), plan.compute_set.name


@pytest.mark.parametrize("name", sorted(MODELS))
def test_shape_inference_without_the_weights_gives_onnxs_model(name: str) -> None:
    # the reference: onnx's own shape inference on the whole model, byte for byte
    from onnx import shape_inference

    from profiler.frontends.onnx.model import infer_shapes

    model = load_model(MODELS[name]())
    assert infer_shapes(model).SerializeToString() == shape_inference.infer_shapes(model).SerializeToString()


def test_shape_inference_reads_small_float_constants() -> None:
    # Resize's scales are floats whose values set the output shape: they stay in the inferred copy
    from onnx import shape_inference

    from profiler.frontends.onnx.model import infer_shapes

    scales = numpy_helper.from_array(np.array([1, 1, 2, 3], np.float32), "scales")
    big = numpy_helper.from_array(np.ones((12, 50), np.float32), "big")
    graph = helper.make_graph(
        [helper.make_node("Resize", ["x", "", "scales"], ["y"]), helper.make_node("MatMul", ["y", "big"], ["z"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 3, 4])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)], [scales, big],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    got = infer_shapes(model)
    assert got.SerializeToString() == shape_inference.infer_shapes(model).SerializeToString()
    assert [d.dim_value for d in got.graph.output[0].type.tensor_type.shape.dim] == [1, 2, 6, 50]


def _matmul_plans(imported: object) -> list[dict]:
    plans = [json.loads(c.attributes) for c in imported.graph.debug_contexts if c.op_type == "MatMul"]  # type: ignore[attr-defined]
    return [a for a in plans if "partials_dtype" in a]


def test_half_partials_plan_every_product_in_half_and_match_the_reference() -> None:
    """``partials="float16"`` (what ByteMLPerf's IPU backend compiles with through PopRT):
    every matmul and convolution is planned with half partials; on an Mk2 target the half AMP then
    drives 16 conv units instead of 8 (cost_model.amp_config), so the products' estimates drop, and
    the outputs still match onnx.reference at half's tolerance."""
    model = MODELS["resnet"]()
    cycles = {}
    for partials in ("float32", "float16"):
        imported = import_model(load_model(model), TARGET, batch_size=2, dtype="float16", partials=partials)
        plans = _matmul_plans(imported)
        assert plans and {a["partials_dtype"] for a in plans} == {partials}
        cycles[partials] = sum(a["cycles"] for a in plans)
        feeds = random_inputs(imported)
        with Session(imported) as s:
            got = s.run(feeds)["output"]
        expected = ReferenceEvaluator(model).run(None, feeds)[0]
        rtol, atol = TOLERANCE["float16"]
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol * np.abs(expected).max())
    assert cycles["float16"] < cycles["float32"]


def test_available_memory_proportion_bounds_every_plan_it_can() -> None:
    """``available_memory_proportion`` is the budget each matmul/convolution plan is held to (PopLibs'
    availableMemoryProportion x the tile's bytes): every plan records it, a plan that fits stays within
    it, a tighter one never picks a plan needing more temporary memory, and the outputs are the same."""
    model = MODELS["resnet"]()
    temp = {}
    outputs = {}
    for amp in (0.6, 0.02):
        imported = import_model(load_model(model), TARGET, batch_size=2, available_memory_proportion=amp)
        plans = _matmul_plans(imported)
        assert plans and {a["budget_bytes_per_tile"] for a in plans} == {int(TARGET.bytes_per_tile * amp)}
        assert all(a["temp_bytes_per_tile"] <= a["budget_bytes_per_tile"] for a in plans if a["fits"])
        temp[amp] = [a["temp_bytes_per_tile"] for a in plans]
        feeds = random_inputs(imported)
        with Session(imported) as s:
            outputs[amp] = s.run(feeds)["output"]
    assert all(t <= u for t, u in zip(temp[0.02], temp[0.6], strict=True)) and temp[0.02] != temp[0.6]
    np.testing.assert_allclose(outputs[0.02], outputs[0.6], rtol=1e-5, atol=1e-6)


def test_available_memory_proportion_is_checked() -> None:
    with pytest.raises(FrontendError, match=r"availableMemoryProportion must be in \(0, 1\], got 1.5"):
        import_model(load_model(MODELS["mlp"]()), TARGET, available_memory_proportion=1.5)


def test_partials_type_is_checked() -> None:
    with pytest.raises(FrontendError, match="partials must be float32 or float16, got 'bfloat16'"):
        import_model(load_model(MODELS["mlp"]()), TARGET, partials="bfloat16")


def test_matmul_weights_are_stored_as_poplibs_creates_them() -> None:
    """PopART creates a MatMul/Gemm weight for its product (createMatMulInputRHS), which stores it in
    channel groups: the MLP's first weight [64, 32] fp32 (AMP: 16 in and 8 out channels per group) is
    the variable [32/8, 64/16, 8, 16] seen as [64, 32], mapped for the product (no rearranging copy of
    it), and the outputs still match onnx.reference. The second, [32, 10], is not whole out-channel
    groups (PopLibs would pad it): tilescope keeps it in its own order."""
    model = MODELS["mlp"]()
    imported = import_model(load_model(model), TARGET, batch_size=16)
    shapes = {v.name: v.shape for v in imported.graph.variables}
    assert shapes["fc0_w_1"] == (4, 4, 8, 16) and shapes["fc1_w_5"] == (32, 10)
    assert "matmul rhs (rearranged)" not in shapes
    feeds = random_inputs(imported)
    with Session(imported) as s:
        got = s.run(feeds)["output"]
    np.testing.assert_allclose(got, ReferenceEvaluator(model).run(None, feeds)[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("execution", list(EXECUTION))
def test_matmul_results_are_held_channel_grouped_for_the_next_matmul(execution: str) -> None:
    """x[32, 32] @ w1[32, 64] @ w2[64, 32] fp32 on 16 tiles. PopLibs' matmul result is its convolution's
    output, created {C/ocpg, batch, ocpg} (lib/poplin/Convolution.cpp getPartialOutputShape): the first
    product's plan takes out-chan blocks of 8 (AMP fp32: 8 out channels a group), so h is held as
    [1, 64/8, 32, 8]. The second product needs its lhs elsewhere and copies it first into the grouped
    store PopLibs' createInputImpl gives its plan: its weights' role here (the plan swaps the operands),
    [32/8, 64/16, 8, 16]. Both products' values match onnx.reference with the compute sets' kernels and
    with every vertex (a split product's partials in out-chan groups, as the store holds them)."""
    rng = np.random.default_rng(5)
    w1 = numpy_helper.from_array(rng.standard_normal((32, 64)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((64, 32)).astype(np.float32), "w2")
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("MatMul", ["h", "w2"], ["y"])]
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [32, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [32, 32])], [w1, w2],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    imported = import_model(load_model(model), TARGET)
    shapes = [v.shape for v in imported.graph.variables]
    assert (1, 8, 32, 8) in shapes  # h
    assert [v.shape for v in imported.graph.variables if "(rearranged)" in v.name] == [(4, 4, 8, 16)]
    x = rng.standard_normal((32, 32)).astype(np.float32)
    with Session(imported, EXECUTION[execution]) as s:
        got = s.run({"x": x})["y"]
    np.testing.assert_allclose(got, ReferenceEvaluator(model).run(None, {"x": x})[0], rtol=1e-4, atol=1e-4)
