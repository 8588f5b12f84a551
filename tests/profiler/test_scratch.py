"""The run's reused temporaries (profiler.host.scratch)."""

import threading

import numpy as np

from profiler.host import scratch


def test_a_slot_hands_out_the_same_memory_until_it_must_grow_and_threads_do_not_share() -> None:
    scratch.release()
    a = scratch.buffer("x", (4, 5), np.float32)
    a[...] = 7
    b = scratch.buffer("x", (2, 3), np.float64)  # smaller: the same memory, another type
    assert b.shape == (2, 3) and b.dtype == np.float64 and b.flags.c_contiguous
    assert np.shares_memory(a, b)
    assert not np.shares_memory(a, scratch.buffer("y", (4, 5), np.float32))  # another slot
    c = scratch.buffer("x", (100,), np.float32)  # larger: grown
    assert c.size == 100 and not np.shares_memory(a, c)
    other: list[np.ndarray] = []
    t = threading.Thread(target=lambda: other.append(scratch.buffer("x", (100,), np.float32)))
    t.start()
    t.join()
    assert not np.shares_memory(c, other[0])  # each thread its own buffers
    scratch.release()
    assert not np.shares_memory(c, scratch.buffer("x", (100,), np.float32))  # dropped: a new one
    scratch.release()
