"""Attention (opset 23) and RotaryEmbedding."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from profiler import ops
from profiler.chip import cost_model
from profiler.poplar.tensor import Tensor, concat

from ..builder import Builder, Value, at_least_1d
from ..errors import Unsupported
from .common import attrs, pad_view, reduce, shape_of
from .matmul import matmul
from .registry import handles

_MASKED = -1e30  # masked scores: finite, so a row's max and exp stay defined; exp(-1e30 - max) is 0


def _bool_bias(m: np.ndarray) -> np.ndarray:
    return np.where(m, 0.0, _MASKED)


def _finite_bias(m: np.ndarray) -> np.ndarray:
    return np.maximum(m, _MASKED)  # -inf in a float mask: the same finite floor


def _row_kept(m: np.ndarray) -> np.ndarray:
    return m > _MASKED / 2  # a row with any position left unmasked


@handles("Attention")
def _attention(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    """Scaled dot-product attention as onnx.reference computes it: 3-D inputs split into heads,
    grouped-query heads repeated (views), past keys/values concatenated, optional softcap, a boolean
    or additive mask padded to the key length, causal masking aligned bottom-right, softmax, and
    rows with every position masked set to zero."""
    at = attrs(node)
    for key in ("softmax_precision",):
        at.pop(key, None)
    if int(at.get("qk_matmul_output_mode", 0)) or (len(node.output) > 3 and node.output[3]):
        raise Unsupported("qk_matmul_output")
    if len(inputs) > 6 and inputs[6] is not None:
        raise Unsupported("nonpad_kv_seqlen")
    if int(at.get("left_window_size", -1)) >= 0 or int(at.get("right_window_size", -1)) >= 0:
        raise Unsupported("sliding windows")
    q, k, v = (b.device(t) for t in inputs[:3])
    three_d = q.rank == 3
    if three_d:
        hq, hkv = int(at["q_num_heads"]), int(at["kv_num_heads"])

        def heads(t: Tensor, h: int) -> Tensor:
            return t.reshape(t.shape[0], t.shape[1], h, t.shape[2] // h).transpose(0, 2, 1, 3)

        q, k, v = heads(q, hq), heads(k, hkv), heads(v, hkv)
    past_k = inputs[4] if len(inputs) > 4 else None
    past_v = inputs[5] if len(inputs) > 5 else None
    if past_k is not None:
        k = concat([b.device(past_k, like=k.dtype), k], 2)
        v = concat([b.device(past_v, like=v.dtype), v], 2)
    present_k, present_v = k, v
    bq, hq_, sq, d = q.shape
    hk, skv = k.shape[1], k.shape[2]
    if hq_ != hk:  # grouped-query attention: each key/value head serves hq/hk query heads
        g = hq_ // hk
        k = k.reshape(bq, hk, 1, skv, k.shape[3]).broadcast_to((bq, hk, g, skv, k.shape[3])).reshape(bq, hq_, skv, -1)
        v = v.reshape(bq, hk, 1, skv, v.shape[3]).broadcast_to((bq, hk, g, skv, v.shape[3])).reshape(bq, hq_, skv, -1)
    scale = float(at["scale"]) if "scale" in at else 1.0 / np.sqrt(d)
    # Q and K each scaled by sqrt(scale), as onnx.reference does (the same rounding in float16)
    root = float(np.sqrt(scale))
    qs = ops.scale(b.graph, q, root, b.prog)
    ks = ops.scale(b.graph, k, root, b.prog)
    scores = matmul(b, qs, ks.transpose(0, 1, 3, 2))
    softcap = float(at.get("softcap", 0.0))
    if softcap > 0:
        scores = b.unary("tanh", ops.scale(b.graph, at_least_1d(scores), 1.0 / softcap, b.prog).reshape(scores.shape))
        scores = ops.scale(b.graph, at_least_1d(scores), softcap, b.prog).reshape(scores.shape)
    bias: Value | None = None
    mask = inputs[3] if len(inputs) > 3 else None
    if mask is not None:
        pad = skv - shape_of(mask)[-1]
        if isinstance(mask, Tensor):
            is_bool = mask.dtype == np.bool_
            mt = b.map("MaskBias" if is_bool else "MaskFloor", _bool_bias if is_bool else _finite_bias, [mask],
                       (cost_model.binary("logical_and" if is_bool else "maximum"),), out_dtype=scores.dtype)  # fmt: skip
            if pad > 0:
                mt = pad_view(b, mt, [(0, 0)] * (mt.rank - 1) + [(0, pad)], "constant", _MASKED)
            bias = mt
        else:
            mh = np.asarray(mask)
            mh = _bool_bias(mh) if mh.dtype == np.bool_ else _finite_bias(mh.astype(np.float64))
            if pad > 0:
                mh = np.pad(mh, [(0, 0)] * (mh.ndim - 1) + [(0, pad)], constant_values=_MASKED)
            bias = mh.astype(np.float32)
    if at.get("is_causal", 0):
        offset = shape_of(past_k)[2] if past_k is not None else 0
        causal = np.where(np.arange(skv)[None, :] <= np.arange(sq)[:, None] + offset, 0.0, _MASKED).astype(np.float32)
        if bias is None or not isinstance(bias, Tensor):
            bias = causal if bias is None else np.maximum(bias + causal, _MASKED).astype(np.float32)
        else:
            bias = b.binary("add", bias, causal)
    if bias is not None:
        scores = b.binary("add", scores, bias)
    probs = ops.softmax(b.graph, scores, b.prog, axis=-1)
    if bias is not None:  # rows masked everywhere: zero, not a uniform average
        if isinstance(bias, Tensor):
            kept = b.map("RowKept", _row_kept, [reduce(b, bias, [bias.rank - 1], "max", keepdims=True)],
                         (cost_model.binary("greater_than"),), out_dtype=probs.dtype)  # fmt: skip
            probs = b.binary("mul", probs, kept)
        else:
            kept = np.asarray(bias).max(axis=-1, keepdims=True) > _MASKED / 2
            if not kept.all():
                probs = b.binary("mul", probs, kept.astype(np.float32))
    y = matmul(b, probs, v)
    if three_d:
        y = y.transpose(0, 2, 1, 3).reshape(bq, sq, -1)
    outs: list[Any] = [y]
    if len(node.output) > 1:
        outs += [present_k, present_v]
    return outs


@handles("RotaryEmbedding")
def _rotary(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    """As onnx.reference: [B, S, H, D] heads, the first rotary_embedding_dim features rotated in
    halves (or interleaved pairs) by cos/sin rows picked by position (a gather, or a host table)."""
    at = attrs(node)
    x = b.device(inputs[0])
    four_d = x.rank == 4
    xs = x.transpose(0, 2, 1, 3) if four_d else x.reshape(x.shape[0], x.shape[1], int(at["num_heads"]), -1)
    bsz, seq, _, head = xs.shape
    rot = int(at.get("rotary_embedding_dim", 0)) or head
    half = rot // 2
    pos = inputs[3] if len(inputs) > 3 else None

    def table(v: Value) -> Value:
        if pos is None:
            return v.reshape(bsz, seq, 1, half) if isinstance(v, Tensor) else np.asarray(v).reshape(bsz, seq, 1, half)
        if isinstance(pos, Tensor):  # positions on the device: a row gather from the cache
            rows = ops.gather(b.graph, b.device(v, like=x.dtype), b.device(pos).reshape(-1), b.prog)
            return rows.reshape(bsz, seq, 1, half)
        if isinstance(v, Tensor):
            return v[np.asarray(pos)].reshape(bsz, seq, 1, half)
        return np.asarray(v)[np.asarray(pos)].reshape(bsz, seq, 1, half)

    cos, sin = table(inputs[1]), table(inputs[2])
    xr = xs[:, :, :, :rot]
    if at.get("interleaved", 0):
        x1, x2 = xr[:, :, :, 0::2], xr[:, :, :, 1::2]
    else:
        x1, x2 = xr[:, :, :, :half], xr[:, :, :, half:]
    real = b.binary("sub", b.binary("mul", x1, cos), b.binary("mul", x2, sin))
    imag = b.binary("add", b.binary("mul", x1, sin), b.binary("mul", x2, cos))
    if at.get("interleaved", 0):
        rotated = concat([real.reshape(*real.shape, 1), imag.reshape(*imag.shape, 1)], 4).reshape(bsz, seq, -1, rot)
    else:
        rotated = concat([real, imag], 3)
    out = concat([rotated, xs[:, :, :, rot:]], 3) if rot < head else rotated
    return [out.transpose(0, 2, 1, 3) if four_d else out.reshape(x.shape)]
