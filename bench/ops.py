"""Benchmark the operations library: simulated cycles, achieved fraction of peak FLOPs, host wall time.

    /work/venv/bin/python bench/ops.py            # all cases
    /work/venv/bin/python bench/ops.py --case conv --matmul-size 1024

Cases: a 2048^3 fp16 matmul on GC200, a 3x3 convolution 64 -> 64 channels on 56x56 with batch 8
(fp16, GC200) and one training step of the MLP workload (its default small IPU-Model target). The
fraction of peak is the op's model FLOPs (2*M*K*N for a matmul) over simulated cycles x tiles x
the target's peak FLOPs per tile per cycle for the partials type the planner used.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from profiler import Engine, Graph, Sequence, cost_model, get_target, ops  # noqa: E402
from profiler.workloads import mlp  # noqa: E402


def _engine_cycles(e: Engine, program: int = 0) -> int:
    e.run(program)
    return int(e.last_run_cycles)


def _plan(g: Graph) -> dict:
    return next(json.loads(c.attributes) for c in g.debug_contexts if c.op_type == "MatMul")


def _report(name: str, cycles: int, flops: float, g: Graph, partials: str, dtype: str, times: dict) -> None:
    t = g.target
    peak = cost_model.peak_flops_per_cycle(dtype, partials, t) * t.num_tiles
    frac = flops / (cycles * peak)
    walls = ", ".join(f"{k} {v:.2f} s" for k, v in times.items())
    print(f"{name}: {cycles:,} cycles ({cycles / t.clock_hz * 1e6:.1f} us at {t.clock_hz / 1e9:.2f} GHz), "
          f"{frac:.1%} of {t.name} peak ({dtype} in, {partials} partials); host: {walls}")  # fmt: skip


def _timed(fn, times: dict, key: str):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    out = fn()
    times[key] = time.perf_counter() - start
    return out


def bench_matmul(size: int, partials: str) -> None:
    times: dict[str, float] = {}

    def build() -> tuple[Graph, Sequence]:
        g = Graph(get_target("GC200"))
        a = ops.add_mapped(g, "float16", (size, size), "a", grain=64)
        b = ops.add_mapped(g, "float16", (size, size), "b", grain=64)
        prog = Sequence()
        ops.matmul(g, a, b, prog, partials_dtype=partials)
        return g, prog

    g, prog = _timed(build, times, "build")
    e = Engine(g, prog)
    _timed(e.compile, times, "compile")
    e.load()
    cycles = _timed(lambda: _engine_cycles(e), times, "run")
    p = _plan(g)
    _report(f"matmul {size}x{size}x{size} fp16 GC200 [{p['method']} splits rows {p['row_split']} in "
            f"{p['in_chan_split']} out {p['out_chan_split']}]", cycles, 2.0 * size**3, g, partials, "float16", times)  # fmt: skip


def bench_conv(batch: int, size: int, channels: int, partials: str) -> None:
    times: dict[str, float] = {}

    def build() -> tuple[Graph, Sequence]:
        g = Graph(get_target("GC200"))
        x = ops.add_mapped(g, "float16", (batch, channels, size, size), "x", grain=64)
        w = ops.add_mapped(g, "float16", (channels, channels, 3, 3), "w")
        prog = Sequence()
        ops.conv2d(g, x, w, prog, padding=1, partials_dtype=partials)
        return g, prog

    g, prog = _timed(build, times, "build")
    e = Engine(g, prog)
    _timed(e.compile, times, "compile")
    e.load()
    cycles = _timed(lambda: _engine_cycles(e), times, "run")
    flops = 2.0 * batch * size * size * channels * channels * 9
    _report(f"conv 3x3 {channels}->{channels} {size}x{size} batch {batch} fp16 GC200", cycles, flops, g, partials,
            "float16", times)  # fmt: skip


def bench_mlp() -> None:
    times: dict[str, float] = {}
    w = _timed(mlp.build, times, "build")
    e = _timed(lambda: w.engine(), times, "compile")
    e.run(0)
    cycles = _timed(lambda: _engine_cycles(e, 1), times, "run")
    _report("MLP training step (784-64-10, batch 32, fp32, 16-tile IPU-Model)", cycles, w.info["flops_per_step"],
            w.graph, "float32", "float32", times)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=["matmul", "conv", "mlp", "all"], default="all")
    parser.add_argument("--matmul-size", type=int, default=2048)
    parser.add_argument("--partials", default="float16", help="partials type for matmul and conv (float16/float32)")
    args = parser.parse_args()
    if args.case in ("mlp", "all"):
        bench_mlp()
    if args.case in ("conv", "all"):
        bench_conv(8, 56, 64, args.partials)
    if args.case in ("matmul", "all"):
        bench_matmul(args.matmul_size, args.partials)


if __name__ == "__main__":
    main()
