"""Convolutions: Conv and ConvTranspose, 1-D as 2-D and 3-D as 2-D over depth slices."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from profiler import ops
from profiler.poplar.tensor import Tensor

from ..builder import Builder, Value
from ..errors import Unsupported
from .common import as_text, attrs, broadcast_per_channel, expand_1d, pad_view, shape_of, spatial_pads, to_2d
from .registry import handles


@handles("Conv")
def _conv(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    at = attrs(node)
    x = b.device(inputs[0])
    if x.rank == 5:
        y = conv3d_by_slices(b, node, x, inputs[1], at)
        if len(inputs) > 2 and inputs[2] is not None:
            bias = inputs[2]
            y = b.binary("add", y, bias.reshape(1, -1, 1, 1, 1) if isinstance(bias, Tensor)
                         else np.asarray(bias).reshape(1, -1, 1, 1, 1))  # fmt: skip
        return [y]
    w_shape = inputs[1].shape if isinstance(inputs[1], Tensor) else np.shape(inputs[1])
    x = b.device(b.fp8_operand(x))  # FP8 models: the input cast on the device, the weights below on the host
    x4, one_d = to_2d(x, "convolution")
    if len(w_shape) != (3 if one_d else 4):
        raise Unsupported("weights rank")
    n_sp = x.rank - 2
    kernel = list(at.get("kernel_shape", w_shape[2:]))
    strides = list(at.get("strides", [1] * n_sp))
    dil = list(at.get("dilations", [1] * n_sp))
    pads = spatial_pads(at, x.shape[2:], kernel, strides, dil)
    strides, dil = expand_1d(strides, one_d, 1), expand_1d(dil, one_d, 1)
    pads = ([(0, 0)] if one_d else []) + pads
    if any(lo != hi for lo, hi in pads):  # asymmetric padding: pad explicitly
        x4 = pad_view(b, x4, [(0, 0), (0, 0)] + pads, "constant", 0.0)
        sym = (0, 0)
    else:
        sym = (pads[0][0], pads[1][0])
    groups = int(at.get("group", 1))
    if isinstance(inputs[1], Tensor):
        w = b.device(b.fp8_operand(inputs[1]))
    else:  # weights created laid out for this convolution (PopART's createWeights)
        grp = ops.conv.channel_group(x4, groups)  # the column order conv2d will take

        def laid_out(t: Tensor) -> bool:
            return not one_d and ops.map_conv_weights(b.graph, t, x4.shape, tuple(strides), sym, tuple(dil), groups,
                                                      b.partials, b.amp, channel_group=grp)  # fmt: skip

        storage = None if one_d else ops.conv.WeightStorage(grp)  # as ops.create_conv_weights stores them
        w = b.device(inputs[1], name=node.input[1], like=x.dtype, mapper=laid_out, storage=storage)
    w4 = w.reshape(w.shape[0], w.shape[1], 1, w.shape[2]) if one_d else w
    y = ops.conv2d(b.graph, x4, w4, b.prog, stride=tuple(strides), padding=sym, dilation=tuple(dil),
                   groups=groups, partials_dtype=b.partials, available_memory_proportion=b.amp,
                   log2_scale=b.fp8_unscale(x, w))  # fmt: skip
    if one_d:
        y = y.reshape(y.shape[0], y.shape[1], y.shape[3])
    if len(inputs) > 2 and inputs[2] is not None:
        bias = inputs[2]
        bias = (
            bias.reshape((1, -1) + (1,) * n_sp)
            if isinstance(bias, Tensor)
            else broadcast_per_channel(np.asarray(bias), y.rank)
        )
        y = b.binary("add", y, bias)
    return [y]


def _pads(at: dict[str, Any], n: int) -> list[tuple[int, int]]:
    p = list(at.get("pads", [0] * 2 * n))
    return [(int(p[i]), int(p[i + n])) for i in range(n)]


@handles("ConvTranspose")
def _conv_transpose(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    """A convolution of the stride-dilated, padded input with the flipped, transposed weights
    (1-D as 2-D with a unit height; 3-D through conv3d_by_slices)."""
    at = attrs(node)
    x = b.device(inputs[0])
    if x.rank not in (3, 4, 5):
        raise Unsupported(f"{x.rank - 2}-D transposed convolution")
    one_d = x.rank == 3
    if one_d:
        x = x.reshape(x.shape[0], x.shape[1], 1, x.shape[2])
    w = inputs[1] if isinstance(inputs[1], Tensor) else np.asarray(inputs[1])
    if one_d:
        w = w.reshape(w.shape[0], w.shape[1], 1, w.shape[2])
    g = int(at.get("group", 1))
    cin, cout_g = w.shape[:2]
    kernel = list(w.shape[2:])
    n_sp = 1 if one_d else x.rank - 2

    def per_dim(key: str, fill: int) -> list[int]:
        v = [int(s) for s in at.get(key, [fill] * n_sp)]
        return ([fill] + v) if one_d else v

    strides, dil, out_pad = per_dim("strides", 1), per_dim("dilations", 1), per_dim("output_padding", 0)
    in_sizes = x.shape[2:]
    auto = as_text(at.get("auto_pad"), "NOTSET")
    if "pads" not in at and ("output_shape" in at or auto in ("SAME_UPPER", "SAME_LOWER")):
        want = [int(s) for s in at["output_shape"]] if "output_shape" in at else [
            s * i for s, i in zip(strides[-n_sp:], in_sizes[-n_sp:], strict=True)]  # fmt: skip
        want = ([1] + want) if one_d else want
        pads = []
        for i, s, k, d, op_, o in zip(in_sizes, strides, kernel, dil, out_pad, want, strict=True):
            total = s * (i - 1) + op_ + (k - 1) * d + 1 - o
            lo = total // 2 if auto == "SAME_UPPER" else total - total // 2  # as onnx.reference splits it
            pads.append((lo, total - lo))
    elif auto == "VALID":
        pads = [(0, 0)] * len(in_sizes)
    else:
        pads = _pads(at, n_sp)
        pads = ([(0, 0)] + pads) if one_d else pads
    # 1. insert stride-1 zeros between input elements (a view: padding a unit axis, then merging)
    n, c = x.shape[:2]
    inter = [n, c] + [v for size in in_sizes for v in (size, 1)]
    xi = x.reshape(inter)
    if any(st > 1 for st in strides):
        xi = pad_view(b, xi, [(0, 0), (0, 0)] + [p for st in strides for p in ((0, 0), (0, st - 1))], "constant", 0.0)
    xs = xi.reshape([n, c] + [size * st for size, st in zip(in_sizes, strides, strict=True)])
    xs = xs[
        (slice(None), slice(None), *(slice(0, (size - 1) * st + 1) for size, st in zip(in_sizes, strides, strict=True)))
    ]
    # 2. pad by the kernel's extent less the given padding (negative: crop), plus output_padding
    full = [((k - 1) * d - lo, (k - 1) * d - hi + op_) for k, d, (lo, hi), op_ in zip(kernel, dil, pads, out_pad,
                                                                                           strict=True)]  # fmt: skip
    xp = pad_view(b, xs, [(0, 0), (0, 0), *full], "constant", 0.0)
    # 3. weights [Cin, Cout/g, k...] -> [Cout, Cin/g, k...], flipped in space
    flip = (slice(None), slice(None)) + (slice(None, None, -1),) * len(kernel)
    grouped = [g * cout_g, cin // g, *kernel]
    perm = (0, 2, 1, *range(3, 3 + len(kernel)))
    if isinstance(w, Tensor):  # device weights: the same rearrangement as views
        wt: Value = w.reshape(g, cin // g, cout_g, *kernel).transpose(*perm).reshape(grouped)[flip]
    else:
        wt = np.ascontiguousarray(w.reshape(g, cin // g, cout_g, *kernel).transpose(perm).reshape(grouped)[flip])
    if x.rank == 5:
        conv_at = {"kernel_shape": kernel, "strides": [1, 1, 1], "dilations": dil, "group": g}
        y = conv3d_by_slices(b, node, xp, wt, conv_at)
    else:
        if not isinstance(wt, Tensor):
            wt = b.device(b.host(f"{node.name or 'convtranspose'}/weights", wt), like=x.dtype)
        y = ops.conv2d(
            b.graph,
            xp,
            wt,
            b.prog,
            stride=(1, 1),
            padding=(0, 0),
            dilation=tuple(dil),
            groups=g,
            partials_dtype=b.partials,
            available_memory_proportion=b.amp,
        )
    if one_d:
        y = y.reshape(y.shape[0], y.shape[1], y.shape[3])
    if len(inputs) > 2 and inputs[2] is not None:
        bias = inputs[2]
        shp = (1, -1) + (1,) * (y.rank - 2)
        y = b.binary("add", y, bias.reshape(shp) if isinstance(bias, Tensor) else np.asarray(bias).reshape(shp))
    return [y]


def conv3d_by_slices(b: Builder, node: onnx.NodeProto, x: Tensor, w: Value, at: dict[str, Any]) -> Tensor:
    """Conv over [N, C, D, H, W]: for each kernel depth offset, the input's depth positions it reads
    become extra images of one 2-D convolution; the offsets' results are summed."""
    kernel = [int(k) for k in at.get("kernel_shape", shape_of(w)[2:])]
    strides = [int(s) for s in at.get("strides", [1, 1, 1])]
    dil = [int(d) for d in at.get("dilations", [1, 1, 1])]
    pads = spatial_pads(at, x.shape[2:], kernel, strides, dil)
    g = int(at.get("group", 1))
    xp = pad_view(b, x, [(0, 0), (0, 0), *pads], "constant", 0.0)
    n, c, dp = xp.shape[:3]
    do = (dp - (kernel[0] - 1) * dil[0] - 1) // strides[0] + 1
    total: Tensor | None = None
    for i in range(kernel[0]):
        start = i * dil[0]
        xs = xp[:, :, start : start + (do - 1) * strides[0] + 1 : strides[0]]  # [N, C, Do, H, W]
        x4 = xs.transpose(0, 2, 1, 3, 4).reshape(n * do, c, *xs.shape[3:])
        wi = w[:, :, i] if isinstance(w, Tensor) else b.device(
            b.host(f"{node.name}/w_depth{i}", np.ascontiguousarray(np.asarray(w)[:, :, i])), like=x.dtype)  # fmt: skip
        y = ops.conv2d(b.graph, x4, wi, b.prog, stride=tuple(strides[1:]), padding=(0, 0), dilation=tuple(dil[1:]),
                       groups=g, partials_dtype=b.partials, available_memory_proportion=b.amp)  # fmt: skip
        total = y if total is None else b.binary("add", total, y)
    assert total is not None
    _, co, ho, wo = total.shape
    return total.reshape(n, do, co, ho, wo).transpose(0, 2, 1, 3, 4)
