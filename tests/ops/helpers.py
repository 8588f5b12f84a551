"""Run a few ops on a small IPU-Model target and compare with numpy (written independently here)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from profiler import Engine, Graph, Sequence, ipu_model, ops

TOL = {np.float32: 2e-5, np.float16: 2e-2}


def tol(dtype: object) -> float:
    return TOL[np.dtype(dtype).type]


def run(
    inputs: dict[str, np.ndarray],
    build: Callable[[Graph, dict, Sequence], dict],
    tiles: int = 4,
    bytes_per_tile: int = 1 << 20,
    target=None,  # type: ignore[no-untyped-def]
) -> tuple[dict[str, np.ndarray], Graph, Engine]:
    """Map each input linearly over the tiles, build the ops, run once, return the named outputs."""
    g = Graph(target or ipu_model(tiles_per_ipu=tiles, bytes_per_tile=bytes_per_tile))
    ts = {}
    for name, value in inputs.items():
        t = ops.add_mapped(g, value.dtype, value.shape, name)
        g.create_host_write(name, t)
        ts[name] = t
    prog = Sequence()
    outs = build(g, ts, prog)
    for name, t in outs.items():
        g.create_host_read(name, t)
    e = Engine(g, [prog])
    e.load()
    for name, value in inputs.items():
        e.write_tensor(name, value)
    e.run(0)
    return {name: e.read_tensor(name) for name in outs}, g, e


def fd_grad(f: Callable[[np.ndarray], np.ndarray], x: np.ndarray, dy: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """d(sum(f(x) * dy))/dx by central differences in float64 (every element)."""
    x = x.astype(np.float64)
    g = np.zeros_like(x)
    flat = g.reshape(-1)
    for i in range(x.size):
        xp, xm = x.copy(), x.copy()
        xp.reshape(-1)[i] += eps
        xm.reshape(-1)[i] -= eps
        flat[i] = ((f(xp) - f(xm)) * dy).sum() / (2 * eps)
    return g


def np_erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf)(x)


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def _tensor_snapshot(t: object) -> tuple:
    var, idx = t.elements()  # type: ignore[attr-defined]
    kind = type(t._lay).__name__  # type: ignore[attr-defined]
    if kind == "VarRuns":  # runs of several variables: an index per element held per run, the same field
        kind = "ndarray"
    return kind, t.shape, t.dtype.str, var.tolist(), idx.tolist()  # type: ignore[attr-defined]


def _batch_snapshot(b: object) -> tuple:
    fields = {k: _tensor_snapshot(v) for k, v in b.fields.items()}  # type: ignore[attr-defined]
    return b.codelet.name, b.tiles.tolist(), repr(b.params), fields  # type: ignore[attr-defined]


def graph_snapshot(g: Graph) -> list:
    """What a graph holds, as plain values: its variables and mappings, and every compute set's
    vertices and kernel (each field's layout kind, shape and elements), to compare two graphs built
    by different code paths."""
    out: list = [
        (v.name, v.shape, v.dtype.str, v.mapping.starts.tolist(), v.mapping.tiles.tolist()) for v in g.variables
    ]
    for cs in g.compute_sets:
        kernel = None if cs.kernel is None else [_batch_snapshot(b) for b in cs.kernel]
        out.append((cs.name, [_batch_snapshot(b) for b in cs.batches], kernel))
    return out


def created_matmul(tiles: int, m: int, k: int, n: int) -> tuple[Graph, Engine]:
    """x[m, k] @ w[k, n] fp32 on a ``tiles``-tile IPU-Model, both operands created for the matmul
    (host writes "x", "w"; host read "y"), compiled."""
    g = Graph(ipu_model(tiles_per_ipu=tiles))
    x = ops.create_matmul_lhs(g, "float32", (m, k), (k, n), "x")
    w = ops.create_matmul_rhs(g, "float32", (m, k), (k, n), "w")
    g.create_host_write("x", x)
    g.create_host_write("w", w)
    prog = Sequence()
    g.create_host_read("y", ops.matmul(g, x, w, prog))
    e = Engine(g, prog, {"debug.instrument": "false"})
    e.compile()
    return g, e


def check_created_matmul(e: Engine, m: int, k: int, n: int, seed: int) -> None:
    """Run ``created_matmul``'s engine on random operands and compare y with numpy's product."""
    r = np.random.default_rng(seed)
    xv, wv = r.standard_normal((m, k), dtype=np.float32), r.standard_normal((k, n), dtype=np.float32)
    e.load()
    e.write_tensor("x", xv)
    e.write_tensor("w", wv)
    e.run(0)
    np.testing.assert_allclose(e.read_tensor("y"), xv @ wv, rtol=1e-5, atol=1e-4)
