"""Running one batch of vertices (a codelet over every row of its fields) against the run state.

A positionwise batch whose fields are walked in one storage order (``access.align_positionwise``)
runs in chunks of rows of that order, on a thread per core: each chunk is read, converted,
computed and written while it is in cache, and numpy releases the GIL in each of those steps.
Elements are computed independently, so the result is the same whatever the chunks. Any other
batch runs whole (its matmuls use BLAS's own threads).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from profiler.compile import BatchPlan

# Elements per chunk: the chunk's operands in float plus its result stay within a core's L2
# (256 KiB - 2 MiB on the x86 machines this runs on) rather than streaming each pass through memory.
CHUNK_ELEMENTS = 1 << 15
_pool: ThreadPoolExecutor | None = None


def threads() -> int:
    """The cores this process may use (what numpy's BLAS and onnxruntime take by default)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def run_batch(b: BatchPlan, state: list[np.ndarray]) -> None:
    """Gather the batch's fields, run its codelet, scatter what it writes."""
    rows = b.aligned_rows
    n = int(np.prod(next(iter(b.fields.values())).shape, dtype=np.int64)) if rows else 0
    chunks = min(rows, n // CHUNK_ELEMENTS)
    if chunks < 2:
        _run_rows(b, state, None)
        return
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=threads(), thread_name_prefix="tilescope-run")
    edges = np.linspace(0, rows, chunks + 1).astype(int)
    for done in [_pool.submit(_run_rows, b, state, slice(a, z)) for a, z in zip(edges[:-1], edges[1:], strict=True)]:
        done.result()  # re-raises a chunk's error here


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
