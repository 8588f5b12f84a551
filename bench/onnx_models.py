"""ONNX models through tilescope vs onnxruntime: host wall time of compile and of one run.

Builds a ResNet-50-shaped model and a BERT-base-layer-shaped model with onnx.helper
(profiler.frontends.onnx.examples), then in one process, for the same model, batch and inputs:
  - onnxruntime: session creation (its "compile") and one run (best of --runs);
  - tilescope: import, compile, weights upload and one inference run with capture on (functional
    + cycle accounting + capture; best of --runs, every run captured), and the report write, on
    each --targets target;
and prints the ratios, simulated samples/s per target and the report size. Targets of issue 5: a
run within 5x of onnxruntime's; ResNet-50 compile under 60 s.

    python bench/onnx_models.py                          # full sizes, batch 1, GC200 and C600
    python bench/onnx_models.py --models bert --batch 2
    python bench/onnx_models.py --image 112 --seq 64     # smaller inputs, same layer shapes
    python bench/onnx_models.py --threads 2              # both sides with two threads
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path


def _threads(argv: list[str]) -> int:
    """--threads N, read before numpy is imported (its BLAS fixes its thread count at import)."""
    for i, a in enumerate(argv):
        if a == "--threads" and i + 1 < len(argv):
            return int(argv[i + 1])
        if a.startswith("--threads="):
            return int(a.split("=", 1)[1])
    return 1


THREADS = _threads(sys.argv)
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = str(THREADS)

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from profiler.chip.targets import get_target  # noqa: E402
from profiler.frontends.onnx import Session, examples, import_model, load_model, random_inputs  # noqa: E402
from profiler.frontends.onnx.model import override_batch  # noqa: E402


def _dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def onnxruntime_times(model_bytes: bytes, feeds: dict[str, np.ndarray], runs: int) -> tuple[float, float, dict]:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = THREADS  # as many threads as numpy's BLAS gets (--threads)
    t0 = time.perf_counter()
    sess = ort.InferenceSession(model_bytes, opts, providers=["CPUExecutionProvider"])
    create = time.perf_counter() - t0
    best = float("inf")
    out = None
    for _ in range(runs):
        t0 = time.perf_counter()
        out = sess.run(None, feeds)
        best = min(best, time.perf_counter() - t0)
    return create, best, {o.name: v for o, v in zip(sess.get_outputs(), out or [], strict=True)}


def tilescope_times(model, batch: int, target_name: str, feeds: dict | None, report_dir: Path, runs: int) -> dict:  # type: ignore[no-untyped-def]
    target = get_target(target_name)
    t0 = time.perf_counter()
    imported = import_model(load_model(model), target, batch_size=batch)
    t_import = time.perf_counter() - t0
    # every run captured, so each timed run includes capture
    options = {"autoReport.all": "true", "autoReport.directory": str(report_dir),
               "autoReport.executionProfileProgramRunCount": str(runs + 1)}  # fmt: skip
    session = Session(imported, options)
    t0 = time.perf_counter()
    session.compile()
    t_compile = time.perf_counter() - t0
    t0 = time.perf_counter()
    session.upload_weights()
    t_weights = time.perf_counter() - t0
    feeds = feeds or random_inputs(imported)
    t_run = []
    for _ in range(runs):
        t0 = time.perf_counter()
        outputs = session.run(feeds)
        t_run.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    path = session.engine.write_report()
    t_write = time.perf_counter() - t0
    session.close()  # frees the engine once this function returns (a ResNet-50 session holds GBs)
    mem = session.engine.memory.tile_memory["total_bytes_including_gaps"]  # type: ignore[union-attr]
    cycles = session.cycles[0]
    return {
        "import_s": t_import, "compile_s": t_compile, "weights_s": t_weights, "run_s": min(t_run), "first_run_s": t_run[0],
        "report_write_s": t_write, "cycles": cycles, "samples_per_s": batch * target.clock_hz / cycles,
        "report_bytes": _dir_bytes(path), "max_tile_bytes": int(mem.max()),
        "oom_tiles": int(session.engine.memory.out_of_memory_tiles().size),  # type: ignore[union-attr]
        "outputs": outputs,
    }  # fmt: skip


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="+", default=["resnet50", "bert"], choices=["resnet50", "bert"])
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--image", type=int, default=224, help="ResNet input size (default 224)")
    p.add_argument("--seq", type=int, default=128, help="BERT sequence length (default 128)")
    p.add_argument("--targets", nargs="+", default=["GC200", "C600"])
    p.add_argument("--runs", type=int, default=3, help="timed runs of each; the best is compared (default 3)")
    p.add_argument("--json", metavar="FILE", help="also write the numbers as JSON")
    p.add_argument("--threads", type=int, default=1,
                   help="threads for onnxruntime and for numpy's BLAS in tilescope alike (default 1)")  # fmt: skip
    args = p.parse_args()
    os.environ.pop("POPLAR_ENGINE_OPTIONS", None)  # the bench sets its own options
    builders = {
        "resnet50": lambda: examples.resnet(image=args.image),
        "bert": lambda: examples.bert_layer(seq=args.seq),
    }
    results: dict = {}
    for name in args.models:
        model = builders[name]()
        # onnxruntime gets the same model with the batch fixed, and the same inputs
        fixed = override_batch(load_model(model), args.batch)
        shape = [d.dim_value for d in fixed.graph.input[0].type.tensor_type.shape.dim]
        feeds = {"input": np.random.default_rng(0).standard_normal(shape).astype(np.float32)}
        ort_create, ort_run, ort_out = onnxruntime_times(fixed.SerializeToString(), feeds, args.runs)
        print(f"\n{name}: batch {args.batch}, {len(model.graph.node)} nodes; onnxruntime ({THREADS} thread(s)): "
              f"session {ort_create:.3f} s, run {ort_run * 1e3:.1f} ms")  # fmt: skip
        results[name] = {"onnxruntime": {"session_s": ort_create, "run_s": ort_run}}
        for target in args.targets:
            tmp = Path(tempfile.mkdtemp(prefix="tilescope-bench-"))
            try:
                r = tilescope_times(model, args.batch, target, feeds, tmp / "report", args.runs)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            got, want = r.pop("outputs")["output"], ort_out["output"]
            err = float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))
            results[name][target] = r | {"max_rel_error_vs_onnxruntime": err}
            print(f"  {target:6} import {r['import_s']:.1f} s, compile {r['compile_s']:.1f} s "
                  f"(x{r['compile_s'] / ort_create:.0f} onnxruntime session), run {r['run_s'] * 1e3:.0f} ms "
                  f"(x{r['run_s'] / ort_run:.1f} onnxruntime run; first {r['first_run_s'] * 1e3:.0f} ms), report write {r['report_write_s']:.2f} s, "
                  f"report {r['report_bytes'] / 1e6:.1f} MB")  # fmt: skip
            print(f"         simulated {r['cycles']:,} cycles = {r['samples_per_s']:,.0f} samples/s; peak tile "
                  f"{r['max_tile_bytes']:,} B, {r['oom_tiles']} OOM tiles; max rel. error vs onnxruntime {err:.1e}")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
