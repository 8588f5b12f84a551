"""The sample reports `tilescope demo` makes: real workloads run on the simulated IPU.

Each sample is a workload from ``profiler.workloads`` with fixed sizes, run with
``autoReport.all`` into ``<out>/<name>``. Pairs that differ in one known way (batch size) are
there for Compare mode; one deliberately does not fit in memory, to show a graph-only report.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Sample:
    name: str
    workload: str  # module under profiler.workloads
    what: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    steps: int = 1
    target: tuple[str, dict[str, Any]] | None = None  # ("GC200", {}) or ("ipu_model", {...})


SAMPLES: tuple[Sample, ...] = (
    Sample("mlp", "mlp", "MLP training on GC200, batch 32, 5 steps", {"batch": 32, "tiles": 0}, steps=5),
    Sample(
        "mlp_batch64", "mlp", "the same MLP with batch 64 (Compare it with mlp)", {"batch": 64, "tiles": 0}, steps=5
    ),
    Sample("cnn", "cnn", "small CNN training on GC200, 3 steps", {"tiles": 0}, steps=3),
    Sample("transformer", "transformer", "transformer encoder layer inference on GC200", {"tiles": 0}),
    Sample("resnet", "resnet", "ResNet-style bottleneck stack inference on GC200"),
    Sample(
        "mlp_oom",
        "mlp",
        "an MLP too big for a 4-tile, 64 KiB-per-tile IPU model: graph profile only",
        {"hidden": 256},
        target=("ipu_model", {"tiles_per_ipu": 4, "bytes_per_tile": 65536}),
    ),
)


def make_sample(sample: Sample, out: Path) -> str:
    """Run one sample with reports into ``out/<name>``; returns a one-line outcome."""
    from profiler import OutOfMemoryError, get_target, ipu_model

    build = importlib.import_module(f"profiler.workloads.{sample.workload}").build
    kwargs = dict(sample.kwargs)
    if sample.target is not None:
        kind, params = sample.target
        kwargs["target"] = ipu_model(**params) if kind == "ipu_model" else get_target(kind, **params)
    workload = build(**kwargs)
    workload.name = sample.name  # the engine name is the report's sub-directory
    options = {"autoReport.all": "true", "autoReport.directory": str(out)}
    try:
        engine = workload.run(sample.steps, options=options)
    except OutOfMemoryError as exc:
        return f"out of memory, as intended ({str(exc).splitlines()[0][:90]}...)"
    cycles = [r.cycles for r in engine.runs]
    engine.close()
    return f"{len(cycles)} runs captured, {max(cycles, default=0):,} cycles in the longest"


def make_samples(out: Path, progress: Callable[[str], None] = print) -> list[Path]:
    """Make every sample report under ``out``; returns their directories."""
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, sample in enumerate(SAMPLES, 1):
        start = time.perf_counter()
        progress(f"[{i}/{len(SAMPLES)}] {sample.name}: {sample.what} ...")
        outcome = make_sample(sample, out)
        progress(f"      {outcome} ({time.perf_counter() - start:.1f} s)")
        paths.append(out / sample.name)
    return paths
