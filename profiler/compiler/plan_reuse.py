"""Planning a compute set once for every compute set built the same way: a model's repeated layers
(ResNet-50's identical bottleneck blocks on one IPU, a decoder's layers over a POD16) plan their
vertices' regions and exchange once, not once a layer.

A compute set's plan (``compute_sets.ComputeSetPlanner.plan``) is a function of its vertex batches
(codelet, parameters, tiles), its fields' views of their variables, those variables' sizes and
tile mappings, and how their global element ids lie relative to each other. The exchange planner
compares element ids with each other, never with a fixed value (``exchange_reuse``'s argument), and
of two variables' ids it can tell only which come first and whether one's end is the other's start
(a region may run on across them): how far apart they are never changes a comparison. Every
per-tile figure is the tile's own. So two compute sets equal in all of that, once every variable is
numbered by its first use and every tile counted from the first tile of their lowest IPU, have the
same plan, moved by the difference of those tiles and with their variables renamed: a layer reading
a constant every layer shares (a convolution's padding element) matches although the constant lies
further from each later layer's variables. A variable laid out as a clone of its sources adds where
its elements sit on their tiles (``ElementMap.packing``, a function of the variable alone). They are
recognised by a 128-bit digest (XXH3-128, as ``exchange_reuse``) of that description, made from the
views' own few integers and run arrays: never an element's region. A compute set with a view of a
kind not described here is planned every time.

Poplar compiles a graph whole, so this is the host's shortcut, not a model of the device: a
reused plan is the plan that planning would give (``tests/profiler/test_plan_reuse.py`` holds
every per-tile figure equal to a fresh plan's).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import fields as dataclass_fields
from dataclasses import is_dataclass
from typing import Any

import numpy as np
import xxhash

from profiler.compiler.exchange_reuse import HeldPlan
from profiler.compiler.tile_span import TileSpan
from profiler.executable.plans import BatchPlan, ComputeSetPlan
from profiler.host import sorting
from profiler.poplar.graph import ComputeSet, VertexBatch
from profiler.poplar.layout import Affine, Blocks, Factored, Runs, VarRuns, Window, WindowBlocks
from profiler.poplar.tensor import Tensor
from profiler.poplar.variables import Variable

# dataclass fields of a layout that are not part of what it views: Window's index-building closure
# and its cache (both follow from its geometry)
_NOT_VIEWED = frozenset({"explicit", "_cached"})


class Unknown(Exception):
    """A view this module does not describe: the compute set is planned afresh."""


class PlanKey:
    """What identifies a compute set's plan up to a move by whole IPUs and a renaming of variables:
    ``digest``; ``base``, the first tile of its lowest IPU; ``variables``, its variables in order of
    first use (a reused plan's variable ``i`` is this compute set's ``variables[i]``)."""

    __slots__ = ("digest", "base", "variables")

    def __init__(self, digest: bytes, base: int, variables: list[int]) -> None:
        self.digest, self.base, self.variables = digest, base, variables


class _Describer:
    """Feeds a compute set's description to one digest, numbering variables by first use."""

    def __init__(self) -> None:
        self.h = xxhash.xxh3_128()
        self.local: dict[int, int] = {}

    def text(self, s: str) -> None:
        self.h.update(s.encode())
        self.h.update(b"\x00")

    def array(self, a: np.ndarray) -> None:
        a = np.asarray(a)
        if a.ndim == 1 and a.size > 1 and a.strides[0] == 0:  # a broadcast (one value a run): its value
            self.text(f"b{a.dtype.str}{a.size}")
            a = a[:1]
        self.text(f"a{a.dtype.str}{a.shape}")
        self.h.update(np.ascontiguousarray(a).data)

    def var(self, v: int) -> int:
        return self.local.setdefault(int(v), len(self.local))

    def var_array(self, vs: np.ndarray) -> None:
        """An array of variable ids, as first-use numbers: where each stretch of one variable
        begins, and its variable (a ragged field over a concatenation names a variable a run,
        millions of runs, most of them in long stretches of one variable)."""
        vs = np.asarray(vs)
        flat = vs.reshape(-1)
        self.text(f"ids{vs.shape}")
        if flat.size == 0:
            return
        begins = np.flatnonzero(np.concatenate(([True], flat[1:] != flat[:-1])))
        codes, uniq = sorting.first_appearance(flat[begins])  # numbered by first appearance
        table = np.fromiter((self.var(int(u)) for u in uniq), np.int64, len(uniq))
        self.array(begins)
        self.array(table[codes])

    def value(self, x: Any) -> None:
        """A layout or one of its parts."""
        if isinstance(x, np.ndarray):
            self.array(x)
        elif isinstance(x, Affine | Factored):  # frozen dataclasses of integers: their repr is them
            self.text(repr(x))
        elif isinstance(x, Runs | Blocks):
            self.dataclass(x)
        elif isinstance(x, VarRuns):
            self.text("VarRuns")
            self.dataclass(x.runs)
            self.var_array(x.var)
        elif isinstance(x, Window):
            self.text("Window")
            self.dataclass(x, skip={"x_var", "pad_var"})
            self.text(f"x{self.var(x.x_var)},p{-1 if x.pad_var < 0 else self.var(x.pad_var)}")
        elif isinstance(x, WindowBlocks):
            self.text("WindowBlocks")
            self.dataclass(x)
        elif x is None or isinstance(x, int | str | tuple):
            self.text(repr(x))
        else:
            raise Unknown(type(x).__name__)

    def dataclass(self, x: Any, skip: Iterable[str] = ()) -> None:
        assert is_dataclass(x)
        self.text(type(x).__name__)
        skipped = _NOT_VIEWED | set(skip)
        for f in dataclass_fields(x):
            if f.name not in skipped:
                self.text(f.name)
                self.value(getattr(x, f.name))

    def batch(self, b: VertexBatch) -> None:
        """A vertex batch's codelet, parameters and fields (its tiles are described apart)."""
        self.text(_batch(b))
        for name in sorted(b.fields):
            self.text(name)
            self.tensor(b.fields[name])

    def tensor(self, t: Tensor) -> None:
        self.text(f"T{t.dtype.str}{t.shape}")
        lay = t._lay
        if isinstance(lay, np.ndarray):  # an index per element (and maybe a variable per element)
            if isinstance(t._var, int):
                self.text(f"v{self.var(t._var)}")
            else:
                self.var_array(t._var)
            self.array(lay)
            return
        if isinstance(lay, Affine | Factored | Blocks | Runs):  # one variable
            assert isinstance(t._var, int)
            self.text(f"v{self.var(t._var)}")
        self.value(lay)


