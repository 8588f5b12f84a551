"""The run's worker threads: numpy work on large arrays split into chunks of rows over the cores.

numpy releases the GIL in its copies, casts, takes and ufunc loops, so chunks of one large
operation run side by side; a chunk is also small enough to stay in cache between the passes made
over it. Results never depend on the chunking (each element is computed on its own).
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait

# Elements per chunk of work that makes several passes (gather, convert, compute, scatter): about
# 1 MiB of float per operand, so a chunk's passes stay in the shared L3 (32 MiB on this machine's
# EPYC) and the ~50 us of Python per chunk stays small beside the work.
CHUNK_ELEMENTS = 1 << 18
# Elements per chunk of a single pass (a copy or a cast): enough to amortise a thread hand-off
COPY_CHUNK_ELEMENTS = 1 << 18
# Fewest elements a part of a split operation has: a pass over 64 Ki elements takes ~15-25 us at
# 0.2-0.4 ns an element (a strided conversion 0.7-4 ns: more), about what handing a part to a
# waiting thread costs (two empty parts: ~30 us of CPU, 36 wall, measured at load ~12)
PART_ELEMENTS = 1 << 16


def chunk_for(elements: int, chunk: int) -> int:
    """The chunk ``in_row_chunks`` is given for an operation of ``elements``: ``chunk`` where the
    operation has several, else a part per thread down to PART_ELEMENTS. Under 2 x ``chunk`` the
    operation was one chunk and ran wholly on the calling thread while the others waited: ResNet-50
    batch 1's 100-400 Ki-element copies, conversions and float32 elementwise passes, ~13 of the main
    thread's ~95 CPU-ms a run (bench/run_threads.py), the main thread being the run's critical path."""
    return min(chunk, max(PART_ELEMENTS, elements // threads()))


_pool: ThreadPoolExecutor | None = None
_PREFIX = "tilescope-run"
_inside = threading.local()  # ``working``: this thread is running a chunk (nested splits run inline)
_cores: int | None = None


def threads() -> int:
    """The cores this process may use (what numpy's BLAS and onnxruntime take by default), read
    once: the affinity call costs ~9 us and the run asks at every batch."""
    global _cores
    if _cores is None:
        _cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return _cores


def in_row_chunks(work: Callable[[slice], object], rows: int, elements: int, chunk: int | None = None) -> None:
    """Call ``work(rows_slice)`` over ``rows`` rows in chunks of about ``chunk`` (default
    CHUNK_ELEMENTS) of the ``elements`` in all: the calling thread and the pool's threads take the
    chunks in turn, or one after the other on this thread with one core (still in cache) or when
    called from a chunk (a worker waiting on the pool could wait on itself; a chunk is small
    already: whole).

    The calling thread works too rather than waiting: each chunk handed to a pool thread costs a
    hand-off (~80 us of the caller's time at ResNet-50 batch 1, its queue's put waiting for the GIL
    while the woken thread runs the chunk's Python), and the caller would only wait."""
    if getattr(_inside, "working", False) or threading.current_thread().name.startswith(_PREFIX):
        work(slice(0, rows))
        return
    n = max(1, min(rows, elements // (chunk or CHUNK_ELEMENTS)))
    parts = [slice(rows * i // n, rows * (i + 1) // n) for i in range(n)]
    helpers = min(threads(), n) - 1
    if helpers < 1:
        for part in parts:
            work(part)
        return
    taken = itertools.count()  # next() on a count is atomic under the GIL: each chunk is taken once

    def drain() -> None:
        while (i := next(taken)) < n:
            work(parts[i])

    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=threads() - 1, thread_name_prefix=_PREFIX)
    helping = [_pool.submit(drain) for _ in range(helpers)]
    _inside.working = True
    try:
        drain()
    finally:
        _inside.working = False
        wait(helping)  # every chunk done before returning, even when this thread's failed
    for done in helping:
        done.result()  # re-raises a chunk's error here
