"""Pooling: MaxPool (with its indices), AveragePool, LpPool, the global pools; 3-D over depth slices."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from profiler import ops
from profiler.chip import cost_model
from profiler.poplar.tensor import Tensor

from ..builder import Builder, Value, at_least_1d
from ..errors import Unsupported
from .common import attrs, expand_1d, pad_view, reduce, spatial_pads, to_2d
from .registry import handles


def _pool_geometry(b: Builder, node: onnx.NodeProto, x: Tensor) -> tuple[list[int], list[int], list[int], list[tuple[int, int]], list[tuple[int, int]]]:  # fmt: skip
    """(kernel, strides, dilations, explicit pads, ceil-mode extra pads) per spatial dimension."""
    at = attrs(node)
    kernel = list(at["kernel_shape"])
    n = len(kernel)
    strides = list(at.get("strides", [1] * n))
    dilations = list(at.get("dilations", [1] * n))
    if (at.get("storage_order", 0) or len([o for o in node.output if o]) > 1) and x.rank != 4:
        raise Unsupported("indices output of 1-D or 3-D pooling")
    pads = spatial_pads(at, x.shape[2:], kernel, strides, dilations)
    extra = []
    for size, k, s, d, (lo, hi) in zip(x.shape[2:], kernel, strides, dilations, pads, strict=True):
        k = (k - 1) * d + 1  # the window's extent
        span = size + lo + hi - k
        out = (-(-span // s) if at.get("ceil_mode", 0) else span // s) + 1
        if at.get("ceil_mode", 0) and (out - 1) * s >= size + lo:
            out -= 1  # the last window would start in the padding
        extra.append(max(0, (out - 1) * s + k - (size + lo + hi)))
    return kernel, strides, dilations, pads, [(0, e) for e in extra]


@handles("MaxPool", "AveragePool")
def _pool(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    if x.rank == 5:
        return [pool3d_by_slices(b, node, x)]
    x4, one_d = to_2d(x, "pooling")
    kernel, strides, dilations, pads, extra = _pool_geometry(b, node, x)
    kernel, strides, dilations = (expand_1d(v, one_d, 1) for v in (kernel, strides, dilations))
    pads, extra = ([(0, 0)] if one_d else []) + pads, ([(0, 0)] if one_d else []) + extra
    full = [(lo, hi + e) for (lo, hi), (_, e) in zip(pads, extra, strict=True)]
    # equal padding on both sides is the op's own (its window reads a pad constant per tile, no
    # index per element); other padding is a padded view
    indices = node.op_type == "MaxPool" and len(node.output) > 1 and bool(node.output[1])
    even = all(lo == hi for lo, hi in full) and not indices  # (the indices are found in the padded view)
    op_pad = tuple(lo for lo, _ in full) if even else (0, 0)
    if node.op_type == "MaxPool":
        lowest = float(np.finfo(x.dtype).min) if x.dtype.kind == "f" else int(np.iinfo(x.dtype).min)
        xp = x4 if even else pad_view(b, x4, [(0, 0), (0, 0)] + full, "constant", lowest)
        y = ops.max_pool2d(b.graph, xp, tuple(kernel), b.prog, stride=tuple(strides), padding=op_pad,
                           dilation=tuple(dilations))  # fmt: skip
        if len(node.output) > 1 and node.output[1]:
            order = int(attrs(node).get("storage_order", 0))
            idx = max_pool_indices(b, x4, xp, y, kernel, strides, dilations, full, order)
            return [y, idx]
    else:
        xp = x4 if even else pad_view(b, x4, [(0, 0), (0, 0)] + full, "constant", 0.0)
        y = ops.avg_pool2d(b.graph, xp, tuple(kernel), b.prog, stride=tuple(strides), padding=op_pad,
                           dilation=tuple(dilations))  # fmt: skip
        # divisor per output position: the window's elements inside the input (count_include_pad=0)
        # or inside the explicitly padded input (=1); ceil-mode overhang never counts
        include = attrs(node).get("count_include_pad", 0)
        h, w = x4.shape[2:]
        ones = np.zeros((h + full[0][0] + full[0][1], w + full[1][0] + full[1][1]))
        if include:
            ones[: h + pads[0][0] + pads[0][1], : w + pads[1][0] + pads[1][1]] = 1
        else:
            ones[full[0][0] : full[0][0] + h, full[1][0] : full[1][0] + w] = 1
        ho, wo = y.shape[2:]
        extent = tuple((k - 1) * d + 1 for k, d in zip(kernel, dilations, strict=True))
        win = np.lib.stride_tricks.sliding_window_view(ones, extent)[:: strides[0], :: strides[1]][:ho, :wo]
        win = win[:, :, :: dilations[0], :: dilations[1]]
        count = win.sum(axis=(2, 3))
        factor = kernel[0] * kernel[1] / np.maximum(count, 1)
        if not np.allclose(factor, 1.0):
            y = b.binary("mul", y, factor.astype(x.dtype).reshape(1, 1, ho, wo))
    if one_d:
        y = y.reshape(y.shape[0], y.shape[1], y.shape[3])
    return [y]


@handles("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    if x.rank == 4:  # pooling over the whole image: vertices over positions and channel chunks
        pool = ops.avg_pool2d if node.op_type == "GlobalAveragePool" else ops.max_pool2d
        return [pool(b.graph, x, tuple(x.shape[2:]), b.prog)]
    kind = "mean" if node.op_type == "GlobalAveragePool" else "max"
    return [reduce(b, x, list(range(2, x.rank)), kind, keepdims=True)]


def pool3d_by_slices(b: Builder, node: onnx.NodeProto, x: Tensor) -> Tensor:
    """Max/average pooling over [N, C, D, H, W]: 2-D pooling of the depth positions each output
    reads, combined with max (or averaged) over the kernel's depth."""
    at = attrs(node)
    kernel, strides, dil, pads, extra = _pool_geometry(b, node, x)
    if any(e for _, e in extra) or (node.op_type == "AveragePool" and any(lo or hi for lo, hi in pads)
                                    and not at.get("count_include_pad", 0)):  # fmt: skip
        raise Unsupported("3-D pooling with ceil_mode, or padding excluded from averages")
    is_max = node.op_type == "MaxPool"
    fill = float(np.finfo(x.dtype).min) if is_max else 0.0
    xp = pad_view(b, x, [(0, 0), (0, 0), *pads], "constant", fill)
    n, c, dp = xp.shape[:3]
    do = (dp - (kernel[0] - 1) * dil[0] - 1) // strides[0] + 1
    total: Tensor | None = None
    for i in range(kernel[0]):
        start = i * dil[0]
        xs = xp[:, :, start : start + (do - 1) * strides[0] + 1 : strides[0]]
        x4 = xs.reshape(n, c * do, *xs.shape[3:])
        pool = ops.max_pool2d if is_max else ops.avg_pool2d
        y = pool(b.graph, x4, tuple(kernel[1:]), b.prog, stride=tuple(strides[1:]), dilation=tuple(dil[1:]))
        total = y if total is None else b.binary("max" if is_max else "add", total, y)
    assert total is not None
    if not is_max and kernel[0] > 1:
        total = ops.scale(b.graph, at_least_1d(total), 1.0 / kernel[0], b.prog).reshape(total.shape)
    return total.reshape(n, c, do, *total.shape[2:])


