"""Multi-IPU: host time and simulated throughput of a transformer-style model sharded, pipelined
and replicated.

Builds a BERT-style encoder (profiler.frontends.onnx.examples.bert_layer, --layers layers) and, on
--target, imports, compiles and runs it as: 1 IPU; 2 and 4 IPUs sharded (split by memory balance);
2 and 4 IPUs pipelined over --micro-batches micro-batches; 2 replicas of 1 IPU. For each it prints
the host time of import + compile and of one run (wall and process CPU, best of --runs), the simulated cycles per
run and samples/s (samples per run = batch x replicas x micro-batches, at the target clock), and
whether the outputs equal the 1-IPU run's (max abs difference).

Training rows (pipelined training has no ONNX path yet): a stack of --layers dense layers of
hidden x hidden (the encoder's feed-forward shape; profiler.workloads.pipelined_mlp), each
micro-batch seq x batch tokens, one SGD step per run over --micro-batches micro-batches: on 1 IPU
unpipelined (the whole batch at once), and pipelined over 2 and 4 IPUs (PopART's 1F1B schedule,
one layer group per IPU); "diff" is the weights' max abs difference from the 1-IPU step.

    python bench/multi_ipu.py                                  # GC200, 4 layers, seq 128, hidden 256
    python bench/multi_ipu.py --layers 2 --seq 64 --target IPUModel
    python bench/multi_ipu.py --json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from profiler.chip.targets import get_target  # noqa: E402
from profiler.frontends.onnx import Session, examples, import_model, random_inputs  # noqa: E402
from profiler.workloads import pipelined_mlp  # noqa: E402

#: (label, IPUs per replica, replicas, pipelined)
CONFIGS = (
    ("1 IPU", 1, 1, False),
    ("2 IPUs sharded", 2, 1, False),
    ("4 IPUs sharded", 4, 1, False),
    ("2 IPUs pipelined", 2, 1, True),
    ("4 IPUs pipelined", 4, 1, True),
    ("2 replicas x 1 IPU", 1, 2, False),
)


def _clocks() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _row(clocks: tuple[float, float, float, float], best: tuple[float, float], cycles: int, samples: int,
         clock_hz: float, compute_cycles: Any) -> dict:  # type: ignore[type-arg]  # fmt: skip
    """A row's timings and throughput: compile = clocks[0..1] to [2..3], run = the best of the runs."""
    w0, c0, w1, c1 = clocks
    return {
        "compile_wall_s": w1 - w0,
        "compile_cpu_s": c1 - c0,
        "run_wall_s": best[0],
        "run_cpu_s": best[1],
        "cycles_per_run": cycles,
        "samples_per_run": samples,
        "samples_per_second": samples * clock_hz / cycles if cycles else 0.0,
        "ipu_utilisation": [round(float(c) / cycles, 3) for c in compute_cycles],
    }


def measure(model, target_name: str, ipus: int, replicas: int, micro_batches: int, seed: int, runs: int) -> dict:  # type: ignore[no-untyped-def]
    w0, c0 = _clocks()
    target = replace(get_target(target_name, ipus * replicas), num_replicas=replicas)
    imported = import_model(model, target)
    session = Session(imported, micro_batches=micro_batches)
    session.compile()
    w1, c1 = _clocks()
    inputs = random_inputs(imported, seed, rows=replicas * micro_batches)
    session.upload_weights()
    best = (float("inf"), float("inf"))
    for _ in range(runs):  # best of --runs: the machine is shared, one run's wall time is noisy
        w2, c2 = _clocks()
        out = session.run(inputs)
        w3, c3 = _clocks()
        best = min(best, (w3 - w2, c3 - c2))
    samples = imported.batch_size * replicas * micro_batches
    return _row((w0, c0, w1, c1), best, session.cycles[-1], samples, target.clock_hz, session.engine.compute_cycles) | {
        "outputs": out,
        "inputs": inputs,
    }


#: (label, IPUs, pipelined) of the training rows
TRAINING = (
    ("1 IPU training", 1, False),
    ("2 IPUs pipelined training", 2, True),
    ("4 IPUs pipelined training", 4, True),
)


