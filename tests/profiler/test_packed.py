"""profiler.host.packed: a layer's weights multiplied through a copy packed once by onnxruntime's MLAS;
each element of a product computed alike whatever rows and columns it is computed with, so the run's
splits do not change the bits; a weight over the budget, or no onnxruntime, multiplies as numpy."""

from __future__ import annotations

import numpy as np
import pytest

from profiler.engine.batch_run import ReadCache
from profiler.executable.access import Access
from profiler.host import blas, packed, parallel

pytest.importorskip("onnxruntime")

SHAPES = [(3136, 576, 64), (196, 2304, 256), (49, 4608, 512), (49, 512, 2048), (1, 2048, 1000), (7, 300, 70)]


def _operands(m: int, k: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(m + k + n)
    return rng.standard_normal((1, m, k)).astype(np.float32), rng.standard_normal((1, k, n)).astype(np.float32)


@pytest.mark.parametrize(("m", "k", "n"), SHAPES)
def test_a_packed_product_is_the_same_whatever_the_split(m: int, k: int, n: int, monkeypatch) -> None:
    a, b = _operands(m, k, n)
    w = packed.weights(b, packable=True)
    assert isinstance(w, packed.Weights)
    whole = np.empty((m, n), np.float32)
    packed.multiply(a[0], w.reshape(k, n), whole)  # one call on this thread
    assert list(w._packs) == [(0, n)]  # through the weight's packed copy
    np.testing.assert_allclose(whole, a[0].astype(np.float64) @ b[0].astype(np.float64), rtol=1e-4, atol=1e-3)
    for threads in (2, 3):  # split by rows, or a few rows' product by columns (each span packed alone)
        monkeypatch.setattr(parallel, "threads", lambda threads=threads: threads)
        with blas.one_thread():
            got = blas.matmul(a, w, np.full((1, m, n), np.nan, np.float32))
        assert np.array_equal(got[0], whole)
    rows = np.empty((m, n), np.float32)  # rows apart and columns apart, by hand
    cut = max(1, m // 3)
    packed.multiply(a[0, :cut], w.reshape(k, n), rows[:cut])
    packed.multiply(a[0, cut:], w.reshape(k, n), rows[cut:])
    assert np.array_equal(rows, whole)
    span = 8 * max(1, n // 24)
    cols = np.empty((m, n), np.float32)
    packed.multiply(a[0], w.reshape(k, n)[:, :span], cols[:, :span])
    packed.multiply(a[0], w.reshape(k, n)[:, span:], cols[:, span:])
    assert np.array_equal(cols, whole)


def test_views_of_kept_weights_share_their_packed_spans() -> None:
    a, b = _operands(49, 256, 128)
    w = packed.weights(b, packable=True).reshape(256, 128)
    first, again = packed.packed_of(w[:, 64:]), packed.packed_of(w.reshape(1, 256, 128)[0][:, 64:])
    assert first is not None and first is again and first.shape == (256, 64)
    assert packed.packed_of(w[::2]) is None  # not whole rows: numpy's
    assert packed.packed_of(b[0]) is None  # a plain array: numpy's


def test_without_onnxruntime_or_over_the_budget_a_product_is_numpys(monkeypatch) -> None:
    a, b = _operands(196, 300, 256)
    assert packed.weights(b, packable=False) is b
    monkeypatch.setattr(packed, "_onnxruntime", lambda: None)
    assert packed.weights(b, packable=True) is b
    out = np.empty((196, 256), np.float32)
    packed.multiply(a[0], b[0], out)
    assert np.array_equal(out, np.matmul(a[0], b[0]))


def test_a_read_cache_packs_kept_weights_within_its_budget(monkeypatch) -> None:
    from profiler import Graph, ipu_model, ops

    g = Graph(ipu_model(tiles_per_ipu=2, bytes_per_tile=1 << 22))
    ws = [ops.add_mapped(g, "float", (300, 256), f"w{i}") for i in range(3)]
    state = [np.random.default_rng(i).standard_normal(300 * 256).astype(np.float32) for i in range(3)]
    monkeypatch.setattr(packed, "PACKED_BYTES", 2 * 300 * 256 * 4)  # room for two of the three
    cache = ReadCache()
    reads = [cache.read(Access(w), state, np.dtype(np.float32), contiguous=True) for w in ws]
    assert [isinstance(r, packed.Weights) for r in reads] == [True, True, False]
    assert all(np.array_equal(r, s.reshape(300, 256)) for r, s in zip(reads, state, strict=True))
    cache.written([ws[0].single_variable()])  # a write drops the weight, its packed copies and their bytes
    state[0] = state[0] * 2
    again = cache.read(Access(ws[0]), state, np.dtype(np.float32), contiguous=True)
    assert isinstance(again, packed.Weights) and np.array_equal(again, state[0].reshape(300, 256))


def test_an_array_computed_from_kept_weights_or_a_refused_span_multiplies_as_numpy(monkeypatch) -> None:
    a, b = _operands(49, 256, 128)
    w = packed.weights(b, packable=True).reshape(256, 128)
    doubled = w * 2  # a Weights by numpy's subclassing, but in memory of its own
    assert isinstance(doubled, packed.Weights) and packed.packed_of(doubled) is None
    out = np.empty((49, 128), np.float32)
    packed.multiply(a[0], doubled, out)
    assert np.array_equal(out, np.matmul(a[0], b[0] * 2))

    def refuse(self, values):
        raise RuntimeError("no session")

    monkeypatch.setattr(packed.PackedMatrix, "__init__", refuse)
    fresh = packed.weights(b.copy(), packable=True).reshape(256, 128)
    packed.multiply(a[0], fresh, out)
    assert np.array_equal(out, np.matmul(a[0], b[0]))
    assert fresh._packs == {(0, 128): None}  # asked once: the span multiplies as numpy's from then on
