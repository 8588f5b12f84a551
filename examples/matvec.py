"""Tiled matrix-vector multiply y = A x (in the spirit of Poplar tutorials 3-4).

A is split into an R x C grid of blocks, one block per tile. Each tile multiplies its block by
its slice of x (received through an exchange) into partial sums; a second compute set adds the
C partials of every row. A and x arrive from the host through streams; y goes back through one.

Run with a report:
    POPLAR_ENGINE_OPTIONS='{"autoReport.all":"true","autoReport.directory":"./r"}' python examples/matvec.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from profiler import Copy, Engine, Execute, Graph, Sequence, ipu_model  # noqa: E402


def run(m: int = 64, n: int = 96, grid: tuple[int, int] = (4, 4), seed: int = 0, options=None, verbose: bool = True):
    rows, cols = grid
    target = ipu_model(tiles_per_ipu=rows * cols)
    mb, nb = m // rows, n // cols
    assert mb * rows == m and nb * cols == n, "matrix must split evenly over the grid"
    g = Graph(target)
    with g.debug_context("matvec", op_type="MatVec"):
        a = g.add_variable("float", [m, n], "A")
        x = g.add_variable("float", [n], "x")
        partials = g.add_variable("float", [cols, m], "partials")
        y = g.add_variable("float", [m], "y")
        tile = lambda i, j: i * cols + j  # noqa: E731
        for i in range(rows):
            for j in range(cols):
                g.set_tile_mapping(a[i * mb : (i + 1) * mb, j * nb : (j + 1) * nb], tile(i, j))
                g.set_tile_mapping(partials[j, i * mb : (i + 1) * mb], tile(i, j))
        g.map_linearly(x)
        g.map_linearly(y, grain_size=m // (rows * cols))

        mul = g.add_compute_set("matvec/partials")
        for i in range(rows):
            for j in range(cols):
                g.add_vertex(mul, "poplin::MatMul", {
                    "a": a[i * mb : (i + 1) * mb, j * nb : (j + 1) * nb],
                    "b": x[j * nb : (j + 1) * nb].reshape(nb, 1),
                    "out": partials[j, i * mb : (i + 1) * mb].reshape(mb, 1),
                }, tile=tile(i, j))  # fmt: skip
        red = g.add_compute_set("matvec/reduce")
        chunk = m // (rows * cols)
        chunks = partials.transpose().reshape(rows * cols, chunk, cols)  # row r of y sums partials[:, r]
        g.add_vertices(red, "popops::ReduceAdd", {"in": chunks, "out": y.reshape(rows * cols, chunk)},
                       tiles=np.arange(rows * cols))  # fmt: skip

    a_in = g.add_host_to_device_fifo("A", "float", [m, n])
    x_in = g.add_host_to_device_fifo("x", "float", [n])
    y_out = g.add_device_to_host_fifo("y", "float", [m])
    prog = Sequence(Copy(a_in, a), Copy(x_in, x), Execute(mul), Execute(red), Copy(y, y_out))

    rng = np.random.default_rng(seed)
    host_a = rng.standard_normal((m, n)).astype(np.float32)
    host_x = rng.standard_normal(n).astype(np.float32)
    host_y = np.zeros(m, dtype=np.float32)
    engine = Engine(g, [prog], options=options)
    engine.load()
    engine.connect_stream("A", host_a)
    engine.connect_stream("x", host_x)
    engine.connect_stream("y", host_y)
    engine.run(0)
    engine.close()
    if verbose:
        print(
            f"y[:4] = {host_y[:4]}  ({m}x{n} over {rows * cols} tiles, {engine.runs[0].cycles if engine.runs else '?'} cycles)"
        )
    return {"A": host_a, "x": host_x, "y": host_y}


if __name__ == "__main__":
    run()
