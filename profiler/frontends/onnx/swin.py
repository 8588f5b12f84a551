"""Swin Transformer image classifiers in ONNX, shaped as Hugging Face's ``SwinForImageClassification``
exports at opset 17 (Liu et al. 2021, "Swin Transformer: Hierarchical Vision Transformer using Shifted
Windows", arXiv 2103.14030). Random weights (cost follows the graph, not the data).

The graph: patch embedding (a Conv of kernel and stride ``patch``, flattened to tokens, LayerNorm),
stages of blocks, each block LayerNorm -> window attention -> residual -> LayerNorm -> GELU MLP ->
residual, a patch merging between stages, a final LayerNorm, the mean over tokens and a Gemm head.
Window attention as the exporter writes it:

- **cyclic shift** (every second block of a stage): ``torch.roll`` exports as two Slices and a Concat
  per rolled axis; rolled back the same way after attention;
- **window partition / reverse**: Reshape to [B, H/ws, ws, W/ws, ws, C], Transpose (0, 1, 3, 2, 4, 5),
  Reshape to [B x windows, ws^2, C] (and the inverse);
- **relative position bias**: a learned [(2 ws - 1)^2, heads] table gathered by a constant
  [ws^2 x ws^2] index, Reshape, Transpose to [heads, ws^2, ws^2], added to the scores;
- **shifted-window mask**: a constant [1, windows, 1, ws^2, ws^2] (0 or -100, as the paper's code and
  Hugging Face build it) added to the scores of a shifted block, viewed as [B, windows, heads, N, N];
- **patch merging**: four stride-2 Slices of [B, H, W, C] concatenated to 4C, LayerNorm, a 4C -> 2C
  MatMul without bias.

As in Hugging Face's SwinLayer, a stage whose resolution is not larger than the window uses one window
of the whole resolution and no shift (Swin-large at 384: the last stage, 12 x 12).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .examples import IR_VERSION, OPSET

Weights = Literal["random", "external"]
CHECK_BELOW = 64 << 20  # bytes: models below it go through onnx.checker (the tests' sizes)
MASKED = -100.0  # the masked score of a shifted window (the paper's code and Hugging Face's get_attn_mask)


@dataclass(frozen=True)
class SwinConfig:
    """A Swin classifier's architecture (Hugging Face SwinConfig names in comments)."""

    name: str
    image: int  # image_size
    patch: int  # patch_size
    embed: int  # embed_dim: the first stage's channels, doubled by each patch merging
    depths: tuple[int, ...]  # blocks per stage
    heads: tuple[int, ...]  # num_heads per stage
    window: int  # window_size
    classes: int  # the classifier's width (num_labels)
    mlp_ratio: int = 4
    eps: float = 1e-5  # layer_norm_eps

    def resolution(self, stage: int) -> int:
        """Tokens per side in ``stage`` (each patch merging halves it)."""
        return self.image // self.patch // 2**stage

    def dim(self, stage: int) -> int:
        return self.embed * 2**stage

    def window_of(self, stage: int) -> tuple[int, int]:
        """(window, shift) of ``stage``'s shifted blocks: as Hugging Face's SwinLayer, a resolution not
        larger than the window makes the window the whole resolution and the shift 0."""
        r = self.resolution(stage)
        return (r, 0) if r <= self.window else (self.window, self.window // 2)

    @property
    def parameters(self) -> int:
        """Weights of the model as built here, counted from the architecture."""
        n = self.patch * self.patch * 3 * self.embed + self.embed + 2 * self.embed  # patch conv, its norm
        for s, (depth, heads) in enumerate(zip(self.depths, self.heads, strict=True)):
            c, (ws, _) = self.dim(s), self.window_of(s)
            ff = self.mlp_ratio * c
            # two norms, q/k/v/output projections with biases, the bias table, the MLP
            block = 4 * c + 4 * (c * c + c) + (2 * ws - 1) ** 2 * heads + 2 * c * ff + ff + c
            n += depth * block
            if s < len(self.depths) - 1:
                n += 2 * 4 * c + 4 * c * 2 * c  # patch merging: norm over 4C, 4C -> 2C without bias
        c = self.dim(len(self.depths) - 1)
        return n + 2 * c + c * self.classes + self.classes  # final norm, head


# Swin-L at 384 x 384, window 12: Liu et al. 2021 (arXiv 2103.14030) section 3.3 (C = 192, layer numbers
# {2, 2, 18, 2}), Table 1 (Swin-L 384^2: 197M parameters, 103.9G FLOPs); Hugging Face
# microsoft/swin-large-patch4-window12-384 config.json: embed_dim 192, depths [2, 2, 18, 2], num_heads
# [6, 12, 24, 48], window_size 12, image_size 384, patch_size 4, mlp_ratio 4.0, layer_norm_eps 1e-05,
# 1000 labels. ByteMLPerf's swin-large-torch-fp32 (model_zoo/swin-large-torch-fp32.json, bytedance/
# ByteMLPerf 7ed25996) is this model's export: input pixel_values [1, 3, 384, 384], output logits.
SWIN_LARGE_384 = SwinConfig("swin-large-384", 384, 4, 192, (2, 2, 18, 2), (6, 12, 24, 48), 12, 1000)
# for tests: two stages, dim 32, window 4 at 32 x 32 (8 x 8 tokens: 4 windows, shift 2; then 4 x 4, one window)
TINY_SWIN = SwinConfig("tiny-swin", 32, 4, 32, (2, 2), (2, 4), 4, 10)


def relative_position_index(ws: int) -> np.ndarray:
    """[ws^2, ws^2] rows of the bias table: token i and j of a window (row-major) at (dy, dx) = pos_i -
    pos_j use row (dy + ws - 1) x (2 ws - 1) + dx + ws - 1 of the [(2 ws - 1)^2, heads] table."""
    yy, xx = np.divmod(np.arange(ws * ws), ws)
    dy = yy[:, None] - yy[None, :] + ws - 1
    dx = xx[:, None] - xx[None, :] + ws - 1
    return (dy * (2 * ws - 1) + dx).astype(np.int64)


def shifted_window_mask(h: int, w: int, ws: int, shift: int) -> np.ndarray:
    """[windows, ws^2, ws^2] additive mask of the windows of an [h, w] grid rolled by -shift: 0 between
    tokens of one region of the rolled grid, MASKED between tokens the roll brought together from
    opposite edges. The regions are the paper's: along each axis [0, n - ws), [n - ws, n - shift),
    [n - shift, n)."""

    def regions(n: int) -> np.ndarray:
        r = np.zeros(n, np.int64)
        r[n - ws :] = 1
        r[n - shift :] = 2
        return r

    label = regions(h)[:, None] * 3 + regions(w)[None, :]  # [h, w]
    windows = label.reshape(h // ws, ws, w // ws, ws).transpose(0, 2, 1, 3).reshape(-1, ws * ws)
    return np.where(windows[:, :, None] == windows[:, None, :], 0.0, MASKED).astype(np.float32)


class _Graph:
    """Nodes and initializers; names are given (``prefix``), so tests can find a block's weights."""

    def __init__(self, seed: int, weights: Weights = "random") -> None:
        self.rng = np.random.default_rng(seed)
        self.weights = weights
        self.offset = 0  # next byte of the (never written) external data file
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.consts: dict[tuple[str, bytes], str] = {}
        self.count = 0

    def node(self, op: str, inputs: list[str], prefix: str, **attrs: Any) -> str:
        self.count += 1
        name = f"{prefix}_{self.count}"
        self.nodes.append(helper.make_node(op, inputs, [f"{name}_out"], name=name, **attrs))
        return f"{name}_out"

    def weight(self, name: str, shape: tuple[int, ...], std: float = 0.02, mean: float = 0.0) -> str:
        """A float32 weight named ``name``: seeded normal values (std 0.02, Swin's trunc_normal_ std), or
        (``weights="external"``) a reference into a data file that is never written: shape and type only,
        for compile-only imports (profiler.frontends.onnx.shapes), which read no weight."""
        if self.weights == "external":
            nbytes = 4 * int(np.prod(shape))
            t = TensorProto(name=name, dims=shape, data_type=TensorProto.FLOAT, data_location=TensorProto.EXTERNAL)
            for key, val in (("location", "weights.bin"), ("offset", str(self.offset)), ("length", str(nbytes))):
                entry = t.external_data.add()
                entry.key, entry.value = key, val
            self.offset += nbytes
            self.inits.append(t)
            return name
        value = self.rng.standard_normal(shape, dtype=np.float32) * np.float32(std) + np.float32(mean)
        self.inits.append(numpy_helper.from_array(value, name))
        return name

    def const(self, prefix: str, value: np.ndarray) -> str:
        """A constant (shapes, indices, masks), made once per value."""
        value = np.asarray(value)
        key = (prefix, value.tobytes() + str(value.shape).encode())
        if key not in self.consts:
            self.count += 1
            self.consts[key] = f"{prefix}_{self.count}"
            self.inits.append(numpy_helper.from_array(value, self.consts[key]))
        return self.consts[key]

    def shape(self, *dims: int) -> str:
        return self.const("shape", np.array(dims, np.int64))

    def dense(self, x: str, n_in: int, n_out: int, p: str, bias: bool = True) -> str:
        y = self.node("MatMul", [x, self.weight(f"{p}_w", (n_in, n_out))], f"{p}_matmul")
        return self.node("Add", [y, self.weight(f"{p}_b", (n_out,))], f"{p}_bias") if bias else y

    def norm(self, x: str, c: int, p: str, eps: float) -> str:
        gain, beta = self.weight(f"{p}_gamma", (c,), 0.1, 1.0), self.weight(f"{p}_beta", (c,), 0.1)
        return self.node("LayerNormalization", [x, gain, beta], p, axis=-1, epsilon=eps)

    def roll(self, x: str, shift: int, n: int, axes: tuple[int, ...], p: str) -> str:
        """torch.roll(x, shift, axes) as the exporter writes it: per axis, Concat of two Slices."""
        k = shift % n
        for a in axes:
            ax = self.const("axis", np.array([a], np.int64))
            head = self.node("Slice", [x, self.const("at", np.array([n - k], np.int64)),
                                       self.const("at", np.array([n], np.int64)), ax], f"{p}_roll_tail")  # fmt: skip
            tail = self.node("Slice", [x, self.const("at", np.array([0], np.int64)),
                                       self.const("at", np.array([n - k], np.int64)), ax], f"{p}_roll_head")  # fmt: skip
            x = self.node("Concat", [head, tail], f"{p}_roll", axis=a)
        return x


def block(g: _Graph, x: str, r: int, c: int, heads: int, ws: int, shift: int, eps: float, p: str) -> str:
    """One Swin block on tokens ``x`` [B, r^2, c]: (shifted) window attention and the MLP, each with a
    pre-norm and a residual. Weights are named ``{p}_<part>_w`` etc."""
    n, nw, dh = ws * ws, (r // ws) ** 2, c // heads
    y = g.node("Reshape", [g.norm(x, c, f"{p}_ln1", eps), g.shape(-1, r, r, c)], f"{p}_grid")
    if shift:
        y = g.roll(y, -shift, r, (1, 2), f"{p}_shift")
    y = g.node("Reshape", [y, g.shape(-1, r // ws, ws, r // ws, ws, c)], f"{p}_part")
    y = g.node("Transpose", [y], f"{p}_part_t", perm=[0, 1, 3, 2, 4, 5])
    y = g.node("Reshape", [y, g.shape(-1, n, c)], f"{p}_windows")  # [B x nw, n, c]
    split = g.shape(-1, n, heads, dh)

    def heads_of(t: str, perm: list[int], part: str) -> str:
        return g.node("Transpose", [g.node("Reshape", [t, split], f"{p}_{part}_split")], f"{p}_{part}_heads",
                      perm=perm)  # fmt: skip

    q = heads_of(g.dense(y, c, c, f"{p}_q"), [0, 2, 1, 3], "q")
    k = heads_of(g.dense(y, c, c, f"{p}_k"), [0, 2, 3, 1], "k")
    v = heads_of(g.dense(y, c, c, f"{p}_v"), [0, 2, 1, 3], "v")
    scale = g.const("sqrt_dh", np.array(np.sqrt(dh), np.float32))
    scores = g.node("Div", [g.node("MatMul", [q, k], f"{p}_scores"), scale], f"{p}_scaled")
    table = g.weight(f"{p}_bias_table", ((2 * ws - 1) ** 2, heads))
    index = g.const("rel_index", relative_position_index(ws).reshape(-1))
    bias = g.node("Gather", [table, index], f"{p}_rel_bias", axis=0)  # [n^2, heads]
    bias = g.node("Transpose", [g.node("Reshape", [bias, g.shape(n, n, heads)], f"{p}_rel_bias_r")],
                  f"{p}_rel_bias_t", perm=[2, 0, 1])  # fmt: skip
    scores = g.node("Add", [scores, bias], f"{p}_biased")
    if shift:
        mask = g.const("shift_mask", shifted_window_mask(r, r, ws, shift).reshape(1, nw, 1, n, n))
        scores = g.node("Reshape", [scores, g.shape(-1, nw, heads, n, n)], f"{p}_per_image")
        scores = g.node("Add", [scores, mask], f"{p}_masked")
        scores = g.node("Reshape", [scores, g.shape(-1, heads, n, n)], f"{p}_per_window")
    probs = g.node("Softmax", [scores], f"{p}_softmax", axis=-1)
    ctx = g.node("Transpose", [g.node("MatMul", [probs, v], f"{p}_context")], f"{p}_context_t", perm=[0, 2, 1, 3])
    ctx = g.dense(g.node("Reshape", [ctx, g.shape(-1, n, c)], f"{p}_merge"), c, c, f"{p}_proj")
    y = g.node("Reshape", [ctx, g.shape(-1, r // ws, r // ws, ws, ws, c)], f"{p}_unpart")
    y = g.node("Transpose", [y], f"{p}_unpart_t", perm=[0, 1, 3, 2, 4, 5])
    y = g.node("Reshape", [y, g.shape(-1, r, r, c)], f"{p}_ungrid")
    if shift:
        y = g.roll(y, shift, r, (1, 2), f"{p}_unshift")
    x = g.node("Add", [x, g.node("Reshape", [y, g.shape(-1, r * r, c)], f"{p}_tokens")], f"{p}_attn_residual")
    h = g.dense(g.norm(x, c, f"{p}_ln2", eps), c, 4 * c, f"{p}_fc1")
    # GELU in its exported Erf form: x * (erf(x / sqrt 2) + 1) / 2
    erf = g.node("Erf", [g.node("Div", [h, g.const("sqrt2", np.array(np.sqrt(2.0), np.float32))], f"{p}_gelu_div")],
                 f"{p}_gelu_erf")  # fmt: skip
    one, half = g.const("one", np.array(1.0, np.float32)), g.const("half", np.array(0.5, np.float32))
    gelu = g.node("Mul", [g.node("Mul", [h, g.node("Add", [erf, one], f"{p}_gelu_add")], f"{p}_gelu_mul"), half],
                  f"{p}_gelu")  # fmt: skip
    return g.node("Add", [x, g.dense(gelu, 4 * c, c, f"{p}_fc2")], f"{p}_mlp_residual")


def merge_patches(g: _Graph, x: str, r: int, c: int, eps: float, p: str) -> str:
    """Patch merging: [B, r^2, c] -> [B, (r/2)^2, 2c] (Hugging Face's SwinPatchMerging: the four
    stride-2 samples x[:, 0::2, 0::2], x[:, 1::2, 0::2], x[:, 0::2, 1::2], x[:, 1::2, 1::2] concatenated)."""
    grid = g.node("Reshape", [x, g.shape(-1, r, r, c)], f"{p}_grid")
    axes, steps, ends = (g.const("axes", np.array([1, 2], np.int64)), g.const("steps", np.array([2, 2], np.int64)),
                         g.const("ends", np.array([r, r], np.int64)))  # fmt: skip
    parts = [g.node("Slice", [grid, g.const("starts", np.array(s, np.int64)), ends, axes, steps], f"{p}_sample")
             for s in ((0, 0), (1, 0), (0, 1), (1, 1))]  # fmt: skip
    y = g.node("Reshape", [g.node("Concat", parts, f"{p}_concat", axis=-1), g.shape(-1, (r // 2) ** 2, 4 * c)],
               f"{p}_tokens")  # fmt: skip
    return g.dense(g.norm(y, 4 * c, f"{p}_ln", eps), 4 * c, 2 * c, f"{p}_reduction", bias=False)


def _model(
    g: _Graph, name: str, inputs: list[onnx.ValueInfoProto], outputs: list[onnx.ValueInfoProto]
) -> onnx.ModelProto:
    graph = helper.make_graph(g.nodes, name, inputs, outputs, g.inits)
    g.inits.clear()  # the graph holds copies: Swin-L's 787 MB of float32 weights once, not twice
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="tilescope")
    m.ir_version = IR_VERSION
    # the checker serializes the whole model (another copy of the weights): small models only
    if m.ByteSize() < CHECK_BELOW and g.weights == "random":
        onnx.checker.check_model(m)
    return m


def swin(
    config: SwinConfig = SWIN_LARGE_384, batch: int | str = "N", seed: int = 0, weights: Weights = "random"
) -> onnx.ModelProto:
    """``config``'s classifier as ONNX: input ``pixel_values`` [batch, 3, image, image], output ``logits``
    [batch, classes]. ``weights="external"``: no weight values (see ``_Graph.weight``)."""
    g = _Graph(seed, weights)
    c, r = config.embed, config.resolution(0)
    kernel = g.weight("patch_w", (c, 3, config.patch, config.patch))
    x = g.node("Conv", ["pixel_values", kernel, g.weight("patch_b", (c,))], "patch_embed",
               kernel_shape=[config.patch] * 2, strides=[config.patch] * 2)  # fmt: skip
    x = g.node("Transpose", [g.node("Reshape", [x, g.shape(0, c, r * r)], "patch_flat")], "patch_tokens",
               perm=[0, 2, 1])  # fmt: skip
    x = g.norm(x, c, "patch_ln", config.eps)
    for s, (depth, heads) in enumerate(zip(config.depths, config.heads, strict=True)):
        c, r = config.dim(s), config.resolution(s)
        ws, shift = config.window_of(s)
        for i in range(depth):
            x = block(g, x, r, c, heads, ws, shift if i % 2 else 0, config.eps, f"s{s}b{i}")
        if s < len(config.depths) - 1:
            x = merge_patches(g, x, r, c, config.eps, f"s{s}_merge")
    x = g.norm(x, c, "final_ln", config.eps)
    x = g.node("ReduceMean", [x], "pool", axes=[1], keepdims=0)
    head = g.node("Gemm", [x, g.weight("head_w", (config.classes, c)), g.weight("head_b", (config.classes,))],
                  "head", transB=1)  # fmt: skip
    g.nodes[-1].output[0] = "logits"
    del head
    inp = helper.make_tensor_value_info("pixel_values", TensorProto.FLOAT, [batch, 3, config.image, config.image])
    out = helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, config.classes])
    return _model(g, config.name, [inp], [out])


def swin_block(r: int, c: int, heads: int, ws: int, shift: int, batch: int = 1, seed: int = 0) -> onnx.ModelProto:
    """One block alone (input ``tokens`` [batch, r^2, c], output ``output``): for checking the shifted
    window attention against a reference. Weights ``b_ln1_gamma``, ``b_q_w``, ``b_bias_table``, ..."""
    g = _Graph(seed)
    block(g, "tokens", r, c, heads, ws, shift, 1e-5, "b")
    g.nodes[-1].output[0] = "output"
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [batch, r * r, c]) for n in ("tokens", "output")]
    return _model(g, "swin_block", io[:1], io[1:])
