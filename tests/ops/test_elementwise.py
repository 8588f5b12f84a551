import json

import numpy as np
import pytest

from profiler import Engine, ops
from profiler.chip import cost_model
from tests.ops.helpers import np_erf, rng, run, tol

SHAPES = [(1,), (7, 3), (5, 1, 4), (13,)]

NUMPY_UNARY = {
    "neg": lambda x: -x,
    "exp": np.exp,
    "log": lambda x: np.log(np.abs(x) + 0.5),
    "sqrt": lambda x: np.sqrt(np.abs(x)),
    "square": lambda x: x * x,
    "abs": np.abs,
    "relu": lambda x: np.where(x > 0, x, 0),
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "tanh": np.tanh,
    "gelu": lambda x: x * 0.5 * (1 + np_erf(x / np.sqrt(2))),
}


def _unary_input(name: str, x: np.ndarray) -> np.ndarray:
    # log and sqrt get positive inputs (their numpy references above use the same transform)
    return (np.abs(x) + 0.5).astype(x.dtype) if name == "log" else (np.abs(x).astype(x.dtype) if name == "sqrt" else x)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", sorted(NUMPY_UNARY))
def test_unary_matches_numpy(name, shape, dtype):
    x = rng(1).standard_normal(shape).astype(dtype)
    xin = _unary_input(name, x)
    out, _, _ = run({"x": xin}, lambda g, t, p: {"y": ops.unary(g, name, t["x"], p)})
    ref = NUMPY_UNARY[name](x.astype(np.float64))
    assert out["y"].dtype == dtype and out["y"].shape == shape
    np.testing.assert_allclose(out["y"], ref, rtol=tol(dtype), atol=tol(dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize(
    "sa,sb", [((7, 3), (7, 3)), ((5, 3), (3,)), ((5, 1), (1, 4)), ((1,), (6,)), ((2, 1, 3), (4, 1))]
)
@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "max", "min"])
def test_binary_broadcasting_matches_numpy(name, sa, sb, dtype):
    r = rng(2)
    a = r.standard_normal(sa).astype(dtype)
    b = (r.standard_normal(sb) + (3 if name == "div" else 0)).astype(dtype)
    out, _, _ = run({"a": a, "b": b}, lambda g, t, p: {"y": ops.binary(g, name, t["a"], t["b"], p)}, tiles=5)
    fn = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "max": np.maximum,
          "min": np.minimum}[name]  # fmt: skip
    ref = fn(a.astype(np.float64), b.astype(np.float64))
    assert out["y"].shape == ref.shape
    np.testing.assert_allclose(out["y"], ref, rtol=tol(dtype), atol=tol(dtype))


def test_in_place_ops_change_their_operand():
    r = rng(3)
    a, b = r.standard_normal((6, 5)).astype(np.float32), r.standard_normal((5,)).astype(np.float32)

    def build(g, t, p):
        ops.binary_in_place(g, "mul", t["a"], t["b"], p)
        ops.unary_in_place(g, "neg", t["a"], p)
        return {"a": t["a"]}

    out, _, _ = run({"a": a, "b": b}, build)
    np.testing.assert_allclose(out["a"], -(a * b), rtol=1e-6)


@pytest.mark.parametrize("src,dst", [(np.float32, np.float16), (np.float16, np.float32), (np.float32, np.int32)])
def test_cast(src, dst):
    x = (rng(4).standard_normal((9, 2)) * 10).astype(src)
    out, _, _ = run({"x": x}, lambda g, t, p: {"y": ops.cast(g, t["x"], dst, p)})
    assert out["y"].dtype == dst
    np.testing.assert_array_equal(out["y"], x.astype(dst))


def test_fill_scaled_add_copy_scale():
    r = rng(5)
    a, b = r.standard_normal((11,)).astype(np.float32), r.standard_normal((11,)).astype(np.float32)

    def build(g, t, p):
        c = ops.copy(g, t["a"], p)
        ops.scaled_add(g, t["a"], t["b"], -0.25, p)
        f = ops.fill(g, ops.add_mapped(g, "float32", (3, 3), "f"), 2.5, p)
        return {"a": t["a"], "c": c, "f": f, "s": ops.scale(g, t["b"], 3.0, p), "k": ops.add_scalar(g, t["b"], 1, p)}

    out, _, _ = run({"a": a, "b": b}, build)
    np.testing.assert_allclose(out["a"], a - 0.25 * b, rtol=1e-6)
    np.testing.assert_array_equal(out["c"], a)
    np.testing.assert_array_equal(out["f"], np.full((3, 3), 2.5, np.float32))
    np.testing.assert_allclose(out["s"], 3 * b, rtol=1e-6)
    np.testing.assert_allclose(out["k"], b + 1, rtol=1e-6)


