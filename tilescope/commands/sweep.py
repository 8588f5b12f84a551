"""Capture a model (or a workload script) at every point of a grid of run options, on Dask.

Each option below takes a comma-separated list; the grid is every combination, and each point is
`tilescope run MODEL` with those options (parsed and checked by run's own parser: a value run refuses
is refused here, exit 2, before anything starts). Options left out take run's defaults.

Each point's report goes to OUT/reports/<point>/; a row per finished point goes to OUT/sweep.arrow
(rewritten whole, temporary file + rename, as each point finishes: documented in report_format/SPEC.md)
with its options, whether it fit (or why not), samples/s, cycles, peak tile memory, total memory, tile
balance and host time, the figures `tilescope summary` reads from the same report. Open it with
`tilescope serve OUT` (the Sweep page: table, Pareto plot, click a point to open its report).

Points run on Dask: by default a LocalCluster of worker processes sized to this machine's cores and
memory (--workers N to choose); --scheduler ADDRESS runs them on an existing cluster whose workers
share this file system at the same path (they write the reports into OUT themselves).

Rerun with the same arguments to resume: finished points are recognised by the record beside their
report (OUT/points/: the point's options and model hash, and its report's manifest) and reused, never
a half-written report; a worker lost mid-point is retried by Dask. A point that does not fit, or that
the simulator cannot run (an unsupported operator), is a row saying why, not the end of the sweep.
For a workload script (.py) each point's grid options are given to the script as its own arguments.

Exit status: 0 every point has a row (fitting or not); 1 a point failed (its row says why; rerun to
retry it); 2 bad input (one line), including a bad grid.

examples:
  tilescope sweep model.onnx --batch 1,8,32 --dtype float32,float16
  tilescope sweep model.onnx --target C600 --dtype float16,float8 --available-memory-proportion 0.2,0.45,0.6
  tilescope sweep model.onnx --ipus 2,4 --pipeline --partials float16,float32 --out ./sweep --json
  tilescope sweep model.onnx --batch 8,32 --scheduler tcp://10.0.0.5:8786
  tilescope serve ./sweep
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from tilescope.errors import CommandError
from tilescope.sweep.grid import GRID, flag

HELP = "capture a model at every point of a grid of run options (on Dask) into one sweep"

#: run options a sweep passes to every point unchanged (value options; flags are below).
FIXED_VALUES = ("split", "micro_batches", "runs", "fp8_scale")
FIXED_FLAGS = ("weights_as_constants", "outline")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", nargs="?", help="an ONNX model (.onnx) or a Python workload script (.py)")
    grid = p.add_argument_group("the grid (comma-separated values of tilescope run's options)")
    for option, example in {
        "target": "GC200,C600", "batch": "1,8,32", "dtype": "float32,float16,float8", "partials": "float16,float32",
        "available_memory_proportion": "0.2,0.45,0.6", "ipus": "1,2,4", "replicas": "1,2",
    }.items():  # fmt: skip
        grid.add_argument(flag(option), metavar="LIST", help=f"e.g. {example}")
    fixed = p.add_argument_group("the same at every point (as tilescope run takes them)")
    fixed.add_argument("--pipeline", action="store_true", help="pipeline the points on 2 or more IPUs")
    fixed.add_argument("--split", metavar="HOW", help="memory or compute (run's --split)")
    fixed.add_argument("--micro-batches", metavar="N", help="run's --micro-batches (with --pipeline)")
    fixed.add_argument("--runs", metavar="N", help="inference runs per point (default 1)")
    fixed.add_argument("--fp8-scale", metavar="N", help="run's --fp8-scale (with --dtype float8)")
    fixed.add_argument("--weights-as-constants", action="store_true", help="run's --weights-as-constants")
    fixed.add_argument("--outline", action="store_true", help="run's --outline")
    p.add_argument("--out", metavar="DIR", help="the sweep directory (default ./sweep-<model name>)")
    p.add_argument(
        "--workers", type=int, metavar="N", help="LocalCluster worker processes (default: cores, as memory allows)"
    )
    p.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="run on this Dask scheduler (tcp://host:8786); its workers must share OUT's file system",
    )
    p.add_argument("--json", action="store_true", help="print the sweep's rows as JSON")
    # tests only: a point kills its own worker process once (marker file), or sleeps first
    p.add_argument("--test-kill-worker-once", metavar="MARKER", help=argparse.SUPPRESS)
    p.add_argument("--test-point-delay", type=float, default=0.0, help=argparse.SUPPRESS)


def _progress(msg: str) -> None:
    print(f"tilescope sweep: {msg}", file=sys.stderr, flush=True)


def _fixed(args: argparse.Namespace) -> list[str]:
    argv = [a for k in FIXED_VALUES if getattr(args, k) is not None for a in (flag(k), getattr(args, k))]
    return argv + [flag(k) for k in FIXED_FLAGS if getattr(args, k)]


def _out_dir(args: argparse.Namespace, model: Path) -> Path:
    """The sweep directory: empty, missing or a sweep already (a rerun resumes it); never a report or
    another directory of somebody else's."""
    from report_format.ownership import read_own_manifest
    from report_format.paths import path_problem
    from report_format.sweep import is_sweep
    from tilescope.sweep.point import POINTS_DIR, REPORTS_DIR

    out = Path(args.out) if args.out else Path(f"sweep-{model.stem}")
    problem = path_problem(out)
    if problem:
        raise CommandError(f"--out {str(out)!r}: {problem}")
    if out.exists() and not out.is_dir():
        raise CommandError(f"--out {out}: is not a directory")
    if read_own_manifest(out.absolute()) is not None:
        raise CommandError(f"--out {out}: is a tilescope report; give a directory for the sweep")
    if out.is_dir() and any(out.iterdir()) and not is_sweep(out) and not (out / POINTS_DIR).is_dir():
        raise CommandError(f"--out {out}: a non-empty directory that is not a sweep; give a new or empty one")
    try:
        (out / REPORTS_DIR).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CommandError(f"--out {out}: cannot create it ({exc.strerror})") from None
    return out.absolute()