def _window_index(xv: np.ndarray, yv: np.ndarray, pos: np.ndarray, best: np.ndarray) -> np.ndarray:
    return np.where((xv == yv) & (pos < best), pos, best)


def max_pool_indices(
    b: Builder,
    x: Tensor,
    xp: Tensor,
    y: Tensor,
    kernel: list[int],
    strides: list[int],
    dilations: list[int],
    pads: list[tuple[int, int]],
    storage_order: int,
) -> Tensor:
    """MaxPool's Indices output: the flat input index (row-major over N, C, H, W, or column-major
    over H, W with storage_order=1) of the first window element equal to the maximum. One
    elementwise pass per kernel offset over strided views of the padded input; the positions are a
    host constant (padding holds an index past the end, so it is never chosen over a real element)."""
    n, c, h, w = x.shape
    ho, wo = y.shape[2:]
    (ph, _), (pw, _) = pads
    hh, ww = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    plane = hh * w + ww if not storage_order else ww * h + hh
    base = (np.arange(n * c) * h * w).reshape(n, c, 1, 1)
    big = n * c * h * w
    pos = np.pad(plane[None, None] + base, [(0, 0), (0, 0), (ph, xp.shape[2] - h - ph), (pw, xp.shape[3] - w - pw)],
                 constant_values=big).astype(np.int32)  # fmt: skip
    best: Value = np.full((n, c, ho, wo), big, dtype=np.int32)
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            r0, c0 = i * dilations[0], j * dilations[1]
            rows = slice(r0, r0 + (ho - 1) * strides[0] + 1, strides[0])
            cols = slice(c0, c0 + (wo - 1) * strides[1] + 1, strides[1])
            xv = xp[:, :, rows, cols]
            pv = b.host(f"maxpool_positions_{i}_{j}", np.ascontiguousarray(pos[:, :, rows, cols]))
            best = b.map("MaxPoolIndex", _window_index, [xv, y, pv, best], (cost_model.binary("equal"), cost_model.binary("minimum")),
                         out_dtype="int32")  # fmt: skip
    return b.device(best)


def _abs_pow(x: np.ndarray, p: float) -> np.ndarray:
    return np.power(np.abs(x), p)


@handles("LpPool")
def _lp_pool(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    """(sum over the window of |x|^p)^(1/p): an average pool of |x|^p times the window size."""
    x = b.device(inputs[0])
    if x.rank != 4:
        raise Unsupported(f"{x.rank - 2}-D LpPool")
    p = float(attrs(node).get("p", 2))
    kernel, strides, dil, pads, extra = _pool_geometry(b, node, x)
    full = [(lo, hi + e) for (lo, hi), (_, e) in zip(pads, extra, strict=True)]
    xp = pad_view(b, b.map("AbsPow", _abs_pow, [x], (cost_model.unary("absolute"), cost_model.binary("power")), p=p),
                  [(0, 0), (0, 0), *full], "constant", 0.0)  # fmt: skip
    y = ops.avg_pool2d(b.graph, xp, tuple(kernel), b.prog, stride=tuple(strides), dilation=tuple(dil))
    y = ops.scale(b.graph, at_least_1d(y), float(kernel[0] * kernel[1]), b.prog).reshape(y.shape)
    return [b.map("PowScalar", _pow_inv, [y], (cost_model.binary("power"),), p=1.0 / p)]


def _pow_inv(x: np.ndarray, p: float) -> np.ndarray:
    return np.power(x, p)
