"""Conversions the run makes millions of times: stored half to computed float and back.

numpy converts half one element at a time where the CPU lacks AVX512-FP16 (this machine: AVX2 +
F16C, numpy 2.4): ~2.5 ns an element from half, and from float 3-9 ns on ordinary values but 50-90
ns on values that overflow or fall below half's normal range (its per-element floating-point
status path). Here half to float is a lookup in a 256 KiB table (it stays in L2) and float to half
a fixed sequence of integer operations over whole arrays; both give numpy's bits exactly (checked
over every half and a sweep of floats in tests/profiler/test_access.py). Large arrays are converted
in chunks of rows on the run's threads (``profiler.parallel``).
"""

from __future__ import annotations

import numpy as np

from profiler import parallel

# Every half value as float, indexed by its bits.
_HALF_TO_FLOAT = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)

# Float to half with rounding to nearest even (F. Giesen, "float_to_half_fast3_rtne", public
# domain, 2016): a normal half is the float's bits re-biased (exponent 127 -> 15) and shifted by the
# 13 mantissa bits half lacks, after adding 0xfff plus the lowest kept bit (ties to even); a subnormal
# one is aligned by a float addition of 2^-1 * 2^(-14 + ...) (the FPU rounds that to nearest even).
_U = np.uint32
_SMALLEST_NORMAL = _U(113 << 23)  # 2^-14, half's smallest normal, as float bits
_TOO_BIG = _U((127 + 16) << 23)  # 2^16: rounds to inf (and inf, NaN)
_REBIAS = _U((((15 - 127) << 23) + 0xFFF) % (1 << 32))
_DENORM_MAGIC = _U(((127 - 15) + (23 - 10) + 1) << 23)
_DENORM_MAGIC_F = np.array([_DENORM_MAGIC], np.uint32).view(np.float32)[0]


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
    perm = sorted(range(core.ndim), key=lambda d: -abs(core.strides[d]))
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
        lambda rows: store(dst[rows], src[rows]), dst.shape[0], dst.size, parallel.COPY_CHUNK_ELEMENTS
    )


def store(dst: np.ndarray, src: np.ndarray) -> None:
    """``dst[...] = src`` converted to dst's type, on this thread."""
    if src.dtype == dst.dtype:
        dst[...] = src
    elif src.dtype == np.float16 and dst.dtype == np.float32:
        np.take(_HALF_TO_FLOAT, src.view(np.uint16), out=dst, mode="clip")
    elif src.dtype == np.float32 and dst.dtype == np.float16:
        _float_to_half(src, dst)
    else:
        dst[...] = src.astype(dst.dtype)


def _float_to_half(src: np.ndarray, dst: np.ndarray) -> None:
    u = src.view(np.uint32)
    a = u & _U(0x7FFFFFFF)
    h = a >> _U(13)  # normal: h = (a + rebias + 0xfff + lowest kept bit) >> 13
    h &= _U(1)
    h += a
    h += _REBIAS
    h >>= _U(13)
    small = a < _SMALLEST_NORMAL
    if small.any():  # subnormal or zero
        with np.errstate(all="ignore"):  # the add also runs over the other lanes (NaN, inf): unused
            s = (a.view(np.float32) + _DENORM_MAGIC_F).view(np.uint32)
        s -= _DENORM_MAGIC
        np.copyto(h, s, where=small)
    big = a >= _TOO_BIG
    if big.any():  # inf, and NaN keeping its top payload bits (at least one: numpy's rule)
        i = np.nonzero(big)
        ai = a[i]
        h[i] = np.where(ai > _U(0x7F800000), _U(0x7C00) + np.maximum((ai & _U(0x7FFFFF)) >> _U(13), _U(1)), _U(0x7C00))
    h |= (u >> _U(16)) & _U(0x8000)
    np.copyto(dst.view(np.uint16), h, casting="unsafe")


def _without_leading_units(a: np.ndarray) -> np.ndarray:
    """``a`` without its leading size-1 dims (a view): the first dim left is the one to chunk."""
    i = 0
    while i < a.ndim - 1 and a.shape[i] == 1:
        i += 1
    return a.reshape(a.shape[i:]) if i else a
