"""The host allocator's policy for the simulator's large temporaries.

Compiling a big graph allocates and frees arrays of tens of megabytes thousands of times. glibc
serves those from fresh ``mmap`` pages and gives them back on free, so every one is paid again in
page faults: half of ResNet-50's compile time at batch 8 was the kernel's (105 of 220 CPU-s).
Raising the mmap threshold to glibc's largest (32 MiB) and keeping freed memory in the process
lets the allocator reuse it (measured: 155 CPU-s, same peak RSS). Set ``TILESCOPE_DEFAULT_MALLOC=1``
to keep the C library's defaults; elsewhere than glibc nothing changes.

Building a large graph (an ONNX import) goes further, for its duration only (``heap_only``): its
temporaries are often larger than that threshold (a per-element array of an attention score
tensor is over 100 MB), so mmap is off altogether and numpy's huge-page advice with it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

# glibc malloc.h: mallopt parameters
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_MMAP_MAX = -4
# glibc's default for M_MMAP_MAX (DEFAULT_MMAP_MAX in malloc.c), restored after ``heap_only``
DEFAULT_MMAP_MAX = 65536
# glibc's upper limit for M_MMAP_THRESHOLD on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX, mallopt(3))
MMAP_THRESHOLD_MAX = 32 * 2**20
OPT_OUT = "TILESCOPE_DEFAULT_MALLOC"


def _mallopt() -> Callable[[int, int], int] | None:
    """glibc's ``mallopt``, or None (opted out, not Linux, not glibc: musl has no mallopt)."""
    if os.environ.get(OPT_OUT) or not sys.platform.startswith("linux"):
        return None
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return None
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return mallopt


def keep_freed_memory() -> bool:
    """Apply the policy above; True when it took effect."""
    mallopt = _mallopt()
    if mallopt is None:
        return False
    # the trim threshold as large as an int allows: freed memory stays for the next temporary
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX)) and bool(mallopt(M_TRIM_THRESHOLD, 2**31 - 1))


def give_back_freed_memory() -> bool:
    """Return the heap's free pages to the system (glibc's ``malloc_trim(0)``); True when it did.
    ``keep_freed_memory`` keeps what a stage frees for its next temporaries; between stages whose
    temporaries differ (an ONNX import, then a reference runtime, then the simulation) that kept
    memory is only held: BERT-large 8 layers kept 0.9 GB after its import (RSS 2.01 -> 1.12 GiB
    once given back)."""
    if os.environ.get(OPT_OUT) or not sys.platform.startswith("linux"):
        return False
    try:
        trim = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc
        return False
    trim.argtypes, trim.restype = (ctypes.c_size_t,), ctypes.c_int
    return bool(trim(0))


@contextmanager
def small_pages() -> Iterator[None]:
    """numpy's huge-page advice (madvise) off while planning: the planner's arrays are large and
    short-lived, and each fresh one faulted in 2 MB pages cost more kernel time (zeroing, compaction)
    than the pages saved - ResNet-50 224 b8 compile 7.7 user + 2.6 sys CPU s with it, 6.7 + 0.5 without.
    Restored after (the engine's long-lived state keeps it)."""
    try:
        # numpy's private switch: not in its stubs
        from numpy._core.multiarray import _set_madvise_hugepage  # type: ignore[attr-defined]
    except ImportError:  # a numpy without the switch: nothing to change
        yield
        return
    previous = _set_madvise_hugepage(False)
    try:
        yield
    finally:
        _set_madvise_hugepage(previous)


@contextmanager
def heap_only() -> Iterator[None]:
    """Every allocation from the process's heap (mmap off) and in small pages, until the block ends.

    An import's temporaries of over 32 MiB (glibc's largest mmap threshold) were each fresh mmap
    pages, faulted in again and given back on free: BERT-base 12 layers batch 8 imported in 33 user
    + 33 sys CPU s. From the heap, which keeps freed memory (``keep_freed_memory``), they are reused:
    31 + 10 s, same peak RSS. Both switches are needed: with either alone the kernel time stayed
    (huge pages on the heap were still faulted and compacted, small mmap pages faulted 10x as often).
    Once the import's per-element temporaries were gone it still saves it ~4 s of kernel time (10
    against 15 s in all), though the compile that follows has then spent 2-6 s more in the kernel
    in some runs (as many page faults, each dearer; not understood): import + compile about even.
    """
    mallopt = _mallopt()
    heap = mallopt is not None and bool(mallopt(M_MMAP_MAX, 0))
    try:
        with small_pages():
            yield
    finally:
        if heap and mallopt is not None:
            mallopt(M_MMAP_MAX, DEFAULT_MMAP_MAX)
