"""A small sweep made in this process (no Dask), for the page and browser tests."""

from __future__ import annotations

from pathlib import Path

import onnx

from profiler.frontends.onnx import examples


def small_sweep(tmp: Path) -> Path:
    """A sweep directory of the MLP at batch 1, 4 and 16 under ``tmp``: three reports, their records
    and the sweep table."""
    from report_format.sweep import write_sweep
    from tilescope.sweep import grid
    from tilescope.sweep.point import model_digest, run_point

    model = tmp / "mlp.onnx"
    onnx.save(examples.mlp((64, 32, 10)), model)
    sweep = tmp / "sweep"
    rows = [
        run_point({"sweep": str(sweep), "model": str(model), "model_sha256": model_digest(model), "index": pt.index,
                   "name": pt.name, "argv": pt.argv, "options": pt.options, "script": False})
        for pt in grid.points({"batch": "1,4,16"}, [], False)
    ]  # fmt: skip
    write_sweep(sweep, rows)
    return sweep
