"""Elementwise ops on half and float run as one compiled pass over the stored values.

The general path reads each half operand into float, computes in float and rounds the result into
half as it is written: three passes over every element, in chunks. For the ops a network spends
its elementwise time in (add, subtract, multiply, divide, relu; the second operand of a binary op
may be one element per row, as a softmax's row maximum and sum) ``profiler.host.half_kernels`` does
the same arithmetic per element in one pass (~0.2 ns an element): float of each operand, the op
in float, one rounding. The bits are the general path's; where a result is NaN the rows are
computed again the general way, so NaN bits too follow numpy's rule.

float32 fields take the same pass with no conversion: numpy walks a per-channel operand (16
channels repeated along the positions) 16 elements per inner loop, and its result is then copied
into the state; here the rows are joined and written in place (ResNet-50's batch norms and relus).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from profiler.executable.convert import kernels
from profiler.executable.strided import strided_view
from profiler.poplar.layout import merged_dims

if TYPE_CHECKING:
    from profiler.chip.codelets import Codelet
    from profiler.executable.access import Access


class BatchPlan(Protocol):
    """What a batch of vertices shows this module (``profiler.executable.plans.BatchPlan``)."""

    codelet: Codelet
    params: dict[str, Any]

    @property
    def fields(self) -> dict[str, Access]: ...

    @property
    def aligned_rows(self) -> int: ...

    # this module's plans of the rows it has run, by (start, stop)
    half_rows: dict[tuple[int, int], _RowsPlan]


_HALF = np.dtype(np.float16)
_FLOAT = np.dtype(np.float32)
# op name -> (loop, op code constant of the loop or None); the loop's name ends in _half or _float
# by the fields' type
LOOPS = {"add": ("binary", "ADD"), "subtract": ("binary", "SUBTRACT"),
         "multiply": ("binary", "MULTIPLY"), "divide": ("binary", "DIVIDE"),
         "relu": ("relu", None)}  # fmt: skip
# Elements a row should have at least: a vectorised loop takes 32-64 halves an iteration, and a
# short row (16 channels of a per-channel scale) runs mostly in its scalar remainder (~0.5 ns an
# element against ~0.2). Shorter rows of arrays laid out one after the other are joined, a
# broadcast operand's row repeated to match.
_LONG_ROW = 128


def runs_on_halves(b: BatchPlan) -> bool:
    """Whether ``b`` can run here: a positionwise op named in LOOPS with no params, every field half
    (or every field float32) and a strided view (aligned in the result's storage order) that walks its last dim contiguously
    in at most 4 merged dims, the result another variable than every operand (the general path
    recomputes NaN rows from unchanged operands)."""
    c = b.codelet
    if c.half_op not in LOOPS or b.params or not b.aligned_rows or len(c.outputs) != 1 or c.inouts:
        return False
    fields = b.fields
    dtype = next(iter(fields.values())).dtype
    if dtype not in (_HALF, _FLOAT) or any(a.dtype != dtype or a.strided is None for a in fields.values()):
        return False
    accs = _in_order(b)
    result_var = _strided(accs[-1])[0]
    if any(_strided(a)[0] == result_var for a in accs[:-1]):
        return False
    shape, strides = _geometry(accs, slice(0, b.aligned_rows))[:2]
    if len(shape) > 4 or any(st[-1] != 1 for i, st in enumerate(strides) if i != 1):
        return False
    if len(shape) == 4:  # walked as 3-d passes, one per index of the first dim (_RowsPlan.leads)
        return strides[1][-1] == 1
    # the second operand of a binary op may hold one element per row (a per-row maximum or sum)
    return strides[1][-1] == 1 or (strides[1][-1] == 0 and LOOPS[c.half_op][0] == "binary")


def run_rows(b: BatchPlan, state: list[np.ndarray], rows: slice) -> bool:
    """Compute ``rows`` of ``b`` (``runs_on_halves``) into the state; False if a result is NaN (the
    rows written are then to be computed the general way)."""
    plan = b.half_rows.get((rows.start, rows.stop))
    if plan is None:  # the same chunks come back every run: their geometry is worked out once
        plan = b.half_rows[rows.start, rows.stop] = _RowsPlan.of(_in_order(b), rows)
    accs = _in_order(b)
    half = accs[0].dtype == _HALF
    buffers = [state[_strided(a)[0]] for a in accs]
    buffers = [x.view(np.uint16) for x in buffers] if half else buffers
    for x, o, s0, distinct, n2, r in plan.repeated:  # a broadcast operand's rows, r times each
        buffers[x] = repeated_rows(buffers[x], o, s0, distinct, n2, r)
    op = b.codelet.half_op
    assert op is not None, "run_rows runs a batch runs_on_halves took"
    name, code = LOOPS[op]
    name += "_half" if half else "_float"
    loops = kernels()
    head = () if code is None else (getattr(loops, code),)
    loop = getattr(loops, name + "_per_row" if plan.per_row else name)
    if plan.leads is None:
        return not loop(*head, *buffers, plan.shape, plan.geo)
    return not any(loop(*head, *buffers, plan.shape, geo) for geo in plan.leads)


@dataclass(frozen=True)
class _RowsPlan:
    """How the compiled loop walks some rows of a batch: its 3-d shape, each array's (offset,
    stride 0, stride 1) in elements, the broadcast operands whose rows are repeated into a new
    buffer first (array, offset, stride 0, distinct rows, row length, times), and whether the second
    operand is one element per row (``binary_half_per_row``). A 4-d walk (fields held in different
    channel groupings: a residual add of a [C/8, HW, 8] and a [C/16, HW, 16] tensor) is a 3-d pass
    per index of its first dim: ``leads``, each pass's geometry."""

    shape: np.ndarray
    geo: np.ndarray
    repeated: tuple[tuple[int, int, int, int, int, int], ...]
    per_row: bool = False
    leads: tuple[np.ndarray, ...] | None = None

    @staticmethod
    def of(accs: list[Access], rows: slice) -> _RowsPlan:
        shape, strides, offsets = _geometry(accs, rows)
        if len(shape) == 4:  # a pass per index of the first dim (runs_on_halves: no row joined, none repeated)
            lead, shape = shape[0], shape[1:]
            geos = [
                np.array([(o + t * st[0], st[1], st[2]) for o, st in zip(offsets, strides, strict=True)], np.int64)
                for t in range(lead)
            ]
            return _RowsPlan(np.array(shape, np.int64), geos[0], (), False, tuple(geos))
        shape = (1,) * (3 - len(shape)) + shape
        strides = [(0,) * (3 - len(st)) + st for st in strides]
        geo = [(o, st[0], st[1]) for o, st in zip(offsets, strides, strict=True)]
        repeated: tuple[tuple[int, int, int, int, int, int], ...] = ()
        if all(st[2] == 1 for st in strides):  # no operand one element per row
            shape, geo, repeated = join_rows(shape, geo)
        return _RowsPlan(np.array(shape, np.int64), np.array(geo, np.int64), repeated, strides[1][2] == 0)


