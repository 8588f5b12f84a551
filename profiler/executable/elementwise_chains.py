"""Consecutive elementwise steps on half or float32 run as one compiled pass: a chain.

A network's elementwise steps come in runs: ResNet-50's batch norms are a multiply and an add per
channel, then a relu (PopLibs' channelMul, addToChannel and NonLinearity compute sets), three steps
each read from and written to memory (``profiler.executable.half_maps``). A chain takes a block of
rows of the steps' common walk through them all while it is in cache (``half_kernels.chain``),
each op computed by its own step's loop (on half: in float and rounded to half),
so the bits are the steps'. Only the results the program reads later are written, into spare
arrays the engine then takes as the variables' values (``profiler.engine.engine``); a result only
the chain reads is never made.

A step extends a chain when its one batch runs in one pass (``half_maps.runs_on_halves``; also a
relu in place, and a cast from float32 as a half chain's first step), its fields are of the chain's
type, one of its operands is the previous step's result walked in the same order, and its other
operand is no earlier step's result.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from profiler.executable.convert import kernels
from profiler.executable.half_maps import LOOPS, _geometry, _in_order, _strided, join_rows, repeated_rows

if TYPE_CHECKING:
    from profiler.executable.access import Access
    from profiler.executable.plans import BatchPlan

_HALF = np.dtype(np.float16)
_FLOAT = np.dtype(np.float32)
# Row length of a chain whose steps all walk their fields as one run (relus, residual adds): long
# enough for the compiled loop's vector width, short enough that a row's float values stay in L1
_FLAT_ROW = 2048


@dataclass(frozen=True)
class Chain:
    """How ``half_kernels.chain`` (by ``dtype``, the results' type: on half or float32) runs
    some steps: the variables it reads (buffer 0 the chain's first value), each step's result
    variable, and the walk: its shape (rows x columns of ``shape``'s last two dims, under the
    first), each buffer's geometry (reads, then one per step's result), and the op table (kind, op
    code, operand buffer, result buffer, per-row operand)."""

    dtype: np.dtype
    reads: tuple[int, ...]
    results: tuple[int, ...]
    shape: np.ndarray
    geo: np.ndarray
    ops: np.ndarray
    # reads whose one row per walk row is repeated to fill a joined row (read index, offset, stride
    # 0, distinct rows, row length, times), as ``half_maps._RowsPlan`` repeats them
    repeated: tuple[tuple[int, int, int, int, int, int], ...] = ()

    def buffers(
        self, reads: list[np.ndarray], keep: Callable[[int, Callable[[], np.ndarray]], np.ndarray] | None = None
    ) -> list[np.ndarray]:
        """The pass's read buffers from the read variables' values (a half's as its bits), rows
        repeated where joined; ``keep(read index, make)``: the repeated rows kept while their
        variable is unwritten."""
        for x, o, s0, distinct, n2, r in self.repeated:

            def make(buffer: np.ndarray = reads[x], at: tuple[int, ...] = (o, s0, distinct, n2, r)) -> np.ndarray:
                return repeated_rows(buffer, *at)

            reads[x] = make() if keep is None else keep(x, make)
        return reads

    @property
    def rows(self) -> int:
        return int(self.shape[0]) * int(self.shape[1])

    @property
    def elements(self) -> int:
        return self.rows * int(self.shape[2])

    def table(self, stored: set[int] | frozenset[int]) -> np.ndarray:
        """The op table with only the steps whose result is ``stored`` (by step index) writing it."""
        ops = self.ops.copy()
        for k in range(len(ops)):
            if k not in stored:
                ops[k, 3] = -1
        return ops


def step_kind(b: BatchPlan) -> str | None:
    """How a batch runs as a chain's step: "map" (a binary op or a relu into another variable, in
    one pass: ``half_maps.runs_on_halves``), "cast" (float32 to half, a chain's first step), "relu in
    place" (on half or float32, a chain's later step), or None."""
    c = b.codelet
    if c.chain_op is None or b.params or not b.aligned_rows:
        return None
    fields = b.fields
    if b.on_halves:
        return "map"
    if any(a.strided is None for a in fields.values()):
        return None
    if c.chain_op == "cast" and not c.inouts and fields["in"].dtype == _FLOAT and fields["out"].dtype == _HALF:
        return "cast"
    if c.chain_op == "relu" and c.inouts == ("data",) and not c.inputs and fields["data"].dtype in (_HALF, _FLOAT):
        return "relu in place"
    return None


def _accesses(b: BatchPlan, kind: str) -> list[Access]:
    """The step's operand accesses, then its result's (an in-place relu's one field twice)."""
    return [b.fields["data"]] * 2 if kind == "relu in place" else _in_order(b)


def chain_of(batches: list[BatchPlan]) -> Chain | None:
    """The chain of consecutive steps with these batches (one a step), or None where they do not
    make one (see the module's doc)."""
    if len(batches) < 2:
        return None
    walks = []
    dtype = _HALF
    for k, b in enumerate(batches):
        kind = step_kind(b)
        if kind is None or (kind != "map" and (kind == "cast") != (k == 0)):
            return None  # a cast only first, an in-place relu never first
        accs = _accesses(b, kind)
        dtype = accs[-1].dtype if k == 0 else dtype  # the chain's type: its first result's
        if any(a.dtype != dtype for a in (accs[1:] if kind == "cast" else accs)):
            return None  # every field of the chain's type (a cast's result)
        shape, strides, offsets = _geometry(accs, slice(0, b.aligned_rows))
        if len(shape) > 3 or any(st[-1] not in (0, 1) for st in strides):
            return None
        walks.append((b, kind, [_strided(a)[0] for a in accs], shape, strides, offsets))
    elements = {math.prod(w[3]) for w in walks}
    if len(elements) != 1:
        return None
    n = elements.pop()
    shaped = {tuple(w[3]) for w in walks if len(w[3]) > 1}
    if len(shaped) > 1:
        return None
    if shaped:
        common = (1,) * (3 - len(next(iter(shaped)))) + next(iter(shaped))
    else:
        row = math.gcd(n, _FLAT_ROW)
        common = (1, n // row, row) if row >= 64 else (1, 1, n)
    n0, n1, n2 = common

    def geometry(shape: tuple[int, ...], stride: tuple[int, ...], offset: int) -> tuple[int, int, int]:
        """A buffer's (offset, stride 0, stride 1) over the common walk; a single first dim's
        stride 0 (so that walks of one buffer compare equal)."""
        if len(shape) == 1:  # one run: contiguous, or one element (a scalar operand)
            return (offset, n1 * n2 * stride[0] if n0 > 1 else 0, n2 * stride[0])
        st = (0,) * (3 - len(stride)) + tuple(stride)
        return (offset, st[0] if n0 > 1 else 0, st[1])

    loops = kernels()
    reads: list[int] = []
    read_geo: list[tuple[int, int, int]] = []
    ops: list[tuple[int, int, int, int, int]] = []
    result_geo: list[tuple[int, int, int]] = []
    results: list[int] = []
    for k, (b, kind, variables, shape, strides, offsets) in enumerate(walks):
        geos = [geometry(shape, st, o) for st, o in zip(strides, offsets, strict=True)]
        if any(st[-1] == 0 for st in (strides[0], strides[-1])):
            return None  # only a binary op's second operand may be one element per row
        ins, out = variables[:-1], variables[-1]
        per_row = len(ins) > 1 and strides[1][-1] == 0
        if k == 0:
            reads.append(ins[0])
            read_geo.append(geos[0])
            link = 0
        else:  # the previous result, walked as it was written
            links = [x for x, v in enumerate(ins) if v == results[-1] and geos[x] == result_geo[-1]]
            if len(links) != 1 or ins.count(results[-1]) != 1:
                return None
            link = links[0]
        if kind == "cast":
            ops.append((loops.CHAIN_CAST, 0, -1, 0, 0))
        elif b.codelet.chain_op == "relu":
            ops.append((loops.CHAIN_RELU, 0, -1, 0, 0))
        else:
            other = 1 - link
            if ins[other] in results or (per_row and other != 1):
                return None  # an earlier step's result as the other operand: not held in the walk
            if ins[other] not in reads or read_geo[reads.index(ins[other])] != geos[other]:
                reads.append(ins[other])
                read_geo.append(geos[other])
                src = len(reads) - 1
            else:
                src = reads.index(ins[other])
            op = b.codelet.chain_op
            assert op is not None, "a chain's step has an op"
            code = LOOPS[op][1]
            assert code is not None, "a binary op has an op code"
            side = loops.CHAIN_LEFT if link == 0 else loops.CHAIN_RIGHT
            ops.append((side, getattr(loops, code), src, 0, int(per_row)))
        results.append(out)
        result_geo.append(geos[-1])
    table = np.array(ops, np.int64)
    table[:, 3] = len(reads) + np.arange(len(ops))  # each step's result buffer follows the reads
    geo = read_geo + result_geo
    # short rows (a layout's channel groups of 8 or 16) joined as half_maps joins a step's rows:
    # the pass's per-row work stays small beside its elements (rows of 8: ~18 ns an element)
    repeated: tuple[tuple[int, int, int, int, int, int], ...] = ()
    if not table[:, 4].any():  # no operand one element per row
        common, geo, repeated = join_rows(common, geo)
    return Chain(
        dtype,
        tuple(reads),
        tuple(results),
        np.array(common, np.int64),
        np.array(geo, np.int64),
        table,
        repeated,
    )
