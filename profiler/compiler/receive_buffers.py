"""Receive buffers: where a compute set's vertices read data held on other tiles, that data lands first.

A Poplar vertex reads only memory of its own tile, so PopLibs copies each remote operand into a tensor
on the reading tile before the compute set runs (a convolution's or matmul's input copies, a
reduction's partials gathered to their reducer). Those tensors are variables like any other: not
always live, live from the exchange that fills them to the compute set that reads them, and in the
liveness and memory reports. tilescope's vertices read remote elements directly (the compiler plans the
exchange), so the compiler records here what each tile receives for each compute set, and memory
placement holds it as one such temporary variable per compute set.

Calibration: the published dense 4096→1024 fp32 profile's peak not-always-live memory, 9.8 MiB (ref §5),
is its partials (3.3 MiB) plus the operand blocks each tile receives (docs/fidelity.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from profiler.compiler.tile_span import TileSpan
from profiler.poplar.variables import TileMapping, Variable

RECEIVED_SUFFIX = "/received"


@dataclass
class ReceiveBuffer:
    """What each tile receives for one compute set (bytes per global tile), and the (first, last) steps
    of each execution: its exchange steps, then the compute step reading them."""

    compute_set_id: int
    name: str
    debug_context_id: int
    received: TileSpan  # bytes per global tile, held over the receiving tiles
    spans: list[tuple[int, int]] = field(default_factory=list)

    @property
    def tile_bytes(self) -> np.ndarray:
        return self.received.dense()


def record(
    buffers: dict[int, ReceiveBuffer], cs_id: int, name: str, debug_context_id: int, tile_bytes: np.ndarray,
    first: int, last: int,
) -> None:  # fmt: skip
    """Note one execution of compute set ``cs_id`` receiving ``tile_bytes`` between steps ``first`` and
    ``last``; a compute set run again reuses its buffer (the same PopLibs tensor)."""
    if not np.any(tile_bytes):
        return
    buf = buffers.get(cs_id)
    if buf is None:
        buf = buffers[cs_id] = ReceiveBuffer(cs_id, name + RECEIVED_SUFFIX, debug_context_id, TileSpan.of(tile_bytes))
    else:
        buf.received = TileSpan.of(np.maximum(buf.tile_bytes, tile_bytes))
    buf.spans.append((first, last))


def as_variables(buffers: list[ReceiveBuffer], first_id: int) -> list[Variable]:
    """One byte-typed variable per buffer, ids from ``first_id``, mapped as its bytes are received (an
    interval per receiving tile): never part of the graph, never given a value; only memory placement,
    liveness and the report see it."""
    out = []
    u8 = np.dtype(np.uint8)
    for k, buf in enumerate(buffers):
        nz = np.flatnonzero(buf.received.values)
        tiles, sizes = nz + buf.received.lo, buf.received.values[nz].astype(np.int64)
        m = TileMapping(int(sizes.sum()))
        m.set_intervals(np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64), tiles)
        out.append(Variable(first_id + k, buf.name, u8, (m.n,), False, False, buf.debug_context_id, m))
    return out