def join_rows(
    shape: tuple[int, ...], geo: list[tuple[int, int, int]]
) -> tuple[tuple[int, ...], list[tuple[int, int, int]], tuple[tuple[int, int, int, int, int, int], ...]]:
    """A 3-d walk's short rows joined r at a time where every array (geometry ``(offset, stride 0,
    stride 1)``) lays its rows out one after the other or repeats one row (a broadcast operand,
    copied r times into a new buffer: ``repeated_rows``): the walk's shape, the arrays' geometry
    over it and the repeated ones (array, offset, stride 0, distinct rows, row length, times); as
    given when no join applies."""
    n0, n1, n2 = shape
    r = 1
    if n2 < _LONG_ROW and all(s1 in (n2, 0) for _, _, s1 in geo):
        # the fewest rows that make a long row and divide the walk's rows (7x7 images' 49 rows of a
        # channel group of 8 joined whole: 392; doubling alone left them at 8, ~2-3 ns an element)
        r = next((d for d in range(2, n1 + 1) if n1 % d == 0 and d * n2 >= _LONG_ROW), n1)
    if r == 1:
        return shape, geo, ()
    joined, repeated = [], []
    for x, (o, s0, s1) in enumerate(geo):
        if s1 == n2:
            joined.append((o, s0, r * n2))
        else:
            repeated.append((x, o, s0, n0 if s0 else 1, n2, r))
            joined.append((0, r * n2 if s0 else 0, 0))
    return (n0, n1 // r, r * n2), joined, tuple(repeated)


def repeated_rows(buffer: np.ndarray, offset: int, s0: int, distinct: int, n: int, times: int) -> np.ndarray:
    """``distinct`` rows of ``n`` elements of a flat buffer (from ``offset``, ``s0`` apart), each
    repeated ``times`` along itself (``join_rows``' repeated arrays)."""
    size = buffer.itemsize
    row = strided_view(buffer, offset, (distinct, n), (s0 * size, size))
    return np.tile(row, (1, times)).reshape(-1)


def _in_order(b: BatchPlan) -> list[Access]:
    """The batch's operand accesses, then its result's."""
    c = b.codelet
    return [b.fields[f] for f in (*c.inputs, c.outputs[0])]


def _strided(a: Access) -> tuple[int, int, tuple[int, ...], bool]:
    """The strided layout (variable, offset, byte strides, writable) every access of a batch run here has."""
    assert a.strided is not None, "runs_on_halves takes strided fields only"
    return a.strided


def _geometry(accs: list[Access], rows: slice) -> tuple[tuple[int, ...], list[tuple[int, ...]], list[int]]:
    """The merged shape of ``rows`` of the accesses' (aligned) views, each one's element strides over
    it and element offset in its variable."""
    start, stop, _ = rows.indices(accs[0].flat_shape[0])
    element = [tuple(s // a.dtype.itemsize for s in _strided(a)[2]) for a in accs]
    offsets = [_strided(a)[1] + start * st[0] for a, st in zip(accs, element, strict=True)]
    shape, strides = merged_dims((stop - start, *accs[0].flat_shape[1:]), tuple(element))
    return shape, list(strides), offsets
