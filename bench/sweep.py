"""A 12-point sweep of ResNet-50 on this machine: wall time against the sum of the single points'
times divided by the workers, and the peak host memory of every process of the sweep.

Builds ResNet-50 (profiler.frontends.onnx.examples.resnet(), 224x224) and runs, as a user would,

    tilescope sweep resnet50.onnx --target C600 --batch 1,4,16 --available-memory-proportion 0.45,0.6
        --dtype float16,float8 --out DIR --json

(batch x AMP x dtype: 12 points) on the default LocalCluster. The single points' times are the
``host_seconds`` of the sweep's own rows (each point's import, compile, run and report on its
worker, measured while the other workers ran theirs: on a loaded machine that is slower than a run
alone). ``ideal_s`` = their sum / workers is the wall time with perfect packing and no start-up;
``overhead`` = wall / ideal. Peak host memory is the largest sum, over the sweep's process and all
its descendants (the cluster's nanny and worker processes), of their resident sizes, sampled every
0.25 s with psutil (Dask's own dependency).

    python bench/sweep.py                  # writes bench/sweep.json
    python bench/sweep.py --out /tmp/bench-sweep --workers 2
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GRID = ["--target", "C600", "--batch", "1,4,16", "--available-memory-proportion", "0.45,0.6", "--dtype", "float16,float8"]  # fmt: skip


def _tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and all its descendants (0 once it is gone)."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0
    total = 0
    for p in procs:
        with contextlib.suppress(psutil.Error):
            total += p.memory_info().rss
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, help="the sweep directory (default: a new temporary one)")
    ap.add_argument("--workers", type=int, help="tilescope sweep --workers (default: its own sizing)")
    ap.add_argument("--json-out", type=Path, default=ROOT / "bench" / "sweep.json")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    model = tmp / "resnet50.onnx"
    sys.path.insert(0, str(ROOT))
    import onnx

    from profiler.frontends.onnx import examples

    onnx.save(examples.resnet(), model)
    out = args.out or tmp / "sweep"
    cmd = [sys.executable, "-m", "tilescope", "sweep", str(model), *GRID, "--out", str(out), "--json"]
    cmd += ["--workers", str(args.workers)] if args.workers else []
    load_before = os.getloadavg()
    peak = 0
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _tree_rss(proc.pid))
            time.sleep(0.25)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stdout, stderr = proc.communicate()
    wall = time.monotonic() - start
    done.set()
    sampler.join()
    sys.stderr.write(stderr)
    if proc.returncode not in (0, 1):
        print(f"the sweep failed (exit {proc.returncode})", file=sys.stderr)
        return 1
    rows = json.loads(stdout)["points"]
    workers = args.workers or next(
        int(line.split("LocalCluster of ")[1].split()[0]) for line in stderr.splitlines() if "LocalCluster of" in line
    )
    point_s = sum(r["host_seconds"] or 0.0 for r in rows)
    ideal = point_s / workers
    result: dict[str, Any] = {
        "command": " ".join(["python bench/sweep.py", *sys.argv[1:]]),
        "sweep": " ".join(["tilescope", "sweep", "resnet50.onnx", *GRID, "--out", "DIR", "--json"]),
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{os.cpu_count()} cores, shared with other work (load average {load_before[0]:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after)",
        "points": len(rows),
        "workers": workers,
        "wall_s": round(wall, 1),
        "sum_point_s": round(point_s, 1),
        "ideal_s": round(ideal, 1),
        "overhead": round(wall / ideal, 3) if ideal else None,
        "peak_host_bytes": peak,
        "peak_host_gib": round(peak / 2**30, 2),
        "rows": [
            {k: r[k] for k in ("name", "status", "host_seconds", "samples_per_second", "max_tile_bytes", "reason")}
            for r in rows
        ],
    }
    args.json_out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "rows"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
