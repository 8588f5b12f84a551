"""Costs of moving data between IPUs over IPU-Links: global exchange (sharding, pipelining) and the
ring all-reduce of replicated training.

The links belong to the IPU, not to a tile: however many tiles of an IPU send, what leaves the IPU
shares its links (ref §1 "IPU-Link": poplibs IPUModel ``addGlobalExchangeConstraints`` constrains
links per IPU pair, 128 Gibit/s x 0.85 each). So a global exchange lasts, on each IPU taking part,
the larger of the bytes leaving and entering that IPU over the target's link bandwidth, plus a
fixed setup; every tile of that IPU that sends or receives waits for it (BSP: the step ends when
the slowest tile reaches the sync).
"""

from __future__ import annotations

import math

import numpy as np

from profiler.chip.cost_model import GLOBAL_EXCHANGE_FIXED_CYCLES
from profiler.chip.targets import Target


def ipu_link_bytes(bytes_in: np.ndarray, bytes_out: np.ndarray, target: Target) -> np.ndarray:
    """Per IPU: max(bytes entering, bytes leaving) over all its tiles (length num_ipus)."""
    shape = (target.num_ipus, target.tiles_per_ipu)
    into = np.asarray(bytes_in, dtype=np.int64).reshape(shape).sum(axis=1)
    out = np.asarray(bytes_out, dtype=np.int64).reshape(shape).sum(axis=1)
    return np.maximum(into, out)


def link_cycles(nbytes: int | np.ndarray, target: Target) -> np.ndarray:
    """Cycles to move ``nbytes`` over one IPU's links: ceil(bytes / link bytes per cycle) + the fixed
    global-exchange setup (cost_model.GLOBAL_EXCHANGE_FIXED_CYCLES); 0 bytes cost 0."""
    b = np.asarray(nbytes, dtype=np.int64)
    link = np.ceil(b / target.ipu_link_bytes_per_cycle).astype(np.int64)
    return np.where(b > 0, link + GLOBAL_EXCHANGE_FIXED_CYCLES, 0)


def global_exchange_cycles(bytes_in: np.ndarray, bytes_out: np.ndarray, target: Target) -> np.ndarray:
    """Per tile (length num_tiles): its IPU's link time if the tile sends or receives, else 0."""
    per_ipu = link_cycles(ipu_link_bytes(bytes_in, bytes_out, target), target)
    per_tile = np.repeat(per_ipu, target.tiles_per_ipu)
    active = (np.asarray(bytes_in) > 0) | (np.asarray(bytes_out) > 0)
    return np.where(active, per_tile, 0).astype(np.int64)


def ring_all_reduce_bytes(gradient_bytes: int, replicas: int) -> int:
    """Bytes each replica sends in a ring all-reduce of ``gradient_bytes``: reduce-scatter then
    all-gather, each R-1 steps of 1/R of the data, so 2(R-1)/R of the gradient bytes (the
    bandwidth-optimal ring of Patarasuk & Yuan, JPDC 2009). [INF] That Graphcore's GCL all-reduce
    runs as this ring over IPU-Links is assumed: the reference does not give its algorithm."""
    if replicas < 1:
        raise ValueError(f"all-reduce: replicas must be >= 1, got {replicas}")
    if replicas == 1:
        return 0
    return math.ceil(2 * (replicas - 1) * gradient_bytes / replicas)


def ring_all_reduce_cycles(gradient_bytes: int, replicas: int, target: Target) -> int:
    """Cycles of the ring all-reduce: 2(R-1) steps, each moving 1/R of the gradients over the links
    to the next replica and ending at an external sync (ref §1 "External/global sync")."""
    if replicas <= 1 or gradient_bytes <= 0:
        return 0
    chunk = math.ceil(gradient_bytes / replicas)
    per_step = math.ceil(chunk / target.ipu_link_bytes_per_cycle) + GLOBAL_EXCHANGE_FIXED_CYCLES
    return 2 * (replicas - 1) * (per_step + target.external_sync_cycles)
