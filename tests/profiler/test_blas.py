"""profiler.host.blas: BLAS held to one thread during a run, and matmuls split over the run's threads."""

from __future__ import annotations

import numpy as np
import pytest

from profiler.host import blas, parallel
from tests.split_parts import record_parts


def test_one_thread_holds_and_restores_the_count() -> None:
    found = blas._openblas()
    if found is None:
        pytest.skip("numpy's BLAS is not OpenBLAS")
    setter, getter = found
    setter(2)
    try:
        with blas.one_thread():
            assert getter() == 1 and blas.held_to_one_thread()
            with blas.one_thread():  # nested: still one, and the outer block restores
                assert getter() == 1
            assert getter() == 1
        assert getter() == 2 and not blas.held_to_one_thread()
    finally:
        setter(parallel.threads())


@pytest.mark.parametrize(
    ("m", "k", "n"),
    [(3136, 576, 64), (196, 2304, 256), (49, 2048, 512), (7, 1024, 1024), (1, 2048, 1000), (5, 4, 3)],
)
def test_split_matmul_is_bit_for_bit_numpys(m: int, k: int, n: int) -> None:
    rng = np.random.default_rng(m)
    a = rng.standard_normal((1, m, k)).astype(np.float32)
    b = rng.standard_normal((1, k, n)).astype(np.float32)
    with blas.one_thread():
        want = np.matmul(a, b)  # one call, one thread
        got = blas.matmul(a, b, np.empty((1, m, n), np.float32))
    assert np.array_equal(got, want)


def _parts_on_two_threads(monkeypatch: pytest.MonkeyPatch) -> list[slice]:
    """The parts of later splits on two run threads (skips where numpy's BLAS is not OpenBLAS: it is
    then never held to one thread, nor split)."""
    if blas._openblas() is None:
        pytest.skip("numpy's BLAS is not OpenBLAS: it is never held to one thread, nor split")
    return record_parts(monkeypatch)


@pytest.mark.parametrize("shared_b", [False, True])
def test_a_stack_of_products_is_split_by_product_and_is_bit_for_bit_numpys(shared_b: bool, monkeypatch) -> None:
    """A batch of matmul vertices (a stack of products, or of products by one shared operand) is
    split over the run's threads, products a part: each product's bits are numpy's one call's."""
    parts = _parts_on_two_threads(monkeypatch)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((6, 200, 300)).astype(np.float32)
    b = rng.standard_normal((1 if shared_b else 6, 300, 100)).astype(np.float32)
    out = np.empty((6, 200, 100), np.float32)
    with blas.one_thread():
        want = np.matmul(a, b)
        got = blas.matmul(a, b, out)
    assert got is out
    assert sorted((p.start, p.stop) for p in parts) == [(0, 3), (3, 6)]  # three products a thread
    assert np.array_equal(out, want)
    np.testing.assert_allclose(out, np.einsum("bmk,bkn->bmn", a.astype(np.float64), np.broadcast_to(b, (6, 300, 100))),
                               rtol=1e-4, atol=1e-3)  # fmt: skip


def test_few_rows_split_by_columns_many_rows_by_rows(monkeypatch) -> None:
    monkeypatch.setattr(parallel, "threads", lambda: 2)
    assert blas.split_columns(49, 512) and blas.split_columns(196, 256)  # ResNet-50's 7x7 and 14x14 layers
    assert not blas.split_columns(3136, 64)  # many rows: by rows
    assert not blas.split_columns(7, 1024)  # nearly a GEMV: never by columns
    assert not blas.split_columns(49, 40)  # parts of 20 columns: too narrow


def test_column_split_writes_each_part_into_out(monkeypatch) -> None:
    parts = _parts_on_two_threads(monkeypatch)
    rng = np.random.default_rng(3)
    a = rng.standard_normal((1, 49, 2048)).astype(np.float32)
    b = rng.standard_normal((1, 2048, 512)).astype(np.float32)
    with blas.one_thread():
        want = np.matmul(a, b)
        got = blas.matmul(a, b, np.full((1, 49, 512), np.nan, np.float32))
    assert blas.held_to_one_thread() is False
    assert sorted((p.start, p.stop) for p in parts) == [(0, 256), (256, 512)]  # two halves of the columns
    assert np.array_equal(got, want)