def _items(d: dict[str, Any]) -> str:
    """A codelet's attributes or a batch's parameters as text, an array by its bytes' digest (its
    repr elides a long one's middle)."""
    return repr([
        (k, f"{v.dtype.str}{v.shape}{xxhash.xxh3_128_hexdigest(np.ascontiguousarray(v).data)}")
        if isinstance(v, np.ndarray) else (k, repr(v))
        for k, v in sorted(d.items())
    ])  # fmt: skip


def _batch(b: VertexBatch) -> str:
    """A batch's codelet (its class and attributes: one holding a function repr's its address, and
    the codelets a graph holds outlive its compile) and parameters."""
    cl = b.codelet
    return f"B{type(cl).__module__}.{type(cl).__qualname__}:{cl.name}:{_items(vars(cl))}|{_items(b.params)}"


class VariableFacts:
    """What a plan key reads of each variable, found once per variable: its lowest mapped tile, and a
    digest of its size, its mapping counted from a base tile and its packed addresses (a dense
    block's concatenated features are read by every later layer of the block)."""

    def __init__(self, variables: Sequence[Variable], packing: Callable[[int], np.ndarray]) -> None:
        self.variables, self.packing = variables, packing
        self._lowest: dict[int, int | None] = {}
        self._digests: dict[tuple[int, int], bytes] = {}

    def lowest(self, v: int) -> int | None:
        """The lowest tile holding an element of variable ``v`` (None: none is mapped)."""
        if v not in self._lowest:
            tiles = self.variables[v].mapping.tiles
            mapped = tiles[tiles >= 0]
            self._lowest[v] = int(mapped.min()) if mapped.size else None
        return self._lowest[v]

    def digest(self, v: int, base: int) -> bytes:
        """Variable ``v``'s size and mapping, tiles counted from ``base``, and packed addresses."""
        found = self._digests.get((v, base))
        if found is None:
            var = self.variables[v]
            tiles = var.mapping.tiles.astype(np.int64)
            d = _Describer()
            d.text(f"V{var.numel}")
            d.array(var.mapping.starts)
            d.array(np.where(tiles >= 0, tiles - base, tiles))
            if var.clone_layout:
                d.array(self.packing(v))
            self._digests[(v, base)] = found = d.h.digest()
        return found


