"""Compiled loops that convert between half and float with the CPU's own instructions.

numpy converts half one element at a time in C where the CPU lacks AVX512-FP16 (2.5-9 ns an element
on this machine's AVX2 + F16C EPYC, 50-90 ns on values outside half's normal range). LLVM's
``fptrunc float to half`` / ``fpext half to float`` compile to the F16C instructions (VCVTPS2PH,
round to nearest even, and VCVTPH2PS), vectorised over a contiguous row: ~0.3 ns an element. Where
the CPU has no F16C, LLVM emits a library call with the same IEEE rounding. Hardware sets the quiet
bit of a signalling NaN where numpy keeps the payload as is, so NaNs are rewritten by numpy's rule
afterwards (``profiler.executable.convert``); every other value is bit for bit what numpy's ``astype`` gives.

Imported on first use (numba takes ~0.5 s to import); the compiled loops are cached on disk
(numba ``cache=True``), so a process pays their ~1 s compile once per checkout.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic, overload


@intrinsic
def _half_bits_intrinsic(typingctx, x):
    """The half nearest ``x`` (a float32), as its 16 bits."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(builder.fptrunc(args[0], ir.HalfType()), ir.IntType(16))

    return types.uint16(types.float32), codegen


@intrinsic
def _from_half_bits_intrinsic(typingctx, h):
    """The float32 of the half whose bits are ``h`` (exact)."""

    def codegen(context, builder, signature, args):
        return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())

    return types.float32(types.uint16), codegen


# numba's stubs give an intrinsic the signature of its typing function (``typingctx`` first) and a
# Python-side call that raises; in jitted code, the only place these run, each takes the value alone.
_half_bits = cast(Callable[[float], int], _half_bits_intrinsic)
_from_half_bits = cast(Callable[[int], float], _from_half_bits_intrinsic)


# A layout conversion (a channel-grouped [C/g, HW, g] store read as [HW, C] columns, a product
# written back grouped) walks rows of g = 4, 8 or 16 elements. A loop over a row whose length LLVM
# does not know is vectorised 16 floats wide with a scalar remainder, so a row of 8 ran wholly in
# the remainder; a row of a length known when compiling is unrolled into a few vector instructions
# (ResNet-50's conversions: 0.9 -> 0.6-0.7 ns an element to float, 0.6 -> 0.4 to half).
_ROWS = (4, 8, 16)


@njit(inline="always")
def _to_half_row(src: np.ndarray, dst: np.ndarray, i: int, j: int, n: int) -> bool:
    nan = False
    for k in range(n):
        x = src[i, j, k]
        nan |= x != x
        dst[i, j, k] = _half_bits(x)
    return nan


@njit(inline="always")
def _to_float_row(src: np.ndarray, dst: np.ndarray, i: int, j: int, n: int) -> bool:
    nan = False
    for k in range(n):
        h = src[i, j, k]
        nan |= (h & 0x7FFF) > 0x7C00
        dst[i, j, k] = _from_half_bits(h)
    return nan


@njit(nogil=True, cache=True)
def to_half(src: np.ndarray, dst: np.ndarray) -> bool:
    """``dst[...] = half bits of src`` over 3-d float32 / uint16 arrays of one shape; True if any
    source element is NaN (the caller rewrites those)."""
    nan = False
    n = src.shape[2]
    for i in range(src.shape[0]):
        for j in range(src.shape[1]):
            # the same loop with the row's length a constant where it is one of _ROWS (see above)
            if n == 8:
                nan |= _to_half_row(src, dst, i, j, 8)
            elif n == 16:
                nan |= _to_half_row(src, dst, i, j, 16)
            elif n == 4:
                nan |= _to_half_row(src, dst, i, j, 4)
            else:
                nan |= _to_half_row(src, dst, i, j, n)
    return nan


