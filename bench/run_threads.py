"""Where a ResNet-50 run's wall time goes between tilescope's two run threads (issue 38).

Builds ResNet-50, compiles it once, runs it a few times to warm the caches, then times --runs runs
and prints, for the best few, the wall time, the process's CPU, the main thread's own CPU
(``time.thread_time``) and the rest (the run's worker threads). A run is on its critical path on the
main thread: where main-thread CPU is far below wall, the main thread waited (on the GIL after a
``nogil`` kernel, on a neighbour's process for a core, or on a worker in ``parallel.in_row_chunks``).

    python bench/run_threads.py                                   # fp16 on C600
    python bench/run_threads.py --target GC200 --dtype float32
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--target", default="C600")
    p.add_argument("--dtype", default="float16")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--runs", type=int, default=15, help="timed runs; the best 5 by wall are shown")
    args = p.parse_args()
    sys.path.insert(0, str(ROOT))
    import numpy as np

    from bench.scale import _onnx_model
    from profiler.chip.targets import get_target
    from profiler.frontends.onnx import Session, import_model, load_model

    model = _onnx_model("resnet50", 224, 128, 12, 1)
    imported = import_model(
        load_model(model), get_target(args.target, 1), batch_size=args.batch, dtype=args.dtype, partials="float32"
    )
    session = Session(imported, {"autoReport.all": "false"}, name="run-threads")
    session.compile()
    session.upload_weights()
    first = imported.inputs[0]
    shape = [args.batch, *first.shape[1:]]
    feeds = {first.name: np.random.default_rng(0).standard_normal(shape).astype(np.float32)}
    for _ in range(3):  # warm: kept weight copies, scratch buffers, compiled loops
        session.run(feeds)
    rows = []
    for _ in range(args.runs):
        w0, c0, m0 = time.perf_counter(), time.process_time(), time.thread_time()
        session.run(feeds)
        rows.append((time.perf_counter() - w0, time.process_time() - c0, time.thread_time() - m0))
    session.close()
    print(f"ResNet-50 b{args.batch} {args.dtype} {args.target}, load average {os.getloadavg()[0]:.2f}")
    print("   wall s    cpu s  main cpu  workers")
    for wall, cpu, main_cpu in sorted(rows)[:5]:
        print(f"{wall:9.4f} {cpu:8.4f} {main_cpu:9.4f} {cpu - main_cpu:8.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
