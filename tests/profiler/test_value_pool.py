"""Dropped variable values handed on (profiler.host.value_pool)."""

import numpy as np

from profiler.host.value_pool import ValuePool


def test_a_dropped_array_is_handed_on_zeroed_and_a_miss_frees_what_waits() -> None:
    pool = ValuePool()
    a = pool.zeros(10, np.float16)
    assert a.dtype == np.float16 and a.size == 10 and not a.any()
    a[:] = 3
    pool.drop(a)
    b = pool.zeros(10, np.float16)  # same type and size: the same memory, zeroed
    assert np.shares_memory(a, b) and not b.any()
    pool.drop(b)
    c = pool.zeros(10, np.float32)  # another type: a new array, and b no longer waits
    assert not np.shares_memory(b, c)
    d = pool.zeros(10, np.float16)
    assert not np.shares_memory(b, d) and not d.any()
    pool.drop(np.zeros(0, np.float16))  # an empty (never made) value is not kept
    assert pool.zeros(0, np.float16).size == 0
