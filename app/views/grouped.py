"""Group-bys over per-tile rows (vertices, exchanges, placements) in numpy.

On a POD16 report these tables hold millions of rows (a Llama-2-7B-shaped decoder over 16 x 1,472
tiles: 2.6 M vertex rows, 2.8 M exchange rows), and pandas' ``groupby(...).agg(tiles=("tile",
"nunique"))`` spends seconds hashing them; sorting the keys once and counting with ``bincount``
gives the same table in a fraction of that.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

import numpy as np
import pandas as pd

from report_format.reader import Report


def sums_and_tiles(
    keys: np.ndarray,
    tiles: np.ndarray,
    sums: Mapping[str, np.ndarray] | None = None,
    maxes: Mapping[str, np.ndarray] | None = None,
    index_name: str = "key",
) -> pd.DataFrame:
    """One row per distinct key (ascending, the index named ``index_name``): each ``sums`` column
    summed and each ``maxes`` column's largest value over the key's rows, and ``tiles``, the
    number of distinct tiles among them. Sums are exact int64 (no float weights)."""
    keys = np.asarray(keys)
    tiles = np.asarray(tiles, dtype=np.int64)
    if keys.size == 0:
        cols = [*(sums or {}), *(maxes or {}), "tiles"]
        return pd.DataFrame(columns=cols, index=pd.Index([], name=index_name))
    # the report's tables are mostly written in key order (vertices by compute set, exchanges by
    # program): then no sort and no gather of every column
    ordered = not np.any(keys[1:] < keys[:-1])
    order = slice(None) if ordered else np.argsort(keys, kind="stable")
    sk = keys[order]
    starts = np.flatnonzero(np.r_[True, sk[1:] != sk[:-1]])
    out: dict[str, np.ndarray] = {}
    for name, values in (sums or {}).items():
        out[name] = np.add.reduceat(np.asarray(values)[order].astype(np.int64, copy=False), starts)
    for name, values in (maxes or {}).items():
        out[name] = np.maximum.reduceat(np.asarray(values)[order], starts)
    # distinct (key, tile) pairs: group number x (tiles + 1) + tile is unique per pair. Sorted and
    # compared with the neighbour rather than np.unique, whose hash path (numpy 2) took 30 s on
    # these 2.8 M structured values.
    width = int(tiles.max()) + 1
    group = np.repeat(np.arange(starts.size, dtype=np.int64), np.diff(np.r_[starts, sk.size]))
    pairs = group * width + tiles[order]
    pairs.sort()
    first = np.r_[True, pairs[1:] != pairs[:-1]]
    out["tiles"] = np.bincount(pairs[first] // width, minlength=starts.size)
    return pd.DataFrame(out, index=pd.Index(sk[starts], name=index_name))


def executed_by_program(report: Report, run: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per program id (arrays indexed by it, as long as the programs table's largest id + 1): the
    cycles of its executed steps (each step's longest IPU, summed over executions), their FLOPs
    (summed over IPUs and executions) and its executions, over ``run`` or all runs. One executed
    step is one (run, step): its rows are its IPUs, all of one program. From Arrow in numpy: a
    POD16 report has millions of (step, IPU) rows, where a pandas group-by on three keys took seconds."""
    size = int(report.table("programs", ["program_id"]).column("program_id").to_numpy().max(initial=-1)) + 1
    col = _step_columns(report)
    if run is not None:
        mine = col["run"] == run
        col = {c: v[mine] for c, v in col.items()}
    if col["run"].size == 0:
        return np.zeros(size, np.int64), np.zeros(size, np.int64), np.zeros(size, np.int64)
    key = col["run"].astype(np.int64) * (int(col["step"].max()) + 1) + col["step"]
    cycles, flops, pid = col["cycles_to"] - col["cycles_from"], col["flops"], col["program_id"]
    if np.any(key[1:] < key[:-1]):  # the writer stores steps in order; sort only if not
        order = np.argsort(key, kind="stable")
        key, cycles, flops, pid = key[order], cycles[order], flops[order], pid[order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    step_prog = pid[starts].astype(np.int64)
    size = max(size, int(step_prog.max()) + 1)
    out = []
    for per_step in (np.maximum.reduceat(cycles, starts), np.add.reduceat(flops, starts)):
        total = np.zeros(size, np.int64)
        np.add.at(total, step_prog, per_step)  # int64 sums (float bincount weights round past 2^53)
        out.append(total)
    return out[0], out[1], np.bincount(step_prog, minlength=size).astype(np.int64)


@lru_cache(maxsize=4)
def _step_columns(report: Report) -> dict[str, np.ndarray]:
    """The execution steps' columns ``executed_by_program`` reads, as numpy arrays, once per report:
    Arrow's filter and chunk concatenation took ~1 s per call on 2.75 M rows (a POD16 decoder)."""
    es = report.table("execution_steps", ["run", "step", "program_id", "cycles_from", "cycles_to", "flops"])
    return {c: es.column(c).to_numpy() for c in es.column_names}
