"""Report I/O benchmark on a POD16-size synthetic report.

Writes a report of 16 IPUs x 1472 tiles with ~20,000 executed steps (per-tile cycles of every
step) and 100,000 variables, then measures: write time, open time, reading target + per-tile
memory, reading the per-tile cycles of one step and of all steps, and on-disk size per table
against the raw int32 size. It repeats open + target + tile memory on a report with the same
graph but 10x fewer executed steps, to show that opening does not depend on the size of the
execution tables.

    python bench/report_io.py            # full POD16 size (~1 min, ~2 GiB RAM for the all-steps read)
    python bench/report_io.py --quick    # 2 IPUs, for a smoke run
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from report_format import schema  # noqa: E402
from report_format.reader import open_report  # noqa: E402
from report_format.synthetic import synthetic_report  # noqa: E402


def _timed(fn, repeat: int = 5) -> tuple[float, object]:
    """Best of ``repeat`` wall times (seconds) and the last result."""
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def _open_and_read_memory(path: Path) -> tuple[float, float]:
    t_open, report = _timed(lambda: open_report(path))
    t_mem, _ = _timed(lambda: (open_report(path).target(), open_report(path).tile_memory()))
    return t_open, t_mem


def _raw_int32_bytes(path: Path, name: str) -> int:
    table = pa.ipc.open_file(pa.memory_map(str(path / f"{name}{schema.TABLE_SUFFIX}"))).read_all()
    n = 0
    for col in table.columns:
        n += len(pa.compute.list_flatten(col)) if pa.types.is_list(col.type) else len(col)
    return 4 * n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="2 IPUs instead of 16")
    ap.add_argument("--keep", metavar="DIR", help="write the reports here and keep them")
    args = ap.parse_args()
    ipus = 2 if args.quick else 16
    size = dict(num_ipus=ipus, tiles_per_ipu=1472, program_steps=2003, variables=100_000, runs=1)
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="tilescope-bench-"))
    big, small = root / "pod_20k_steps", root / "pod_200_steps"
    try:
        for p in (big, small):
            shutil.rmtree(p, ignore_errors=True)
        t = time.perf_counter()
        synthetic_report(big, executed_steps=20_003, **size)
        t_write = time.perf_counter() - t
        synthetic_report(small, executed_steps=2_003, **size)  # one pass of the body: 10x fewer executed steps
        report = open_report(big)
        steps = int(report.runs()["steps"][0])
        print(f"report: {ipus} IPUs x 1472 tiles, {steps:,} executed steps, 100,000 variables  ({root})")
        print(f"write (generate + compress + fsync + checksum)   {t_write:8.2f} s")
        for label, path in (("20k steps", big), ("2k steps", small)):
            t_open, t_mem = _open_and_read_memory(path)
            ex = sum(open_report(path).manifest.tables[n].bytes for n in ("tile_cycles", "execution_steps"))
            print(
                f"open [{label:>9}]  {t_open * 1e3:8.2f} ms   open+target+tile_memory {t_mem * 1e3:8.2f} ms"
                f"   (execution tables on disk {ex / 2**20:7.1f} MiB)"
            )
        t_one, one = _timed(lambda: open_report(big).tile_cycles(0, steps // 2))
        print(f"per-tile cycles of one step   {t_one * 1e3:8.2f} ms  shape {one.shape}")
        t_all, allc = _timed(lambda: open_report(big).tile_cycles_range(0, 0, steps), repeat=1)
        print(f"per-tile cycles of all steps  {t_all:8.2f} s   shape {allc.shape}  ({allc.nbytes / 2**30:.2f} GiB)")
        del allc
        print(f"\n{'table':<26}{'rows':>12}{'on disk':>12}{'raw int32':>12}{'ratio':>8}")
        for name, entry in report.manifest.tables.items():
            raw = _raw_int32_bytes(big, name)
            ratio = raw / entry.bytes if entry.bytes else 0
            print(f"{name:<26}{entry.rows:>12,}{entry.bytes / 2**20:>10.2f}Mi{raw / 2**20:>10.1f}Mi{ratio:>7.1f}x")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
