"""Decoder-only language models in ONNX, shaped as Hugging Face's exports of them (opset 17).

Two published configurations (``GPT2_XL``, ``LLAMA2_7B``) and tiny ones for tests, each as a
**prefill** graph (``S`` prompt tokens, no cache: ``present.{i}.key/value`` outputs of length ``S``)
or a **generation step** (one token after ``L`` cached ones: ``past_key_values.{i}.key/value``
inputs [B, heads, L, head_dim], ``present.{i}.key/value`` outputs of length L + 1): the input and
output names of ``optimum``'s decoder exports (``decoder_model.onnx`` / ``decoder_with_past_model.onnx``).
Shapes are static: a graph is built for one (S, L) as a compiled IPU program is. The attention mask
input of those exports is left out (no padding: a prefill's mask is the causal one, folded into a
constant; a generation step attends to every cached position).

Weights are seeded random values (``weights="random"``, for runs with values and ``--check``) or,
for the billion-parameter sizes, external-data references (``weights="external"``): every weight
initializer has its shape and type and points into a data file by offset, and ``save`` writes that
file sparse (its bytes are never written, and read as zeros), so a 7B decoder's ONNX is a few MB and
is built in seconds; a compile-only import reads only the shapes.

``ipus=N`` places the nodes PopART-style (``__ipu_number``, what ``builder.virtualGraph`` sets) as
``stage_of_layer`` says, so ``tilescope run m.onnx --ipus N --pipeline`` pipelines it layer-wise.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from profiler.multi_ipu.sharding import IPU_ATTRIBUTE

from .examples import IR_VERSION, OPSET

Mode = Literal["prefill", "generate"]
Weights = Literal["random", "external"]


@dataclass(frozen=True)
class DecoderConfig:
    """A decoder's architecture (Hugging Face config names in comments)."""

    name: str
    layers: int  # num_hidden_layers / n_layer
    hidden: int  # hidden_size / n_embd
    heads: int  # num_attention_heads / n_head
    ffn: int  # intermediate_size / n_inner (4 x hidden for GPT-2)
    vocab: int  # vocab_size
    max_positions: int  # max_position_embeddings / n_positions
    norm: Literal["layer", "rms"]
    mlp: Literal["gelu", "swiglu"]
    positions: Literal["learned", "rotary"]
    eps: float  # layer_norm_epsilon / rms_norm_eps
    bias: bool  # biases on the projections (GPT-2's Conv1D layers have them; Llama's Linear layers do not)
    rope_theta: float = 10_000.0

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def parameters(self) -> int:
        """Weights of the model as built here (GPT-2's tied LM head counted once)."""
        h, f = self.hidden, self.ffn
        per_layer = 4 * h * h + (3 if self.mlp == "swiglu" else 2) * h * f
        per_layer += (2 if self.norm == "rms" else 4) * h  # norm gains (and LayerNorm biases)
        if self.bias:
            per_layer += 4 * h + f + (h if self.mlp == "gelu" else 0)
        embed = self.vocab * h + (self.max_positions * h if self.positions == "learned" else 0)
        head = 0 if self.tied_head else self.vocab * h
        return self.layers * per_layer + embed + head + (2 if self.norm == "layer" else 1) * h

    @property
    def tied_head(self) -> bool:
        """GPT-2 ties its LM head to the token embedding (tie_word_embeddings defaults to true);
        Llama-2 does not (its config: "tie_word_embeddings": false)."""
        return self.positions == "learned"


