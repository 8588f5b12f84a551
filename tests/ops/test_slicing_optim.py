import numpy as np
import pytest

from profiler import Engine, Graph, Sequence, ipu_model, ops
from tests.ops.helpers import fd_grad, rng


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("index", [0, 2, 4])
def test_dynamic_slice_and_update(index, dtype):
    r = rng(50)
    t, u = r.standard_normal((5, 3, 2)).astype(dtype), r.standard_normal((3, 2)).astype(dtype)
    g = Graph(ipu_model(tiles_per_ipu=4))
    tt = ops.sliceable(g, dtype, (5, 3, 2), "t")
    uu, ix = ops.add_mapped(g, dtype, (3, 2), "u"), ops.add_mapped(g, "int32", (1,), "ix")
    prog = Sequence()
    s = ops.dynamic_slice(g, tt, ix, prog)
    ops.dynamic_update(g, tt, uu, ix, prog)
    for n, x in {"t": tt, "u": uu, "ix": ix}.items():
        g.create_host_write(n, x)
    g.create_host_read("s", s)
    g.create_host_read("t", tt)
    e = Engine(g, prog)
    e.load()
    for n, v in {"t": t, "u": u, "ix": np.array([index], np.int32)}.items():
        e.write_tensor(n, v)
    e.run(0)
    np.testing.assert_array_equal(e.read_tensor("s"), t[index])
    expect = t.copy()
    expect[index] = u
    np.testing.assert_array_equal(e.read_tensor("t"), expect)


def test_dynamic_update_needs_a_sliceable_tensor():
    g = Graph(ipu_model(tiles_per_ipu=4))
    t = ops.add_mapped(g, "float32", (5, 6), "t")
    with pytest.raises(ops.OpError, match="sliceable"):
        ops.dynamic_update(
            g, t, ops.add_mapped(g, "float32", (6,), "u"), ops.add_mapped(g, "int32", (1,), "i"), Sequence()
        )


def test_gather_and_its_gradient():
    r = rng(51)
    table = r.standard_normal((10, 7)).astype(np.float32)
    ids = np.array([3, 0, 3, 9, 9], np.int32)
    dout = r.standard_normal((5, 7)).astype(np.float32)
    g = Graph(ipu_model(tiles_per_ipu=3))
    tab = ops.embedding_table(g, "float32", 10, 7, "table")
    dtab = ops.embedding_table(g, "float32", 10, 7, "dtable")
    ii, dd = ops.add_mapped(g, "int32", (5,), "ids"), ops.add_mapped(g, "float32", (5, 7), "dout")
    prog = Sequence()
    out = ops.gather(g, tab, ii, prog)
    ops.fill(g, dtab, 0.0, prog)
    ops.gather_grad(g, dtab, ii, dd, prog)
    for n, x in {"table": tab, "ids": ii, "dout": dd}.items():
        g.create_host_write(n, x)
    g.create_host_read("out", out)
    g.create_host_read("dtable", dtab)
    e = Engine(g, prog)
    e.load()
    for n, v in {"table": table, "ids": ids, "dout": dout}.items():
        e.write_tensor(n, v)
    e.run(0)
    np.testing.assert_array_equal(e.read_tensor("out"), table[ids])
    fd = fd_grad(lambda v: v[ids], table, dout)
    np.testing.assert_allclose(e.read_tensor("dtable"), fd, rtol=1e-5, atol=1e-6)


def _optimizer_run(kind, steps):
    r = rng(52)
    w0 = r.standard_normal((4, 5)).astype(np.float32)
    grads = [r.standard_normal((4, 5)).astype(np.float32) for _ in range(steps)]
    g = Graph(ipu_model(tiles_per_ipu=3))
    w, gr = ops.add_mapped(g, "float32", (4, 5), "w"), ops.add_mapped(g, "float32", (4, 5), "g")
    init, step = Sequence(), Sequence()
    if kind == "adam":
        st = ops.AdamState(g, w, "w")
        st.init(g, init)
        ops.adam(g, w, gr, st, 0.1, step)
    else:
        v = ops.state_like(g, w, "v")
        ops.init_state(g, [v], init)
        ops.sgd(g, w, gr, 0.1, step, momentum=0.9, velocity=v)
    g.create_host_write("w", w)
    g.create_host_write("g", gr)
    g.create_host_read("w", w)
    e = Engine(g, [init, step])
    e.load()
    e.write_tensor("w", w0)
    e.run(0)
    for x in grads:
        e.write_tensor("g", x)
        e.run(1)
    return w0, grads, e.read_tensor("w")


def test_adam_matches_reference():
    w0, grads, got = _optimizer_run("adam", 3)
    w, m, v = w0.astype(np.float64), 0.0, 0.0
    for t, gr in enumerate(grads, 1):
        m = 0.9 * m + 0.1 * gr
        v = 0.999 * v + 0.001 * gr.astype(np.float64) ** 2
        w = w - 0.1 * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8 * np.sqrt(1 / (1 - 0.999**t)))
    np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-5)


def test_sgd_momentum_matches_reference():
    w0, grads, got = _optimizer_run("sgd", 3)
    w, v = w0.astype(np.float64), 0.0
    for gr in grads:
        v = 0.9 * v + gr
        w = w - 0.1 * v
    np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6)