def plan_key(
    batches: Sequence[VertexBatch],
    kernel: Sequence[VertexBatch] | None,
    facts: VariableFacts,
    gid_base: np.ndarray,
    tiles_per_ipu: int,
) -> PlanKey | None:
    """The key of a compute set with vertex ``batches`` (merged as planned) and ``kernel``, over the
    variables ``facts`` describes (global ids from ``gid_base``); None when it cannot be described
    (``Unknown``)."""
    d = _Describer()
    try:
        for b in batches:
            d.batch(b)
        d.text(f"K{kernel is None}")
        for b in kernel or []:
            d.batch(b)
    except Unknown:
        return None
    order = list(d.local)
    lows = [low for low in (facts.lowest(v) for v in order) if low is not None]
    tiles = [int(b.tiles.min()) for b in batches if b.tiles.size]
    lowest = min(lows + tiles, default=0)
    base = lowest // tiles_per_ipu * tiles_per_ipu
    for b in batches:  # (a kernel's tiles are not planned: it is run whole, ComputeSet.kernel)
        d.array(np.subtract(b.tiles, base, dtype=np.int64))
    # where each variable's elements lie relative to the others': their order, and which of them
    # end where the next begins (all the planner can tell of the gaps between them)
    ids = np.asarray(order, dtype=np.int64)
    gids = gid_base[ids] if order else np.zeros(0, np.int64)
    by_id = np.argsort(gids, kind="stable")
    ends = gid_base[ids + 1] if order else gids
    d.array(by_id)
    d.array(ends[by_id][:-1] == gids[by_id][1:])
    for v in order:
        d.h.update(facts.digest(v, base))
    return PlanKey(d.h.digest(), base, order)


def _frozen(a: np.ndarray) -> np.ndarray:
    """``a`` made read-only: a held plan's arrays are shared by every compute set reusing it."""
    a.flags.writeable = False
    return a


class HeldComputeSetPlan:
    """A compute set's plan held relative to its key: tiles from its base, variables by first use."""

    def __init__(self, plan: ComputeSetPlan, key: PlanKey) -> None:
        base = key.base
        local = {v: i for i, v in enumerate(key.variables)}
        assert plan.tile_cycles is not None and plan.flops is not None, "held before the compiler takes its figures"
        self.exchange = HeldPlan(plan.exchange, base)
        self.global_exchange = None if plan.global_exchange is None else HeldPlan(plan.global_exchange, base)
        self.base = base
        self.tile_cycles, self.flops = TileSpan.of(plan.tile_cycles), TileSpan.of(plan.flops)
        self.reads = [local[v] for v in sorted(plan.reads)]
        self.writes = [local[v] for v in sorted(plan.writes)]
        self.fills = [local[v] for v in sorted(plan.fills)]
        self.v_tile = _frozen(np.subtract(plan.v_tile, base, dtype=np.int64))
        self.vertices = {
            name: None if getattr(plan, name) is None else _frozen(getattr(plan, name))
            for name in ("v_codelet", "v_count", "v_state", "v_cycles", "v_flops", "v_constant", "v_field_data")
        }

    def _moved(self, span: TileSpan, base: int) -> np.ndarray:
        return TileSpan(span.lo + base - self.base, span.values, span.n).dense()

    def at(
        self, key: PlanKey, n: int, cs: ComputeSet, batches: list[BatchPlan], kernel: list[BatchPlan] | None
    ) -> ComputeSetPlan:  # fmt: skip
        """The plan moved to ``key``'s base and variables, for compute set ``cs`` with its own
        ``batches`` and ``kernel`` (the engine runs them on its own fields)."""
        names, base = key.variables, key.base
        return ComputeSetPlan(
            cs, batches, kernel, self.exchange.at(base, n),
            None if self.global_exchange is None else self.global_exchange.at(base, n),
            self._moved(self.tile_cycles, base), self._moved(self.flops, base),
            {names[i] for i in self.reads}, {names[i] for i in self.writes},
            (self.v_tile + base).astype(np.int32), **self.vertices,  # type: ignore[arg-type]
            fills=frozenset(names[i] for i in self.fills),
        )  # fmt: skip
