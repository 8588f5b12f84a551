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
    _pieces: list[BatchPlan] | None = None
    _asked: int = 0  # times ``pieces`` was asked before it was worked out

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

    @property
    def pieces(self) -> list[BatchPlan]:
        """A positionwise batch over a concatenation (a field of several variables: DenseNet's batch
        norms over its growing feature maps), as a batch for each run of the dim along which every
        field holds one variable: each then read and written through strided views of its
        variables (``Access``) rather than element by element (~10 ns an element), and on halves
        in one compiled pass where it can; [] for any other batch. Worked out once, at the batch's
        second run: the parts' views cost about what two runs element by element do (DenseNet-121:
        1.5 s against 0.5 s a run saved), so a command that runs once does not pay for them."""
        if self._pieces is None:
            self._asked += 1
            if self._asked < 2:
                return []
            self._pieces = _pieces(self)
        return self._pieces


# A batch over a concatenation of more parts than this runs element by element, as before
MAX_PIECES = 256


def _pieces(b: BatchPlan) -> list[BatchPlan]:
    if not b.codelet.positionwise or b.codelet.window_field is not None:
        return []
    tensors = b.tensors
    shapes = {t.shape for t in tensors.values()}
    several = {f: t._explicit() for f, t in tensors.items() if t.single_variable() is None}
    if len(shapes) != 1 or not several:
        return []
    shape = shapes.pop()
    ids = {f: t.elements()[0].reshape(shape) for f, t in several.items()}
    for dim in range(len(shape)):
        cuts: set[int] = set()
        for v in ids.values():
            along = np.moveaxis(v, dim, 0).reshape(shape[dim], -1)
            if not (along == along[:, :1]).all():  # a variable change within an index of ``dim``
                break
            cuts.update((np.flatnonzero(along[1:, 0] != along[:-1, 0]) + 1).tolist())
        else:
            bounds = [0, *sorted(cuts), shape[dim]]
            if not cuts or len(bounds) - 1 > MAX_PIECES:
                return []  # one variable after all (ids held per element), or too many parts
            return [_piece(b, several, ids, dim, lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]
    return []


def _piece(
    b: BatchPlan, several: dict[str, Tensor], ids: dict[str, np.ndarray], dim: int, lo: int, hi: int
) -> BatchPlan:
    """A batch over indices ``lo`` to ``hi`` of ``dim`` of ``b``'s fields, each one variable's (not
    split again). A field of several variables gives its part as that variable's element indices,
    not through a view of the whole (~1 ms a part). A part of a variable held channel-grouped
    ([C/g, H*W, g]: a convolution's result) is no strided view over [C, H, W]; as [C/g, g, H, W],
    every field alike, it is: g is read off the first such part's indices along ``dim``."""
    at = (slice(None),) * dim + (slice(lo, hi),)
    parts: dict[str, Tensor] = {}
    for f, t in b.tensors.items():
        if f in several:
            e = several[f]
            parts[f] = Tensor(e.graph, int(ids[f][at].flat[0]), e._idx[at], e.dtype)
        else:
            parts[f] = t.slice(lo, hi, dim)
    shape = next(iter(parts.values())).shape
    first = next(iter(several))
    line = parts[first]._idx[(0,) * dim + (slice(None),) + (0,) * (len(shape) - dim - 1)]
    steps = np.diff(line)
    if steps.size and not (steps == steps[0]).all():  # runs of one step then a jump: channel groups
        g = int(np.flatnonzero(steps != steps[0])[0]) + 1
        if shape[dim] % g == 0:
            grouped = (*shape[:dim], shape[dim] // g, g, *shape[dim + 1 :])
            piece = BatchPlan(b.codelet, b.params, {f: t.reshape(grouped) for f, t in parts.items()}, _pieces=[])
            if all(a.strided is not None for a in piece.fields.values()):
                return piece
    return BatchPlan(b.codelet, b.params, parts, _pieces=[])


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
