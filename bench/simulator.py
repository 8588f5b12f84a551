"""Simulator benchmark: a GC200 graph with ~200 compute sets and ~500,000 vertices on all 1472 tiles.

Prints graph-build, compile, run and report-write times and peak RSS. Targets on a 2-core machine:
compile < 10 s, one run < 5 s, peak RSS < 2 GiB.

    /work/venv/bin/python bench/simulator.py [--compute-sets 200] [--vertices 500000] [--report DIR]
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from profiler import Engine, Execute, Graph, Sequence, get_target  # noqa: E402

OPS = ["popops::Add", "popops::Sigmoid", "popops::Mul", "popops::Relu", "popops::Sub"]


def build(compute_sets: int, vertices: int, elems: int = 8) -> tuple[Graph, Sequence]:
    g = Graph(get_target("GC200"))
    tiles = g.target.num_tiles
    per_cs = vertices // compute_sets
    n = per_cs * elems
    vertex_tile = (np.arange(per_cs) * tiles) // per_cs  # vertices spread evenly over every tile
    prev = g.add_variable("float", [n], "input")
    g.set_tile_mapping(prev, np.repeat(vertex_tile, elems))
    g.create_host_write("input", prev)
    rolled = np.roll(np.arange(per_cs), -1)  # every 4th op also reads the next vertex's row: exchange
    prog = Sequence()
    for i in range(compute_sets):
        out = g.add_variable("float", [n], f"t{i}")
        g.set_tile_mapping(out, np.repeat(vertex_tile, elems))
        cs = g.add_compute_set(f"layer{i}")
        op = OPS[i % len(OPS)]
        rows = prev.reshape(per_cs, elems)
        if op in ("popops::Sigmoid", "popops::Relu"):
            fields = {"in": rows, "out": out.reshape(per_cs, elems)}
        else:
            in2 = rows[rolled] if i % 4 == 0 else rows
            fields = {"in1": rows, "in2": in2, "out": out.reshape(per_cs, elems)}
        g.add_vertices(cs, op, fields, tiles=vertex_tile)
        prog.add(Execute(cs))
        prev = out
    g.create_host_read("output", prev)
    return g, prog


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compute-sets", type=int, default=200)
    ap.add_argument("--vertices", type=int, default=500_000)
    ap.add_argument("--report", default="")
    args = ap.parse_args()
    t0 = time.perf_counter()
    g, prog = build(args.compute_sets, args.vertices)
    t1 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        out = args.report or str(Path(tmp) / "report")
        e = Engine(g, [prog], options={"autoReport.all": "true", "autoReport.directory": out})
        e.compile()
        t2 = time.perf_counter()
        e.load()
        e.write_tensor("input", np.linspace(-1, 1, g.variables[0].numel, dtype=np.float32))
        t3 = time.perf_counter()
        e.run(0)
        t4 = time.perf_counter()
        e.write_report()
        t5 = time.perf_counter()
        size = sum(f.stat().st_size for f in Path(out).iterdir())
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB -> MiB on Linux
    nv = sum(cs.num_vertices for cs in g.compute_sets)
    print(f"graph: {len(g.compute_sets)} compute sets, {nv:,} vertices, {len(g.variables)} variables, "
          f"{g.target.num_tiles} tiles ({g.target.name})")  # fmt: skip
    print(f"build graph   {t1 - t0:7.2f} s")
    print(f"compile       {t2 - t1:7.2f} s   (target < 10 s)")
    print(f"load          {t3 - t2:7.2f} s")
    print(f"run           {t4 - t3:7.2f} s   (target < 5 s; {e.runs[0].cycles:,} simulated cycles)")
    print(f"write report  {t5 - t4:7.2f} s   ({size / 2**20:.1f} MiB)")
    print(f"peak RSS      {rss:7.0f} MiB (target < 2048 MiB)")


if __name__ == "__main__":
    main()