def test_debug_contexts_are_carried_by_variables_and_compute_sets():
    x = rng(6).standard_normal((8, 4)).astype(np.float32)

    def build(g, t, p):
        with g.debug_context("block", op_type="Block", layer="model") as outer:
            y = ops.add(g, t["x"], t["x"], p, debug_name="double")
        build.outer = outer
        return {"y": y}

    _, g, e = run({"x": x}, build)
    ctx = next(c for c in g.debug_contexts if c.name == "double")
    assert (ctx.layer, ctx.op_type, ctx.parent_id) == ("poplibs", "Binary", build.outer)
    assert any(v.debug_context_id == ctx.id for v in g.variables)  # the result variable
    cs = [c for c in g.compute_sets if c.debug_context_id == ctx.id]
    assert len(cs) == 1
    steps = [lf for lf in e.compiled.steps if lf.debug_context_id == ctx.id]
    assert "OnTileExecute" in {s.type for s in steps}


def test_flops_and_cycles_come_from_the_cost_model():
    n = 100
    x = rng(7).standard_normal((n,)).astype(np.float32)
    _, g, e = run({"x": x}, lambda g, t, p: {"y": ops.add(g, t["x"], t["x"], p)}, tiles=1)
    leaf = next(lf for lf in e.compiled.steps if lf.type == "OnTileExecute")
    assert int(leaf.cost.flops.sum()) == int(cost_model.binary_flops("add", n, np.float32))
    expected = int(cost_model.binary_cycles("add", n, np.float32, g.target))
    assert int(leaf.cost.tile_cycles[0]) == expected + cost_model.COMPUTE_SET_SUPERVISOR_CYCLES
    assert json.loads(g.debug_contexts[0].attributes) == {}


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_positionwise_ops_run_in_row_chunks_on_threads_give_the_whole_result(monkeypatch, dtype):
    # an add of a transposed operand and a broadcast one, then relu in place: the engine walks each
    # batch in its result's storage order, in chunks of rows on a thread per core
    from profiler.engine import batch_run
    from profiler.host import parallel

    calls = []
    whole = batch_run._run_rows
    monkeypatch.setattr(parallel, "CHUNK_ELEMENTS", 64)
    monkeypatch.setattr(batch_run, "PASS_PART_ELEMENTS", 64)
    monkeypatch.setattr(parallel, "threads", lambda: 2)  # chunks on threads even on a one-core machine
    # each step on its own (half steps would otherwise run as one chain: tests/profiler/test_elementwise_chains.py)
    monkeypatch.setattr(Engine, "_chained", lambda self, block: list(block.acting))
    monkeypatch.setattr(
        batch_run, "_run_rows", lambda b, s, rows, cache: calls.append((b, rows)) or whole(b, s, rows, cache)
    )
    r = rng(7)
    a, b, c = (r.standard_normal(s).astype(dtype) for s in [(40, 30), (30, 40), (30,)])
    out, _, _ = run(
        {"a": a, "b": b, "c": c},
        lambda g, t, p: {"y": ops.unary(g, "relu", ops.binary(g, "add", ops.binary(g, "mul", t["a"], t["b"].T, p), t["c"], p), p)},
        tiles=3,
    )  # fmt: skip
    f = np.float32  # half is computed in float and rounded after each op
    want = np.maximum((((a.astype(f) * b.T.astype(f)).astype(dtype)).astype(f) + c.astype(f)).astype(dtype), 0)
    assert np.array_equal(out["y"], want)
    # every batch walked in storage order (each op's, with kernels) ran in several chunks: a chunk
    # per thread for those run in one compiled pass (profiler.executable.half_maps), else of CHUNK_ELEMENTS
    chunked = {b: sum(1 for c, rows in calls if c is b) for b, rows in calls if rows is not None}
    assert chunked and min(chunked.values()) >= 2
    assert any(b.on_halves for b in chunked)  # half and float alike


@pytest.mark.parametrize(
    ("build", "per_vertex"),
    [
        # PopLibs' 1D elementwise structs (asm/binaryOps1D.S, asm/unaryOps1D.S offsets): ONE_PTR 4 B
        # per input, a SPAN (pointer + count) 8 B for the output or the in-place operand
        (lambda g, t, p: ops.binary(g, "add", t["a"], t["b"], p), 4 + 4 + 8),
        (lambda g, t, p: ops.binary_in_place(g, "add", t["a"], t["b"], p), 8 + 4),
        (lambda g, t, p: ops.unary(g, "exp", t["a"], p), 4 + 8),
        (lambda g, t, p: ops.unary_in_place(g, "exp", t["a"], p), 8),
    ],
)
def test_elementwise_vertex_state_is_poplibs_1d_struct(build, per_vertex):
    a = rng(2).standard_normal(16).astype(np.float32)
    _, _, e = run({"a": a, "b": a}, lambda g, t, p: {"y": build(g, t, p)})
    plan = next(iter(e.compiled.cs_plans.values()))
    assert set(plan.v_state.tolist()) == {per_vertex}  # one vertex per tile, 4 elements each
    assert int(plan.v_count.sum()) == 4
