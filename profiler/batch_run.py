"""Running one batch of vertices (a codelet over every row of its fields) against the run state.

A positionwise batch whose fields are walked in one storage order (``access.align_positionwise``)
runs in chunks of rows of that order on the run's threads (``profiler.parallel``): each chunk is
read, converted, computed and written while it is in cache. Elements are computed independently,
so the result is the same whatever the chunks. Any other batch runs whole (its matmuls use
BLAS's own threads).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from profiler import parallel

if TYPE_CHECKING:
    from profiler.compile import BatchPlan


def run_batch(b: BatchPlan, state: list[np.ndarray]) -> None:
    """Gather the batch's fields, run its codelet, scatter what it writes."""
    rows = b.aligned_rows
    if rows:
        n = int(np.prod(next(iter(b.fields.values())).shape, dtype=np.int64))
        parallel.in_row_chunks(lambda part: _run_rows(b, state, part), rows, n)
    else:
        _run_rows(b, state, None)


def _run_rows(b: BatchPlan, state: list[np.ndarray], rows: slice | None) -> None:
    codelet, reads = b.codelet, b.reads
    skip = () if codelet.reads_outputs else codelet.outputs
    values = {
        f: np.empty(acc.shape if rows is None else acc.rows_shape(rows), reads[f]) if f in skip
        else acc.gather(state, reads[f], rows)
        for f, acc in b.fields.items()
    }  # fmt: skip
    out = codelet.run_batch(values, b.params)
    for f in codelet.writes:
        b.fields[f].scatter(state, out[f], rows)
