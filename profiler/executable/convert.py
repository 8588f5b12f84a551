"""Conversions the run makes millions of times: stored half to computed float and back.

Half <-> float goes through compiled loops on the CPU's conversion instructions
(``profiler.host.half_kernels``, ~0.3 ns an element against numpy's 2.5-9 ns), with NaNs rewritten by
numpy's rule, so the bits are exactly what ``astype`` gives (checked over every half and a sweep of
floats in tests/profiler/test_access.py). Large arrays are converted in chunks of rows on the run's
threads (``profiler.host.parallel``).
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import numpy as np

from profiler.host import parallel
from profiler.poplar.layout import memory_order, merged_dims

_U = np.uint32
_kernels: ModuleType | None = None  # profiler.host.half_kernels, imported on the first conversion


def converted(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``values`` in ``dtype``, converted in the order they lie in memory: a new array whose dims
    have the same stride order as ``values``' (a transposed view stays transposed, so both sides of
    the copy are walked contiguously) and whose broadcast dims stay broadcast (each distinct element
    is converted once; the result is then a read-only view). Bit for bit what ``astype`` gives."""
    dtype = np.dtype(dtype)
    distinct = tuple(
        slice(0, 1) if st == 0 and n > 1 else slice(None) for n, st in zip(values.shape, values.strides, strict=True)
    )
    core = values[distinct]
    perm = memory_order(core)
    out = np.empty([core.shape[d] for d in perm], dtype)
    copy_into(out, core.transpose(perm))
    out = out.transpose(np.argsort(perm))
    return np.broadcast_to(out, values.shape) if core.shape != values.shape else out


def copy_into(dst: np.ndarray, src: np.ndarray) -> None:
    """``dst[...] = src`` (one shape; any layouts that do not overlap), converted to dst's type as
    numpy would, in chunks of rows on the run's threads when large."""
    dst, src = _without_leading_units(dst), _without_leading_units(src)
    if dst.ndim == 0:
        store(dst, src)
        return
    parallel.in_row_chunks(
        lambda rows: store(dst[rows], src[rows]),
        dst.shape[0],
        dst.size,
        parallel.chunk_for(dst.size, parallel.COPY_CHUNK_ELEMENTS),
    )


# Longest row (elements, after merging dims) a same-type copy hands to the compiled loop: numpy's
# own copy pays its inner loop's call per row (~1 ns an element on rows of 16 floats, 0.3-0.4 on
# rows of hundreds, as fast as the compiled loop), so only short rows gain
_SHORT_ROW = 64


def store(dst: np.ndarray, src: np.ndarray) -> None:
    """``dst[...] = src`` converted to dst's type, on this thread."""
    if src.dtype == dst.dtype:
        strided = not (src.flags.c_contiguous and dst.flags.c_contiguous)
        # the compiled loop reads and writes in one pass: never over overlapping memory (numpy's copy handles it)
        if dst.ndim > 1 and src.dtype.itemsize in (2, 4) and strided and not np.may_share_memory(src, dst):
            bits = np.dtype(f"u{src.dtype.itemsize}")  # a copy moves bits: the same loop for every type
            arrays, shape = _walk([np.broadcast_to(src, dst.shape).view(bits), dst.view(bits)])
            if shape[-1] <= _SHORT_ROW:
                _run_merged(kernels().copy, arrays, shape)
                return
        dst[...] = src
    elif {src.dtype, dst.dtype} == {np.dtype(np.float16), np.dtype(np.float32)}:
        _convert_half(dst, src)
    else:
        dst[...] = src.astype(dst.dtype)


def _convert_half(dst: np.ndarray, src: np.ndarray) -> None:
    """half <-> float32 of one shape, through the compiled loops."""
    to_half = dst.dtype == np.float16
    if src.shape != dst.shape:
        src = np.broadcast_to(src, dst.shape)
    loops = kernels()
    if to_half:
        nan = run_3d(loops.to_half, [src, dst.view(np.uint16)])
    else:
        nan = run_3d(loops.to_float, [src.view(np.uint16), dst])
    if nan:
        _numpy_nans(dst, src)


def kernels() -> ModuleType:
    """``profiler.host.half_kernels``, imported on first use (numba takes ~0.5 s to import)."""
    global _kernels
    if _kernels is None:
        from profiler.host import half_kernels

        _kernels = half_kernels
    return _kernels


def run_3d(loop: Callable[..., bool], arrays: list[np.ndarray], *head: object) -> bool:
    """``loop(*head, *views)`` over 3-d views of ``arrays`` (one shape, any strides; the last is the
    one written): dims merged where every array lays them out as one, unit dims put in front, one
    call per leading index where more than 3 dims are left (rare). True if any call returned True."""
    arrays, shape = _walk(arrays)
    return _run_merged(loop, arrays, shape, *head)


