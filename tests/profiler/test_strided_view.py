"""strided_view gives as_strided's view (same memory, shape, strides, values, writeability)."""

from __future__ import annotations

import numpy as np
import pytest

from profiler.executable.strided import strided_view


@pytest.mark.parametrize(
    ("offset", "shape", "strides"),
    [
        (3, (4, 5), (20, 4)),  # rows of a [.., 5] float32 block
        (10, (3, 4), (0, 4)),  # a broadcast row
        (40, (4, 3), (-40, 8)),  # walking backwards
        (0, (0, 7), (28, 4)),  # empty
    ],
)
def test_the_view_is_as_strideds(offset, shape, strides) -> None:
    base = np.arange(64, dtype=np.float32)
    want = np.lib.stride_tricks.as_strided(base[offset:], shape, strides, writeable=False)
    got = strided_view(base, offset, shape, strides)
    assert got.shape == want.shape and got.strides == want.strides
    assert np.array_equal(got, want) and np.shares_memory(got, base) == (got.size > 0)
    assert not got.flags.writeable


def test_a_writeable_view_writes_the_base_and_a_readonly_base_still_works() -> None:
    base = np.zeros(12, dtype=np.float16)
    strided_view(base, 2, (2, 3), (8, 2), writeable=True)[:] = 1
    assert base.tolist() == [0, 0, 1, 1, 1, 0, 1, 1, 1, 0, 0, 0]
    frozen = base.copy()
    frozen.flags.writeable = False  # not a buffer np.ndarray may write: as_strided's path
    assert np.array_equal(strided_view(frozen, 2, (2, 3), (8, 2)), [[1, 1, 1], [1, 1, 1]])