def run(args: argparse.Namespace) -> int:
    from tilescope.sweep import grid as grid_mod
    from tilescope.sweep.point import empty_row, finished, model_digest

    if args.model is None:
        raise CommandError("no model given: name an ONNX model (.onnx) or a workload script (.py); see --help")
    model = Path(args.model)
    if not model.is_file():
        what = "is a directory" if model.is_dir() else "is not a regular file" if model.exists() else "no such file"
        raise CommandError(f"{model}: {what}")
    if args.workers is not None and not 1 <= args.workers <= 256:
        raise CommandError(f"--workers {args.workers}: must be between 1 and 256")
    if args.workers is not None and args.scheduler:
        raise CommandError("--workers sizes the LocalCluster; with --scheduler the cluster has its own workers")
    script = model.suffix == ".py"
    values = {k: getattr(args, k) for k in GRID}
    if script:  # the grid's values are the script's own arguments; run's parser does not know them
        points = grid_mod.script_points(values)
    else:
        points = grid_mod.points(values, _fixed(args), args.pipeline)
        _check_targets(points)
    out = _out_dir(args, model)
    digest = model_digest(model)
    done = finished(out, digest)
    rows: dict[int, dict[str, Any]] = {}
    todo = []
    for pt in points:
        reused = done.get(pt.key())
        if reused is not None:
            rows[pt.index] = reused | {"point": pt.index}
        else:
            todo.append(pt)
    _write(out, rows)
    _progress(f"{len(points)} points, {len(rows)} reused from {out}, {len(todo)} to compute")
    specs = [
        {"sweep": str(out), "model": str(model.absolute()), "model_sha256": digest, "index": pt.index,
         "name": pt.name, "argv": pt.argv, "options": pt.options, "script": script,
         "kill_marker": args.test_kill_worker_once, "delay_s": args.test_point_delay}
        for pt in todo
    ]  # fmt: skip
    if specs:
        _compute(args, out, specs, rows, len(points), empty_row)
    ordered = [rows[i] for i in sorted(rows)]
    if args.json:
        print(json.dumps({"sweep": str(out), "points": [_json_row(r) for r in ordered]}, indent=2, allow_nan=False))
    else:
        print(_render(out))
    failed = [r for r in ordered if r["status"] == "failed"]
    if failed:
        _progress(f"{len(failed)} point(s) failed (their rows say why; rerun to retry them)")
        return 1
    return 0


