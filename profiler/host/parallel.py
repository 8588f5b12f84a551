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

# Elements per chunk of work that makes several passes (gather, convert, compute, scatter): about
# 1 MiB of float per operand, so a chunk's passes stay in the shared L3 (32 MiB on this machine's
# EPYC) and the ~50 us of Python per chunk stays small beside the work.
CHUNK_ELEMENTS = 1 << 18
# Elements per chunk of a single pass (a copy or a cast): enough to amortise a thread hand-off
COPY_CHUNK_ELEMENTS = 1 << 18
# Fewest elements a part of a split operation has. A pass over 64 Ki elements takes ~15-25 us at
# 0.2-0.4 ns an element in cache, about what handing a part to a waiting thread costs (two empty
# parts: ~30 us of CPU, 36 wall, measured at load ~12); but a run's copies and conversions read
# from memory, where two threads share the bandwidth: parts of 64 Ki made ResNet-50 b1 runs 3-4 %
# slower than parts of 128 Ki or 256 Ki, which ran alike (2026-11-29, with PASS_PART_ELEMENTS at
# 256 Ki; batch 32 unchanged)
PART_ELEMENTS = 1 << 17


def chunk_for(elements: int, chunk: int) -> int:
    """The chunk ``in_row_chunks`` is given for an operation of ``elements``: ``chunk`` where the
    operation has several, else a part per thread down to PART_ELEMENTS. Under 2 x ``chunk`` the
    operation was one chunk and ran wholly on the calling thread while the others waited: ResNet-50
    batch 1's 100-400 Ki-element copies, conversions and float32 elementwise passes, ~13 of the main
    thread's ~95 CPU-ms a run (bench/run_threads.py), the main thread being the run's critical path."""
    return min(chunk, max(PART_ELEMENTS, elements // threads()))


_PREFIX = "tilescope-run"
_inside = threading.local()  # ``working``: this thread is running a chunk (nested splits run inline)
_cores: int | None = None


class _Helper:
    """A run thread that takes a split's chunks when handed them. It waits on a lock, not on a
    ``ThreadPoolExecutor``'s queue: a hand-off is a lock release and the join a lock acquire, both
    in C, where a ``ThreadPoolExecutor``'s ``submit`` and ``wait`` built a Future, a work item and
    waiters in Python on the caller's thread: ~6 % of the main thread's samples at ResNet-50 batch 1
    fp16 (py-spy, ~316 splits a run), the main thread being the run's critical path
    (bench/run_threads.py)."""

    def __init__(self, index: int) -> None:
        self._start = threading.Lock()
        self._start.acquire()  # released by ``hand``
        self._done = threading.Lock()
        self._done.acquire()  # released when the handed work is done
        self._work: Callable[[], None] | None = None
        self._error: BaseException | None = None
        threading.Thread(target=self._loop, name=f"{_PREFIX}_{index}", daemon=True).start()

    def _loop(self) -> None:
        while True:
            self._start.acquire()
            try:
                assert self._work is not None, "a helper is woken only with work"
                self._work()
            except BaseException as e:  # re-raised on the caller's thread by ``join``
                self._error = e
            finally:
                self._work = None
                self._done.release()

    def hand(self, work: Callable[[], None]) -> None:
        self._work = work
        self._start.release()

    def join(self) -> None:
        """Wait for the handed work; re-raise its error here."""
        self._done.acquire()
        error, self._error = self._error, None
        if error is not None:
            raise error


_helpers: list[_Helper] = []
# held while a split's chunks are on the helpers: a second thread splitting at the same time (two
# engines run from two threads) runs its chunks itself rather than hand work to a busy helper
_busy = threading.Lock()


def _after_fork() -> None:
    """A forked child has none of its parent's threads: it starts its own helpers when it splits."""
    global _busy
    _helpers.clear()
    _busy = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def threads() -> int:
    """The cores this process may use (what numpy's BLAS and onnxruntime take by default), read
    once: the affinity call costs ~9 us and the run asks at every batch."""
    global _cores
    if _cores is None:
        _cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return _cores


def in_row_chunks(work: Callable[[slice], object], rows: int, elements: int, chunk: int | None = None) -> None:
    """Call ``work(rows_slice)`` over ``rows`` rows in chunks of about ``chunk`` (default
    CHUNK_ELEMENTS) of the ``elements`` in all: the calling thread and the helper threads take the
    chunks in turn, or one after the other on this thread with one core (still in cache), while
    another thread's split holds the helpers, or when called from a chunk (a helper waiting on the
    helpers could wait on itself; a chunk is small already: whole).

    The calling thread works too rather than waiting: each chunk handed to a helper costs a
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
    if not _busy.acquire(blocking=False):  # another thread's split holds the helpers
        for part in parts:
            work(part)
        return
    taken = itertools.count()  # next() on a count is atomic under the GIL: each chunk is taken once

    def drain() -> None:
        while (i := next(taken)) < n:
            work(parts[i])

    try:
        while len(_helpers) < helpers:
            _helpers.append(_Helper(len(_helpers)))
        for h in _helpers[:helpers]:
            h.hand(drain)
        _inside.working = True
        try:
            drain()
        finally:
            _inside.working = False
            errors = []
            for h in _helpers[:helpers]:  # every chunk done before returning, even when this thread's failed
                try:
                    h.join()
                except BaseException as e:
                    errors.append(e)
        if errors:
            raise errors[0]  # a chunk's error, re-raised here
    finally:
        _busy.release()
