"""Scale: host cost of real models at real batch sizes (import, compile, run, peak memory).

For each model and batch, one child process (so each peak RSS is its own) imports the model,
compiles it, uploads the weights, runs inference (best of --runs, every run captured), writes
the report, and then runs the same inputs on onnxruntime; both at their default thread counts
(what a user gets). Each run is timed in wall seconds and in process-CPU seconds
(``time.process_time``, every thread's): on a shared, loaded machine the CPU figure is the honest
one (wall then measures the neighbours), so both ratios are printed. Peak RSS is read twice in
the child: after import + compile (tilescope's figure) and at the end. A case that stops (host
memory, out of tile memory) prints why.

    python bench/scale.py                                    # ResNet-50 at batch 1, 8, 32; BERT-base at 8
    python bench/scale.py --models resnet50 --batches 1 2
    python bench/scale.py --models bert --batches 8 --seq 128 --layers 2
    python bench/scale.py --compile-only                     # the same, profiled without values

--compile-only (tilescope.compileOnly) profiles without values: the weights are not read, no input
is made, each run is estimated from the cost model, and onnxruntime is not run.

    python bench/scale.py --models bert-large --batches 1 --target GC200 --runs 1   # 4 IPUs, pipelined (float16: float32 is out of tile memory)
    python bench/scale.py --models gpt2-xl --batches 1 --layers 8 --seq 128 --target GC200 --dtype float16
    python bench/scale.py --models llama2-7b --batches 1 --layers 2 --ipus 2 --seq 128 --target GC200
    python bench/scale.py --models llama2-7b --batches 1 --seq 2048 --target POD16 --compile-only --timeout 3600  # issue 38: <= 180 s, <= 8 GiB

The LLM-size models (profiler.frontends.onnx.decoders, examples.bert) are pipelined over --ipus IPUs
(default: BERT-large and GPT-2 XL 4, Llama-2-7B 16, a POD16), 2 x --ipus micro-batches, with their
layers placed as ``decoders.stage_of_layer`` says (BERT-large: the memory-balanced split); --seq is
the prefill's tokens, --layers fewer layers than published (their weights are made in host memory).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from report_format.vocabulary import MemoryCategory

if TYPE_CHECKING:
    import onnx

ROOT = Path(__file__).resolve().parents[1]
#: the pipelined models and their default IPUs (a POD16 for Llama-2-7B: profiler.chip.targets.SYSTEMS)
PIPELINED = {"bert-large": 4, "gpt2-xl": 4, "llama2-7b": 16}
MODELS = ["resnet50", "bert", *PIPELINED]
PUBLISHED_LAYERS = {"resnet50": 0, "bert": 12, "bert-large": 24, "gpt2-xl": 48, "llama2-7b": 32}


def _rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # kB on Linux


def child(
    model: str, batch: int, target_name: str, dtype: str, runs: int, image: int, seq: int, layers: int,
    partials: str = "float32", amp: float | None = None, outline: bool = False, ipus: int | None = None,
    compile_only: bool = False,
) -> dict:  # fmt: skip
    sys.path.insert(0, str(ROOT))
    import numpy as np

    from profiler.chip.targets import get_target
    from profiler.frontends.onnx import Session, import_model, load_model, random_inputs
    from profiler.frontends.onnx.model import override_batch
    from profiler.ops.matmul import DEFAULT_AVAILABLE_MEMORY_PROPORTION

    n_ipus = (ipus or PIPELINED[model]) if model in PIPELINED else 1
    out: dict = {"model": model, "batch": batch, "target": target_name, "dtype": dtype, "partials": partials,
                 "outline": outline, "ipus": n_ipus, "seq": seq, "compile_only": compile_only}  # fmt: skip
    values = not compile_only
    t0 = time.perf_counter()
    onnx_model = _onnx_model(model, image, seq, layers, n_ipus, external=compile_only)
    out["onnx_build_s"] = time.perf_counter() - t0
    out["onnx_mib"] = onnx_model.ByteSize() / 2**20
    micro_batches = 2 * n_ipus if n_ipus > 1 else 1  # tilescope run --pipeline's default
    target = get_target(target_name, n_ipus)
    amp = DEFAULT_AVAILABLE_MEMORY_PROPORTION if amp is None else amp
    out["available_memory_proportion"] = amp
    t0 = time.perf_counter()
    imported = import_model(load_model(onnx_model, values=values), target, batch_size=batch, dtype=dtype,
                            partials=partials, available_memory_proportion=amp, outline=outline,
                            values=values)  # fmt: skip
    out["import_s"] = time.perf_counter() - t0
    report = Path(tempfile.mkdtemp(prefix="tilescope-scale-"))
    try:
        options = {"autoReport.all": "true", "autoReport.directory": str(report / "r"),
                   "autoReport.executionProfileProgramRunCount": str(runs + 1),
                   "tilescope.compileOnly": str(compile_only).lower()}  # fmt: skip
        session = Session(imported, options, name="scale", micro_batches=micro_batches)
        t0 = time.perf_counter()
        session.compile()
        out["compile_s"] = time.perf_counter() - t0
        out["rss_import_compile_gib"] = _rss_gib()
        by_cat = session.engine.memory.by_category
        tile_bytes = np.bincount(by_cat["tile"], weights=by_cat["bytes"], minlength=target.num_tiles)
        out["max_tile_kib"] = float(tile_bytes.max()) / 1024
        out["exchange_code_mib"] = (
            float(by_cat["bytes"][by_cat["category"] == MemoryCategory.INTERNAL_EXCHANGE_CODE].sum()) / 2**20
        )
        if session.engine.out_of_memory:  # its memory-only report was written at compile, as tilescope run's
            out["stopped"] = "out of tile memory"
            out["oom_tiles"] = int(session.engine.memory.out_of_memory_tiles().size)
            session.close()
            out["report_mib"] = sum(f.stat().st_size for f in (report / "r").rglob("*") if f.is_file()) / 2**20
            out["total_cpu_s"] = time.process_time()
            out["rss_peak_gib"] = _rss_gib()
            return out
        session.upload_weights()
        if model in PIPELINED:  # token ids (and masks): random_inputs, every micro-batch's rows
            feeds = random_inputs(imported, rows=micro_batches)
        else:
            shape = [batch, *imported.inputs[0].shape[1:]]
            feeds = {imported.inputs[0].name: np.random.default_rng(0).standard_normal(shape).astype(np.float32)}
        times, cpu = [], []
        for _ in range(runs):
            t0, c0 = time.perf_counter(), time.process_time()
            got = session.run(feeds)
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        out["run_s"] = min(times)
        out["run_cpu_s"] = min(cpu)
        out["cycles"] = session.cycles[-1]
        out["samples_per_s"] = batch * micro_batches * target.clock_hz / session.cycles[-1]
        t0 = time.perf_counter()
        path = session.engine.write_report()
        out["report_write_s"] = time.perf_counter() - t0
        out["report_mib"] = sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file()) / 2**20
        session.close()
        del session
        if compile_only:  # no outputs to compare, and nothing a runtime would be timed against
            out["rss_peak_gib"] = _rss_gib()
            out["total_cpu_s"] = time.process_time()
            return out
        import onnxruntime as ort

        fixed = override_batch(load_model(onnx_model), batch * micro_batches).SerializeToString()
        sess = ort.InferenceSession(fixed, providers=["CPUExecutionProvider"])  # default threads
        ort_feeds = {k: v if model in PIPELINED else v.astype(np.float32) for k, v in feeds.items()}
        want = sess.run(None, ort_feeds)[0]  # its first run sets up its arena: not timed
        best = best_cpu = float("inf")
        for _ in range(runs):
            t0, c0 = time.perf_counter(), time.process_time()
            want = sess.run(None, ort_feeds)[0]
            best = min(best, time.perf_counter() - t0)
            best_cpu = min(best_cpu, time.process_time() - c0)
        out["onnxruntime_run_s"] = best
        out["onnxruntime_run_cpu_s"] = best_cpu
        g = got[sess.get_outputs()[0].name].astype(np.float32)
        out["max_rel_error"] = float(np.abs(g - want).max() / max(float(np.abs(want).max()), 1e-30))
    finally:
        shutil.rmtree(report, ignore_errors=True)
    out["rss_peak_gib"] = _rss_gib()
    return out


def _onnx_model(model: str, image: int, seq: int, layers: int, ipus: int, external: bool = False) -> onnx.ModelProto:
    """The ONNX model of a case (seeded random weights; ``external``: a decoder's weights as references
    into an absent data file, as ``tilescope model`` writes them, which compile-only reads as shapes)."""
    from dataclasses import replace

    from profiler.frontends.onnx import decoders, examples

    if model == "resnet50":
        return examples.resnet(image=image)
    if model == "bert":
        return examples.bert_layer(seq=seq, layers=layers)
    if model == "bert-large":  # Devlin et al. 2019: L=24, H=1024, A=16; SQuAD heads, as tilescope model makes it
        return examples.bert(layers=layers, hidden=1024, heads=16, ff=4096, seq=seq, batch=1)
    config = replace(decoders.CONFIGS[model], layers=layers)
    if external:
        return decoders.decoder(config, "prefill", seq=seq, ipus=ipus, weights="external", data_file="absent.data")
    return decoders.decoder(config, "prefill", seq=seq, ipus=ipus)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="+", default=["resnet50", "bert"], choices=MODELS)
    p.add_argument("--batches", nargs="+", type=int, help="default: 1 8 32 for ResNet-50, 8 for BERT")
    p.add_argument("--target", default="C600")
    p.add_argument("--dtype", default="float16", choices=["float16", "float32"])
    p.add_argument(
        "--partials", default="float32", choices=["float32", "float16"],
        help="matmul/conv partials type (default float32, PopLibs'; float16 is the C600 benchmarks' setting)",
    )  # fmt: skip
    p.add_argument(
        "--available-memory-proportion", type=float, default=None, metavar="P",
        help="matmul/conv plans' share of tile memory for temporaries (default 0.6, PopLibs'; ByteMLPerf's BERT "
        "on C600 uses 0.4)",
    )  # fmt: skip
    p.add_argument("--outline", action="store_true", help="import with outlining (identical layers built once)")
    p.add_argument("--compile-only", action="store_true", help="profile without values (tilescope.compileOnly)")
    p.add_argument("--runs", type=int, default=2, help="timed runs of each; the best is shown (default 2)")
    p.add_argument("--image", type=int, default=224)
    p.add_argument("--seq", type=int, default=384)
    p.add_argument(
        "--layers", type=int, default=None,
        help="layers (default: the published model's: BERT-base 12, BERT-large 24, GPT-2 XL 48, Llama-2-7B 32)",
    )  # fmt: skip
    p.add_argument("--ipus", type=int, default=None, help="pipeline stages of the LLM-size models (default 4; 16)")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per case (default 1800)")
    p.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    p.add_argument("--child", nargs=2, metavar=("MODEL", "BATCH"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        row = child(args.child[0], int(args.child[1]), args.target, args.dtype, args.runs, args.image, args.seq,
                    args.layers, args.partials, args.available_memory_proportion, args.outline, args.ipus,
                    args.compile_only)  # fmt: skip
        print("ROW " + json.dumps(row))
        return 0
    os.environ.pop("POPLAR_ENGINE_OPTIONS", None)  # the bench sets its own options
    rows = []
    header = (f"{'case':28} {'import s':>8} {'compile s':>9} {'RSS i+c':>8} {'run s':>8} {'ort s':>7} {'ratio':>6} "
              f"{'run cpu':>8} {'ort cpu':>8} {'ratio':>6} "
              f"{'RSS peak':>8} {'report':>8} {'samples/s':>10} {'fullest':>8} {'exch code':>9} {'onnx s':>6} {'onnx':>7}")  # fmt: skip
    sys.path.insert(0, str(ROOT))
    from profiler.host.parallel import threads

    print(f"threads: tilescope {threads()} run threads (numpy's BLAS held to one in a run), onnxruntime its default")
    print(header)
    for model in args.models:
        for batch in args.batches or ([1, 8, 32] if model == "resnet50" else [8]):
            layers = args.layers or PUBLISHED_LAYERS[model]
            name = f"{model} b{batch} {args.dtype} {args.target}" + (" half-p" if args.partials == "float16" else "")
            if model in PIPELINED:
                name += f" L{layers} x{args.ipus or PIPELINED[model]}"
            amp = args.available_memory_proportion
            name += f" amp {amp:g}" if amp is not None else ""
            name += " outlined" if args.outline else ""
            name += " compile-only" if args.compile_only else ""
            cmd = [sys.executable, __file__, "--child", model, str(batch), "--target", args.target, "--dtype",
                   args.dtype, "--runs", str(args.runs), "--image", str(args.image), "--seq", str(args.seq),
                   "--layers", str(layers), "--partials", args.partials, *(["--ipus", str(args.ipus)] if args.ipus else []),
                   *(["--available-memory-proportion", str(amp)] if amp is not None else []),
                   *(["--outline"] if args.outline else []),
                   *(["--compile-only"] if args.compile_only else [])]  # fmt: skip
            try:
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
            except subprocess.TimeoutExpired:
                print(f"{name:28} stopped: over {args.timeout:.0f} s")
                continue
            line = next((x for x in done.stdout.splitlines() if x.startswith("ROW ")), None)
            if line is None:
                why = (done.stderr.strip().splitlines() or ["no output"])[-1]
                print(f"{name:28} stopped: {why[:100]}")
                continue
            r = json.loads(line[4:])
            rows.append(r)
            if "run_s" not in r:
                oom = f" ({r['oom_tiles']:,} tiles over; report {r['report_mib']:.1f} MiB)" if "oom_tiles" in r else ""
                cpu_total = f", {r['total_cpu_s']:.0f} s CPU in all" if "total_cpu_s" in r else ""
                print(f"{name:28} {r['import_s']:8.1f} {r['compile_s']:9.1f} {r['rss_import_compile_gib']:7.2f}G "
                      f"stopped: {r.get('stopped', '?')}{oom}{cpu_total}")  # fmt: skip
                continue
            if r["compile_only"]:  # nothing ran: no run time, no onnxruntime to compare with
                ort_s, ratio, cpu = f"{'-':>7}", f"{'-':>6}", f"{'-':>8} {'-':>8} {'-':>6}"
            else:
                ort_s, ratio = f"{r['onnxruntime_run_s']:7.3f}", f"{r['run_s'] / r['onnxruntime_run_s']:6.1f}"
                cpu = (f"{r['run_cpu_s']:8.3f} {r['onnxruntime_run_cpu_s']:8.3f} "
                       f"{r['run_cpu_s'] / r['onnxruntime_run_cpu_s']:6.1f}")  # fmt: skip
            print(f"{name:28} {r['import_s']:8.1f} {r['compile_s']:9.1f} {r['rss_import_compile_gib']:7.2f}G "
                  f"{r['run_s']:8.3f} {ort_s} {ratio} {cpu} "
                  f"{r['rss_peak_gib']:7.2f}G {r['report_mib']:7.1f}M {r['samples_per_s']:10,.0f} "
                  f"{r['max_tile_kib']:7.0f}K {r['exchange_code_mib']:8.1f}M {r['onnx_build_s']:6.1f} "
                  f"{r['onnx_mib']:6.0f}M")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
