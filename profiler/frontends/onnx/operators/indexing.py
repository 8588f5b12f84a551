"""Indexing: Gather, GatherND, GatherElements, the Scatters, OneHot, Compress, ReverseSequence."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from profiler import ops
from profiler.chip import cost_model
from profiler.ops import slicing
from profiler.poplar.tensor import Tensor, concat

from ..builder import Builder, Value
from ..errors import Unsupported
from .common import as_text, attrs, host_array, normalize_axis
from .registry import handles


def _wrap_index(i: np.ndarray, size: int) -> np.ndarray:
    return np.where(i < 0, i + size, i)


@handles("Gather")
def _gather(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    axis = normalize_axis(
        int(attrs(node).get("axis", 0)), np.ndim(inputs[0]) if isinstance(inputs[0], np.ndarray) else inputs[0].rank
    )
    idx = inputs[1]
    lookup = isinstance(idx, Tensor) and axis == 0 and np.ndim(inputs[0]) == 2  # an embedding table's rows

    def sliceable(t: Tensor) -> bool:  # laid out for the lookup, as PopART creates an embedding
        slicing.map_for_lookup(b.graph, t)
        return True

    x = b.device(inputs[0], name=node.input[0], mapper=sliceable if lookup else None,
                 storage=slicing.ColumnStorage() if lookup else None)  # fmt: skip
    if not isinstance(idx, Tensor):  # constant indices: a view
        i = np.asarray(idx).astype(np.int64)
        i = np.where(i < 0, i + x.shape[axis], i)
        return [x._apply(lambda a: np.take(a, i, axis=axis))]
    if idx.dtype.kind not in "iu":
        raise Unsupported("non-integer indices")
    idx = b.map("WrapIndex", _wrap_index, [idx], (cost_model.binary("add"),), size=int(x.shape[axis]))
    moved = x.transpose(axis, *[d for d in range(x.rank) if d != axis])
    rest = moved.shape[1:]
    table = moved.reshape(moved.shape[0], -1)
    flat = idx.reshape(-1)
    out = ops.gather(b.graph, table, flat, b.prog).reshape(*idx.shape, *rest)
    # move the index dims to where the axis was
    r = idx.rank
    perm = list(range(r, r + axis)) + list(range(r)) + list(range(r + axis, r + len(rest)))
    return [out.transpose(*perm)]


def _gather_nd_index(data_shape: tuple[int, ...], idx: np.ndarray, batch_dims: int) -> tuple[np.ndarray, ...]:
    """numpy advanced-index arrays selecting GatherND's result from data."""
    idx = idx.astype(np.int64)
    q = idx.shape[-1]
    bshape = idx.shape[:batch_dims]
    outer = idx.shape[batch_dims:-1]
    grids = np.indices(bshape) if batch_dims else np.zeros((0,), np.int64)
    index: list[np.ndarray] = []
    for d in range(batch_dims):
        index.append(grids[d].reshape(bshape + (1,) * len(outer)))
    for j in range(q):
        v = idx[..., j]
        dim = data_shape[batch_dims + j]
        index.append(np.where(v < 0, v + dim, v))
    return tuple(np.broadcast_arrays(*index)) if index else ()


