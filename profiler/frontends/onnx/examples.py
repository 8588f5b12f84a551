"""Reference model shapes built with onnx.helper (seeded random weights, no downloads): a ResNet-style
CNN (ResNet-50 at its default sizes), a BERT encoder layer (BERT-base at its default sizes) and an
MLP. The tests, the benchmark and ``tilescope run`` demos use them.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8  # opset 17's IR version; the installed onnxruntime reads up to 13, onnx.helper writes newer


class _Net:
    """Collects nodes and initializers with unique names."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}_{self.count}"

    def weight(self, prefix: str, value: np.ndarray) -> str:
        n = self.name(prefix)
        self.inits.append(numpy_helper.from_array(value.astype(np.float32), n))
        return n

    def node(self, op: str, inputs: list[str], prefix: str = "", n_out: int = 1, **attrs: object) -> str:
        name = self.name(prefix or op)
        outs = [f"{name}_out{i}" if i else f"{name}_out" for i in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=name, **attrs))
        return outs[0]

    def model(self, name: str, inputs: list[onnx.ValueInfoProto], output: str, out_shape: list) -> onnx.ModelProto:
        self.nodes[-1].output[0] = "output"
        g = helper.make_graph(self.nodes, name, inputs, [helper.make_tensor_value_info("output", TensorProto.FLOAT,
                                                                                      out_shape)], self.inits)  # fmt: skip
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="tilescope")
        m.ir_version = IR_VERSION
        onnx.checker.check_model(m)
        return m


def _conv_bn(net: _Net, x: str, cin: int, cout: int, k: int, stride: int, relu: bool, prefix: str) -> str:
    w = net.weight(f"{prefix}_w", net.rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / (cin * k * k)))
    y = net.node("Conv", [x, w], f"{prefix}_conv", kernel_shape=[k, k], strides=[stride, stride],
                 pads=[k // 2] * 4)  # fmt: skip
    bn = [net.weight(f"{prefix}_bn_{p}", v) for p, v in (
        ("scale", 1 + 0.1 * net.rng.standard_normal(cout)), ("bias", 0.1 * net.rng.standard_normal(cout)),
        ("mean", 0.1 * net.rng.standard_normal(cout)), ("var", 1 + 0.1 * net.rng.random(cout)))]  # fmt: skip
    y = net.node("BatchNormalization", [y, *bn], f"{prefix}_bn", epsilon=1e-5)
    return net.node("Relu", [y], f"{prefix}_relu") if relu else y


def resnet(
    image: int = 224,
    blocks: tuple[int, ...] = (3, 4, 6, 3),
    widths: tuple[int, ...] = (64, 128, 256, 512),
    stem: int = 64,
    classes: int = 1000,
    batch: int | str = "N",
    seed: int = 0,
) -> onnx.ModelProto:
    """ResNet v1.5 with bottleneck blocks (ResNet-50 by default): conv-BN-ReLU stem, max pool, stages of
    bottlenecks (1x1, 3x3 strided, 1x1 x4) with projection shortcuts, global average pool, Gemm."""
    net = _Net(seed)
    x = _conv_bn(net, "input", 3, stem, 7, 2, True, "stem")
    x = net.node("MaxPool", [x], "stem_pool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = stem
    for s, (n, w) in enumerate(zip(blocks, widths, strict=True)):
        for i in range(n):
            stride = 2 if i == 0 and s > 0 else 1
            p = f"s{s}b{i}"
            h = _conv_bn(net, x, cin, w, 1, 1, True, f"{p}_a")
            h = _conv_bn(net, h, w, w, 3, stride, True, f"{p}_b")
            h = _conv_bn(net, h, w, 4 * w, 1, 1, False, f"{p}_c")
            short = _conv_bn(net, x, cin, 4 * w, 1, stride, False, f"{p}_proj") if i == 0 else x
            x = net.node("Relu", [net.node("Add", [h, short], f"{p}_add")], f"{p}_relu")
            cin = 4 * w
    x = net.node("Flatten", [net.node("GlobalAveragePool", [x], "pool")], "flatten", axis=1)
    fc = net.weight("fc_w", net.rng.standard_normal((classes, cin)) / np.sqrt(cin))
    fcb = net.weight("fc_b", np.zeros(classes))
    net.node("Gemm", [x, fc, fcb], "fc", transB=1)
    inp = helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, image, image])
    return net.model("resnet", [inp], "output", [batch, classes])


def bert_layer(
    seq: int = 128, hidden: int = 768, heads: int = 12, ff: int = 3072, batch: int | str = "N", seed: int = 0,
    layers: int = 1,
) -> onnx.ModelProto:  # fmt: skip
    """Post-norm BERT encoder layers (one BERT-base layer by default; ``layers=12`` is BERT-base's
    encoder) as exported by PyTorch at opset 17: Q/K/V projections, scaled dot-product attention with
    Softmax, output projection, residual + LayerNormalization, a GELU (Erf form) feed-forward,
    residual + LayerNormalization."""
    net = _Net(seed)
    dh = hidden // heads

    def dense(x: str, n_in: int, n_out: int, p: str) -> str:
        w = net.weight(f"{p}_w", net.rng.standard_normal((n_in, n_out)) / np.sqrt(n_in))
        b = net.weight(f"{p}_b", 0.02 * net.rng.standard_normal(n_out))
        return net.node("Add", [net.node("MatMul", [x, w], f"{p}_matmul"), b], f"{p}_bias")

    def layer_norm(x: str, p: str) -> str:
        g = net.weight(f"{p}_gamma", 1 + 0.1 * net.rng.standard_normal(hidden))
        b = net.weight(f"{p}_beta", 0.1 * net.rng.standard_normal(hidden))
        return net.node("LayerNormalization", [x, g, b], p, axis=-1, epsilon=1e-12)

    split_shape = net.name("split_shape")
    net.inits.append(numpy_helper.from_array(np.array([0, 0, heads, dh], np.int64), split_shape))
    merge_shape = net.name("merge_shape")
    net.inits.append(numpy_helper.from_array(np.array([0, 0, hidden], np.int64), merge_shape))

    def heads_of(x: str, p: str, perm: list[int]) -> str:
        return net.node("Transpose", [net.node("Reshape", [x, split_shape], f"{p}_split")], f"{p}_heads", perm=perm)

    consts: dict[str, str] = {}  # scalars shared by the layers, made where the first layer uses them

    def const(name: str, value: float) -> str:
        if name not in consts:
            consts[name] = net.weight(name, np.array(value))
        return consts[name]

    x = "input"
    for _ in range(layers):
        x = _bert_encoder(net, x, hidden, ff, dh, dense, layer_norm, heads_of, const, merge_shape)
    inp = helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, seq, hidden])
    return net.model("bert_layer", [inp], "output", [batch, seq, hidden])


