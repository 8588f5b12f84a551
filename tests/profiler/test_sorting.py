"""profiler.host.sorting: stable_order is numpy's stable argsort, whichever way it takes; unique and union are numpy's."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profiler.host import sorting
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


@pytest.mark.parametrize(
    "values",
    [
        np.zeros(0, np.int64),
        np.array([7], np.int32),
        np.random.default_rng(1).integers(-(10**12), 10**12, 50_000),
        np.random.default_rng(2).integers(0, 5, (40, 30)).astype(np.int32),  # few values, 2-D: flattened
        np.arange(10_000)[::-1].copy(),
        np.random.default_rng(3).integers(0, 2, 1000).astype(bool),
        np.array([2.5, np.nan, 1.0, np.nan]),  # floats: numpy's own (NaNs collapse)
    ],
    ids=["empty", "one", "wide", "few-2d", "descending", "bool", "float-nan"],
)
def test_unique_and_union_are_numpys(values: np.ndarray) -> None:
    """``unique`` and ``union`` give exactly numpy's values, type and order (sorted distinct)."""
    got, want = sorting.unique(values), np.unique(values)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    other = values[::-1].ravel()[: values.size // 2] if values.size else values
    got, want = sorting.union(values, other), np.union1d(values, other)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("n, distinct", [(0, 1), (1, 1), (7, 3), (5_000, 40), (100_000, 100_000)])
def test_first_appearance_numbers_values_as_pandas_factorize_does(n: int, distinct: int) -> None:
    import pandas as pd  # the reference: pandas' own factorize, written independently

    a = np.random.default_rng(n).integers(-distinct, distinct, n)
    codes, values = sorting.first_appearance(a)
    want_codes, want_values = pd.factorize(a)
    np.testing.assert_array_equal(codes, want_codes)
    np.testing.assert_array_equal(values, want_values)
    np.testing.assert_array_equal(values[codes], a)


@pytest.mark.parametrize(
    "make",
    [
        lambda r: r.integers(0, 5, (10_000, 5)),  # a matmul's vertex shapes: few distinct rows
        lambda r: r.integers(0, 1 << 20, (5_000, 3)),  # many distinct rows
        lambda r: r.integers(0, 3, (7, 1)).astype(np.int32),
        lambda r: r.integers(0, 1 << 40, (1_000, 2)),  # too wide for one int64 key: numpy's way
        lambda r: r.integers(-3, 3, (500, 2)),  # negative: numpy's way
        lambda r: np.zeros((0, 4), np.int64),
    ],
)
def test_unique_rows_are_numpys_unique_along_axis_0(make) -> None:  # type: ignore[no-untyped-def]
    a = make(np.random.default_rng(9))
    got, want = sorting.unique_rows(a), np.unique(a, axis=0)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
