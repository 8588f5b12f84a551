"""Models written the way exporters (torch.onnx of 2018-2021, keras2onnx, tf2onnx) write them, not
the way onnx.helper tutorials do: older opsets (7-11) with attribute-style axes, initializers also
listed as graph inputs, Constant nodes for shapes, Shape -> Gather -> Unsqueeze -> Concat -> Reshape
chains, and hard-coded batch-1 flatten shapes."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class Exporter:
    """Collects nodes the way torch.onnx names them (``Conv_0``, ``Relu_1``, ...) and initializers that
    are also graph inputs (IR version 3, as exporters before IR 4 had to)."""

    def __init__(self, opset: int, seed: int = 0) -> None:
        self.opset, self.rng = opset, np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.k = 0

    def weight(self, shape: tuple[int, ...], scale: float = 0.3) -> str:
        name = f"features.{len(self.inits)}.weight"
        self.inits.append(numpy_helper.from_array((self.rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def const(self, value: np.ndarray) -> str:
        """A Constant node, as torch.onnx writes shape and index literals."""
        return self.node("Constant", [], value=numpy_helper.from_array(np.asarray(value), f"c{self.k}"))

    def node(self, op: str, inputs: list[str], n_out: int = 1, **attrs: object) -> str:
        name = f"{op}_{self.k}"
        self.k += 1
        outs = [f"{self.k}_{i}" if i else f"{self.k}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=name, **attrs))
        return outs[0]

    def unsqueeze(self, x: str, axes: list[int]) -> str:
        if self.opset < 13:
            return self.node("Unsqueeze", [x], axes=axes)
        return self.node("Unsqueeze", [x, self.const(np.array(axes, np.int64))])

    def flatten_by_shape(self, x: str) -> str:
        """x.view(x.size(0), -1) as torch.onnx exports it: Shape -> Gather -> Unsqueeze -> Concat -> Reshape."""
        shape = self.node("Shape", [x])
        batch = self.node("Gather", [shape, self.const(np.array(0, np.int64))], axis=0)
        b1 = self.unsqueeze(batch, [0])
        target = self.node("Concat", [b1, self.const(np.array([-1], np.int64))], axis=0)
        return self.node("Reshape", [x, target])

    def model(self, x_shape: list, out_shape: list, name: str) -> onnx.ModelProto:
        self.nodes[-1].output[0] = "output"
        inputs = [helper.make_tensor_value_info("input", TensorProto.FLOAT, x_shape)]
        inputs += [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in self.inits]
        outputs = [helper.make_tensor_value_info("output", TensorProto.FLOAT, out_shape)]
        g = helper.make_graph(self.nodes, name, inputs, outputs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", self.opset)], producer_name="pytorch")
        m.ir_version = 3 if self.opset <= 8 else 6
        onnx.checker.check_model(m)
        return m


def alexnet_style(opset: int = 9, batch: int | str = 1, flatten: str = "shape") -> onnx.ModelProto:
    """Conv/Relu/MaxPool/LRN features, then a flatten (``shape``: Shape chain; ``constant``: a
    Reshape to a hard-coded [1, N]; ``pinned``: a Reshape to a hard-coded [N]) and Gemm/Dropout."""
    e = Exporter(opset)
    x = e.node("Conv", ["input", e.weight((8, 3, 3, 3)), e.weight((8,))], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    x = e.node("Relu", [x])
    x = e.node("LRN", [x], size=3)
    x = e.node("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = e.node("Conv", [x, e.weight((16, 8, 3, 3), 0.1)], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    x = e.node("Relu", [x])
    x = e.node("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])  # [N, 16, 4, 4]
    if flatten == "shape":
        x = e.flatten_by_shape(x)
    elif flatten == "constant":
        x = e.node("Reshape", [x, e.const(np.array([1, 256], np.int64))])
    else:
        x = e.node("Reshape", [x, e.const(np.array([256], np.int64))])
        x = e.unsqueeze(x, [0])
    x = e.node("Dropout", [x], ratio=0.5) if opset < 12 else e.node("Dropout", [x])
    x = e.node("Gemm", [x, e.weight((10, 256), 0.05), e.weight((10,))], transB=1)
    return e.model([batch, 3, 16, 16], [batch, 10], "alexnet_style")


def densenet_style(opset: int = 9, batch: int | str = 1) -> onnx.ModelProto:
    """Dense blocks (BatchNorm/Relu/Conv and Concat), an Inception-style branch merge, ReduceMean with
    attribute axes, Squeeze with attribute axes, Softmax over axis 1 (the pre-13 flattening rule)."""
    e = Exporter(opset, seed=1)

    def bn(x: str, c: int) -> str:
        scale = e.weight((c,), 0.1)
        e.inits[-1] = numpy_helper.from_array(numpy_helper.to_array(e.inits[-1]) + 1, e.inits[-1].name)
        var = e.weight((c,), 0.1)
        e.inits[-1] = numpy_helper.from_array(np.abs(numpy_helper.to_array(e.inits[-1])) + 1, e.inits[-1].name)
        return e.node("BatchNormalization", [x, scale, e.weight((c,)), e.weight((c,)), var], epsilon=1e-5)

    x = e.node("Conv", ["input", e.weight((8, 3, 3, 3))], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    c = 8
    for _ in range(2):  # dense layers: concatenate each layer's output to its input
        y = e.node("Relu", [bn(x, c)])
        y = e.node("Conv", [y, e.weight((4, c, 3, 3), 0.1)], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
        x = e.node("Concat", [x, y], axis=1)
        c += 4
    # inception-style branches: 1x1, 3x3 and pooled, merged by Concat
    b1 = e.node("Conv", [x, e.weight((4, c, 1, 1), 0.2)], kernel_shape=[1, 1])
    b2 = e.node("Conv", [x, e.weight((4, c, 3, 3), 0.1)], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    b3 = e.node("AveragePool", [x], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1], count_include_pad=0)
    b3 = e.node("Conv", [b3, e.weight((4, c, 1, 1), 0.2)], kernel_shape=[1, 1])
    x = e.node("Concat", [b1, b2, b3], axis=1)
    x = e.node("ReduceMean", [x], axes=[2, 3], keepdims=1)
    x = e.node("Squeeze", [x], axes=[2, 3]) if opset < 13 else e.node("Squeeze", [x, e.const(np.array([2, 3]))])
    x = e.node("Gemm", [x, e.weight((5, 12), 0.3), e.weight((5,))], transB=1)
    x = e.node("Softmax", [x], axis=1)
    return e.model([batch, 3, 8, 8], [batch, 5], "densenet_style")


def bert_style(
    opset: int = 11, batch: int | str = "batch", seq: int = 8, hidden: int = 16, heads: int = 2
) -> onnx.ModelProto:
    """A BERT encoder layer as torch.onnx exported it at opset 10-12: LayerNorm decomposed into
    ReduceMean (attribute axes) / Sub / Pow / Sqrt / Div, head reshapes built from
    Shape -> Gather -> Unsqueeze -> Concat chains, an attention mask input turned into an additive
    bias ((1 - mask) * -10000, with Cast), Softmax over the last axis, Erf GELU."""
    e = Exporter(opset, seed=2)
    dh = hidden // heads

    def layer_norm(x: str) -> str:
        mean = e.node("ReduceMean", [x], axes=[-1]) if opset < 18 else e.node(
            "ReduceMean", [x, e.const(np.array([-1], np.int64))])  # fmt: skip
        d = e.node("Sub", [x, mean])
        var = e.node("ReduceMean", [e.node("Pow", [d, e.const(np.array(2.0, np.float32))])], axes=[-1])
        std = e.node("Sqrt", [e.node("Add", [var, e.const(np.array(1e-12, np.float32))])])
        return e.node(
            "Add", [e.node("Mul", [e.node("Div", [d, std]), e.weight((hidden,), 0.1)]), e.weight((hidden,), 0.1)]
        )

    def dense(x: str, n_in: int, n_out: int) -> str:
        return e.node(
            "Add", [e.node("MatMul", [x, e.weight((n_in, n_out), 1 / np.sqrt(n_in))]), e.weight((n_out,), 0.02)]
        )

    def dim(x: str, i: int) -> str:
        return e.unsqueeze(e.node("Gather", [e.node("Shape", [x]), e.const(np.array(i, np.int64))], axis=0), [0])

    def split_heads(x: str, perm: list[int]) -> str:
        shape = e.node("Concat", [dim(x, 0), dim(x, 1), e.const(np.array([heads], np.int64)),
                                  e.const(np.array([dh], np.int64))], axis=0)  # fmt: skip
        return e.node("Transpose", [e.node("Reshape", [x, shape])], perm=perm)

    x = "input"
    # mask [B, S] (1 = attend) -> additive bias [B, 1, 1, S]
    m = e.unsqueeze(e.unsqueeze("mask", [1]), [2])
    m = e.node("Cast", [m], to=TensorProto.FLOAT)
    bias = e.node(
        "Mul", [e.node("Sub", [e.const(np.array(1.0, np.float32)), m]), e.const(np.array(-10000.0, np.float32))]
    )
    q = split_heads(dense(x, hidden, hidden), [0, 2, 1, 3])
    k = split_heads(dense(x, hidden, hidden), [0, 2, 3, 1])
    v = split_heads(dense(x, hidden, hidden), [0, 2, 1, 3])
    s = e.node("Div", [e.node("MatMul", [q, k]), e.const(np.array(np.sqrt(dh), np.float32))])
    p = e.node("Softmax", [e.node("Add", [s, bias])], axis=3)
    ctx = e.node("Transpose", [e.node("MatMul", [p, v])], perm=[0, 2, 1, 3])
    merge = e.node("Concat", [dim(ctx, 0), dim(ctx, 1), e.const(np.array([hidden], np.int64))], axis=0)
    ctx = e.node("Reshape", [ctx, merge])
    a = layer_norm(e.node("Add", [dense(ctx, hidden, hidden), x]))
    h = dense(a, hidden, 4 * hidden)
    erf = e.node("Erf", [e.node("Div", [h, e.const(np.array(np.sqrt(2.0), np.float32))])])
    g = e.node("Mul", [e.node("Mul", [h, e.node("Add", [erf, e.const(np.array(1.0, np.float32))])]),
                       e.const(np.array(0.5, np.float32))])  # fmt: skip
    layer_norm(e.node("Add", [dense(g, 4 * hidden, hidden), a]))
    e.nodes[-1].output[0] = "output"
    inputs = [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, seq, hidden]),
              helper.make_tensor_value_info("mask", TensorProto.INT64, [batch, seq])]  # fmt: skip
    inputs += [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in e.inits]
    outputs = [helper.make_tensor_value_info("output", TensorProto.FLOAT, [batch, seq, hidden])]
    m = helper.make_model(helper.make_graph(e.nodes, "bert_style", inputs, outputs, e.inits),
                          opset_imports=[helper.make_opsetid("", opset)], producer_name="pytorch")  # fmt: skip
    m.ir_version = 6
    onnx.checker.check_model(m)
    return m
