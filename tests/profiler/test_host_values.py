"""Host values follow liveness: a tensor that is not always-live holds no host array once its last
step has run, and the results are unchanged (checked against numpy written separately)."""

import numpy as np

from profiler import Engine, Graph, Sequence, ipu_model, ops


def test_dead_intermediates_are_dropped_and_results_stay_right() -> None:
    g = Graph(ipu_model(tiles_per_ipu=8))
    prog = Sequence()
    x = ops.add_mapped(g, "float", (16, 32), "x")
    w = ops.add_mapped(g, "float", (32, 8), "w")
    g.create_host_write("x", x)
    g.create_host_write("w", w)
    h = ops.relu(g, ops.matmul(g, x, w, prog), prog)  # the matmul result dies once relu has read it
    y = ops.add(g, h, h, prog)
    g.create_host_read("y", y)
    e = Engine(g, [prog])
    rng = np.random.default_rng(0)
    xv, wv = rng.standard_normal((16, 32)).astype(np.float32), rng.standard_normal((32, 8)).astype(np.float32)
    e.write_tensor("x", xv)
    e.write_tensor("w", wv)
    for _ in range(2):  # a second run makes dropped values again
        e.run(0)
        np.testing.assert_allclose(e.read_tensor("y"), 2 * np.maximum(xv @ wv, 0), rtol=1e-5)
    by_name = {v.name: v for v in g.variables}
    for name in ("matmul out", "relu"):  # not always-live: gone after the last step that reads them
        v = by_name[name]
        assert e._state[v.id].size == 0 and v.id in e._dropped
    for name in ("x", "w", "add"):  # read or written by the host: always-live, kept
        v = by_name[name]
        assert e._state[v.id].size == v.numel