def _check_targets(points: list[Any]) -> None:
    """A target name (or IPU count) the simulator does not have is exit 2 before any worker starts."""
    from profiler.frontends.onnx.profile import ProfileError, profile_target
    from tilescope.commands.run import parse_options, profile_options

    seen = set()
    for pt in points:
        key = (pt.options["target"], pt.options["ipus"], pt.options["replicas"], pt.options["outline"])
        if key in seen:
            continue
        seen.add(key)
        try:
            profile_target(profile_options(parse_options(pt.argv)))
        except ProfileError as exc:
            raise CommandError(str(exc)) from None


def _compute(args: argparse.Namespace, out: Path, specs: list[dict[str, Any]], rows: dict[int, dict[str, Any]],
             total: int, empty_row: Any) -> None:  # fmt: skip
    """Run ``specs`` on Dask, writing the table as each finishes (progress and ETA on stderr)."""
    from distributed import as_completed

    from tilescope.sweep import cluster
    from tilescope.sweep.point import run_point

    workers = args.workers or cluster.default_workers(len(specs))
    where = f"scheduler {args.scheduler}" if args.scheduler else f"a LocalCluster of {workers} worker process(es)"
    _progress(f"computing {len(specs)} point(s) on {where}")
    start = time.monotonic()
    with cluster.client(args.scheduler, workers) as client:
        if args.scheduler:
            cluster.check_shared(client, out)
        futures = {
            client.submit(run_point, s, key=f"tilescope-sweep-{s['name']}-{s['model_sha256'][:8]}",
                          retries=cluster.RETRIES, pure=False): s
            for s in specs
        }  # fmt: skip
        for computed, fut in enumerate(as_completed(futures), start=1):
            spec = futures[fut]
            try:
                row = fut.result()
            except Exception as exc:  # a worker lost past Dask's allowed failures, or a bug: a row, not a crash
                row = empty_row(spec) | {"reason": f"{type(exc).__name__}: {' '.join(str(exc).split())}"}
            rows[spec["index"]] = row
            _write(out, rows)
            elapsed = time.monotonic() - start
            eta = elapsed / computed * (len(specs) - computed)
            fig = f", {row['samples_per_second']:,.1f} samples/s" if math.isfinite(row["samples_per_second"]) else ""
            why = f": {row['reason']}" if row["reason"] else ""
            _progress(f"{len(rows)}/{total} points; {row['name']} {row['status']}{fig}{why} "
                      f"(ETA {_duration(eta)})")  # fmt: skip


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def _write(out: Path, rows: dict[int, dict[str, Any]]) -> None:
    from report_format.sweep import write_sweep

    write_sweep(out, list(rows.values()))


def _json_row(row: dict[str, Any]) -> dict[str, Any]:
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()}


def _render(out: Path) -> str:
    """The sweep as a text table (``*`` marks the Pareto front of samples/s against peak tile memory)."""
    from app.views.sweep import sweep_points
    from report_format.sweep import open_sweep

    df = sweep_points(open_sweep(out))
    lines = [f"{'':1} {'point':36} {'status':13} {'samples/s':>12} {'cycles':>12} {'peak tile':>10} "
             f"{'total':>10} {'balance':>7} {'host s':>7}"]  # fmt: skip
    records: list[dict[str, Any]] = [{str(k): v for k, v in r.items()} for r in df.to_dict("records")]
    for r in records:
        lines.append(_line(r))
        if r["reason"] and r["status"] != "ok":
            lines.append(f"    {r['reason'][:200]}")
    lines.append(f"* on the Pareto front of samples/s against peak tile memory; table {out / 'sweep.arrow'}")
    lines.append(f"open it: tilescope serve {out}")
    return "\n".join(lines)


def _line(r: dict[str, Any]) -> str:
    from app.units import format_bytes

    def known(v: float, text: str) -> str:
        return text if math.isfinite(v) and v >= 0 else "-"

    sps = known(r["samples_per_second"], f"{r['samples_per_second']:,.1f}")
    cyc = known(r["cycles"], f"{r['cycles']:,}")
    peak = known(r["max_tile_bytes"], format_bytes(r["max_tile_bytes"]))
    tot = known(r["total_bytes"], format_bytes(r["total_bytes"]))
    bal = known(r["tile_balance"], f"{r['tile_balance']:.2f}")
    host = known(r["host_seconds"], f"{r['host_seconds']:.1f}")
    return (f"{'*' if r['pareto'] else ' '} {r['name'][:36]:36} {r['status']:13} {sps:>12} {cyc:>12} {peak:>10} "
            f"{tot:>10} {bal:>7} {host:>7}")  # fmt: skip