# GPT-2 XL, 1.5 B: Radford et al. 2019, "Language Models are Unsupervised Multitask Learners",
# Table 2 (48 layers, d_model 1600); Hugging Face gpt2-xl config.json: n_layer 48, n_embd 1600, n_head
# 25, n_positions 1024, vocab_size 50257, layer_norm_epsilon 1e-5, activation_function "gelu_new"
# (the tanh form), n_inner null (4 x n_embd).
GPT2_XL = DecoderConfig("gpt2-xl", 48, 1600, 25, 6400, 50257, 1024, "layer", "gelu", "learned", 1e-5, True)
# Llama-2-7B: Touvron et al. 2023, "Llama 2: Open Foundation and Fine-Tuned Chat Models" (Table 1:
# 7B, context 4k) and Hugging Face meta-llama/Llama-2-7b-hf config.json: num_hidden_layers 32,
# hidden_size 4096, num_attention_heads 32 (num_key_value_heads 32: no grouped-query attention at
# 7B), intermediate_size 11008, vocab_size 32000, max_position_embeddings 4096, rms_norm_eps 1e-5,
# hidden_act "silu" (SwiGLU), rope_theta 10000, tie_word_embeddings false.
LLAMA2_7B = DecoderConfig("llama2-7b", 32, 4096, 32, 11008, 32000, 4096, "rms", "swiglu", "rotary", 1e-5, False)
# tiny versions of both for tests (2 layers, hidden 64): the same graph, sizes onnxruntime runs in ms
TINY_GPT2 = replace(GPT2_XL, name="tiny-gpt2", layers=2, hidden=64, heads=4, ffn=256, vocab=96, max_positions=64)
TINY_LLAMA = replace(LLAMA2_7B, name="tiny-llama", layers=2, hidden=64, heads=4, ffn=172, vocab=96, max_positions=64)

CONFIGS: dict[str, DecoderConfig] = {c.name: c for c in (GPT2_XL, LLAMA2_7B, TINY_GPT2, TINY_LLAMA)}


def stage_of_layer(layers: int, ipus: int) -> np.ndarray:
    """The pipeline stage (IPU) of each decoder layer: contiguous, as even as the division allows
    (layer l on IPU floor(l x ipus / layers)), so 32 layers over 16 IPUs are two a stage and 48 over 4
    twelve. The token (and position) embeddings go on IPU 0 with the first layers, the final norm and
    the LM head on the last IPU with the last layers.

    Graphcore's GPT-2 example (graphcore/examples nlp/gpt2/pytorch/run/pretraining_medium.sh:
    ``--layers-per-ipu 0 3 3 3 3 4 4 4`` on 8 IPUs) gives IPU 0 the embeddings and the LM head tied to
    them and no layer; a stage list here runs forward through the IPUs once (profiler.multi_ipu.pipeline),
    so the head cannot return to IPU 0 and the layers are spread over every IPU instead. Graphcore's
    Llama-2 7B inference (PopXL) uses tensor parallelism over the IPUs, which is not modelled here.
    """
    if layers < 1 or ipus < 1:
        raise ValueError(f"stage_of_layer: layers and ipus must be >= 1, got {layers}, {ipus}")
    if ipus > layers:
        raise ValueError(f"stage_of_layer: {ipus} IPUs for {layers} layers leaves an IPU with no layer")
    return (np.arange(layers) * ipus) // layers


class _Graph:
    """Nodes, initializers and the IPU each new node goes on."""

    def __init__(self, seed: int, weights: Weights, data_file: str) -> None:
        self.rng = np.random.default_rng(seed)
        self.weights = weights
        self.data_file = data_file
        self.offset = 0  # next free byte of the external data file
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0
        self.ipu: int | None = None

    def node(self, op: str, inputs: list[str], prefix: str, out: str | None = None, n_out: int = 1,
             **attrs: Any) -> str:  # fmt: skip
        self.count += 1
        name = f"{prefix}_{self.count}"
        outs = [out or f"{name}_out"] + [f"{name}_out{i}" for i in range(1, n_out)]
        if self.ipu is not None:
            attrs[IPU_ATTRIBUTE] = self.ipu
        self.nodes.append(helper.make_node(op, inputs, outs, name=name, **attrs))
        return outs[0]

    def const(self, prefix: str, value: np.ndarray) -> str:
        """A small constant (shapes, masks, rotary tables): always inline."""
        self.count += 1
        name = f"{prefix}_{self.count}"
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def weight(self, prefix: str, shape: tuple[int, ...], std: float = 0.02, mean: float = 0.0) -> str:
        """A float32 weight: seeded normal values (std 0.02, GPT-2's and Llama's initializer_range),
        or a reference into the external data file (no values made)."""
        self.count += 1
        name = f"{prefix}_{self.count}"
        if self.weights == "random":
            value = mean + std * self.rng.standard_normal(shape)
            self.inits.append(numpy_helper.from_array(value.astype(np.float32), name))
            return name
        nbytes = 4 * int(np.prod(shape))
        t = TensorProto(name=name, dims=shape, data_type=TensorProto.FLOAT, data_location=TensorProto.EXTERNAL)
        for key, val in (("location", self.data_file), ("offset", str(self.offset)), ("length", str(nbytes))):
            entry = t.external_data.add()
            entry.key, entry.value = key, val
        self.offset += nbytes
        self.inits.append(t)
        return name


