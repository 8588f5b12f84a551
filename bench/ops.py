"""Benchmark the operations library: simulated cycles, achieved fraction of peak FLOPs, host wall time.

    python bench/ops.py            # all cases
    python bench/ops.py --case matmul --matmul-size 2048 1024 512

Cases: a 2048^3 fp16 matmul on GC200, a 3x3 convolution 64 -> 64 channels on 56x56 with batch 8
(fp16, GC200) and one training step of the MLP workload (on its default 16-tile IPU-Model and on a
whole GC200). The fraction of peak is the op's model FLOPs (2*M*K*N for a matmul) over simulated cycles x tiles x
the target's peak FLOPs per tile per cycle for the partials type the planner used.

A matmul size whose simulation would not fit in host memory (~45 bytes per element reference its
vertex fields hold explicitly, HOST_BYTES_PER_FIELD_ELEMENT) is not run at the default availableMemoryProportion: its
planner estimate is printed and a lower proportion is run instead. By default 2048^3 (the target
case) and 1024^3 are tried.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from profiler import Engine, Graph, Sequence, get_target, ops  # noqa: E402
from profiler.chip import cost_model
from profiler.ops.matmul import DEFAULT_AVAILABLE_MEMORY_PROPORTION  # noqa: E402
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


# Host memory the simulator needs per vertex-field element reference (int32 element indices):
# measured peak RSS 2.33 GB for the 1024^3 case (54.5M references) and 7.57 GB for 2048^3 at 0.6
# (209.7M); 175 B before element indices became int32 and kernels ran the matmul. Used to skip a
# case that would exhaust the machine (and get other processes OOM-killed) instead of starting it.
HOST_BYTES_PER_FIELD_ELEMENT = 45


def _available_bytes() -> int:
    try:
        with open("/proc/meminfo") as f:
            info = dict(line.split(":", 1) for line in f)
        return int(info["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return 1 << 62


def matmul_field_elements(plan: ops.MatMulPlan, m: int, k: int, n: int) -> int:
    """Element references the plan's vertex fields make (what the compile's host memory scales with):
    one serial step's operand blocks once per tile reading them, its result, the partials written
    and read by the reduction; a serial loop adds its one-off rearrangement and its slices/updates
    (each compiled once, however many iterations run)."""
    n_step = n // plan.out_chan_serial
    # operand blocks of views hold no index per element (profiler.poplar.layout.Blocks): only the result's
    refs = m * n_step
    refs += 2 * m * n_step * plan.in_chan_split if plan.in_chan_split > 1 else 0
    if plan.in_chan_serial * plan.out_chan_serial > 1:
        refs += 3 * k * n + 2 * m * n  # rhs rearranged (in + out), its slices, result updates
        if plan.in_chan_serial > 1:
            refs += 3 * m * k + m * n  # lhs rearranged and sliced, result slice to accumulate
    return refs


SERIAL_FALLBACK_PROPORTIONS = (0.3, 0.2, 0.1, 0.05)


def bench_matmul(size: int, partials: str) -> None:
    """The matmul at the default availableMemoryProportion, or - when its simulation would not fit in
    host memory - at the largest lower proportion whose (serial) plan does, labelled as such."""
    target = get_target("GC200")
    plan = ops.plan_matmul(target, 1, size, size, size, "float16", partials)
    budget = 0.8 * _available_bytes()
    amp = DEFAULT_AVAILABLE_MEMORY_PROPORTION
    need = matmul_field_elements(plan, size, size, size) * HOST_BYTES_PER_FIELD_ELEMENT
    if need > budget:
        ideal = 2 * size**3 / (cost_model.peak_flops_per_cycle("float16", partials, target) * target.num_tiles)
        print(f"matmul {size}^3 fp16 GC200, availableMemoryProportion 0.6: not run, the simulator would need "
              f"~{need / 1e9:.0f} GB of host memory ({_available_bytes() / 1e9:.0f} GB available). Planner: "
              f"{plan.method}, splits rows {plan.row_split} in {plan.in_chan_split} out {plan.out_chan_split}, "
              f"estimated {plan.cycles:,} cycles = {ideal / plan.cycles:.1%} of peak")  # fmt: skip
        for amp in SERIAL_FALLBACK_PROPORTIONS:
            plan = ops.plan_matmul(target, 1, size, size, size, "float16", partials, amp)
            if matmul_field_elements(plan, size, size, size) * HOST_BYTES_PER_FIELD_ELEMENT <= budget:
                break
        else:
            print(f"  no availableMemoryProportion in {SERIAL_FALLBACK_PROPORTIONS} fits either; not simulated")
            return
    times: dict[str, float] = {}

    def build() -> tuple[Graph, Sequence]:
        g = Graph(target)
        a = ops.add_mapped(g, "float16", (size, size), "a", grain=64)
        b = ops.add_mapped(g, "float16", (size, size), "b", grain=64)
        prog = Sequence()
        ops.matmul(g, a, b, prog, partials_dtype=partials, available_memory_proportion=amp)
        return g, prog

    g, prog = _timed(build, times, "build")
    e = Engine(g, prog)
    _timed(e.compile, times, "compile")
    e.load()
    cycles = _timed(lambda: _engine_cycles(e), times, "run")
    p = _plan(g)
    serial = (
        f" serial in {p['in_chan_serial']} out {p['out_chan_serial']}"
        if amp != DEFAULT_AVAILABLE_MEMORY_PROPORTION
        else ""
    )
    _report(f"matmul {size}x{size}x{size} fp16 GC200 availableMemoryProportion {amp} [{p['method']} splits rows "
            f"{p['row_split']} in {p['in_chan_split']} out {p['out_chan_split']}{serial}; planner estimate "
            f"{p['cycles']:,}]", cycles,
            2.0 * size**3, g, partials, "float16", times)  # fmt: skip


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


def bench_mlp(tiles: int) -> None:
    times: dict[str, float] = {}
    w = _timed(lambda: mlp.build(tiles=tiles), times, "build")
    e = _timed(w.engine, times, "compile")
    e.run(0)
    cycles = _timed(lambda: _engine_cycles(e, 1), times, "run")
    where = f"{tiles}-tile IPU-Model" if tiles else "GC200"
    _report(f"MLP training step (784-64-10, batch 32, fp32, {where})", cycles, w.info["flops_per_step"], w.graph,
            "float32", "float32", times)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=["matmul", "conv", "mlp", "all"], default="all")
    parser.add_argument("--matmul-size", type=int, nargs="+", default=[2048, 1024])
    parser.add_argument("--partials", default="float16", help="partials type for matmul and conv (float16/float32)")
    args = parser.parse_args()
    if args.case in ("mlp", "all"):
        bench_mlp(16)
        bench_mlp(0)
    if args.case in ("conv", "all"):
        bench_conv(8, 56, 64, args.partials)
    if args.case in ("matmul", "all"):
        for size in args.matmul_size:
            bench_matmul(size, args.partials)


if __name__ == "__main__":
    main()
