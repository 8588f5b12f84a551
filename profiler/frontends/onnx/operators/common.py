"""Helpers the operator groups share: attributes, axes, host-known inputs, padded views, reductions, windows."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import helper

from profiler import ops
from profiler.poplar.tensor import Tensor

from ..builder import Builder, Value
from ..errors import Unsupported


def attrs(node: onnx.NodeProto) -> dict[str, Any]:
    """The node's attributes by name, as Python values."""
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def shape_of(v: Value) -> tuple[int, ...]:
    """The shape of a host array or a device tensor."""
    return v.shape if isinstance(v, Tensor) else np.shape(v)


def host_array(v: Value | None, what: str) -> np.ndarray | None:
    """A shape-like input that must be known at import."""
    if v is None:
        return None
    if isinstance(v, Tensor):
        raise Unsupported(f"{what} computed on the device (must be constant)")
    return np.asarray(v)


def normalize_axis(a: int, rank: int) -> int:
    """Axis ``a`` (negative: from the end) as 0..rank-1; Unsupported when out of range."""
    if not -rank <= a < max(rank, 1):
        raise Unsupported(f"axis {a} out of range for rank {rank}")
    return a % rank if rank else 0


def axes_input(b: Builder, node: onnx.NodeProto, inputs: list[Any], since: int, pos: int = 1) -> list[int] | None:
    """Axes from the attribute (opsets before ``since``) or from input ``pos``."""
    if b.opset < since:
        a = attrs(node).get("axes")
        return None if a is None else [int(x) for x in a]
    v = host_array(inputs[pos] if len(inputs) > pos else None, "axes")
    return None if v is None else [int(x) for x in v.reshape(-1)]


def as_text(v: object, default: str) -> str:
    """A string attribute as str (ONNX hands them back as bytes); ``default`` when absent."""
    if v is None:
        return default
    return v.decode() if isinstance(v, bytes) else str(v)


def select(x: np.ndarray, y: np.ndarray, cond: np.ndarray) -> np.ndarray:
    """``x`` where ``cond``, else ``y``: the elementwise function of popops Select maps."""
    return np.where(cond, x, y)


def pad_view(b: Builder, x: Tensor, pads: list[tuple[int, int]], mode: str, value: float = 0.0) -> Tensor:
    """``x`` padded per axis (before, after) as a view: edge/reflect repeat x's own elements, constant
    mode reads a constant element on the tile of the nearest element of ``x`` (as PopLibs maps
    padding, so no tile serves every other tile's padding); negative pads crop."""
    crop = tuple(slice(-lo if lo < 0 else 0, x.shape[i] + hi if hi < 0 else None) for i, (lo, hi) in enumerate(pads))
    x = x[crop]
    pos = [(max(lo, 0), max(hi, 0)) for lo, hi in pads]
    if not any(lo or hi for lo, hi in pos):
        return x
    var, idx = x.elements()
    var, idx = var.reshape(x.shape), idx.reshape(x.shape)
    if mode == "constant" and x.numel():
        cvar, cidx = ops.constant_per_tile(b.graph, x.dtype, value).elements()
        near = np.pad(b.graph.tile_of(x).reshape(x.shape), pos, mode="edge")
        inside = np.pad(np.ones(x.shape, dtype=bool), pos)
        var = np.where(inside, np.pad(var, pos), cvar[0])
        idx = np.where(inside, np.pad(idx, pos), cidx[near])
    elif mode == "constant":  # nothing to be near: one constant element
        c = b.device(np.asarray(value, dtype=x.dtype), like=x.dtype).reshape(1)
        cvar, cidx = c.elements()
        var = np.pad(var, pos, mode="constant", constant_values=int(cvar[0]))
        idx = np.pad(idx, pos, mode="constant", constant_values=int(cidx[0]))
    elif mode in ("edge", "reflect", "wrap"):
        var = np.pad(var, pos, mode=mode)
        idx = np.pad(idx, pos, mode=mode)
    else:
        raise Unsupported(f"pad mode {mode!r}")
    return Tensor(b.graph, var.astype(np.int32), idx, x.dtype)


def reduce(b: Builder, x: Tensor, axes: list[int] | None, kind: str, keepdims: bool) -> Tensor:
    """``x`` reduced over ``axes`` (None: all) with ``kind`` (add, mean, max or min)."""
    ax = sorted({normalize_axis(a, x.rank) for a in axes}) if axes is not None else list(range(x.rank))
    if x.rank == 0 or not ax:
        return x
    if kind == "mean":
        return ops.reduce_mean(b.graph, x, ax, b.prog, keepdims=keepdims)
    return ops.reduce(b.graph, x, ax, b.prog, op_name=kind, keepdims=keepdims, debug_name=f"reduce_{kind}")


def spatial_pads(
    at: dict[str, Any], in_sizes: tuple[int, ...], kernel: list[int], strides: list[int], dilations: list[int]
) -> list[tuple[int, int]]:
    """(before, after) padding per spatial dimension from ``pads`` or ``auto_pad``."""
    n = len(in_sizes)
    auto = at.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto in ("NOTSET", ""):
        p = list(at.get("pads", [0] * 2 * n))
        return [(int(p[i]), int(p[i + n])) for i in range(n)]
    if auto == "VALID":
        return [(0, 0)] * n
    out = []
    for size, k, s, d in zip(in_sizes, kernel, strides, dilations, strict=True):
        total = max((-(-size // s) - 1) * s + (k - 1) * d + 1 - size, 0)
        small, big = total // 2, total - total // 2
        out.append((small, big) if auto == "SAME_UPPER" else (big, small))
    return out


def to_2d(x: Tensor, what: str) -> tuple[Tensor, bool]:
    """A 1-D (N, C, W) input as 2-D with a unit height, and whether it was 1-D; Unsupported for 3-D."""
    if x.rank == 3:
        return x.reshape(x.shape[0], x.shape[1], 1, x.shape[2]), True
    if x.rank != 4:
        raise Unsupported(f"{x.rank - 2}-D {what}")
    return x, False


def expand_1d(v: list[int], one_d: bool, fill: int) -> list[int]:
    """Per-spatial-dimension values with ``fill`` for the unit height a 1-D op is given."""
    return [fill] + v if one_d else v


def broadcast_per_channel(v: np.ndarray, rank: int) -> np.ndarray:
    """A per-channel vector shaped to broadcast over [N, C, ...] of ``rank``."""
    return v.reshape((1, -1) + (1,) * (rank - 2))
