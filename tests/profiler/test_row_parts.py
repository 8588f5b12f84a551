"""A convolution's im2col product run in parts of rows, each part's columns, product and result on
one thread (profiler.engine.batch_run._run_in_row_parts): the same bits as the whole batch."""

from __future__ import annotations

import numpy as np
import pytest

from profiler import ops
from profiler.engine import batch_run
from profiler.host import blas, parallel
from tests.ops.helpers import rng, run
from tests.ops.test_conv import ref_conv

# B, C, H, W, Cout, k, stride, pad
CASES = [
    (1, 16, 12, 12, 32, 3, 1, 1),  # batch 1: parts along the output rows
    (3, 8, 7, 9, 16, 1, 1, 0),  # 1x1 over a batch: parts along the batch
    (2, 16, 11, 10, 16, 3, 2, 1),  # strided, padded
]


def _conv(x: np.ndarray, wt: np.ndarray, s: int, p: int, threads: int, monkeypatch) -> tuple[np.ndarray, int]:
    """The convolution's output run with ``threads`` run threads, and how many batches ran in parts."""
    monkeypatch.setattr(parallel, "threads", lambda: threads)
    monkeypatch.setattr(blas, "SPLIT_MACS", 1)  # every product large enough to split
    used: list[bool] = []
    whole = batch_run._run_in_row_parts

    def counted(b: batch_run.BatchPlan, state: list[np.ndarray], cache: batch_run.ReadCache | None) -> bool:
        used.append(whole(b, state, cache))
        return used[-1]

    monkeypatch.setattr(batch_run, "_run_in_row_parts", counted)
    build = lambda g, t, prog: {"y": ops.conv2d(g, t["x"], t["w"], prog, stride=s, padding=p)}  # noqa: E731
    out, _, _ = run({"x": x, "w": wt}, build, tiles=6)
    return out["y"], sum(used)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("case", CASES)
def test_conv_in_row_parts_gives_the_whole_batchs_bits(case, dtype, monkeypatch) -> None:
    if blas._openblas() is None:
        pytest.skip("numpy's BLAS is not OpenBLAS: never held to one thread, so never split")
    b, c, h, w, co, k, s, p = case
    r = rng(7)
    x = r.standard_normal((b, c, h, w)).astype(dtype)
    wt = (r.standard_normal((co, c, k, k)) * 0.3).astype(dtype)
    whole, parts_whole = _conv(x, wt, s, p, 1, monkeypatch)
    split, parts = _conv(x, wt, s, p, 3, monkeypatch)
    assert parts_whole == 0 and parts > 0
    assert np.array_equal(split.view(np.uint8), whole.view(np.uint8))
    ref = ref_conv(x.astype(np.float64), wt.astype(np.float64), s, p, 1, 1)
    tol = 1e-5 if dtype == np.float32 else 2e-2
    np.testing.assert_allclose(split, ref, rtol=tol, atol=tol * 4)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_a_products_weights_are_read_row_major_once_per_run(dtype, monkeypatch) -> None:
    """A 1x1 convolution's weights [Cout, C] are its product's rhs as [C, Cout]: the engine hands
    BLAS a row-major copy (kept while unwritten, batch_run._product_operands), not the transposed view,
    and the result is the convolution's."""
    seen: list[bool] = []
    matmul = blas.matmul

    def spy(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> np.ndarray:
        seen.append(b.reshape(b.shape[-2:]).flags.c_contiguous)
        return matmul(a, b, out)

    monkeypatch.setattr(blas, "matmul", spy)
    r = rng(3)
    x = r.standard_normal((1, 16, 5, 6)).astype(dtype)
    wt = (r.standard_normal((24, 16, 1, 1)) * 0.3).astype(dtype)
    build = lambda g, t, prog: {"y": ops.conv2d(g, t["x"], t["w"], prog)}  # noqa: E731
    out, _, _ = run({"x": x, "w": wt}, build, tiles=4)
    assert seen and all(seen)
    ref = ref_conv(x.astype(np.float64), wt.astype(np.float64), 1, 0, 1, 1)
    tol = 1e-5 if dtype == np.float32 else 2e-2
    np.testing.assert_allclose(out["y"], ref, rtol=tol, atol=tol * 4)