def _bert_encoder(net: _Net, x: str, hidden: int, ff: int, dh: int, dense, layer_norm, heads_of, const,  # type: ignore[no-untyped-def]
                  merge_shape: str) -> str:  # fmt: skip
    q = heads_of(dense(x, hidden, hidden, "query"), "query", [0, 2, 1, 3])  # [B, H, S, dh]
    k = heads_of(dense(x, hidden, hidden, "key"), "key", [0, 2, 3, 1])  # [B, H, dh, S]
    v = heads_of(dense(x, hidden, hidden, "value"), "value", [0, 2, 1, 3])
    scale = const("scale", np.sqrt(dh))
    scores = net.node("Div", [net.node("MatMul", [q, k], "scores"), scale], "scaled_scores")
    probs = net.node("Softmax", [scores], "softmax", axis=-1)
    ctx = net.node("Transpose", [net.node("MatMul", [probs, v], "context")], "context_heads", perm=[0, 2, 1, 3])
    ctx = net.node("Reshape", [ctx, merge_shape], "context_merge")
    attn = layer_norm(net.node("Add", [dense(ctx, hidden, hidden, "attn_out"), x], "attn_residual"), "attn_ln")
    h = dense(attn, hidden, ff, "ff1")
    sqrt2, one, half = const("sqrt2", np.sqrt(2.0)), const("one", 1.0), const("half", 0.5)
    erf = net.node("Erf", [net.node("Div", [h, sqrt2], "gelu_div")], "gelu_erf")
    gelu = net.node("Mul", [net.node("Mul", [h, net.node("Add", [erf, one], "gelu_add")], "gelu_mul"), half],
                    "gelu")  # fmt: skip
    out = net.node("Add", [dense(gelu, ff, hidden, "ff2"), attn], "ff_residual")
    return layer_norm(out, "ff_ln")


def mlp(sizes: tuple[int, ...] = (784, 256, 128, 10), batch: int | str = "N", seed: int = 0) -> onnx.ModelProto:
    """Gemm + ReLU layers and a Softmax over the classes."""
    net = _Net(seed)
    x = "input"
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        w = net.weight(f"fc{i}_w", net.rng.standard_normal((a, b)) / np.sqrt(a))
        bias = net.weight(f"fc{i}_b", 0.1 * net.rng.standard_normal(b))
        x = net.node("Gemm", [x, w, bias], f"fc{i}")
        if i < len(sizes) - 2:
            x = net.node("Relu", [x], f"relu{i}")
    net.node("Softmax", [x], "softmax", axis=-1)
    inp = helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, sizes[0]])
    return net.model("mlp", [inp], "output", [batch, sizes[-1]])
