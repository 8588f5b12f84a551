"""One transformer encoder layer, inference: pre-norm multi-head self-attention and a GELU MLP, each
with a residual connection, on a synthetic token sequence.

    POPLAR_ENGINE_OPTIONS='{"autoReport.all":"true","autoReport.directory":"./report"}' \
        python -m profiler.workloads.transformer
"""

from __future__ import annotations

import numpy as np

from profiler import ops
from profiler.chip.targets import Target
from profiler.poplar.graph import Graph
from profiler.poplar.programs import Copy, Sequence
from profiler.workloads.common import Workload, host_parameter, main, workload_target
from report_format.vocabulary import Layer

DEFAULTS = {"seq": 32, "model": 64, "heads": 4, "ff": 128, "tiles": 16}


def build(
    seq: int = 32,
    model: int = 64,
    heads: int = 4,
    ff: int = 128,
    tiles: int = 16,
    dtype: str = "float32",
    target: Target | None = None,
    seed: int = 0,
) -> Workload:
    if model % heads:
        raise ValueError(f"transformer: model width {model} does not split into {heads} heads")
    t = workload_target(target, tiles)
    g = Graph(t)
    rng = np.random.default_rng(seed)
    dh = model // heads
    shapes = {
        "ln1_g": (model,), "ln1_b": (model,), "wqkv": (model, 3 * model), "wo": (model, model),
        "ln2_g": (model,), "ln2_b": (model,), "w1": (model, ff), "b1": (ff,), "w2": (ff, model), "b2": (model,),
    }  # fmt: skip
    # projection weights laid out for the matmul that uses them (createMatMulInputRHS), the rest linearly
    lhs = {"wqkv": (seq, model), "wo": (seq, model), "w1": (seq, model), "w2": (seq, ff)}
    p = {
        n: host_parameter(g, ops.create_matmul_rhs(g, dtype, lhs[n], s, n), n)
        if n in lhs
        else ops.parameter(g, dtype, s, n)
        for n, s in shapes.items()
    }
    x = ops.add_mapped(g, dtype, (seq, model), "tokens")
    out = g.add_device_to_host_fifo("out", dtype, [seq, model])
    prog = Sequence(name="encoder layer")
    prog.add(Copy(g.add_host_to_device_fifo("tokens", dtype, [seq, model]), x, name="tokens"))
    with g.debug_context("attention", op_type="SelfAttention", layer=Layer.USER):
        h, _, _ = ops.layer_norm(g, x, p["ln1_g"], p["ln1_b"], prog, debug_name="ln1")
        qkv = ops.matmul(g, h, p["wqkv"], prog, debug_name="qkv")  # [S, 3D]
        heads_view = qkv.reshape(seq, 3, heads, dh).transpose(1, 2, 0, 3)  # [3, H, S, dh]
        q, k, v = heads_view[0], heads_view[1], heads_view[2]
        scores = ops.scale(g, ops.matmul(g, q, k.transpose(0, 2, 1), prog, debug_name="scores"), 1 / np.sqrt(dh), prog)
        attn = ops.softmax(g, scores, prog)
        ctx = ops.matmul(g, attn, v, prog, debug_name="context")  # [H, S, dh]
        merged = ctx.transpose(1, 0, 2).reshape(seq, model)
        x1 = ops.add(g, x, ops.matmul(g, merged, p["wo"], prog, debug_name="out proj"), prog, debug_name="residual")
    with g.debug_context("mlp", op_type="FeedForward", layer=Layer.USER):
        h2, _, _ = ops.layer_norm(g, x1, p["ln2_g"], p["ln2_b"], prog, debug_name="ln2")
        f = ops.gelu(g, ops.add(g, ops.matmul(g, h2, p["w1"], prog, debug_name="ff1"), p["b1"], prog), prog)
        y = ops.add(g, ops.matmul(g, f, p["w2"], prog, debug_name="ff2"), p["b2"], prog)
        x2 = ops.add(g, x1, y, prog, debug_name="residual")
    prog.add(Copy(x2, out, name="out"))
    np_dt = np.dtype(dtype)
    initial = {n: (rng.standard_normal(s) / np.sqrt(s[0])).astype(np_dt) for n, s in shapes.items() if len(s) == 2}
    initial |= {n: (np.ones(s) if n.endswith("_g") else np.zeros(s)).astype(np_dt) for n, s in shapes.items()
                if len(s) == 1}  # fmt: skip
    tokens = rng.standard_normal((seq, model)).astype(np_dt)
    result: dict[str, np.ndarray] = {}
    w = Workload("transformer", g, [Sequence(name="init"), prog], initial,
                 {"tokens": tokens, "out": lambda v: result.__setitem__("out", np.array(v))})  # fmt: skip
    w.info = {"tokens": tokens, "result": result}
    return w


if __name__ == "__main__":
    main(build, DEFAULTS, "Run one transformer encoder layer (inference)")
