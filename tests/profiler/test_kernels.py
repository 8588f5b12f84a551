"""Compute-set kernels (coarse whole-tensor vertices the engine runs instead of every vertex) and
the strided views the engine reads tensors through."""

import numpy as np
import pytest

from profiler import CompileError, Engine, Graph, GraphError, Sequence, ipu_model, ops
from profiler.compiler import compute_sets
from profiler.executable.access import Access
from profiler.poplar.layout import strided_layout
from profiler.poplar.programs import Execute
from profiler.poplar.tensor import concat

VIEWS = {
    "whole": lambda a: a,
    "transpose": lambda a: a.transpose(2, 0, 1),
    "slice": lambda a: a[1:, :, 1:4],
    "step": lambda a: a[:, ::2, ::3],
    "broadcast": lambda a: np.broadcast_to(a[:, :1, :], (2, 5, 6)),
    "expand": lambda a: a[1][None],
}


@pytest.mark.parametrize("view", list(VIEWS))
def test_strided_layout_rebuilds_numpy_views(view: str) -> None:
    idx = np.ascontiguousarray(VIEWS[view](np.arange(60).reshape(2, 5, 6)))
    offset, strides = strided_layout(idx)  # type: ignore[misc]
    rebuilt = offset + sum(np.arange(n).reshape([-1 if d == i else 1 for d in range(idx.ndim)]) * s
                           for i, (n, s) in enumerate(zip(idx.shape, strides, strict=True)))  # fmt: skip
    assert (rebuilt == idx).all()


@pytest.mark.parametrize("idx", [np.array([3, 1, 2]), np.arange(6)[::-1], np.array([[0, 1], [5, 7]])])
def test_gathered_index_patterns_are_not_strided(idx: np.ndarray) -> None:
    assert strided_layout(idx) is None


def test_access_reads_a_strided_view_without_copying_and_writes_through_it() -> None:
    g = Graph(ipu_model(tiles_per_ipu=2))
    v = g.add_variable("float", [3, 4], "v")
    state = [np.arange(12, dtype=np.float32)]
    acc = Access(v.T[1:])
    got = acc.gather(state)
    assert np.shares_memory(got, state[0]) and not got.flags.writeable
    assert (got == np.arange(12).reshape(3, 4).T[1:]).all()
    acc.scatter(state, -np.ones((3, 3)))
    assert state[0].reshape(3, 4)[:, 1:].tolist() == [[-1] * 3] * 3 and state[0].reshape(3, 4)[:, 0].tolist() == [
        0,
        4,
        8,
    ]
    # a broadcast view reaches elements twice: read as a view, written element by element
    b = Access(v[0].expand(0).broadcast_to((2, 4)))
    assert np.shares_memory(b.gather(state), state[0]) and not b.strided[3]  # type: ignore[index]


def _matmul_graph() -> tuple[Graph, Sequence, object]:
    # M = N = 4, K = 4096 over 16 tiles: the planner splits K (blocks of two lengths), so the result
    # comes from a partials compute set and a reduction; the partials are op-internal, so those
    # compute sets defer to the last reduction stage's kernel, which computes a @ b at once
    g = Graph(ipu_model(tiles_per_ipu=16, bytes_per_tile=1 << 20))
    a = ops.add_mapped(g, "float", (4, 4096), "a")
    b = ops.add_mapped(g, "float", (4096, 4), "b")
    prog = Sequence()
    y = ops.matmul(g, a, b, prog)
    for name, t in {"a": a, "b": b}.items():
        g.create_host_write(name, t)
    g.create_host_read("y", y)
    return g, prog, y


@pytest.mark.parametrize("vertices", [False, True])
def test_engine_runs_kernels_and_leaves_vertex_fields_unbuilt(vertices: bool) -> None:
    g, prog, _ = _matmul_graph()
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((4, 4096)).astype(np.float32), rng.standard_normal((4096, 4)).astype(np.float32)
    e = Engine(g, [prog], {"tilescope.executeVertices": str(vertices).lower()})
    e.load()
    e.write_tensor("a", a)
    e.write_tensor("b", b)
    e.run(0)
    np.testing.assert_allclose(e.read_tensor("y"), a.astype(np.float64) @ b, rtol=1e-5, atol=1e-4)
    plans = e.compiled.cs_plans.values()  # type: ignore[union-attr]
    # every compute set has a kernel or defers to a later one (the partials and the reduction's first
    # stages to the last stage's)
    assert len(plans) >= 2 and all(p.kernel is not None for p in plans) and any(p.kernel for p in plans)
    built = [b._fields is not None for p in plans for b in p.batches]
    assert all(built) if vertices else not any(built)


