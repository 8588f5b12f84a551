"""Poplar tutorial 1 (variables and programs) on the simulated IPU.

Run with a report:
    POPLAR_ENGINE_OPTIONS='{"autoReport.all":"true","autoReport.directory":"./r"}' python examples/tutorial1_variables.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from profiler import Copy, Engine, Execute, Graph, PrintTensor, Sequence, ipu_model  # noqa: E402


def run(target=None, options=None, verbose: bool = True) -> dict[str, np.ndarray]:
    graph = Graph(target or ipu_model(tiles_per_ipu=4))
    # variables spread over tiles, as in the tutorial
    v1 = graph.add_variable("float", [4], "v1")
    v2 = graph.add_variable("float", [4], "v2")
    v3 = graph.add_variable("float", [4, 4], "v3")
    v4 = graph.add_variable("int", [10], "v4")
    for i in range(4):
        graph.set_tile_mapping(v1[i], i)
        graph.set_tile_mapping(v2[i], i)
    graph.set_tile_mapping(v3, 0)
    graph.set_tile_mapping(v4, 0)
    c1 = graph.add_constant("float", [4], [1.0, 1.5, 2.0, 2.5], "c1")
    c2 = graph.add_constant("float", [4], [4.0, 3.0, 2.0, 1.0], "c2")
    graph.set_tile_mapping(c1, 0)
    graph.set_tile_mapping(c2, 0)

    # v2 = v1 + c2, one vertex per tile: the vertex on tile i reads c2[i] from tile 0 (an exchange)
    add = graph.add_compute_set("add")
    graph.add_vertices(
        add,
        "popops::Add",
        {"in1": v1.reshape(4, 1), "in2": c2.reshape(4, 1), "out": v2.reshape(4, 1)},
        tiles=[0, 1, 2, 3],
    )

    in_stream = graph.add_host_to_device_fifo("v4-input-stream", "int", [10])
    out_stream = graph.add_device_to_host_fifo("v4-output-stream", "int", [10])

    prog = Sequence(
        Copy(c1, v1),
        PrintTensor("v1-debug", v1),
        Execute(add),
        PrintTensor("v2-debug", v2),
        Copy(v2, v3[0]),  # slices of v3 filled from v1, v2 and the transpose of a 2x2 view
        Copy(v1, v3[1]),
        Copy(v3[0:2, 0:2].transpose().reshape(4), v3[2]),
        PrintTensor("v3-debug", v3),
        Copy(in_stream, v4),
        Copy(v4, out_stream),
    )
    graph.create_host_read("v3", v3)
    engine = Engine(graph, [prog], options=options)
    engine.compile()
    engine.load()
    host_in = np.arange(10, dtype=np.int32)
    host_out = np.zeros(10, dtype=np.int32)
    engine.connect_stream("v4-input-stream", host_in)
    engine.connect_stream("v4-output-stream", host_out)
    engine.run(0)
    results = {"v4": host_out.copy(), "v3": engine.read_tensor("v3")}
    if verbose:
        print("v4 out:", results["v4"])
    engine.close()
    return results


if __name__ == "__main__":
    run()