@njit(nogil=True, cache=True)
def to_float(src: np.ndarray, dst: np.ndarray) -> bool:
    """``dst[...] = float of the half bits src`` over 3-d uint16 / float32 arrays of one shape;
    True if any source element is NaN (the caller rewrites those)."""
    nan = False
    n = src.shape[2]
    for i in range(src.shape[0]):
        for j in range(src.shape[1]):
            if n == 8:
                nan |= _to_float_row(src, dst, i, j, 8)
            elif n == 16:
                nan |= _to_float_row(src, dst, i, j, 16)
            elif n == 4:
                nan |= _to_float_row(src, dst, i, j, 4)
            else:
                nan |= _to_float_row(src, dst, i, j, n)
    return nan


@njit(inline="always")
def _copy_row(src: np.ndarray, dst: np.ndarray, i: int, j: int, n: int) -> None:
    for k in range(n):
        dst[i, j, k] = src[i, j, k]


@njit(nogil=True, cache=True)
def copy(src: np.ndarray, dst: np.ndarray) -> bool:
    """``dst[...] = src`` over 3-d arrays of one shape and one unsigned type (values' bits as they
    are) whose rows are short: numpy's strided copy pays its inner loop's call on every row, ~1 ns
    an element on rows of 16 floats (a float32 layout conversion); rows of _ROWS elements are
    copied with their length a constant, as ``to_float``'s. Returns False (nothing to rewrite)."""
    n = src.shape[2]
    for i in range(src.shape[0]):
        for j in range(src.shape[1]):
            if n == 8:
                _copy_row(src, dst, i, j, 8)
            elif n == 16:
                _copy_row(src, dst, i, j, 16)
            elif n == 4:
                _copy_row(src, dst, i, j, 4)
            else:
                _copy_row(src, dst, i, j, n)
    return False


# A convolution's activations move between two groupings of their channels, ``[C/gi, m, gi]`` and
# ``[C/go, m, go]`` (PopLibs' groups of 8 or 16 and MLAS's NCHWc blocks, ``profiler.host.nchwc``): each
# run of min(gi, go) channels of a row is contiguous on both sides. One call walks a span of channels
# ([first, end), multiples of both groups); numpy's strided copy of the same views paid a call per
# block, ~3-4.5 ns an element on a 7x7 layer's 49 rows against ~0.3 here.


def _element(x, dst):
    """An element of a run converted to ``dst``'s type, and whether it was NaN (float32 to half bits,
    half bits to float32, or as it is)."""


@overload(_element)  # resolved when compiling: one loop a pair of types, cached
def _element_of(x, dst):
    if x == types.float32 and dst.dtype == types.uint16:
        return lambda x, dst: (_half_bits(x), x != x)
    if x == types.uint16 and dst.dtype == types.float32:
        return lambda x, dst: (_from_half_bits(x), (x & 0x7FFF) > 0x7C00)
    return lambda x, dst: (x, False)


# A run is sliced out of the flat buffers first: indexed by an offset LLVM cannot prove non-negative,
# each element pays numba's wraparound select and the loop does not vectorise (~2x slower)
@njit(inline="always")
def _run(src: np.ndarray, dst: np.ndarray, s: int, d: int, n: int) -> bool:
    a, o = src[s : s + n], dst[d : d + n]
    nan = False
    for k in range(n):
        v, bad = _element(a[k], o)
        nan |= bad
        o[k] = v
    return nan


def _convert_run(src, dst, s, d, n):
    """``_run`` compiled for the buffers' types."""


@overload(_convert_run)  # resolved when compiling; numba's own inlining of the run into the regroup
def _convert_run_of(src, dst, s, d, n):  # loop (inline="always") made it ~1.5x slower than LLVM's
    return lambda src, dst, s, d, n: _run(src, dst, s, d, n)