def test_a_kernel_must_write_what_the_vertices_write() -> None:
    g = Graph(ipu_model(tiles_per_ipu=2))
    x = g.add_variable("float", [4], "x")
    y = g.add_variable("float", [4], "y")
    g.map_linearly(x)
    g.map_linearly(y)
    cs = g.add_compute_set("relu")
    g.add_vertices(cs, "popops::Relu", {"in": x.reshape(2, 2), "out": y.reshape(2, 2)}, [0, 1])
    g.add_kernel(cs, "popops::Relu", {"in": x[:2].expand(0), "out": y[:2].expand(0)})
    with pytest.raises(CompileError, match="'relu': its kernel writes 2 elements, its vertices 4"):
        Engine(g, [Execute(cs)]).compile()
    # as many elements, but one of them twice
    cs.kernel = None
    g.add_kernel(cs, "popops::Relu", {"in": x[[0, 1, 2, 2]].expand(0), "out": y[[0, 1, 2, 2]].expand(0)})
    with pytest.raises(CompileError, match="writes 4 elements, its vertices 4 \\(different ones\\)"):
        Engine(g, [Execute(cs)]).compile()


@pytest.mark.parametrize(
    ("vertex_out", "message"),
    [
        (lambda y, z: y[:2].reshape(1, 2), "its kernel writes 4 elements, its vertices 2"),
        (lambda y, z: y[[0, 1, 2, 2]].reshape(2, 2), "writes 4 elements, its vertices 4 \\(different ones\\)"),
        (lambda y, z: concat([y[:2], z[2:]]).reshape(2, 2), "writes 4 elements, its vertices 4 \\(different ones\\)"),
    ],
    ids=["fewer", "one-twice", "another-variable"],
)
def test_a_kernel_writing_a_whole_variable_must_write_what_the_vertices_write(vertex_out, message) -> None:
    # the kernel's output is all of y, each element once: checked without the kernel's regions
    g = Graph(ipu_model(tiles_per_ipu=2))
    x, y, z = (g.add_variable("float", [4], n) for n in "xyz")
    for t in (x, y, z):
        g.map_linearly(t)
    out = vertex_out(y, z)
    cs = g.add_compute_set("relu")
    g.add_vertices(
        cs, "popops::Relu", {"in": x[: out.numel()].reshape(out.shape), "out": out}, list(range(out.shape[0]))
    )
    g.add_kernel(cs, "popops::Relu", {"in": x.expand(0), "out": y.expand(0)})
    with pytest.raises(CompileError, match=message):
        Engine(g, [Execute(cs)]).compile()


@pytest.mark.parametrize(
    ("kernel_out", "message"),
    [
        (lambda y, z: concat([z[[3, 2]], y[[1, 0, 3, 2]], z[[1, 0]]]), None),  # each element once, in any order
        (
            lambda y, z: concat([z[[3, 2]], y[[1, 0, 3, 3]], z[[1, 0]]]),
            "writes 8 elements, its vertices 8 \\(different ones\\)",
        ),
        (lambda y, z: concat([y[[1, 0, 3, 2]], z[[1, 0]]]), "its kernel writes 6 elements, its vertices 8"),
    ],
    ids=["each-once", "one-twice", "fewer"],
)
def test_a_kernel_writing_elements_of_several_variables(kernel_out, message, monkeypatch) -> None:
    g = Graph(ipu_model(tiles_per_ipu=2))
    x, y, z = (g.add_variable("float", [4], n) for n in "xyz")
    for t in (x, y, z):
        g.map_linearly(t)
    cs = g.add_compute_set("relu")
    out = concat([y[:2], z[:2], y[2:], z[2:]]).reshape(2, 4)  # tile 0 writes y[:2], z[:2]; tile 1 the rest
    g.add_vertices(cs, "popops::Relu", {"in": concat([x, x]).reshape(2, 4), "out": out}, [0, 1])
    kout = kernel_out(y, z)
    g.add_kernel(cs, "popops::Relu", {"in": concat([x, x])[: kout.numel()].expand(0), "out": kout.expand(0)})
    if message is None:  # found by the bitmap of the variables' elements, without the regions' sort
        monkeypatch.setattr(compute_sets, "_same_elements", lambda a, b: pytest.fail("regions compared"))
        Engine(g, [Execute(cs)]).compile()
    else:
        with pytest.raises(CompileError, match=message):
            Engine(g, [Execute(cs)]).compile()