def measure_training(args: argparse.Namespace, ipus: int, pipelined: bool) -> dict:  # type: ignore[type-arg]
    """One SGD step of the dense stack (see the module docstring), timed like ``measure``."""
    w0, c0 = _clocks()
    tokens = args.seq * args.batch  # rows per micro-batch
    if args.layers % ipus:
        raise SystemExit(f"--layers {args.layers} does not split over {ipus} IPUs")
    w = pipelined_mlp.build(stages=ipus, micro_batches=args.micro_batches, batch=tokens, inputs=args.hidden,
                            width=args.hidden, classes=args.hidden, pipelined=pipelined,
                            target=get_target(args.target, ipus), layers_per_stage=args.layers // ipus)  # fmt: skip
    e = w.engine()
    e.run(0, name="init")
    w1, c1 = _clocks()
    best = (float("inf"), float("inf"))
    weights = []
    for i in range(args.runs):  # each run is one more SGD step; the weights compared are after the first
        w2, c2 = _clocks()
        e.run(1, name=f"step {i}")
        w3, c3 = _clocks()
        best = min(best, (w3 - w2, c3 - c2))
        if i == 0:
            weights = [e.read_tensor(f"w{s}") for s in range(args.layers)]
    samples = args.batch * args.micro_batches
    return _row((w0, c0, w1, c1), best, e.last_run_cycles, samples, e.graph.target.clock_hz, e.compute_cycles) | {
        "weights": weights,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--target", default="GC200")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--micro-batches", type=int, default=8)
    p.add_argument("--runs", type=int, default=3, help="runs per configuration; the best host time is kept")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    model = examples.bert_layer(seq=args.seq, hidden=args.hidden, heads=args.heads, ff=4 * args.hidden,
                                batch=args.batch, layers=args.layers)  # fmt: skip
    single = Session(import_model(model, get_target(args.target, 1)))
    rows = []
    for label, ipus, replicas, piped in CONFIGS:
        m = measure(model, args.target, ipus, replicas, args.micro_batches if piped else 1, seed=0, runs=args.runs)
        # the same inputs through the 1-IPU model, one model batch at a time
        x = next(iter(m["inputs"].values()))
        name = next(iter(m["inputs"]))
        want = np.concatenate([single.run({name: part})["output"] for part in np.split(x, len(x) // args.batch)])
        m["max_abs_diff_vs_1_ipu"] = float(np.abs(m.pop("outputs")["output"] - want).max())
        m.pop("inputs")
        rows.append({"config": label, **m})
    reference: list[np.ndarray] = []
    for label, ipus, piped in TRAINING:
        m = measure_training(args, ipus, piped)
        weights = m.pop("weights")
        reference = reference or weights
        m["max_abs_diff_vs_1_ipu"] = max(float(np.abs(a - b).max()) for a, b in zip(weights, reference, strict=True))
        rows.append({"config": label, **m})
    if args.json:
        print(json.dumps({"args": vars(args), "results": rows}, indent=2))
        return
    print(f"{args.layers}-layer encoder, seq {args.seq}, hidden {args.hidden}, batch {args.batch}, on {args.target}; "
          f"pipelines over {args.micro_batches} micro-batches")  # fmt: skip
    print(f"{'config':26} {'compile s (cpu)':>16} {'run s (cpu)':>13} {'cycles/run':>12} {'samples/s':>11}  "
          f"{'IPU utilisation':24} diff")  # fmt: skip
    for r in rows:
        print(f"{r['config']:26} {r['compile_wall_s']:7.2f} ({r['compile_cpu_s']:5.2f}) "
              f"{r['run_wall_s']:5.2f} ({r['run_cpu_s']:5.2f}) {r['cycles_per_run']:12,} "
              f"{r['samples_per_second']:11,.0f}  {str(r['ipu_utilisation']):24} {r['max_abs_diff_vs_1_ipu']:.1e}")  # fmt: skip


if __name__ == "__main__":
    main()
