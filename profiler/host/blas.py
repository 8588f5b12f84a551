"""numpy's BLAS held to one thread while the engine runs; the run's own threads split its matmuls.

OpenBLAS's worker threads busy-wait between calls. On a machine whose cores are shared (this
project's 2-core machine runs 8 engineers), a spinning BLAS thread takes the core the run's own
threads (``profiler.host.parallel``) or another BLAS call need: a ResNet-50 batch-1 run measured 1.1
process-CPU seconds with OpenBLAS's 2 threads and 0.24 with one (time.process_time, load average
~15), and the matmuls alone ran at ~10 against ~120 GFLOP/s per CPU-second. With one BLAS thread a
matmul's rows are split over the run's threads instead (``matmul``), which wait on locks,
never spin. One thread also makes a matmul's bits independent of the machine's core count (a
2-thread OpenBLAS sums a 1-row product, a GEMV, in another order than one thread does).

Only OpenBLAS (numpy's wheels bundle it) is handled; with any other BLAS this does nothing.
"""

from __future__ import annotations

import ctypes
import glob
import math
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np

from profiler.host import packed, parallel

# set/get pairs as the OpenBLAS builds name them: numpy's scipy-openblas (64-bit ints, prefixed),
# then a plain OpenBLAS, 64-bit or not
_SYMBOLS = (
    ("scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_"),
    ("openblas_set_num_threads64_", "openblas_get_num_threads64_"),
    ("openblas_set_num_threads", "openblas_get_num_threads"),
)
_found: tuple[Callable[[int], None], Callable[[], int]] | None = None
_looked = False
_lock = threading.Lock()
_depth = 0
_saved = 1
# multiply-adds below which a matmul is not split: ~20 us of BLAS, about what handing a part to a
# thread and waiting for it costs
SPLIT_MACS = 1 << 21
# Rows below which a product is split by columns (out channels) rather than rows: OpenBLAS's sgemm
# (SkylakeX kernels) runs a part of few rows far below its rate - ResNet-50's 7x7 layers, 49 rows
# as 21 + 28: ~75-79 GFLOP/s a thread, 98-99 as two halves of the columns; 196 rows: 126-137
# against 140-147 (bench: one thread, thread CPU time, the layers' (m, k, n)). From 784 rows on
# a half of the rows is as fast or faster (146-153 against 136-163).
COLUMN_SPLIT_ROWS = 256
# Fewest columns a part has when split by columns: a part of a few columns is a GEMV-like product
# that runs in another kernel (numpy's GEMV for one column), whose bits may differ
COLUMN_PART_MIN = 32
# Fewest rows for a split by columns: below it a product is nearly a GEMV (one row runs numpy's
# GEMV, whose bits depend on n's blocking)
COLUMN_SPLIT_MIN_ROWS = 16


def _libraries() -> list[str]:
    """OpenBLAS libraries this process has mapped (Linux), else those beside numpy's package."""
    paths: list[str] = []
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.rsplit(" ", 1)[-1].strip()
                if "openblas" in os.path.basename(path).lower() and path not in paths:
                    paths.append(path)
    except OSError:
        pass
    root = os.path.dirname(os.path.dirname(np.__file__))
    return paths or sorted(glob.glob(os.path.join(root, "numpy.libs", "*openblas*")))


def _openblas() -> tuple[Callable[[int], None], Callable[[], int]] | None:
    global _found, _looked
    if not _looked:
        _looked = True
        for path in _libraries():
            try:
                lib = ctypes.CDLL(path)  # already loaded by numpy: the same library, not a second copy
            except OSError:
                continue
            for set_name, get_name in _SYMBOLS:
                if hasattr(lib, set_name) and hasattr(lib, get_name):
                    setter, getter = getattr(lib, set_name), getattr(lib, get_name)
                    setter.restype, getter.restype = None, ctypes.c_int
                    setter.argtypes = [ctypes.c_int]
                    _found = (setter, getter)
                    return _found
    return _found


@contextmanager
def one_thread() -> Iterator[None]:
    """numpy's BLAS on one thread inside the block (nested blocks fine); its count restored after."""
    global _depth, _saved
    blas = _openblas()
    if blas is None:
        yield
        return
    setter, getter = blas
    with _lock:
        if _depth == 0:
            _saved = getter()
            setter(1)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                setter(_saved)


def held_to_one_thread() -> bool:
    """Whether numpy's BLAS is held to one thread now (inside ``one_thread`` with OpenBLAS)."""
    return _depth > 0 and _found is not None


def matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``np.matmul(a, b, out=out)``; while BLAS is held to one thread (``one_thread``) a large
    product's rows are split over the run's threads (``profiler.host.parallel``), or its columns
    when it has few rows (``split_columns``). Each element of a product is computed alike whichever
    rows and columns it is computed with (OpenBLAS blocks over k, not m or n), so the bits do not
    depend on the split (checked in tests/profiler/test_blas.py)."""
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    lead = out.shape[:-2]
    if any(d != 1 for d in lead):  # a stack of products (a batch of matmul vertices): split by product
        count = math.prod(lead)
        if not held_to_one_thread() or len(lead) != 1 or a.ndim != 3 or b.ndim != 3 or count * m * k * n < SPLIT_MACS:
            return np.matmul(a, b, out=out)

        def products(sl: slice) -> None:  # each product alone: numpy's one call made them one by one
            np.matmul(a[sl] if a.shape[0] > 1 else a, b[sl] if b.shape[0] > 1 else b, out=out[sl])

        parallel.in_row_chunks(products, count, count, max(1, count // parallel.threads()))
        return out
    if a.ndim != 3 or b.ndim != 3 or out.ndim != 3:  # (a product's operands are [1, m, k] and [1, k, n])
        return np.matmul(a, b, out=out)
    a2, o2 = a.reshape(a.shape[-2:]), out.reshape(out.shape[-2:])
    b2 = b.reshape(b.shape[-2:])
    if not held_to_one_thread() or m < 2 or m * k * n < SPLIT_MACS:
        packed.multiply(a2, b2, o2)  # a layer's weights through their packed copy (profiler.host.packed)
        return out
    if split_columns(m, n):
        parts = parallel.threads()
        parallel.in_row_chunks(lambda cols: packed.multiply(a2, b2[:, cols], o2[:, cols]), n, n, max(1, n // parts))
        return out
    # one part per thread: a part of a matmul is already large beside the hand-off (a chunk of
    # m // threads rows makes as many parts; one of -(-m // threads) made one part of 49 rows)
    parallel.in_row_chunks(lambda rows: packed.multiply(a2[rows], b2, o2[rows]), m, m, max(1, m // parallel.threads()))
    return out


def split_columns(m: int, n: int) -> bool:
    """Whether a product of ``m`` rows and ``n`` columns large enough to split (SPLIT_MACS) is split
    over the run's threads by columns (few rows: COLUMN_SPLIT_ROWS) rather than by rows."""
    return COLUMN_SPLIT_MIN_ROWS <= m < COLUMN_SPLIT_ROWS and n >= COLUMN_PART_MIN * parallel.threads()