def test_a_kernel_must_read_what_the_vertices_read() -> None:
    g = Graph(ipu_model(tiles_per_ipu=2))
    x, y, z = (g.add_variable("float", [4], n) for n in "xyz")
    for t in (x, y, z):
        g.map_linearly(t)
    cs = g.add_compute_set("relu")
    g.add_vertices(cs, "popops::Relu", {"in": x.reshape(2, 2), "out": y.reshape(2, 2)}, [0, 1])
    g.add_kernel(cs, "popops::Relu", {"in": z.expand(0), "out": y.expand(0)})
    with pytest.raises(CompileError, match="kernel field 'in' uses variables its vertices do not"):
        Engine(g, [Execute(cs)]).compile()
    with pytest.raises(GraphError, match="already has a kernel"):
        g.defer_kernel(cs)


def test_a_deferred_stage_lets_the_next_kernel_read_its_inputs() -> None:
    # reduce to 1 element from 8 tiles: stage 1 (partials per tile) defers to stage 2's kernel,
    # which reduces straight from the input
    g = Graph(ipu_model(tiles_per_ipu=8))
    x = ops.add_mapped(g, "float", (64,), "x")
    prog = Sequence()
    s = ops.reduce_sum(g, x, 0, prog)
    g.create_host_write("x", x)
    g.create_host_read("s", s)
    e = Engine(g, [prog])
    e.load()
    values = np.linspace(-1, 2, 64, dtype=np.float32)
    e.write_tensor("x", values)
    e.run(0)
    kernels = [p.kernel for p in sorted(e.compiled.cs_plans.values(), key=lambda p: p.compute_set.id)]  # type: ignore[union-attr]
    assert kernels[0] == [] and len(kernels[-1]) == 1
    assert e.read_tensor("s") == pytest.approx(values.astype(np.float64).sum(), rel=1e-6)
    # the partials only the deferring stage writes are never made on the host (no step runs them)
    first = min(e.compiled.cs_plans.values(), key=lambda p: p.compute_set.id)  # type: ignore[union-attr]
    partials = first.writes - {s._var}
    assert partials and all(e._state[v].size == 0 for v in partials)
    made = lambda eng, p: any(  # noqa: E731 - a step that runs something makes p's value
        n.action is not None and p in eng._needs.get(n.step, ()) for n in eng.compiled.steps
    )
    assert not any(made(e, p) for p in partials)
    v = Engine(g, [prog], {"tilescope.executeVertices": "true"})  # every vertex runs: made and written
    v.write_tensor("x", values)
    v.run(0)
    assert v.read_tensor("s") == pytest.approx(values.astype(np.float64).sum(), rel=1e-6)
    assert all(made(v, p) for p in partials)


def test_element_indices_are_int32_when_they_fit() -> None:
    from profiler.poplar.tensor import index_dtype

    g = Graph(ipu_model(tiles_per_ipu=2))
    v = g.add_variable("float", [3, 4], "v")
    assert v._idx.dtype == np.int32 and v.T[1:]._idx.dtype == np.int32
    assert index_dtype(2**31 - 1) == np.int32 and index_dtype(2**31) == np.int64


def test_weights_converted_for_a_run_are_reused_until_a_program_or_the_host_writes_them() -> None:
    # program 1 reads half weights as float (a matmul's operand): converted once and kept between
    # runs; program 0 negates the weights on the device, and write_tensor replaces them from the host
    g = Graph(ipu_model(tiles_per_ipu=4, bytes_per_tile=1 << 20))
    x = ops.create_matmul_lhs(g, "half", (8, 16), (16, 4), "x")  # laid out for the matmul: read in place
    w = ops.create_matmul_rhs(g, "half", (8, 16), (16, 4), "w")
    g.create_host_write("x", x)
    g.create_host_write("w", w)
    negate, infer = Sequence(), Sequence()
    ops.unary_in_place(g, "neg", w, negate)
    g.create_host_read("y", ops.matmul(g, x, w, infer))
    e = Engine(g, [negate, infer])
    rng = np.random.default_rng(4)
    xv, wv = (rng.standard_normal(s).astype(np.float16) for s in [(8, 16), (16, 4)])
    e.write_tensor("x", xv)
    e.write_tensor("w", wv)

    def y_after(program: int | None = None) -> np.ndarray:
        if program is not None:
            e.run(program)
        e.run(1)
        return e.read_tensor("y")

    def want(wgt: np.ndarray) -> np.ndarray:
        return (xv.astype(np.float32) @ wgt.astype(np.float32)).astype(np.float16)

    assert np.array_equal(y_after(), want(wv))
    assert np.array_equal(y_after(), want(wv))  # the kept conversion
    assert np.array_equal(y_after(0), want(-wv))  # the device wrote w: converted anew
    w2 = rng.standard_normal((16, 4)).astype(np.float16)
    e.write_tensor("w", w2)
    assert np.array_equal(y_after(), want(w2))  # the host wrote w