def decoder(
    config: DecoderConfig,
    mode: Mode = "prefill",
    seq: int = 128,
    past: int = 0,
    batch: int = 1,
    ipus: int | None = None,
    weights: Weights = "random",
    data_file: str | None = None,
    seed: int = 0,
) -> onnx.ModelProto:
    """``config``'s decoder as ONNX: a prefill of ``seq`` tokens, or (``mode="generate"``) one token
    after a KV cache of ``past`` tokens. Inputs ``input_ids`` [batch, tokens] (int64) and, generating,
    ``past_key_values.{i}.key`` / ``.value``; outputs ``logits`` [batch, tokens, vocab] and
    ``present.{i}.key`` / ``.value``. ``ipus``: place the nodes for pipelining (``stage_of_layer``).
    ``weights="external"`` makes no weight values (see the module docstring); ``data_file`` names the
    data file relative to the model (default ``<name>.onnx.data``)."""
    if mode not in ("prefill", "generate"):
        raise ValueError(f"decoder: mode must be 'prefill' or 'generate', got {mode!r}")
    tokens = seq if mode == "prefill" else 1
    cached = 0 if mode == "prefill" else past
    if tokens < 1 or cached < 0 or batch < 1:
        raise ValueError(f"decoder: need seq >= 1, past >= 0, batch >= 1; got {seq}, {past}, {batch}")
    if cached + tokens > config.max_positions:
        raise ValueError(f"decoder: {cached + tokens} positions, {config.name} has {config.max_positions}")
    stages = stage_of_layer(config.layers, ipus) if ipus else None
    g = _Graph(seed, weights, data_file or f"{config.name}.onnx.data")
    g.ipu = 0 if ipus else None
    h, heads, dh = config.hidden, config.heads, config.head_dim
    total = cached + tokens  # keys and values attended to
    positions = np.arange(cached, total)

    def dense(x: str, n_in: int, n_out: int, p: str) -> str:
        y = g.node("MatMul", [x, g.weight(f"{p}_w", (n_in, n_out))], f"{p}_matmul")
        return g.node("Add", [y, g.weight(f"{p}_b", (n_out,))], f"{p}_bias") if config.bias else y

    def norm(x: str, p: str) -> str:
        gain = g.weight(f"{p}_gamma", (h,), std=0.1, mean=1.0)
        if config.norm == "layer":
            return g.node("LayerNormalization", [x, gain, g.weight(f"{p}_beta", (h,))], p, axis=-1,
                          epsilon=config.eps)  # fmt: skip
        # LlamaRMSNorm as torch.onnx exports it: x * 1/sqrt(mean(x^2) + eps) * weight
        ms = g.node("ReduceMean", [g.node("Pow", [x, two], f"{p}_square")], f"{p}_mean", axes=[-1], keepdims=1)
        inv = g.node("Reciprocal", [g.node("Sqrt", [g.node("Add", [ms, eps], f"{p}_eps")], f"{p}_sqrt")], f"{p}_inv")
        return g.node("Mul", [g.node("Mul", [x, inv], f"{p}_scale"), gain], p)

    if config.norm == "rms":
        two = g.const("two", np.array(2.0, np.float32))
        eps = g.const("rms_eps", np.array(config.eps, np.float32))
    split_shape = g.const("split_shape", np.array([0, 0, heads, dh], np.int64))
    merge_shape = g.const("merge_shape", np.array([0, 0, h], np.int64))
    inv_sqrt_dh = g.const("inv_sqrt_dh", np.array(1 / np.sqrt(dh), np.float32))
    causal = None
    if tokens > 1:  # query i (position cached + i) sees keys 0 .. cached + i
        seen = np.arange(total)[None, :] <= positions[:, None]
        causal = g.const("causal_mask", seen.reshape(1, 1, tokens, total))
        masked = g.const("mask_value", np.array(np.finfo(np.float32).min, np.float32))
    rope = None
    if config.positions == "rotary":  # Hugging Face's rotate_half form: halves, not interleaved pairs
        inv_freq = 1.0 / config.rope_theta ** (np.arange(0, dh, 2) / dh)
        angle = np.concatenate([positions[:, None] * inv_freq[None, :]] * 2, axis=1)  # [tokens, dh]
        rope = (g.const("rope_cos", np.cos(angle).astype(np.float32)),
                g.const("rope_sin", np.sin(angle).astype(np.float32)),
                g.const("zero", np.array([0], np.int64)), g.const("half_dim", np.array([dh // 2], np.int64)),
                g.const("head_dim", np.array([dh], np.int64)), g.const("last_axis", np.array([3], np.int64)))  # fmt: skip

    def heads_of(x: str, p: str) -> str:  # [B, T, h] -> [B, heads, T, dh]
        return g.node("Transpose", [g.node("Reshape", [x, split_shape], f"{p}_split")], f"{p}_heads",
                      perm=[0, 2, 1, 3])  # fmt: skip

    def rotate(x: str, p: str) -> str:  # x * cos + rotate_half(x) * sin, rotate_half(x) = [-x2, x1]
        assert rope is not None
        cos, sin, zero, half_dim, head_dim, axis = rope
        x1 = g.node("Slice", [x, zero, half_dim, axis], f"{p}_x1")
        x2 = g.node("Slice", [x, half_dim, head_dim, axis], f"{p}_x2")
        turned = g.node("Concat", [g.node("Neg", [x2], f"{p}_neg"), x1], f"{p}_rotate_half", axis=-1)
        return g.node("Add", [g.node("Mul", [x, cos], f"{p}_cos"), g.node("Mul", [turned, sin], f"{p}_sin")],
                      f"{p}_rope")  # fmt: skip

    # embeddings (IPU 0)
    wte = g.weight("wte", (config.vocab, h))
    x = g.node("Gather", [wte, "input_ids"], "token_embedding")
    if config.positions == "learned":
        wpe = g.weight("wpe", (config.max_positions, h), std=0.01)
        ids = g.const("position_ids", positions[None, :].astype(np.int64))
        x = g.node("Add", [x, g.node("Gather", [wpe, ids], "position_embedding")], "embeddings")
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [batch, tokens])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, tokens, config.vocab])]
    kv_in = [batch, heads, cached, dh]
    kv_out = [batch, heads, total, dh]
    for i in range(config.layers):
        if stages is not None:
            g.ipu = int(stages[i])
        p = f"layer{i}"
        y = norm(x, f"{p}_ln1")
        if config.bias:  # GPT-2's fused c_attn, split three ways
            qkv = dense(y, h, 3 * h, f"{p}_c_attn")
            sizes = g.const("qkv_sizes", np.array([h] * 3, np.int64))
            q = g.node("Split", [qkv, sizes], f"{p}_qkv_split", n_out=3, axis=2)
            k, v = g.nodes[-1].output[1], g.nodes[-1].output[2]
        else:
            q, k, v = (dense(y, h, h, f"{p}_{n}_proj") for n in ("q", "k", "v"))
        q, k, v = heads_of(q, f"{p}_q"), heads_of(k, f"{p}_k"), heads_of(v, f"{p}_v")
        if rope is not None:
            q, k = rotate(q, f"{p}_q"), rotate(k, f"{p}_k")
        names = (f"present.{i}.key", f"present.{i}.value")
        if mode == "generate":
            for n in ("key", "value"):
                inputs.append(helper.make_tensor_value_info(f"past_key_values.{i}.{n}", TensorProto.FLOAT, kv_in))
            k = g.node("Concat", [f"past_key_values.{i}.key", k], f"{p}_key_cache", out=names[0], axis=2)
            v = g.node("Concat", [f"past_key_values.{i}.value", v], f"{p}_value_cache", out=names[1], axis=2)
        else:
            k = g.node("Identity", [k], f"{p}_key_present", out=names[0])
            v = g.node("Identity", [v], f"{p}_value_present", out=names[1])
        outputs += [helper.make_tensor_value_info(n, TensorProto.FLOAT, kv_out) for n in names]
        kt = g.node("Transpose", [k], f"{p}_key_t", perm=[0, 1, 3, 2])
        scores = g.node("Mul", [g.node("MatMul", [q, kt], f"{p}_scores"), inv_sqrt_dh], f"{p}_scaled")
        if causal is not None:
            scores = g.node("Where", [causal, scores, masked], f"{p}_causal")
        probs = g.node("Softmax", [scores], f"{p}_softmax", axis=-1)
        ctx = g.node("Transpose", [g.node("MatMul", [probs, v], f"{p}_context")], f"{p}_context_t", perm=[0, 2, 1, 3])
        ctx = g.node("Reshape", [ctx, merge_shape], f"{p}_context_merge")
        x = g.node("Add", [dense(ctx, h, h, f"{p}_o_proj"), x], f"{p}_attn_residual")
        y = norm(x, f"{p}_ln2")
        if config.mlp == "swiglu":  # down(silu(gate(y)) * up(y)); SiLU exported as x * Sigmoid(x)
            gate = dense(y, h, config.ffn, f"{p}_gate_proj")
            silu = g.node("Mul", [gate, g.node("Sigmoid", [gate], f"{p}_sigmoid")], f"{p}_silu")
            act = g.node("Mul", [silu, dense(y, h, config.ffn, f"{p}_up_proj")], f"{p}_swiglu")
        else:  # gelu_new: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
            u = dense(y, h, config.ffn, f"{p}_c_fc")
            cube = g.node("Pow", [u, g.const("three", np.array(3.0, np.float32))], f"{p}_cube")
            inner = g.node("Add", [u, g.node("Mul", [cube, g.const("c", np.array(0.044715, np.float32))],
                                             f"{p}_cube_scale")], f"{p}_inner")  # fmt: skip
            t = g.node("Tanh", [g.node("Mul", [inner, g.const("k", np.array(np.sqrt(2 / np.pi), np.float32))],
                                       f"{p}_tanh_in")], f"{p}_tanh")  # fmt: skip
            half = g.node("Mul", [g.node("Add", [t, g.const("one", np.array(1.0, np.float32))], f"{p}_one_plus"),
                                  g.const("half", np.array(0.5, np.float32))], f"{p}_half")  # fmt: skip
            act = g.node("Mul", [u, half], f"{p}_gelu")
        x = g.node("Add", [dense(act, config.ffn, h, f"{p}_down_proj"), x], f"{p}_mlp_residual")
    if ipus:
        g.ipu = ipus - 1
    x = norm(x, "final_norm")
    if config.tied_head and not ipus:  # the token embedding, transposed (one initializer, as torch exports it)
        head = g.node("Transpose", [wte], "lm_head_t", perm=[1, 0])
    else:  # untied (Llama-2), or a copy of the tied table on the last stage (a stage cannot reach back)
        head = g.weight("lm_head", (h, config.vocab))
    g.node("MatMul", [x, head], "lm_head", out="logits")
    graph = helper.make_graph(g.nodes, f"{config.name}_{mode}", inputs, outputs, g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="tilescope")
    model.ir_version = IR_VERSION
    if weights == "random":
        onnx.checker.check_model(model)
    return model


def save(model: onnx.ModelProto, path: str | Path) -> Path:
    """Write ``model`` to ``path``; a model with external weights gets its data file beside it,
    sparse (sized, never written: reads as zeros), so saving a 7B decoder costs no disk or time."""
    path = Path(path)
    onnx.save(model, str(path))
    ends: dict[str, int] = {}
    for t in model.graph.initializer:
        if t.data_location == TensorProto.EXTERNAL:
            meta = {e.key: e.value for e in t.external_data}
            end = int(meta.get("offset", 0)) + int(meta["length"])
            ends[meta["location"]] = max(ends.get(meta["location"], 0), end)
    for location, size in ends.items():
        with open(path.parent / location, "wb") as f:
            os.ftruncate(f.fileno(), size)
    return path