@njit(inline="always")
def _regroup_runs(src, dst, m, gi, go, first, end, shift, w):
    # each run's offsets in row 0 worked out once (an integer division a run cost more than its copy)
    runs = (end - first) // w
    src_at = np.empty(runs, np.int64)
    dst_at = np.empty(runs, np.int64)
    for j in range(runs):
        c = first + j * w
        cs = c - shift  # its channel in src
        src_at[j] = (cs // gi) * m * gi + cs % gi
        dst_at[j] = (c // go) * m * go + c % go
    nan = False
    j0 = 0
    while j0 < runs:  # a destination plane's runs at a time: written row by row, as they lie
        j1 = min(runs, j0 + (go - (first + j0 * w) % go) // w)
        for r in range(m):
            for j in range(j0, j1):
                nan |= _convert_run(src, dst, src_at[j] + r * gi, dst_at[j] + r * go, w)
        j0 = j1
    return nan


@njit(nogil=True, cache=True)
def regroup(src: np.ndarray, dst: np.ndarray, m: int, gi: int, go: int, first: int, end: int, shift: int) -> bool:
    """Channels ``first`` to ``end`` of ``m`` rows of ``dst`` (flat ``[C/go, m, go]``) from channels
    ``first - shift`` on of ``src`` (flat ``[C'/gi, m, gi]``; ``first - shift`` a multiple of ``gi``
    or of ``go``): copied (one type), float32 to half bits or half bits to float32. True if a
    converted source element is NaN (the caller rewrites those)."""
    w = min(gi, go)
    if gi == go and (end - first) % go == 0 and first % go == 0:  # whole planes alike: one run a plane
        return _regroup_runs(src, dst, 1, m * go, m * go, first * m, end * m, shift * m, m * go)
    if w == 8:  # the run's length a constant where it is one of _ROWS (see above)
        return _regroup_runs(src, dst, m, gi, go, first, end, shift, 8)
    if w == 16:
        return _regroup_runs(src, dst, m, gi, go, first, end, shift, 16)
    return _regroup_runs(src, dst, m, gi, go, first, end, shift, w)


# The ops ``binary_half`` computes, by its ``op`` argument (one compiled loop for all four: the
# branch is the same for every element, and LLVM hoists it out of the loop, which then vectorises).
ADD, SUBTRACT, MULTIPLY, DIVIDE = range(4)

# The elementwise loops below walk arrays of half bits given as flat buffers and a geometry: row
# (i, j) of array x is the ``shape[2]`` elements from ``geo[x, 0] + i * geo[x, 1] + j * geo[x, 2]``
# on. Each row is sliced out as a 1-d contiguous view, which LLVM vectorises; numba's 3-d
# non-contiguous arrays are walked one element at a time (~1 ns an element, against ~0.2 ns).


@njit(inline="always")
def _start(geo: np.ndarray, x: int, i: int, j: int) -> int:
    """Where row (i, j) of array ``x`` starts in its flat buffer."""
    return geo[x, 0] + i * geo[x, 1] + j * geo[x, 2]


@njit(inline="always", error_model="numpy")
def _binary(op: int, x: float, y: float) -> float:
    if op == ADD:
        return x + y
    if op == SUBTRACT:
        return x - y
    if op == MULTIPLY:
        return x * y
    return x / y


@njit(nogil=True, cache=True, error_model="numpy")  # IEEE division by zero (inf, NaN), not an exception
def binary_half(op: int, a: np.ndarray, b: np.ndarray, out: np.ndarray, shape: np.ndarray, geo: np.ndarray) -> bool:
    """``out = half(float(a) op float(b))`` over rows of the flat half-bit buffers ``a``, ``b``,
    ``out`` (geometry rows 0, 1, 2), as the engine computes half: in float, rounded once. True if
    any result is NaN (the caller then computes the rows the general way, for numpy's NaN bits)."""
    nan = False
    n = shape[2]
    for i in range(shape[0]):
        for j in range(shape[1]):
            pa = _start(geo, 0, i, j)
            pb = _start(geo, 1, i, j)
            po = _start(geo, 2, i, j)
            ra, rb, ro = a[pa : pa + n], b[pb : pb + n], out[po : po + n]
            for k in range(n):
                r = _binary(op, _from_half_bits(ra[k]), _from_half_bits(rb[k]))
                nan |= r != r
                ro[k] = _half_bits(r)
    return nan


@njit(nogil=True, cache=True, error_model="numpy")
def binary_half_per_row(
    op: int, a: np.ndarray, b: np.ndarray, out: np.ndarray, shape: np.ndarray, geo: np.ndarray
) -> bool:
    """``binary_half`` with ``b`` one element per row (a softmax's row maximum or sum)."""
    nan = False
    n = shape[2]
    for i in range(shape[0]):
        for j in range(shape[1]):
            pa = _start(geo, 0, i, j)
            po = _start(geo, 2, i, j)
            ra, ro = a[pa : pa + n], out[po : po + n]
            y = _from_half_bits(b[_start(geo, 1, i, j)])
            for k in range(n):
                r = _binary(op, _from_half_bits(ra[k]), y)
                nan |= r != r
                ro[k] = _half_bits(r)
    return nan


@njit(nogil=True, cache=True)
def relu_half(src: np.ndarray, dst: np.ndarray, shape: np.ndarray, geo: np.ndarray) -> bool:
    """``dst = max(src, 0)`` over rows of flat half-bit buffers (geometry rows 0, 1): the halves
    below zero (bits 0x8001, -denorm_min, to 0xFC00, -inf) become +0; -0 and NaNs are kept, as
    np.maximum keeps them. Exact; returns False (no NaN to rewrite)."""
    n = shape[2]
    for i in range(shape[0]):
        for j in range(shape[1]):
            ps = _start(geo, 0, i, j)
            pd = _start(geo, 1, i, j)
            rs, rd = src[ps : ps + n], dst[pd : pd + n]
            for k in range(n):
                h = rs[k]
                rd[k] = 0 if 0x8001 <= h <= 0xFC00 else h
    return False


# The same elementwise loops over float32 values (no conversion either side): numpy's loops take a
# per-channel operand repeated along a middle dim (stride 0) 16 elements at a time, ~1 ns an element
# with the iterator's overhead; these walk the joined rows vectorised (~0.1-0.2 ns). Each result is
# the one IEEE float operation numpy performs, so the bits are numpy's; NaN results are reported so
# that the caller recomputes their rows the general way (a NaN's payload follows the operand order,
# which LLVM may commute).


@njit(nogil=True, cache=True, error_model="numpy")
def binary_float(op: int, a: np.ndarray, b: np.ndarray, out: np.ndarray, shape: np.ndarray, geo: np.ndarray) -> bool:
    """``out = a op b`` over rows of the flat float32 buffers ``a``, ``b``, ``out`` (geometry rows 0,
    1, 2). True if any result is NaN."""
    nan = False
    n = shape[2]
    for i in range(shape[0]):
        for j in range(shape[1]):
            pa = _start(geo, 0, i, j)
            pb = _start(geo, 1, i, j)
            po = _start(geo, 2, i, j)
            ra, rb, ro = a[pa : pa + n], b[pb : pb + n], out[po : po + n]
            for k in range(n):
                r = _binary(op, ra[k], rb[k])
                nan |= r != r
                ro[k] = r
    return nan


@njit(nogil=True, cache=True, error_model="numpy")
def binary_float_per_row(
    op: int, a: np.ndarray, b: np.ndarray, out: np.ndarray, shape: np.ndarray, geo: np.ndarray
) -> bool:
    """``binary_float`` with ``b`` one element per row (a softmax's row maximum or sum)."""
    nan = False
    n = shape[2]
    for i in range(shape[0]):
        for j in range(shape[1]):
            pa = _start(geo, 0, i, j)
            po = _start(geo, 2, i, j)
            ra, ro = a[pa : pa + n], out[po : po + n]
            y = b[_start(geo, 1, i, j)]
            for k in range(n):
                r = _binary(op, ra[k], y)
                nan |= r != r
                ro[k] = r
    return nan


@njit(nogil=True, cache=True)
def relu_float(src: np.ndarray, dst: np.ndarray, shape: np.ndarray, geo: np.ndarray) -> bool:
    """``dst = max(src, 0)`` over rows of flat float32 buffers (geometry rows 0, 1): values below
    zero and -0 become +0, NaNs are kept, as np.maximum(x, 0) gives them on float32 (its loops give
    +0 for -0, unlike its half loop). Exact; returns False."""
    n = shape[2]
    for i in range(shape[0]):
        for j in range(shape[1]):
            ps = _start(geo, 0, i, j)
            pd = _start(geo, 1, i, j)
            rs, rd = src[ps : ps + n], dst[pd : pd + n]
            for k in range(n):
                x = rs[k]
                rd[k] = np.float32(0) if x <= 0 else x
    return False


# A chain of elementwise steps on half or float32 (``profiler.executable.elementwise_chains``), one pass: a block of
# rows (~4 Ki elements, in L1) goes through every op before the next block, each op by the loop its
# own step runs (``binary_half``, ``binary_half_per_row``, ``relu_half``), so the bits are the
# steps' own. A result nothing after the chain reads is held in a block buffer only. Rows of the op
# table: (kind, op code, operand buffer, result buffer or -1, operand one element per row); the
# chain's value starts as buffer 0. One op per row of a block, as a per-element interpreter would
# be, ran at ~0.6-1 ns an element (its short loops do not vectorise); this ~0.3 in cache.
CHAIN_LEFT, CHAIN_RIGHT, CHAIN_RELU, CHAIN_CAST = range(4)  # CHAIN_CAST: float32 to half, the first op
_CHAIN_BLOCK = 4096


def _binary_loop(op, a, b, out, shape, geo):
    """``binary_half`` or ``binary_float`` by the buffers' type (in compiled code only)."""


def _binary_per_row_loop(op, a, b, out, shape, geo):
    """``binary_half_per_row`` or ``binary_float_per_row`` by the buffers' type."""


def _relu_loop(src, dst, shape, geo):
    """``relu_half`` or ``relu_float`` by the buffers' type."""


# resolved when compiling (a function handed as an argument would keep the chain from numba's cache)
@overload(_binary_loop)
def _binary_loop_of(op, a, b, out, shape, geo):
    loop = binary_half if a.dtype == types.uint16 else binary_float
    return lambda op, a, b, out, shape, geo: loop(op, a, b, out, shape, geo)


@overload(_binary_per_row_loop)
def _binary_per_row_loop_of(op, a, b, out, shape, geo):
    loop = binary_half_per_row if a.dtype == types.uint16 else binary_float_per_row
    return lambda op, a, b, out, shape, geo: loop(op, a, b, out, shape, geo)


@overload(_relu_loop)
def _relu_loop_of(src, dst, shape, geo):
    loop = relu_half if src.dtype == types.uint16 else relu_float
    return lambda src, dst, shape, geo: loop(src, dst, shape, geo)


@njit(nogil=True, error_model="numpy")
def _chain(bufs, ops, geo, shape, lo, hi, temp):
    """``chain``'s walk, by the loops of the buffers' type."""
    n1, n2 = shape[1], shape[2]
    block = temp[0].size // n2
    g = np.zeros((3, 3), np.int64)  # one op's geometry over the block: (offset, 0, row stride)
    sh = np.ones(3, np.int64)
    sh[2] = n2
    nan = False
    t = lo
    while t < hi:
        i, j = t // n1, t % n1
        rows = min(block, n1 - j, hi - t)  # rows of one i: each buffer's block is (offset, stride)
        sh[1] = rows
        cur, c0, c2 = bufs[0], geo[0, 0] + i * geo[0, 1] + j * geo[0, 2], geo[0, 2]
        for o in range(ops.shape[0]):
            kind, code, src, dst, per_row = ops[o, 0], ops[o, 1], ops[o, 2], ops[o, 3], ops[o, 4]
            if dst >= 0:
                res, r0, r2 = bufs[dst], geo[dst, 0] + i * geo[dst, 1] + j * geo[dst, 2], geo[dst, 2]
            else:
                res, r0, r2 = temp[o % 2], 0, n2
            if kind == CHAIN_CAST:  # buffer 0 holds float32 (its geometry in floats)
                xf = cur.view(np.float32)
                for r in range(rows):
                    # each row a 1-d slice, which LLVM vectorises (as binary_half's rows): indexing
                    # the flat buffers by offset ran the cast an element at a time (~1.1 ns an element)
                    ps, pr = c0 + r * c2, r0 + r * r2
                    rx, rr = xf[ps : ps + n2], res[pr : pr + n2]
                    for k in range(n2):
                        x = rx[k]
                        nan |= x != x
                        rr[k] = _half_bits(x)
            elif kind == CHAIN_RELU:
                g[0, 0], g[0, 2], g[1, 0], g[1, 2] = c0, c2, r0, r2
                _relu_loop(cur, res, sh, g)
            else:
                s0, s2 = geo[src, 0] + i * geo[src, 1] + j * geo[src, 2], geo[src, 2]
                if kind == CHAIN_LEFT:
                    a, b = cur, bufs[src]
                    g[0, 0], g[0, 2], g[1, 0], g[1, 2] = c0, c2, s0, s2
                else:
                    a, b = bufs[src], cur
                    g[0, 0], g[0, 2], g[1, 0], g[1, 2] = s0, s2, c0, c2
                g[2, 0], g[2, 2] = r0, r2
                if per_row:
                    nan |= _binary_per_row_loop(code, a, b, res, sh, g)
                else:
                    nan |= _binary_loop(code, a, b, res, sh, g)
            cur, c0, c2 = res, r0, r2
        if nan:
            return True
        t += rows
    return nan


@njit(nogil=True, error_model="numpy")
def _chain_span(bufs, ops, geo, shape, lo, hi, jlo, jhi, temp):
    """``_chain`` over rows ``lo`` to ``hi`` of the walk, only those whose second index lies in
    ``[jlo, jhi)``: with ``jlo, jhi`` of ``0, shape[1]`` every row."""
    n1 = shape[1]
    if jlo == 0 and jhi == n1:
        return _chain(bufs, ops, geo, shape, lo, hi, temp)
    for i in range(lo // n1, (hi + n1 - 1) // n1):
        a, b = max(lo, i * n1 + jlo), min(hi, i * n1 + jhi)
        if a < b and _chain(bufs, ops, geo, shape, a, b, temp):
            return True
    return False


@njit(nogil=True, cache=True, error_model="numpy")
def chain(
    bufs: tuple[np.ndarray, ...],
    ops: np.ndarray,
    geo: np.ndarray,
    shape: np.ndarray,
    lo: int,
    hi: int,
    jlo: int,
    jhi: int,
) -> bool:
    """Rows ``lo`` to ``hi`` (of ``shape[0] * shape[1]``) whose second index lies in ``[jlo, jhi)``
    (``0, shape[1]``: all of them; a product's rows in every channel plane,
    ``profiler.engine.step_chains.run_chain_span``) of a chain of ops over the flat buffers ``bufs``
    (a tuple; geometry rows as ``binary_half``'s): half ops over half bits (uint16 buffers; a cast
    chain's float32 first buffer viewed so) or float32 ops over float32, each by its own step's loop
    (``binary_half`` or ``binary_float``, ...), so the bits are numpy's. Stops and returns True at
    the first block with a NaN result: the caller then runs the steps the general way, whose NaN bits
    follow numpy's rule."""
    n = max(1, _CHAIN_BLOCK // shape[2]) * shape[2]
    temp = (np.empty(n, bufs[0].dtype), np.empty(n, bufs[0].dtype))
    return _chain_span(bufs, ops, geo, shape, lo, hi, jlo, jhi, temp)
