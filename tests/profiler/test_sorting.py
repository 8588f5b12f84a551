"""profiler.host.sorting.stable_order is numpy's stable argsort, whichever way it takes."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profiler.host.sorting import stable_order


def _runs(rng: np.random.Generator, n: int, length: int) -> np.ndarray:
    """``n`` keys in shuffled ascending runs of ``length``."""
    keys = np.sort(rng.integers(0, 1 << 30, n))
    blocks = keys.reshape(-1, length)
    return blocks[rng.permutation(blocks.shape[0])].ravel()


@pytest.mark.parametrize(
    "make",
    [
        lambda r: r.integers(0, 1 << 40, 100_000),  # shuffled: packed with the index
        lambda r: r.integers(0, 50, 100_000),  # many equal keys: their index order kept
        lambda r: r.integers(-(1 << 20), 1 << 20, 50_000),  # negative keys: counted from the lowest
        lambda r: np.sort(r.integers(0, 1 << 40, 50_000)),  # in order: no sort
        lambda r: _runs(r, 100_000, 10_000),  # long ascending runs: timsort's case
        lambda r: _runs(r, 100_000, 10),  # short runs: packed
        lambda r: r.integers(0, 1 << 62, 100_000),  # too wide to pack beside a 17-bit index
        lambda r: r.integers(0, 1 << 16, 100_000).astype(np.uint16),
        lambda r: r.integers(0, 1 << 31, 100_000).astype(np.int32),
    ],
    ids=["random", "equal", "negative", "sorted", "long-runs", "short-runs", "wide", "uint16", "int32"],
)
def test_same_order_as_numpys_stable_argsort(make):
    key = make(np.random.default_rng(7))
    assert np.array_equal(stable_order(key), np.argsort(key, kind="stable"))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-(2**62), 2**62 - 1), max_size=5000), st.integers(0, 3))
def test_any_keys(values, repeat):
    key = np.repeat(np.array(values, dtype=np.int64), repeat + 1)
    assert np.array_equal(stable_order(key), np.argsort(key, kind="stable"))