def _walk(arrays: list[np.ndarray]) -> tuple[list[np.ndarray], tuple[int, ...]]:
    """``arrays`` (one shape) with their dims in the order ``run_3d`` walks them, and the merged
    shape of that walk (at least 3 dims, unit dims in front)."""
    if all(a.flags.c_contiguous for a in arrays):  # the common case: one row
        return arrays, (1, 1, arrays[0].size)
    # walked in the written array's memory order: the loops are elementwise, so any order gives
    # the same elements, and this one writes contiguously and lets the dims that both sides lay
    # out alike merge (a channel-grouped [G, H, W, g] copied into a channels-last [H, W, G, g]
    # buffer walked as given was 4 dims, a call per G, W innermost: 2.5-8 ns an element, ~1 as
    # [(H W), G, g])
    key = (arrays[0].shape, tuple(a.strides for a in arrays))
    walk = _WALKS.get(key)
    if walk is None:
        order = memory_order(arrays[-1])
        merged, _ = merged_dims(
            tuple(arrays[0].shape[d] for d in order), tuple(tuple(a.strides[d] for d in order) for a in arrays)
        )
        if len(_WALKS) >= _WALKS_KEPT:
            _WALKS.clear()
        walk = _WALKS[key] = (tuple(order), (1,) * (3 - len(merged)) + merged)
    perm, shape = walk
    return [a.transpose(perm) for a in arrays], shape


# The walks ``_walk`` has worked out, by the arrays' shape and strides: a run makes the same copies
# and conversions every time (ResNet-50 batch 1: ~200 a run, their order and merged dims ~10 us of
# Python each, ~2.4 looked up), so each geometry is worked out once. Bounded: cleared when full.
_WALKS: dict[tuple[tuple[int, ...], tuple[tuple[int, ...], ...]], tuple[tuple[int, ...], tuple[int, ...]]] = {}
_WALKS_KEPT = 1 << 14


def _run_merged(loop: Callable[..., bool], arrays: list[np.ndarray], shape: tuple[int, ...], *head: object) -> bool:
    """``run_3d``'s calls over ``arrays`` walked as ``_walk`` gave them, in ``shape``."""
    # views, never copies: the merged dims are laid out as one in every array
    views = [a.reshape(shape, copy=False) for a in arrays]
    for v in views[:-1]:  # read-only whatever they came as: numba compiles one loop per layout
        v.flags.writeable = False
    if len(shape) == 3:  # the common case, one call: np.ndindex(), ~2 us, a fifth of a small call's Python
        return bool(loop(*head, *views))
    # a call per index of the smallest outer dims, the others walked in the loop: a convolution's
    # result of 8-channel groups written from 16-channel blocks walks [blocks, 2, rows, 8], and a
    # call per block (49 rows: 784 elements a call) ran at ~3-4.5 ns an element against ~0.4
    outer = sorted(range(len(shape) - 1), key=lambda d: (shape[d], d))[: len(shape) - 3]
    order = outer + [d for d in range(len(shape)) if d not in outer]
    views = [v.transpose(order) for v in views]
    flagged = False
    for lead in np.ndindex(*(shape[d] for d in outer)):
        flagged |= loop(*head, *(v[lead] for v in views))
    return flagged


def _numpy_nans(dst: np.ndarray, src: np.ndarray) -> None:
    """Rewrite NaNs as numpy converts them: the payload's top bits kept, no quiet bit set."""
    if dst.dtype == np.float16:
        where = np.isnan(src)
        u = src.view(np.uint32)[where]
        top = np.maximum((u & _U(0x7FFFFF)) >> _U(13), _U(1))
        dst.view(np.uint16)[where] = (((u >> _U(16)) & _U(0x8000)) | _U(0x7C00) | top).astype(np.uint16)
    else:
        h = src.view(np.uint16)
        where = (h & np.uint16(0x7FFF)) > np.uint16(0x7C00)
        b = h[where].astype(_U)
        dst.view(_U)[where] = ((b & _U(0x8000)) << _U(16)) | _U(0x7F800000) | ((b & _U(0x3FF)) << _U(13))


def _without_leading_units(a: np.ndarray) -> np.ndarray:
    """``a`` without its leading size-1 dims (a view): the first dim left is the one to chunk."""
    i = 0
    while i < a.ndim - 1 and a.shape[i] == 1:
        i += 1
    return a.reshape(a.shape[i:]) if i else a
