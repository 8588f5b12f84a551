"""Reference model shapes built with onnx.helper (seeded random weights, no downloads): a ResNet-style
CNN (ResNet-50 at its default sizes), a BERT encoder layer (BERT-base at its default sizes), an
MLP, a MobileNetV2/EfficientNet-style depthwise network, a U-Net-style encoder-decoder (Resize,
ConvTranspose, InstanceNormalization) and a GPT-2 decoder block (Einsum attention, causal Where). The tests, the benchmark and ``tilescope run`` demos use them.
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


def _bert_encoder(net: _Net, x: str, hidden: int, ff: int, dh: int, dense, layer_norm, heads_of, const,
                  merge_shape: str, mask: str | None = None, rotary: tuple[str, str, str] | None = None,
                  pre_norm: bool = False, quick_gelu: bool = False) -> str:  # fmt: skip
    """One encoder layer. ``mask``: an additive [B, 1, 1|S, S] term on the scores (the exporter's
    attention-mask arithmetic or a causal mask); ``rotary``: (cos, sin, rotation) [S, dh], [S, dh] and
    [dh, dh] applied to the queries and keys as x * cos + (x @ rotation) * sin (RoFormer; PopRT's
    matmul_rotary_embedding pass writes the rotation as this MatMul); ``pre_norm``: LayerNorm before each
    sublayer (CLIP, GPT-2) instead of after the residual; ``quick_gelu``: x * sigmoid(1.702 x) (CLIP)."""
    y = layer_norm(x, "attn_ln") if pre_norm else x
    q = heads_of(dense(y, hidden, hidden, "query"), "query", [0, 2, 1, 3])  # [B, H, S, dh]
    k = heads_of(dense(y, hidden, hidden, "key"), "key", [0, 2, 1, 3] if rotary else [0, 2, 3, 1])
    if rotary is not None:
        cos, sin, rot = rotary

        def rope(t: str, p: str) -> str:
            turned = net.node("Mul", [net.node("MatMul", [t, rot], f"{p}_rotate"), sin], f"{p}_sin")
            return net.node("Add", [net.node("Mul", [t, cos], f"{p}_cos"), turned], f"{p}_rope")

        q = rope(q, "query")
        k = net.node("Transpose", [rope(k, "key")], "key_t", perm=[0, 1, 3, 2])  # [B, H, dh, S]
    v = heads_of(dense(y, hidden, hidden, "value"), "value", [0, 2, 1, 3])
    scale = const("scale", np.sqrt(dh))
    scores = net.node("Div", [net.node("MatMul", [q, k], "scores"), scale], "scaled_scores")
    if mask is not None:
        scores = net.node("Add", [scores, mask], "masked_scores")
    probs = net.node("Softmax", [scores], "softmax", axis=-1)
    ctx = net.node("Transpose", [net.node("MatMul", [probs, v], "context")], "context_heads", perm=[0, 2, 1, 3])
    ctx = net.node("Reshape", [ctx, merge_shape], "context_merge")
    attn = net.node("Add", [dense(ctx, hidden, hidden, "attn_out"), x], "attn_residual")
    if not pre_norm:
        attn = layer_norm(attn, "attn_ln")
    h = dense(layer_norm(attn, "ff_ln") if pre_norm else attn, hidden, ff, "ff1")
    if quick_gelu:
        gate = net.node("Sigmoid", [net.node("Mul", [h, const("c1702", 1.702)], "gelu_scale")], "gelu_sigmoid")
        gelu = net.node("Mul", [h, gate], "gelu")
    else:
        sqrt2, one, half = const("sqrt2", np.sqrt(2.0)), const("one", 1.0), const("half", 0.5)
        erf = net.node("Erf", [net.node("Div", [h, sqrt2], "gelu_div")], "gelu_erf")
        gelu = net.node("Mul", [net.node("Mul", [h, net.node("Add", [erf, one], "gelu_add")], "gelu_mul"), half],
                        "gelu")  # fmt: skip
    out = net.node("Add", [dense(gelu, ff, hidden, "ff2"), attn], "ff_residual")
    return out if pre_norm else layer_norm(out, "ff_ln")


def bert(
    layers: int = 12, hidden: int = 768, heads: int = 12, ff: int = 3072, vocab: int = 30_522, seq: int = 384,
    max_positions: int = 512, token_types: int = 2, embedding: int | None = None, shared_layers: bool = False,
    rotary: bool = False, causal: bool = False, pre_norm: bool = False, quick_gelu: bool = False,
    head: int = 2, batch: int | str = "N", seed: int = 0, packed: bool = False,
) -> onnx.ModelProto:  # fmt: skip
    """A BERT-family model from token ids, as PyTorch exports it at opset 17 (BERT-base for SQuAD by
    default, random weights): word, position and token-type embeddings (Gathers of their tables),
    LayerNormalization, the attention-mask arithmetic ((1 - mask) x -10000 added to the scores), ``layers``
    encoder layers (``_bert_encoder``) and a ``head``-wide Gemm on every position (SQuAD's start/end
    logits; 0: none). Variants: ``embedding`` (ALBERT: a smaller embedding projected to ``hidden``),
    ``shared_layers`` (ALBERT: one layer's weights used by every layer), ``rotary`` (RoFormer: rotary
    position embedding on queries and keys instead of a position table), ``causal`` (CLIP's text tower:
    a causal mask instead of the attention mask input), ``pre_norm`` and ``quick_gelu`` (CLIP).
    ``packed``: several sequences per row, as Graphcore's packed BERT (Krell et al., "Efficient Sequence
    Packing without Cross-contamination", arXiv 2107.02027, and PopRT's packing for ByteMLPerf): the
    attention_mask input holds each token's sequence number in its row (1, 2, ...; 0 for padding) and
    the model builds the block-diagonal mask from it (a token attends to its own sequence's tokens only),
    and a position_ids input restarts the positions at each sequence.
    Inputs: input_ids, then attention_mask unless ``causal``, then token_type_ids if ``token_types``,
    then position_ids if ``packed``."""
    net = _Net(seed)
    dh = hidden // heads
    shared: dict[str, tuple[str, str]] = {}

    def dense(x: str, n_in: int, n_out: int, p: str) -> str:
        key = f"{p}:{n_in}:{n_out}"
        if key not in shared or not shared_layers:
            w = net.weight(f"{p}_w", net.rng.standard_normal((n_in, n_out)) / np.sqrt(n_in))
            shared[key] = (w, net.weight(f"{p}_b", 0.02 * net.rng.standard_normal(n_out)))
        w, b = shared[key]
        return net.node("Add", [net.node("MatMul", [x, w], f"{p}_matmul"), b], f"{p}_bias")

    norms: dict[str, tuple[str, str]] = {}

    def layer_norm(x: str, p: str, width: int = hidden) -> str:
        if p not in norms or not shared_layers:
            norms[p] = (net.weight(f"{p}_gamma", 1 + 0.1 * net.rng.standard_normal(width)),
                        net.weight(f"{p}_beta", 0.1 * net.rng.standard_normal(width)))  # fmt: skip
        return net.node("LayerNormalization", [x, *norms[p]], p, axis=-1, epsilon=1e-12)

    def const(name: str, value: np.ndarray, dtype: type = np.float32) -> str:
        n = net.name(name)
        net.inits.append(numpy_helper.from_array(np.asarray(value, dtype), n))
        return n

    split_shape = const("split_shape", np.array([0, 0, heads, dh]), np.int64)
    merge_shape = const("merge_shape", np.array([0, 0, hidden]), np.int64)

    def heads_of(x: str, p: str, perm: list[int]) -> str:
        return net.node("Transpose", [net.node("Reshape", [x, split_shape], f"{p}_split")], f"{p}_heads", perm=perm)

    consts: dict[str, str] = {}

    def scalar(name: str, value: float) -> str:
        if name not in consts:
            consts[name] = net.weight(name, np.array(value))
        return consts[name]

    width = embedding or hidden
    words = net.weight("word_embeddings", 0.02 * net.rng.standard_normal((vocab, width)))
    x = net.node("Gather", [words, "input_ids"], "word_lookup")
    if not rotary:  # a learned position table, looked up at positions 0..seq-1 (constant indices)
        positions = net.weight("position_embeddings", 0.02 * net.rng.standard_normal((max_positions, width)))
        pids = "position_ids" if packed else const("position_ids", np.arange(seq)[None, :], np.int64)
        pos = net.node("Gather", [positions, pids], "pos_lookup")
        x = net.node("Add", [x, pos], "add_positions")
    if token_types:
        types = net.weight("token_type_embeddings", 0.02 * net.rng.standard_normal((token_types, width)))
        x = net.node("Add", [x, net.node("Gather", [types, "token_type_ids"], "type_lookup")], "add_types")
    if not pre_norm:
        x = layer_norm(x, "embeddings_ln", width)
    if embedding:
        x = dense(x, embedding, hidden, "embedding_projection")
    if causal:
        mask: str | None = const("causal_mask", np.triu(np.full((seq, seq), -10000.0), 1)[None, None])
    elif packed:  # [B, S] sequence numbers -> [B, 1, S, S] block-diagonal: same sequence, attend
        ax = const("pack_axes", np.array([1]), np.int64)
        rows = net.node("Unsqueeze", ["attention_mask", const("pack_row_axis", np.array([2]), np.int64)], "pack_rows")
        same = net.node("Equal", [rows, net.node("Unsqueeze", ["attention_mask", ax], "pack_cols")], "pack_same")
        m = net.node("Cast", [net.node("Unsqueeze", [same, ax], "pack_heads")], "mask_cast", to=TensorProto.FLOAT)
        m = net.node("Sub", [scalar("one", 1.0), m], "mask_invert")
        mask = net.node("Mul", [m, scalar("mask_value", -10000.0)], "mask_scale")
    else:  # the exporter's arithmetic: [B, S] ids -> [B, 1, 1, S] float, (1 - m) * -10000
        m = net.node("Cast", [net.node("Unsqueeze", ["attention_mask", const("mask_axes", np.array([1, 2]), np.int64)],
                                       "mask_unsqueeze")], "mask_cast", to=TensorProto.FLOAT)  # fmt: skip
        m = net.node("Sub", [scalar("one", 1.0), m], "mask_invert")
        mask = net.node("Mul", [m, scalar("mask_value", -10000.0)], "mask_scale")
    rope = None
    if rotary:  # RoFormer's sinusoidal angles (base 10000) on pairs of dimensions
        angle = np.arange(seq)[:, None] / 10000.0 ** (2 * (np.arange(dh) // 2) / dh)
        rot = np.zeros((dh, dh))
        rot[np.arange(1, dh, 2), np.arange(0, dh, 2)] = -1.0  # (x0, x1) -> (-x1, x0)
        rot[np.arange(0, dh, 2), np.arange(1, dh, 2)] = 1.0
        rope = (const("rope_cos", np.cos(angle)), const("rope_sin", np.sin(angle)), const("rope_rotation", rot))
    for _ in range(layers):
        x = _bert_encoder(net, x, hidden, ff, dh, dense, layer_norm, heads_of, scalar, merge_shape, mask=mask,
                          rotary=rope, pre_norm=pre_norm, quick_gelu=quick_gelu)  # fmt: skip
    if pre_norm:
        x = layer_norm(x, "final_ln")
    if head:
        dense(x, hidden, head, "qa_outputs")
    else:
        net.node("Identity", [x], "last_hidden_state")
    ids = lambda n: helper.make_tensor_value_info(n, TensorProto.INT64, [batch, seq])  # noqa: E731
    inputs = [ids("input_ids")] + ([] if causal else [ids("attention_mask")])
    inputs += [ids("token_type_ids")] if token_types else []
    inputs += [ids("position_ids")] if packed and not rotary else []
    return net.model("bert", inputs, "output", [batch, seq, head or hidden])


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


def mobilenet(
    image: int = 224,
    blocks: tuple[tuple[int, int, int, int], ...] = (
        (1, 16, 1, 1),
        (6, 24, 2, 2),
        (6, 40, 2, 2),
        (6, 80, 3, 2),
        (6, 112, 1, 1),
        (6, 192, 2, 2),
        (6, 320, 1, 1),
    ),
    stem: int = 32,
    head: int = 1280,
    classes: int = 1000,
    batch: int | str = "N",
    seed: int = 0,
) -> onnx.ModelProto:
    """A MobileNetV2/EfficientNet-style network (blocks: (expansion, channels, repeats, stride)):
    inverted residual blocks of 1x1 expansion, 3x3 depthwise convolution (group = channels) and 1x1
    projection, each with BatchNormalization; ReLU6 (Clip) after the stem and expansion, HardSwish
    after the depthwise convolution, squeeze-and-excitation gates (GlobalAveragePool, two 1x1
    convolutions, HardSigmoid, Mul), residual Adds, then a 1x1 head, GlobalAveragePool and Gemm."""
    net = _Net(seed)
    lo = net.weight("relu6_min", np.array(0.0))
    hi = net.weight("relu6_max", np.array(6.0))

    def conv_bn(x: str, cin: int, cout: int, k: int, stride: int, p: str, group: int = 1) -> str:
        w = net.weight(
            f"{p}_w", net.rng.standard_normal((cout, cin // group, k, k)) * np.sqrt(2.0 / (cin // group * k * k))
        )
        y = net.node("Conv", [x, w], f"{p}_conv", kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4,
                     group=group)  # fmt: skip
        bn = [net.weight(f"{p}_bn_{q}", v) for q, v in (
            ("scale", 1 + 0.1 * net.rng.standard_normal(cout)), ("bias", 0.1 * net.rng.standard_normal(cout)),
            ("mean", 0.1 * net.rng.standard_normal(cout)), ("var", 1 + 0.1 * net.rng.random(cout)))]  # fmt: skip
        return net.node("BatchNormalization", [y, *bn], f"{p}_bn", epsilon=1e-5)

    x = net.node("Clip", [conv_bn("input", 3, stem, 3, 2, "stem"), lo, hi], "stem_relu6")
    cin = stem
    for s, (t, c, n, first_stride) in enumerate(blocks):
        for i in range(n):
            p, stride, mid = f"b{s}_{i}", first_stride if i == 0 else 1, cin * t
            h = x if t == 1 else net.node("Clip", [conv_bn(x, cin, mid, 1, 1, f"{p}_expand"), lo, hi], f"{p}_relu6")
            h = net.node("HardSwish", [conv_bn(h, mid, mid, 3, stride, f"{p}_dw", group=mid)], f"{p}_hswish")
            se = max(1, mid // 4)
            g = net.node("GlobalAveragePool", [h], f"{p}_se_pool")
            w1 = net.weight(f"{p}_se_w1", net.rng.standard_normal((se, mid, 1, 1)) / np.sqrt(mid))
            w2 = net.weight(f"{p}_se_w2", net.rng.standard_normal((mid, se, 1, 1)) / np.sqrt(se))
            g = net.node("Relu", [net.node("Conv", [g, w1], f"{p}_se_reduce", kernel_shape=[1, 1])], f"{p}_se_relu")
            g = net.node("HardSigmoid", [net.node("Conv", [g, w2], f"{p}_se_expand", kernel_shape=[1, 1])],
                         f"{p}_se_gate", alpha=1 / 6, beta=0.5)  # fmt: skip
            h = conv_bn(net.node("Mul", [h, g], f"{p}_se_scale"), mid, c, 1, 1, f"{p}_project")
            x = net.node("Add", [h, x], f"{p}_add") if stride == 1 and cin == c else h
            cin = c
    x = net.node("Clip", [conv_bn(x, cin, head, 1, 1, "head"), lo, hi], "head_relu6")
    x = net.node("Flatten", [net.node("GlobalAveragePool", [x], "pool")], "flatten", axis=1)
    fc = net.weight("fc_w", net.rng.standard_normal((classes, head)) / np.sqrt(head))
    net.node("Gemm", [x, fc, net.weight("fc_b", np.zeros(classes))], "fc", transB=1)
    inp = helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, image, image])
    return net.model("mobilenet", [inp], "output", [batch, classes])


def unet(image: int = 128, base: int = 16, depth: int = 3, classes: int = 2, batch: int | str = "N",
         seed: int = 0) -> onnx.ModelProto:  # fmt: skip
    """A U-Net-style encoder-decoder: (conv 3x3, InstanceNormalization, LeakyRelu) x 2 per level,
    MaxPool down; up by ConvTranspose (2x2, stride 2) on even levels and by Resize (nearest, x2)
    then a 1x1 convolution on odd ones; skip connections by Concat; a 1x1 classifier and Sigmoid."""
    net = _Net(seed)

    def conv_block(x: str, cin: int, cout: int, p: str) -> str:
        for j in range(2):
            c_in = cin if j == 0 else cout
            w = net.weight(f"{p}{j}_w", net.rng.standard_normal((cout, c_in, 3, 3)) * np.sqrt(2.0 / (c_in * 9)))
            b = net.weight(f"{p}{j}_b", 0.1 * net.rng.standard_normal(cout))
            x = net.node("Conv", [x, w, b], f"{p}{j}_conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
            gamma = net.weight(f"{p}{j}_in_scale", 1 + 0.1 * net.rng.standard_normal(cout))
            beta = net.weight(f"{p}{j}_in_bias", 0.1 * net.rng.standard_normal(cout))
            x = net.node("InstanceNormalization", [x, gamma, beta], f"{p}{j}_norm", epsilon=1e-5)
            x = net.node("LeakyRelu", [x], f"{p}{j}_act", alpha=0.01)
        return x

    scales = net.weight("resize_scales", np.array([1.0, 1.0, 2.0, 2.0]))
    skips, x, c = [], "input", 3
    for level in range(depth):
        x = conv_block(x, c, base << level, f"down{level}_")
        c = base << level
        skips.append((x, c))
        x = net.node("MaxPool", [x], f"down{level}_pool", kernel_shape=[2, 2], strides=[2, 2])
    x = conv_block(x, c, base << depth, "bottom_")
    c = base << depth
    for level in reversed(range(depth)):
        skip, cs = skips[level]
        if level % 2 == 0:
            w = net.weight(f"up{level}_w", net.rng.standard_normal((c, cs, 2, 2)) * np.sqrt(1.0 / c))
            b = net.weight(f"up{level}_b", 0.1 * net.rng.standard_normal(cs))
            x = net.node("ConvTranspose", [x, w, b], f"up{level}_convtranspose", kernel_shape=[2, 2], strides=[2, 2])
        else:
            x = net.node("Resize", [x, "", scales], f"up{level}_resize", mode="nearest")
            w = net.weight(f"up{level}_w", net.rng.standard_normal((cs, c, 1, 1)) * np.sqrt(1.0 / c))
            x = net.node("Conv", [x, w], f"up{level}_conv", kernel_shape=[1, 1])
        x = net.node("Concat", [x, skip], f"up{level}_concat", axis=1)
        x = conv_block(x, 2 * cs, cs, f"up{level}_")
        c = cs
    w = net.weight("head_w", net.rng.standard_normal((classes, c, 1, 1)) / np.sqrt(c))
    x = net.node("Conv", [x, w], "head_conv", kernel_shape=[1, 1])
    net.node("Sigmoid", [x], "head_sigmoid")
    inp = helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, image, image])
    return net.model("unet", [inp], "output", [batch, classes, image, image])


def gpt2_block(seq: int = 128, hidden: int = 768, heads: int = 12, batch: int | str = "N",
               seed: int = 0) -> onnx.ModelProto:  # fmt: skip
    """One pre-norm GPT-2 decoder block (GPT-2 small by default) as transformers exports it: a fused
    QKV projection split three ways, attention scores by Einsum, a causal mask applied with Where
    (masked scores get the float minimum), Softmax, context by Einsum, output projection and
    residual, then LayerNormalization and an MLP with the tanh-form GELU (Pow, Tanh) and residual."""
    net = _Net(seed)
    dh = hidden // heads

    def dense(x: str, n_in: int, n_out: int, p: str) -> str:
        w = net.weight(f"{p}_w", net.rng.standard_normal((n_in, n_out)) * 0.02 * np.sqrt(768 / n_in))
        b = net.weight(f"{p}_b", 0.02 * net.rng.standard_normal(n_out))
        return net.node("Add", [net.node("MatMul", [x, w], f"{p}_matmul"), b], f"{p}_bias")

    def layer_norm(x: str, p: str) -> str:
        g = net.weight(f"{p}_gamma", 1 + 0.1 * net.rng.standard_normal(hidden))
        b = net.weight(f"{p}_beta", 0.1 * net.rng.standard_normal(hidden))
        return net.node("LayerNormalization", [x, g, b], p, axis=-1, epsilon=1e-5)

    def const(name: str, value: np.ndarray) -> str:
        n = net.name(name)
        net.inits.append(numpy_helper.from_array(value, n))
        return n

    split_shape = const("split_shape", np.array([0, 0, heads, dh], np.int64))
    merge_shape = const("merge_shape", np.array([0, 0, hidden], np.int64))
    split_sizes = const("qkv_sizes", np.array([hidden] * 3, np.int64))
    causal = const("causal_mask", np.tril(np.ones((seq, seq), bool)).reshape(1, 1, seq, seq))
    masked = const("mask_value", np.array(np.finfo(np.float32).min, np.float32))
    h = layer_norm("input", "ln_1")
    qkv = dense(h, hidden, 3 * hidden, "c_attn")
    q, k, v = (f"qkv_split_out{i}" if i else "qkv_split_out" for i in range(3))
    net.nodes.append(helper.make_node("Split", [qkv, split_sizes], [q, k, v], name="qkv_split", axis=2))

    def heads_of(x: str, p: str) -> str:
        return net.node("Transpose", [net.node("Reshape", [x, split_shape], f"{p}_split")], f"{p}_heads",
                        perm=[0, 2, 1, 3])  # fmt: skip

    q, k, v = heads_of(q, "query"), heads_of(k, "key"), heads_of(v, "value")  # [B, H, S, dh]
    scores = net.node("Einsum", [q, k], "scores", equation="bhid,bhjd->bhij")
    scores = net.node("Mul", [scores, net.weight("inv_sqrt_dh", np.array(1 / np.sqrt(dh)))], "scaled_scores")
    scores = net.node("Where", [causal, scores, masked], "causal_where")
    probs = net.node("Softmax", [scores], "softmax", axis=-1)
    ctx = net.node("Einsum", [probs, v], "context", equation="bhij,bhjd->bihd")
    ctx = net.node("Reshape", [ctx, merge_shape], "context_merge")
    x = net.node("Add", [dense(ctx, hidden, hidden, "c_proj"), "input"], "attn_residual")
    h = dense(layer_norm(x, "ln_2"), hidden, 4 * hidden, "c_fc")
    cube = net.node("Pow", [h, net.weight("three", np.array(3.0))], "gelu_cube")
    inner = net.node("Add", [h, net.node("Mul", [cube, net.weight("c044715", np.array(0.044715))], "gelu_mul1")],
                     "gelu_add1")  # fmt: skip
    t = net.node("Tanh", [net.node("Mul", [inner, net.weight("sqrt_2_pi", np.array(np.sqrt(2 / np.pi)))],
                                   "gelu_mul2")], "gelu_tanh")  # fmt: skip
    gate = net.node("Mul", [net.node("Add", [t, net.weight("one", np.array(1.0))], "gelu_add2"),
                            net.weight("half", np.array(0.5))], "gelu_half")  # fmt: skip
    m = dense(net.node("Mul", [h, gate], "gelu"), 4 * hidden, hidden, "mlp_proj")
    net.node("Add", [m, x], "mlp_residual")
    inp = helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, seq, hidden])
    return net.model("gpt2_block", [inp], "output", [batch, seq, hidden])


def vgg(
    image: int = 224,
    widths: tuple[int, ...] = (64, 128, 256, 512, 512),
    convs: tuple[int, ...] = (2, 2, 3, 3, 3),
    fc: tuple[int, ...] = (4096, 4096),
    classes: int = 1000,
    batch: int | str = "N",
    seed: int = 0,
) -> onnx.ModelProto:
    """A VGG-style CNN (VGG-16 at its default sizes, 138M float32 weights): stages of 3x3 Conv + Relu
    ending in a 2x2 max pool, then Flatten and fully connected layers (Gemm + Relu) and the classifier."""
    net = _Net(seed)
    x, cin = "input", 3
    for s, (w, n) in enumerate(zip(widths, convs, strict=True)):
        for i in range(n):
            k = net.weight(f"s{s}c{i}_w", net.rng.standard_normal((w, cin, 3, 3)) * np.sqrt(2.0 / (cin * 9)))
            bias = net.weight(f"s{s}c{i}_b", np.zeros(w))
            x = net.node("Conv", [x, k, bias], f"s{s}c{i}_conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
            x = net.node("Relu", [x], f"s{s}c{i}_relu")
            cin = w
        x = net.node("MaxPool", [x], f"s{s}_pool", kernel_shape=[2, 2], strides=[2, 2])
    x = net.node("Flatten", [x], "flatten", axis=1)
    size = cin * (image // 2 ** len(widths)) ** 2
    for j, n_out in enumerate((*fc, classes)):
        w = net.weight(f"fc{j}_w", net.rng.standard_normal((n_out, size)) * np.sqrt(2.0 / size))
        x = net.node("Gemm", [x, w, net.weight(f"fc{j}_b", np.zeros(n_out))], f"fc{j}", transB=1)
        if j < len(fc):
            x = net.node("Relu", [x], f"fc{j}_relu")
        size = n_out
    inp = helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, image, image])
    return net.model("vgg", [inp], "output", [batch, classes])