def test_slicing_with_a_replicated_index_needs_no_index_exchange():
    r = rng(53)
    t = r.standard_normal((4, 6)).astype(np.float32)
    g = Graph(ipu_model(tiles_per_ipu=3))
    tt = ops.sliceable(g, "float32", (4, 6), "t")
    ix = ops.replicated_index(g, "ix")
    prog = Sequence()
    s = ops.dynamic_slice(g, tt, ix, prog)
    g.create_host_write("t", tt)
    g.create_host_write("ix", ix)
    g.create_host_read("s", s)
    e = Engine(g, prog)
    e.load()
    e.write_tensor("t", t)
    e.write_tensor("ix", np.full(3, 3, np.int32))
    e.run(0)
    np.testing.assert_array_equal(e.read_tensor("s"), t[3])
    assert "DoExchange" not in {lf.type for lf in e.compiled.steps}


def test_dynamic_slice_gradient_by_finite_differences():
    r = rng(54)
    t, dout = r.standard_normal((4, 3)).astype(np.float32), r.standard_normal((3,)).astype(np.float32)
    g = Graph(ipu_model(tiles_per_ipu=2))
    tt, dd, ix = (ops.add_mapped(g, "float32", (4, 3), "t"), ops.add_mapped(g, "float32", (3,), "d"),
                  ops.add_mapped(g, "int32", (1,), "ix"))  # fmt: skip
    prog = Sequence()
    grad = ops.dynamic_slice_grad(g, tt, dd, ix, prog)
    for n, x in {"d": dd, "ix": ix}.items():
        g.create_host_write(n, x)
    g.create_host_read("g", grad)
    e = Engine(g, prog)
    e.load()
    e.write_tensor("d", dout)
    e.write_tensor("ix", np.array([2], np.int32))
    e.run(0)
    np.testing.assert_allclose(e.read_tensor("g"), fd_grad(lambda v: v[2], t, dout), atol=1e-6)


def test_slicing_a_sliceable_tensor_builds_fields_from_its_intervals_not_per_element(monkeypatch):
    # a serial convolution's result store holds tens of millions of elements at batch 32: its slices'
    # fields come from the mapping's runs (one interval per tile and slice), never a tile per
    # element. 30 positions a slice on 4 tiles: runs of 8, 8, 8 and 6 (mapTensorLinearly).
    r = rng(51)
    t, u = r.standard_normal((7, 3, 10)).astype(np.float32), r.standard_normal((3, 10)).astype(np.float32)
    g = Graph(ipu_model(tiles_per_ipu=4))
    tt = ops.sliceable(g, "float32", (7, 3, 10), "t")
    var = g.variables[tt.single_variable()]
    assert var.mapping.starts.tolist() == [s * 30 + o for s in range(7) for o in (0, 8, 16, 24)]
    uu, ix = ops.add_mapped(g, "float32", (3, 10), "u"), ops.add_mapped(g, "int32", (1,), "ix")
    out = ops.add_mapped(g, "float32", (3, 10), "out")
    per_element = []
    tile_of = g.tile_of
    monkeypatch.setattr(g, "tile_of", lambda x: per_element.append(x.shape) or tile_of(x))
    prog = Sequence()
    ops.dynamic_update(g, tt, uu, ix, prog)
    assert per_element == []  # a sliceable store: its runs, not tile_of
    s = ops.dynamic_slice(g, tt, ix, prog, out=out)
    assert per_element == []  # a linearly mapped destination: its runs too
    monkeypatch.undo()
    for n, x in {"t": tt, "u": uu, "ix": ix}.items():
        g.create_host_write(n, x)
    g.create_host_read("s", s)
    g.create_host_read("t", tt)
    e = Engine(g, prog)
    e.load()
    for n, v in {"t": t, "u": u, "ix": np.array([5], np.int32)}.items():
        e.write_tensor(n, v)
    e.run(0)
    expect = t.copy()
    expect[5] = u
    np.testing.assert_array_equal(e.read_tensor("t"), expect)
    np.testing.assert_array_equal(e.read_tensor("s"), u)  # sliced after the update


@pytest.mark.parametrize("offset", [None, 40])
def test_multi_slice_vertices_split_over_threads_take_each_vertexs_own_rows(offset):
    """A batch of MultiSlice vertices large enough to split over the run's threads gives what
    numpy's indexing of each vertex's own table rows gives (zeros where an index falls outside the
    rows the vertex holds, with a split dictionary's ``offset``)."""
    from profiler.host import parallel
    from profiler.ops.poplibs_codelets import MultiSlice

    vertices, held, n, d = 64, 100, 48, 128  # out: 393,216 elements, over two parts' worth
    assert vertices * n * d >= 2 * parallel.PART_ELEMENTS
    r = np.random.default_rng(3)
    table = r.standard_normal((vertices, held, d)).astype(np.float32)
    idx = r.integers(0, 180, (vertices, n)).astype(np.int32)
    params = {} if offset is None else {"offset": offset}
    got = MultiSlice().run_batch(
        {"table": table, "indices": idx, "out": np.empty((vertices, n, d), np.float16)}, params
    )["out"]
    assert got.dtype == np.float16 and got.shape == (vertices, n, d)
    base = offset or 0
    for v in (0, vertices // 2, vertices - 1):
        for j in range(n):
            row = int(idx[v, j]) - base
            if offset is not None and not 0 <= row < held:
                want = np.zeros(d, np.float32)
            else:
                want = table[v, min(max(row, 0), held - 1)]
            np.testing.assert_array_equal(got[v, j], want.astype(np.float16))
