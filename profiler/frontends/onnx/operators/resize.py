"""Resize and Upsample: nearest, linear and cubic, one axis at a time."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from profiler.poplar.tensor import Tensor

from ..builder import Builder
from ..errors import Unsupported
from .common import as_text, attrs, host_array, normalize_axis
from .registry import handles


def _source_coords(out_size: int, in_size: int, scale: float, mode: str, roi: tuple[float, float]) -> np.ndarray:
    """The input coordinate of each output position along one axis (ONNX Resize's
    coordinate_transformation_mode); align_corners spans the unrounded output length in * scale."""
    o = np.arange(out_size, dtype=np.float64)
    exact = in_size * scale
    if mode == "half_pixel":
        return (o + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (o + 0.5) / scale - 0.5 if out_size > 1 else np.zeros(out_size)
    if mode == "align_corners":
        return o * (in_size - 1) / (exact - 1) if exact != 1 else np.zeros(out_size)
    if mode == "asymmetric":
        return o / scale
    if mode == "tf_half_pixel_for_nn":
        return (o + 0.5) / scale
    if mode == "half_pixel_symmetric":
        adj = out_size / (scale * in_size)
        center = in_size / 2
        offset = center * (1 - adj)
        return offset + (o + 0.5) / scale - 0.5
    if mode == "tf_crop_and_resize":
        start, end = roi
        if out_size > 1:
            return start * (in_size - 1) + o * (end - start) * (in_size - 1) / (out_size - 1)
        return np.full(out_size, 0.5 * (start + end) * (in_size - 1))
    raise Unsupported(f"coordinate_transformation_mode {mode!r}")


def _nearest(coord: np.ndarray, mode: str, scale: float) -> np.ndarray:
    if mode == "round_prefer_floor":
        return np.where(coord == np.floor(coord) + 0.5, np.floor(coord), np.round(coord))
    if mode == "round_prefer_ceil":
        return np.where(coord == np.floor(coord) + 0.5, np.ceil(coord), np.round(coord))
    if mode == "floor":
        return np.floor(coord)
    if mode == "ceil":
        return np.ceil(coord)
    raise Unsupported(f"nearest_mode {mode!r}")


def _cubic_taps(coords: np.ndarray, n_in: int, a: float, exclude_outside: bool) -> tuple[np.ndarray, np.ndarray]:
    """(input index, weight) of the four taps of each output position (Keys' cubic convolution with
    coefficient ``a``; the edge is repeated, or with exclude_outside its taps get no weight)."""
    x0 = np.floor(coords)
    r = np.where(coords == x0, 1.0, coords - x0)  # an exact integer takes the pixel on its left
    q = 1 - r
    w = np.stack([((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
                  ((a + 2) * r - (a + 3)) * r * r + 1,
                  ((a + 2) * q - (a + 3)) * q * q + 1,
                  ((a * (q + 1) - 5 * a) * (q + 1) + 8 * a) * (q + 1) - 4 * a], axis=1)  # fmt: skip
    xp = coords + 2
    p = np.floor(xp)
    start = p + np.where(xp == p, -2, -1)
    idx = (start[:, None] + np.arange(4)[None, :] - 2).astype(np.int64)
    if exclude_outside:
        w = np.where((idx < 0) | (idx >= n_in), 0.0, w)
        total = w.sum(axis=1, keepdims=True)
        w = w / np.where(total == 0, 1.0, total)
    return np.clip(idx, 0, n_in - 1), w


def _take(x: Tensor, idx: np.ndarray, axis: int) -> Tensor:
    key: tuple[Any, ...] = (slice(None),) * axis + (idx,)
    return x[key]


@handles("Resize", "Upsample")
def _resize(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    at = attrs(node)
    mode = as_text(at.get("mode"), "nearest")
    r = x.rank
    roi = None
    sizes = None
    if node.op_type == "Upsample":
        scales = at.get("scales") if b.opset < 9 else host_array(inputs[1], "scales")
        scales = [float(s) for s in np.reshape(scales, -1)]  # type: ignore[arg-type]
        coord_mode, nearest_mode = "asymmetric", "floor"
    else:
        if b.opset < 11:
            scales = [float(s) for s in host_array(inputs[1], "scales").reshape(-1)]  # type: ignore[union-attr]
            coord_mode, nearest_mode = "asymmetric", "floor"
        else:
            roi_v = host_array(inputs[1] if len(inputs) > 1 else None, "roi")
            sc = host_array(inputs[2] if len(inputs) > 2 else None, "scales")
            sz = host_array(inputs[3] if len(inputs) > 3 else None, "sizes")
            coord_mode = as_text(at.get("coordinate_transformation_mode"), "half_pixel")
            nearest_mode = as_text(at.get("nearest_mode"), "round_prefer_floor")
            if at.get("antialias", 0):
                raise Unsupported("antialias")
            policy = as_text(at.get("keep_aspect_ratio_policy"), "stretch")
            axes = [normalize_axis(int(a), r) for a in at["axes"]] if "axes" in at else list(range(r))
            scales = [1.0] * r
            if sz is not None and sz.size:
                sizes = [x.shape[d] for d in range(r)]
                for a, s in zip(axes, sz.reshape(-1), strict=True):
                    sizes[a] = int(s)
                scales = [sizes[d] / x.shape[d] for d in range(r)]
                if policy != "stretch":  # one scale for every resized axis, sizes rounded half up
                    pick = {"not_larger": min, "not_smaller": max}.get(policy)
                    if pick is None:
                        raise Unsupported(f"keep_aspect_ratio_policy {policy!r}")
                    one = pick(scales[a] for a in axes)
                    scales = [one if d in axes else 1.0 for d in range(r)]
                    sizes = [int(one * x.shape[d] + 0.5) if d in axes else x.shape[d] for d in range(r)]
            elif sc is not None and sc.size:
                for a, s in zip(axes, sc.reshape(-1), strict=True):
                    scales[a] = float(s)
            if roi_v is not None and roi_v.size:
                rv = roi_v.reshape(-1).astype(np.float64)
                full = [(0.0, 1.0)] * r
                for j, a in enumerate(axes):
                    full[a] = (float(rv[j]), float(rv[j + len(axes)]))
                roi = full
    if mode == "cubic" and node.op_type == "Upsample":
        raise Unsupported("cubic mode")
    if sizes is None:
        sizes = [int(np.floor(x.shape[d] * scales[d])) for d in range(r)]
    y = x
    for d in range(r):
        if sizes[d] == x.shape[d] and scales[d] == 1.0 and coord_mode != "tf_crop_and_resize":
            continue
        n_in = x.shape[d]
        coords = _source_coords(sizes[d], n_in, scales[d], coord_mode, roi[d] if roi else (0.0, 1.0))
        if coord_mode == "tf_crop_and_resize":
            raise Unsupported("tf_crop_and_resize")  # needs extrapolation_value outside the box
        if mode == "nearest":
            idx = np.clip(_nearest(coords, nearest_mode, scales[d]), 0, n_in - 1).astype(np.int64)
            y = _take(y, idx, d)
        elif mode == "cubic":  # four neighbours per output position, weights as onnx.reference's
            idx4, w4 = _cubic_taps(coords, n_in, float(at.get("cubic_coeff_a", -0.75)),
                                   bool(at.get("exclude_outside", 0)))  # fmt: skip
            shp = [1] * r
            shp[d] = sizes[d]
            acc: Tensor | None = None
            for t in range(4):
                term = b.binary("mul", _take(y, idx4[:, t], d), w4[:, t].astype(x.dtype).reshape(shp))
                acc = term if acc is None else b.binary("add", acc, term)
            assert acc is not None
            y = acc
        else:  # linear: two neighbours blended per output position along this axis
            c = np.clip(coords, 0, n_in - 1)
            lo = np.floor(c).astype(np.int64)
            hi = np.minimum(lo + 1, n_in - 1)
            frac = (c - lo).astype(x.dtype if x.dtype.kind == "f" else np.float32)
            shp = [1] * r
            shp[d] = sizes[d]
            w_hi = frac.reshape(shp)
            w_lo = (1 - frac).reshape(shp)
            y = b.binary("add", b.binary("mul", _take(y, lo, d), w_lo), b.binary("mul", _take(y, hi, d), w_hi))
    return [y]
