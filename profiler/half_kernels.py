"""Compiled loops that convert between half and float with the CPU's own instructions.

numpy converts half one element at a time in C where the CPU lacks AVX512-FP16 (2.5-9 ns an element
on this machine's AVX2 + F16C EPYC, 50-90 ns on values outside half's normal range). LLVM's
``fptrunc float to half`` / ``fpext half to float`` compile to the F16C instructions (VCVTPS2PH,
round to nearest even, and VCVTPH2PS), vectorised over a contiguous row: ~0.3 ns an element. Where
the CPU has no F16C, LLVM emits a library call with the same IEEE rounding. Hardware sets the quiet
bit of a signalling NaN where numpy keeps the payload as is, so NaNs are rewritten by numpy's rule
afterwards (``profiler.convert``); every other value is bit for bit what numpy's ``astype`` gives.

Imported on first use (numba takes ~0.5 s to import); the compiled loops are cached on disk
(numba ``cache=True``), so a process pays their ~1 s compile once per checkout.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic


@intrinsic
def _half_bits(typingctx, x):  # type: ignore[no-untyped-def]
    """The half nearest ``x`` (a float32), as its 16 bits."""

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        return builder.bitcast(builder.fptrunc(args[0], ir.HalfType()), ir.IntType(16))

    return types.uint16(types.float32), codegen


@intrinsic
def _from_half_bits(typingctx, h):  # type: ignore[no-untyped-def]
    """The float32 of the half whose bits are ``h`` (exact)."""

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())

    return types.float32(types.uint16), codegen


@njit(nogil=True, cache=True)
def to_half(src: np.ndarray, dst: np.ndarray) -> bool:
    """``dst[...] = half bits of src`` over 3-d float32 / uint16 arrays of one shape; True if any
    source element is NaN (the caller rewrites those)."""
    nan = False
    for i in range(src.shape[0]):
        for j in range(src.shape[1]):
            for k in range(src.shape[2]):
                x = src[i, j, k]
                nan |= x != x
                dst[i, j, k] = _half_bits(x)
    return nan


@njit(nogil=True, cache=True)
def to_float(src: np.ndarray, dst: np.ndarray) -> bool:
    """``dst[...] = float of the half bits src`` over 3-d uint16 / float32 arrays of one shape;
    True if any source element is NaN (the caller rewrites those)."""
    nan = False
    for i in range(src.shape[0]):
        for j in range(src.shape[1]):
            for k in range(src.shape[2]):
                h = src[i, j, k]
                nan |= (h & 0x7FFF) > 0x7C00
                dst[i, j, k] = _from_half_bits(h)
    return nan
