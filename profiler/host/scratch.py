"""Reused buffers for a run's largest temporaries (a convolution's columns, its padded input, a
matmul's result).

Arrays of hundreds of megabytes are beyond glibc's largest mmap threshold (32 MiB,
``profiler.host.allocator``), so each fresh one is mapped, faulted in page by page (the kernel zeroing
every page) and unmapped again at every step: at ResNet-50 batch 32 that was ~1.5 of a run's ~10
CPU-s, and a first-touch copy into fresh pages ran 3-8x slower than into warm ones. A buffer here
is kept per thread and per slot and handed out again, grown when a larger one is asked for, and
kept from run to run until the engine closes (``release``).

A buffer is valid until the next request for the same slot on the same thread: its users consume it
within one batch (the engine runs a batch's gathers, codelet and scatters before the next batch).
"""

from __future__ import annotations

import math
import threading

import numpy as np

_local = threading.local()


def buffer(slot: str, shape: tuple[int, ...], dtype: np.dtype | type) -> np.ndarray:
    """An uninitialised C-contiguous array of ``shape`` and ``dtype`` over this thread's ``slot``."""
    dtype = np.dtype(dtype)
    n = math.prod(shape) * dtype.itemsize  # math.prod: ~0.3 us, np.prod ~5 (many calls a run)
    held: dict[str, np.ndarray] = _local.__dict__.setdefault("held", {})
    raw = held.get(slot)
    if raw is None or raw.size < n:
        raw = held[slot] = np.empty(max(n, 1), np.uint8)
    return raw[:n].view(dtype).reshape(shape)


def release() -> None:
    """Drop this thread's buffers (their memory goes back to the system)."""
    _local.__dict__.pop("held", None)
