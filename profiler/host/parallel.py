"""The run's worker threads: numpy work on large arrays split into chunks of rows over the cores.

numpy releases the GIL in its copies, casts, takes and ufunc loops, so chunks of one large
operation run side by side; a chunk is also small enough to stay in cache between the passes made
over it. Results never depend on the chunking (each element is computed on its own).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

# Elements per chunk of work that makes several passes (gather, convert, compute, scatter): about
# 1 MiB of float per operand, so a chunk's passes stay in the shared L3 (32 MiB on this machine's
# EPYC) and the ~50 us of Python per chunk stays small beside the work.
CHUNK_ELEMENTS = 1 << 18
# Elements per chunk of a single pass (a copy or a cast): enough to amortise a thread hand-off
COPY_CHUNK_ELEMENTS = 1 << 18
_pool: ThreadPoolExecutor | None = None
_PREFIX = "tilescope-run"


def threads() -> int:
    """The cores this process may use (what numpy's BLAS and onnxruntime take by default)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def in_row_chunks(work: Callable[[slice], object], rows: int, elements: int, chunk: int | None = None) -> None:
    """Call ``work(rows_slice)`` over ``rows`` rows in chunks of about ``chunk`` (default
    CHUNK_ELEMENTS) of the ``elements`` in all: on the pool's threads, or one after the other on
    this thread with one core (still in cache) or when called from a chunk (a worker waiting on the
    pool could wait on itself; a chunk is small already: whole)."""
    if threading.current_thread().name.startswith(_PREFIX):
        work(slice(0, rows))
        return
    n = max(1, min(rows, elements // (chunk or CHUNK_ELEMENTS)))
    parts = [slice(rows * i // n, rows * (i + 1) // n) for i in range(n)]
    if n < 2 or threads() < 2:
        for part in parts:
            work(part)
        return
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=threads(), thread_name_prefix=_PREFIX)
    for done in [_pool.submit(work, part) for part in parts]:
        done.result()  # re-raises a chunk's error here
