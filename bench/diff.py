"""Benchmark of `tilescope diff` on two POD16-size synthetic reports.

Writes reports of 16 IPUs x 1472 tiles, 2,003 program steps, ~20,000 executed steps and 100,000
variables, then times the full diff (the ``--json`` path: parity, metrics, step alignment, tiles,
variables, operations, runs, top changes) in a fresh process per pair, and reports its wall time
and peak RSS. Pairs:

- ``oom``: same program, 8 tiles pushed out of memory (memory differs, steps identical);
- ``seed``: another seed (a different program: most steps, operations and variables differ: the
  alignment's worst realistic case).

It also times the step aligner alone on 20,000 keys (a repeated body with one inserted step, and
20,000 unique keys with 50 insertions and 50 deletions).

    python bench/diff.py            # POD16 (about 1 min to write the reports)
    python bench/diff.py --quick    # 2 IPUs
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def inner(baseline: str, active: str) -> None:
    """Run in a child process: the diff's JSON path, with a per-stage breakdown."""
    t0 = time.perf_counter()
    from app.comparison.comparison import Comparison
    from app.render.text import diff_document
    from report_format.reader import open_report

    stages: dict[str, float] = {}
    t = time.perf_counter()
    c = Comparison(open_report(baseline), open_report(active))
    for name in ("parity", "metrics", "steps", "liveness_peaks", "tile_memory", "variables", "operations", "runs"):
        t = time.perf_counter()
        getattr(c, name)
        stages[name] = time.perf_counter() - t
    t = time.perf_counter()
    doc = diff_document(c, 10, [])
    text = json.dumps(doc, default=str)
    stages["document"] = time.perf_counter() - t
    stages["total_after_imports"] = time.perf_counter() - t0
    print(json.dumps({"stages": stages, "json_bytes": len(text), "steps": doc["steps"]}))


def run_child(baseline: Path, active: Path) -> tuple[float, int, dict]:
    """Wall seconds, peak RSS (bytes) and the child's own report."""
    t = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, __file__, "--inner", str(baseline), str(active)], stdout=subprocess.PIPE, text=True
    )
    out = proc.stdout.read() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"diff child failed with exit code {proc.returncode}")
    return wall, usage.ru_maxrss * 1024, json.loads(out)


def cli_wall(baseline: Path, active: Path) -> float:
    t = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "tilescope", "diff", str(baseline), str(active), "--json"],
        cwd=ROOT,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - t


def bench_aligner() -> list[tuple[str, float, int]]:
    import numpy as np

    from app.comparison.align import align_sequences

    rng = np.random.default_rng(0)
    body = np.arange(2000)
    cases = {"repeated body x10 + 1 inserted step": (np.tile(body, 10), np.tile(np.insert(body, 700, 99_999), 10))}
    a = np.arange(20_000)
    b = np.delete(a, rng.choice(a.size, 50, replace=False))
    cases["20k unique keys, 50 inserted + 50 removed"] = (
        a,
        np.insert(b, rng.integers(0, b.size, 50), 10**6 + np.arange(50)),
    )
    out = []
    for label, (x, y) in cases.items():
        t = time.perf_counter()
        al = align_sequences(x, y)
        out.append((label, time.perf_counter() - t, int(al.matched.sum())))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="2 IPUs instead of 16")
    ap.add_argument("--keep", metavar="DIR", help="write the reports here and keep them (reused if present)")
    ap.add_argument("--inner", nargs=2, metavar=("BASELINE", "ACTIVE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.inner:
        inner(*args.inner)
        return 0
    from report_format.synthetic import synthetic_report

    ipus = 2 if args.quick else 16
    size = dict(num_ipus=ipus, tiles_per_ipu=1472, program_steps=2003, executed_steps=20_003, variables=100_000, runs=1)
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="tilescope-bench-diff-"))
    reports = {"base": dict(seed=0), "oom": dict(seed=0, oom_tiles=8), "seed": dict(seed=1)}
    try:
        t = time.perf_counter()
        for name, kw in reports.items():
            if not (root / name / "manifest.json").is_file():
                synthetic_report(root / name, **size, **kw)
        print(f"reports: {ipus} IPUs x 1472 tiles, 2,003 program steps, 20,003 executed steps, 100,000 variables")
        print(f"  written in {time.perf_counter() - t:.1f} s under {root}")
        for pair in ("oom", "seed"):
            wall, rss, child = run_child(root / "base", root / pair)
            st = child["stages"]
            print(
                f"\ndiff base vs {pair}: {wall:.2f} s wall (fresh process, imports included), peak RSS {rss / 2**20:.0f} MiB"
            )
            print(
                f"  after imports {st['total_after_imports']:.2f} s; steps {child['steps']}; JSON {child['json_bytes']:,} bytes"
            )
            print("  " + ", ".join(f"{k} {v:.2f}s" for k, v in st.items() if k != "total_after_imports"))
            print(f"  `tilescope diff --json` end to end: {cli_wall(root / 'base', root / pair):.2f} s")
        print("\nstep aligner alone:")
        for label, secs, matched in bench_aligner():
            print(f"  {label:<45} {secs * 1e3:8.1f} ms  ({matched:,} matched)")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
