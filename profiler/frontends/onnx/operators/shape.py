"""Shape and layout ops, as views of their input: reshape, transpose, slice, concat, split, pad, expand, tile."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from profiler.poplar.tensor import Tensor, concat

from ..builder import Builder
from ..errors import Unsupported
from .common import as_text, attrs, axes_input, host_array, normalize_axis, pad_view, shape_of
from .registry import handles


@handles("Identity")
def _identity(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    return [inputs[0]]


@handles("Dropout")  # inference: the input itself (and an all-true mask)
def _dropout(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    training = inputs[2] if len(inputs) > 2 else None
    if training is not None and (isinstance(training, Tensor) or bool(np.asarray(training))):
        raise Unsupported("training mode")
    x = inputs[0]
    return [x, np.ones(shape_of(x), dtype=bool)]


@handles("Reshape")
def _reshape(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    if b.opset < 5:
        raise Unsupported("opset < 5")
    shape = [int(s) for s in host_array(inputs[1], "target shape").reshape(-1)]  # type: ignore[union-attr]
    if not attrs(node).get("allowzero", 0):
        shape = [x.shape[i] if s == 0 else s for i, s in enumerate(shape)]
    return [x.reshape(shape)]


@handles("Flatten")
def _flatten(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    axis = int(attrs(node).get("axis", 1))
    axis = axis + x.rank if axis < 0 else axis  # Flatten's axis may equal the rank
    outer = int(np.prod(x.shape[:axis], dtype=np.int64))
    return [x.reshape(outer, -1 if x.numel() else 0)]


@handles("Transpose")
def _transpose(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    perm = attrs(node).get("perm")
    return [x.transpose(*perm) if perm is not None else x.transpose()]


@handles("Squeeze")
def _squeeze(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    axes = axes_input(b, node, inputs, 13)
    if axes is None:
        shape = [s for s in x.shape if s != 1]
    else:
        ax = {normalize_axis(a, x.rank) for a in axes}
        if any(x.shape[a] != 1 for a in ax):
            raise ValueError(f"Squeeze: axes {sorted(ax)} of shape {x.shape} are not all 1")
        shape = [s for i, s in enumerate(x.shape) if i not in ax]
    return [x.reshape(shape)]


@handles("Unsqueeze")
def _unsqueeze(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    axes = axes_input(b, node, inputs, 13)
    rank = x.rank + len(axes or [])
    ax = sorted(normalize_axis(a, rank) for a in axes or [])
    shape = list(x.shape)
    for a in ax:
        shape.insert(a, 1)
    return [x.reshape(shape)]


@handles("Concat")
def _concat(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    parts = [v for v in inputs if v is not None and int(np.prod(shape_of(v))) > 0]
    dev = next(v for v in parts if isinstance(v, Tensor))
    ts = [b.device(v, like=dev.dtype) if not isinstance(v, Tensor) else v for v in parts]
    axis = normalize_axis(int(attrs(node)["axis"]), ts[0].rank)
    return [concat(ts, axis) if len(ts) > 1 else ts[0]]


@handles("Split")
def _split(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    at = attrs(node)
    axis = normalize_axis(int(at.get("axis", 0)), x.rank)
    n = len(node.output)
    if b.opset < 13:
        split = at.get("split")
    else:
        sv = host_array(inputs[1] if len(inputs) > 1 else None, "split sizes")
        split = None if sv is None else [int(s) for s in sv.reshape(-1)]
    dim = x.shape[axis]
    if split is None:
        if at.get("num_outputs") is not None:
            n = int(at["num_outputs"])
        size = -(-dim // n)
        split = [min(size, dim - i * size) for i in range(n)]
    starts = np.concatenate(([0], np.cumsum(split)))
    return [x.slice(int(starts[i]), int(starts[i + 1]), axis) for i in range(len(split))]


@handles("Slice")
def _slice(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    if b.opset < 10:
        at = attrs(node)
        starts, ends, axes, steps = at["starts"], at["ends"], at.get("axes"), None
    else:
        starts = host_array(inputs[1], "starts").reshape(-1)  # type: ignore[union-attr]
        ends = host_array(inputs[2], "ends").reshape(-1)  # type: ignore[union-attr]
        axes = host_array(inputs[3] if len(inputs) > 3 else None, "axes")
        steps = host_array(inputs[4] if len(inputs) > 4 else None, "steps")
    axes = list(range(len(starts))) if axes is None else [int(a) for a in np.reshape(axes, -1)]
    steps = [1] * len(starts) if steps is None else [int(s) for s in np.reshape(steps, -1)]
    key: list[slice] = [slice(None)] * x.rank
    for s, e, a, st in zip(starts, ends, axes, steps, strict=True):
        dim = x.shape[normalize_axis(a, x.rank)]
        s, e = int(s), int(e)
        # clamp as ONNX does (Python slicing clamps the same way once values are in range)
        s = max(-dim - 1, min(s, dim))
        e = max(-dim - 1, min(e, dim))
        if st < 0 and e < -dim:
            e = None  # type: ignore[assignment]
        key[normalize_axis(a, x.rank)] = slice(s, e, st)
    out = x[tuple(key)]
    if out.numel() == 0:  # no elements: exact as a host value
        return [np.zeros(out.shape, x.dtype)]
    return [out]


@handles("Expand")
def _expand(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    shape = tuple(int(s) for s in host_array(inputs[1], "shape").reshape(-1))  # type: ignore[union-attr]
    out = tuple(np.broadcast_shapes(x.shape, shape))
    return [x.broadcast_to(out) if out != x.shape else x]


@handles("Pad")
def _pad(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    at = attrs(node)
    mode = at.get("mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if b.opset < 11:
        raw, value, axes = list(at.get("pads")), float(at.get("value", 0.0)), None
    else:
        raw = [int(p) for p in host_array(inputs[1], "pads").reshape(-1)]  # type: ignore[union-attr]
        cv = host_array(inputs[2] if len(inputs) > 2 else None, "constant value")
        value = 0.0 if cv is None or cv.size == 0 else cv.reshape(-1)[0].item()
        av = host_array(inputs[3] if len(inputs) > 3 else None, "axes")
        axes = None if av is None else [normalize_axis(int(a), x.rank) for a in av.reshape(-1)]
    axes = axes if axes is not None else list(range(x.rank))
    k = len(axes)
    pads = [(0, 0)] * x.rank
    for j, a in enumerate(axes):
        pads[a] = (int(raw[j]), int(raw[j + k]))
    return [pad_view(b, x, pads, mode, value)]


@handles("Tile")
def _tile(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    reps = [int(r) for r in host_array(inputs[1], "repeats").reshape(-1)]  # type: ignore[union-attr]
    if len(reps) != x.rank:
        raise ValueError(f"Tile: {len(reps)} repeats for rank {x.rank}")
    if 0 in reps or x.numel() == 0:
        raise Unsupported("empty tensors")
    y = x
    for axis, r in enumerate(reps):
        if r > 1:
            y = y.broadcast(r, axis)  # Poplar Tensor::broadcast repeats the whole tensor: a view
    return [y]


@handles("DepthToSpace", "SpaceToDepth")
def _depth_space(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    if x.rank != 4:
        raise Unsupported(f"rank {x.rank} input")
    at = attrs(node)
    s = int(at["blocksize"])
    n, c, h, w = x.shape
    if node.op_type == "SpaceToDepth":
        y = x.reshape(n, c, h // s, s, w // s, s)
        crd = as_text(at.get("mode"), "DCR") == "CRD"
        y = y.transpose(0, 1, 3, 5, 2, 4) if crd else y.transpose(0, 3, 5, 1, 2, 4)
        return [y.reshape(n, c * s * s, h // s, w // s)]
    if as_text(at.get("mode"), "DCR") == "DCR":
        y = x.reshape(n, s, s, c // (s * s), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:  # CRD
        y = x.reshape(n, c // (s * s), s, s, h, w).transpose(0, 1, 4, 2, 5, 3)
    return [y.reshape(n, c // (s * s), h * s, w * s)]


@handles("CenterCropPad")
def _center_crop_pad(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    shape = [int(s) for s in host_array(inputs[1], "shape").reshape(-1)]  # type: ignore[union-attr]
    axes = [normalize_axis(int(a), x.rank) for a in attrs(node).get("axes", range(x.rank))]
    pads = [(0, 0)] * x.rank
    for a, want in zip(axes, shape, strict=True):
        diff = want - x.shape[a]
        # as onnx.reference: crop (in - out) // 2 at the start and the rest at the end; pad
        # (out - in) // 2 before and the rest after
        pads[a] = (diff // 2, diff - diff // 2) if diff >= 0 else (-((-diff) // 2), -((-diff) - (-diff) // 2))
    return [pad_view(b, x, pads, "constant", 0)]
