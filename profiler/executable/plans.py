"""The plans the compiler hands the engine: a compute set's vertex batches and its kernel.

A batch is the vertices of one codelet as the engine runs them; a compute set's plan also carries
what the BSP model charges per tile (cycles, FLOPs, vertices by tile and codelet) and its exchange.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from profiler.chip.codelets import Codelet
from profiler.executable.access import Access, align_positionwise
from profiler.executable.half_maps import runs_on_halves
from profiler.poplar.graph import ComputeSet
from profiler.poplar.tensor import Tensor


@dataclass(eq=False)
class BatchPlan:
    """Vertices of one codelet as the engine runs them: one numpy kernel over every row of the fields."""

    codelet: Codelet
    params: dict[str, Any]
    tensors: dict[str, Tensor]
    _fields: dict[str, Access] | None = None
    _reads: dict[str, np.dtype] | None = None
    _aligned: bool = False
    _on_halves: bool | None = None
    half_rows: dict[tuple[int, int], Any] = field(default_factory=dict)  # profiler.executable.half_maps' plans by rows

    @property
    def reads(self) -> dict[str, np.dtype]:
        """The type the engine gathers each field in (``Codelet.read_dtypes``), computed once."""
        if self._reads is None:
            self._reads = dict(self.codelet.read_dtypes({f: a.dtype for f, a in self.fields.items()}))
        return self._reads

    @property
    def fields(self) -> dict[str, Access]:
        # built on first run: the vertex batches of compute sets with a kernel usually never run,
        # and their element indices would otherwise be held twice
        if self._fields is None:
            self._fields = {f: Access(t) for f, t in self.tensors.items()}
            if self.codelet.positionwise:
                self._aligned = align_positionwise(self._fields, self.codelet.writes)
        return self._fields

    @property
    def aligned_rows(self) -> int:
        """Rows of the storage order a positionwise batch's fields are walked in (it may run in
        chunks of them, ``profiler.engine.batch_run``); 0 for any other batch."""
        fields = self.fields
        return next(iter(fields.values())).shape[0] if self._aligned else 0

    @property
    def on_halves(self) -> bool:
        """Whether the batch runs as one compiled pass over stored halves
        (``profiler.executable.half_maps.runs_on_halves``), decided once."""
        if self._on_halves is None:
            self._on_halves = runs_on_halves(self)
        return self._on_halves


@dataclass
class ComputeSetPlan:
    compute_set: ComputeSet
    batches: list[BatchPlan]
    kernel: list[BatchPlan] | None  # see ComputeSet.kernel
    # the planned per-tile figures; None once the compiler holds them as its steps' spans
    # (profiler.compiler.compile._held_costs)
    exchange: Any  # ExchangePlan (on-IPU part)
    global_exchange: Any  # ExchangePlan (inter-IPU part) or None
    tile_cycles: np.ndarray | None
    flops: np.ndarray | None
    reads: set[int]
    writes: set[int]
    # vertices aggregated by (tile, codelet): arrays
    v_tile: np.ndarray
    v_codelet: np.ndarray
    v_count: np.ndarray
    v_state: np.ndarray
    v_cycles: np.ndarray
    v_flops: np.ndarray
    v_constant: np.ndarray | None = None  # graph constants the vertices add on their tile (Codelet.vertex_bytes)
    v_field_data: np.ndarray | None = None  # their out-of-line field data (Codelet.vertex_bytes)
    # variables whose every element the vertices write and which they do not read: a value made
    # for one of them at this step needs no zeros (every element is written before any is read)
    fills: frozenset[int] = frozenset()
