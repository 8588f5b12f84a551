"""Recurrent layers (LSTM, GRU, RNN), unrolled over the sequence."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from profiler.chip import cost_model
from profiler.poplar.tensor import Tensor, concat

from ..builder import Builder, Value
from ..errors import Unsupported
from .common import as_text, attrs, select
from .matmul import matmul
from .registry import handles


def _act(b: Builder, name: str, x: Tensor) -> Tensor:
    if name == "Sigmoid":
        return b.unary("sigmoid", x)
    if name == "Tanh":
        return b.unary("tanh", x)
    if name == "Relu":
        return b.unary("relu", x)
    raise Unsupported(f"activation {name}")


def _rnn_args(b: Builder, node: onnx.NodeProto, inputs: list[Any], gates: int) -> dict[str, Any]:
    at = attrs(node)
    x = b.device(inputs[0])
    if at.get("layout", 0):
        x = x.transpose(1, 0, 2)  # [B, S, I] -> [S, B, I]
    seq_lens = inputs[4] if len(inputs) > 4 else None
    if seq_lens is not None and not isinstance(seq_lens, Tensor) and np.all(np.asarray(seq_lens) == x.shape[0]):
        seq_lens = None  # every sequence is full length: no masking
    if at.get("clip") is not None:
        raise Unsupported("clip")
    if node.op_type == "LSTM" and at.get("input_forget", 0):
        raise Unsupported("input_forget")
    direction = as_text(at.get("direction"), "forward")
    hidden = int(at["hidden_size"])
    acts = [as_text(a, "") for a in at.get("activations", [])]
    return {"x": x, "w": inputs[1], "r": inputs[2], "bias": inputs[3] if len(inputs) > 3 else None,
            "h0": inputs[5] if len(inputs) > 5 else None, "c0": inputs[6] if len(inputs) > 6 else None,
            "dirs": ["forward", "reverse"] if direction == "bidirectional" else [direction], "hidden": hidden,
            "acts": acts, "layout": int(at.get("layout", 0)), "lbr": int(at.get("linear_before_reset", 0)),
            "seq_lens": seq_lens, "peep": inputs[7] if node.op_type == "LSTM" and len(inputs) > 7 else None}  # fmt: skip


def _part(v: Value, d: int) -> Value:
    return v[d] if isinstance(v, Tensor) else np.asarray(v)[d]


def _t(v: Value) -> Value:
    return v.transpose() if isinstance(v, Tensor) else np.ascontiguousarray(np.asarray(v).T)


def _step_valid(n: np.ndarray, t: int) -> np.ndarray:
    return t < n


@handles("LSTM", "GRU", "RNN")
def _recurrent(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    """One matmul for every step's input projection, then per step a matmul of the hidden state and
    the gate arithmetic (as PopLibs' LSTM/GRU unroll over the sequence)."""
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[node.op_type]
    a = _rnn_args(b, node, inputs, gates)
    x, hdim = a["x"], a["hidden"]
    s, batch = x.shape[0], x.shape[1]
    defaults = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"], "RNN": ["Tanh"]}[node.op_type]
    per = len(defaults)
    ys, hs, cs = [], [], []
    for d, direction in enumerate(a["dirs"]):
        acts = a["acts"][d * per : (d + 1) * per] or defaults
        w, r = _part(a["w"], d), _part(a["r"], d)
        xw = matmul(b, x.reshape(s * batch, -1), _t(w)).reshape(s, batch, gates * hdim)
        wb = rb = None
        if a["bias"] is not None:
            bias = _part(a["bias"], d)
            wb, rb = bias[: gates * hdim], bias[gates * hdim :]
            if node.op_type != "GRU" or not a["lbr"]:
                xw = b.binary("add", xw, b.binary("add", wb, rb) if isinstance(wb, Tensor) else np.asarray(wb) + rb)
                rb = None
            else:
                xw = b.binary("add", xw, wb)
        h: Value = np.zeros((batch, hdim), np.float32) if a["h0"] is None else _part(a["h0"], d)
        c: Value = np.zeros((batch, hdim), np.float32) if a["c0"] is None else _part(a["c0"], d)
        rt = _t(r)
        out = []
        steps = range(s) if direction == "forward" else range(s - 1, -1, -1)
        lens = None if a["seq_lens"] is None else b.device(a["seq_lens"]).reshape(batch, 1)
        peep = None if a["peep"] is None else _part(a["peep"], d)
        for t in steps:
            g = xw[t]
            h_prev, c_prev = h, c
            if node.op_type == "LSTM":
                z = b.binary("add", g, matmul(b, h, rt))
                i_, o_, f_, c_ = (z.slice(k * hdim, (k + 1) * hdim, 1) for k in range(4))
                if peep is not None:  # peepholes: P = [p_i, p_o, p_f] on the cell state
                    i_ = b.binary("add", i_, b.binary("mul", c, peep[:hdim]))
                    f_ = b.binary("add", f_, b.binary("mul", c, peep[2 * hdim :]))
                i_, f_ = _act(b, acts[0], i_), _act(b, acts[0], f_)
                c = b.binary("add", b.binary("mul", f_, c), b.binary("mul", i_, _act(b, acts[1], c_)))
                if peep is not None:
                    o_ = b.binary("add", o_, b.binary("mul", c, peep[hdim : 2 * hdim]))
                h = b.binary("mul", _act(b, acts[0], o_), _act(b, acts[2], c))
            elif node.op_type == "GRU":
                hr = matmul(b, h, rt.slice(0, 2 * hdim, 1) if isinstance(rt, Tensor) else rt[:, : 2 * hdim])
                rh_w = rt.slice(2 * hdim, 3 * hdim, 1) if isinstance(rt, Tensor) else rt[:, 2 * hdim :]
                if rb is not None:
                    hr = b.binary("add", hr, rb[: 2 * hdim])
                zr = b.binary("add", g.slice(0, 2 * hdim, 1), hr)
                z_ = _act(b, acts[0], zr.slice(0, hdim, 1))
                r_ = _act(b, acts[0], zr.slice(hdim, 2 * hdim, 1))
                if a["lbr"]:
                    hh = matmul(b, h, rh_w)
                    if rb is not None:
                        hh = b.binary("add", hh, rb[2 * hdim :])
                    cand = b.binary("add", g.slice(2 * hdim, 3 * hdim, 1), b.binary("mul", r_, hh))
                else:
                    cand = b.binary("add", g.slice(2 * hdim, 3 * hdim, 1), matmul(b, b.binary("mul", r_, h), rh_w))
                cand = _act(b, acts[1], cand)
                # h = (1 - z) * cand + z * h = cand + z * (h - cand)
                h = b.binary("add", cand, b.binary("mul", z_, b.binary("sub", h, cand)))
            else:
                h = _act(b, acts[0], b.binary("add", g, matmul(b, h, rt)))
            if lens is not None:  # steps past a sequence's length keep its state and output zeros
                valid = b.map("SeqValid", _step_valid, [lens], (cost_model.binary("less_than"),), out_dtype="bool", t=t)
                zero = np.zeros((), dtype=x.dtype)
                y_t = b.map("Select", select, [b.device(h), zero, valid], (cost_model.binary("maximum"),))
                h = b.map(
                    "Select",
                    select,
                    [b.device(h), b.device(h_prev, like=x.dtype), valid],
                    (cost_model.binary("maximum"),),
                )
                if node.op_type == "LSTM":
                    c = b.map("Select", select, [b.device(c, like=x.dtype), b.device(c_prev, like=x.dtype), valid],
                              (cost_model.binary("maximum"),))  # fmt: skip
                out.append(y_t.reshape(1, batch, hdim))
                continue
            out.append(b.device(h).reshape(1, batch, hdim))
        if direction == "reverse":
            out.reverse()
        ys.append(concat(out, 0) if len(out) > 1 else out[0])  # [S, B, H]
        hs.append(b.device(h).reshape(1, batch, hdim))
        cs.append(b.device(c, like=x.dtype).reshape(1, batch, hdim))
    y = concat([v.reshape(s, 1, batch, hdim) for v in ys], 1) if len(ys) > 1 else ys[0].reshape(s, 1, batch, hdim)
    yh = concat(hs, 0) if len(hs) > 1 else hs[0]
    yc = concat(cs, 0) if len(cs) > 1 else cs[0]
    if a["layout"]:
        y, yh, yc = y.transpose(2, 0, 1, 3), yh.transpose(1, 0, 2), yc.transpose(1, 0, 2)
    outs: list[Any] = [y, yh]
    if node.op_type == "LSTM":
        outs.append(yc)
    return outs