@handles("GatherND")
def _gather_nd(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    idx = host_array(inputs[1], "indices")
    batch_dims = int(attrs(node).get("batch_dims", 0))
    index = _gather_nd_index(x.shape, idx, batch_dims)  # type: ignore[arg-type]
    return [x[index]]


def _flat_index(i: np.ndarray, offset: np.ndarray, dim: int, stride: int) -> np.ndarray:
    return np.where(i < 0, i + dim, i) * stride + offset


def gather_elements(b: Builder, x: Tensor, ti: Tensor, axis: int) -> Tensor:
    """GatherElements with device indices: flat element indices, then one gather from x as a column."""
    if ti.dtype.kind not in "iu":
        raise Unsupported("non-integer indices")
    stride = int(np.prod(x.shape[axis + 1 :], dtype=np.int64))
    grid = np.indices(ti.shape)
    grid[axis] = 0
    offset = np.ravel_multi_index(tuple(grid), x.shape).astype(np.int32)
    flat = b.map("FlatIndex", _flat_index, [ti, offset], (cost_model.binary("multiply"), cost_model.binary("add")),
                 out_dtype="int32", dim=int(x.shape[axis]), stride=stride)  # fmt: skip
    out = ops.gather(b.graph, x.reshape(-1, 1), flat.reshape(-1), b.prog)
    return out.reshape(ti.shape)


@handles("GatherElements")
def _gather_elements(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    x = b.device(inputs[0])
    axis = normalize_axis(int(attrs(node).get("axis", 0)), x.rank)
    if isinstance(inputs[1], Tensor):  # indices on the device: one flat-index gather (popops MultiSlice)
        return [gather_elements(b, x, inputs[1], axis)]
    idx = host_array(inputs[1], "indices").astype(np.int64)  # type: ignore[union-attr]
    idx = np.where(idx < 0, idx + x.shape[axis], idx)
    grid = list(np.indices(idx.shape))
    grid[axis] = idx
    return [x[tuple(grid)]]


@handles("ScatterND", "ScatterElements", "Scatter")
def _scatter(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    """With constant indices the result is a view: each element comes from ``data`` or from ``updates``."""
    data, idx, upd = inputs[0], host_array(inputs[1], "indices"), inputs[2]
    x, u = b.pair(data, upd)
    reduction = as_text(attrs(node).get("reduction"), "none")
    if reduction not in ("none", "add", "mul", "max", "min"):
        raise Unsupported(f"reduction={reduction!r}")
    idx = idx.astype(np.int64)  # type: ignore[union-attr]
    pos = np.arange(x.numel(), dtype=np.int64).reshape(x.shape)  # element positions in data
    if node.op_type == "ScatterND":
        target = pos[_gather_nd_index(x.shape, idx, 0)]  # positions each update row lands on
    else:
        axis = normalize_axis(int(attrs(node).get("axis", 0)), x.rank)
        idx = np.where(idx < 0, idx + x.shape[axis], idx)
        grid = list(np.indices(idx.shape))
        grid[axis] = idx
        target = pos[tuple(grid)]
    flat = target.reshape(-1)
    if reduction == "none":
        source = np.arange(x.numel(), dtype=np.int64)  # output element -> position in concat(data, updates)
        source[flat] = x.numel() + np.arange(flat.size, dtype=np.int64)  # the last update wins
        both = concat([x.reshape(-1), u.reshape(-1)], 0)
        return [both[source].reshape(x.shape)]
    # a reduction: the k-th update of each position goes into layer k (positions unique within a
    # layer); each layer is a view holding its updates and the identity elsewhere, combined with
    # the result by one elementwise op
    order = np.argsort(flat, kind="stable")
    first = np.searchsorted(flat[order], flat[order], side="left")
    rank = np.empty(flat.size, dtype=np.int64)
    rank[order] = np.arange(flat.size) - first
    lowest, highest = (np.finfo if x.dtype.kind == "f" else np.iinfo)(x.dtype).min, (
        np.finfo if x.dtype.kind == "f" else np.iinfo)(x.dtype).max  # fmt: skip
    ident = {"add": 0, "mul": 1, "max": lowest, "min": highest}[reduction]
    pool = concat([b.device(np.array([ident], dtype=x.dtype), like=x.dtype), u.reshape(-1)], 0)
    y: Value = x
    for k in range(int(rank.max()) + 1 if rank.size else 0):
        sel = np.nonzero(rank == k)[0]
        source = np.zeros(x.numel(), dtype=np.int64)  # element 0 of the pool: the identity
        source[flat[sel]] = 1 + sel
        y = b.binary(reduction, y, pool[source].reshape(x.shape))
    return [y]


def _one_hot(i: np.ndarray, iota: np.ndarray, depth: int, off: float, on: float) -> np.ndarray:
    i = np.where(i < 0, i + depth, i)
    return np.where(i == iota, on, off)


@handles("OneHot")
def _one_hot_op(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    idx = b.device(inputs[0])
    depth = int(host_array(inputs[1], "depth").reshape(-1)[0])  # type: ignore[union-attr]
    values = host_array(inputs[2], "values").reshape(-1)  # type: ignore[union-attr]
    rank = idx.rank + 1
    axis = normalize_axis(int(attrs(node).get("axis", -1)), rank)
    shape = list(idx.shape)
    shape.insert(axis, 1)
    ix = idx.reshape(shape)
    iota = np.arange(depth, dtype=np.int32).reshape([depth if d == axis else 1 for d in range(rank)])
    if ix.dtype.kind == "f":
        ix = b.cast(ix, np.dtype(np.int32))
    out_dt = b.device(values).dtype
    y = b.map("OneHot", _one_hot, [ix, iota], (cost_model.binary("equal"), cost_model.binary("maximum")), out_dtype=out_dt,
              depth=depth, off=values[0].item(), on=values[1].item())  # fmt: skip
    return [y]


@handles("Compress")
def _compress(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    """With a constant condition: a view of the selected slices."""
    x = b.device(inputs[0])
    cond = host_array(inputs[1], "condition").reshape(-1).astype(bool)  # type: ignore[union-attr]
    at = attrs(node)
    if "axis" not in at:
        x, axis = x.reshape(-1), 0
    else:
        axis = normalize_axis(int(at["axis"]), x.rank)
    sel = np.nonzero(cond[: x.shape[axis]])[0]
    if sel.size == 0:
        shape = list(x.shape)
        shape[axis] = 0
        return [np.zeros(shape, x.dtype)]
    return [x[(slice(None),) * axis + (sel,)]]


@handles("ReverseSequence")
def _reverse_sequence(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    """With constant lengths: a view (each batch entry's first len elements reversed)."""
    x = b.device(inputs[0])
    lens = host_array(inputs[1], "sequence_lens").reshape(-1).astype(np.int64)  # type: ignore[union-attr]
    at = attrs(node)
    ta, ba = int(at.get("time_axis", 0)), int(at.get("batch_axis", 1))
    t = np.arange(x.shape[ta])
    src = np.where(t[None, :] < lens[:, None], lens[:, None] - 1 - t[None, :], t[None, :])  # [B, T]
    grid = list(np.indices(x.shape))
    bidx, tidx = grid[ba], grid[ta]
    grid[ta] = src[bidx, tidx]
    return [x[tuple(grid)]]
