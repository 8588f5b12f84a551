"""Planning a compute set: its vertices' cycles, FLOPs, state and code per tile, the batches the
engine runs, its kernel, and the remote reads its exchange must bring (``exchange_planning``).

Vertices are accounted columnar (arrays of tile, codelet, cycles, bytes per vertex, aggregated by
tile and codelet), never one Python object per vertex.
"""

from __future__ import annotations

import numpy as np

from profiler.chip import cost_model
from profiler.chip.codelets import Codelet
from profiler.chip.targets import Target
from profiler.compiler.element_map import ElementMap
from profiler.compiler.errors import CompileError
from profiler.compiler.exchange import ExchangePlan
from profiler.compiler.exchange_planning import RemoteReads, plan_compute_set_receives, sent_pieces
from profiler.compiler.exchange_reuse import ExchangeReuse
from profiler.compiler.plan_reuse import HeldComputeSetPlan, VariableFacts, plan_key
from profiler.executable.plans import BatchPlan, ComputeSetPlan
from profiler.host import host_memory
from profiler.poplar.graph import ComputeSet, VertexBatch
from profiler.poplar.layout import covers_all
from profiler.poplar.regions import canonical, field_regions
from profiler.poplar.tensor import Tensor, concat

# Host bytes per region a compute set's vertex fields read, while its exchange is planned: a piece's
# start, length, source and destination tiles and element size, their sorted copies and the union
# pass (checked with profiler.host.host_memory before planning).
PLAN_BYTES_PER_REGION = 160

# Fields whose pieces hold fewer elements than this on average are planned per element (packed
# keys, one sort): cheaper than the interval union when the runs are that short. Measured per piece
# or element read: ~0.7 us per piece, ~0.15-0.35 us per element (a BERT layer's single elements
# 0.3 s per element vs 1.6 s per piece; a ResNet-50 stride-2 convolution's runs of 8-9, 12 s vs 2.6 s).
SHORT_PIECE_ELEMENTS = 2


class ComputeSetPlanner:
    """Plans compute sets in program order, keeping the codelet types in use (each one's code once)."""

    def __init__(
        self, elements: ElementMap, target: Target, values: bool = True, reuse_exchanges: bool = True,
        reuse_plans: bool = True,
    ) -> None:  # fmt: skip
        self.elements = elements
        # exchange plans reused between compute sets reading alike on other IPUs (exchange_reuse)
        self.exchanges = ExchangeReuse(target.tiles_per_ipu) if reuse_exchanges else None
        # whole plans reused between compute sets built alike (plan_reuse); how many were
        self.plans: dict[bytes, HeldComputeSetPlan] | None = {} if reuse_plans else None
        self.plans_reused = 0
        self._facts: VariableFacts | None = None  # what plan keys read of each variable (plan_reuse)
        self.target = target
        self.values = values  # False (compile-only): kernels' accesses are not built (nothing runs them)
        self.codelets: list[tuple[str, Codelet]] = []  # (type name, codelet)
        self.code_bytes: list[int] = []  # each codelet type's code size (Codelet.code_size)
        self._codelet_ids: dict[str, int] = {}
        self._deferred_touched: set[int] = set()  # variables of compute sets deferring to a later kernel

    def codelet_id(self, cl: Codelet, dtypes: dict[str, np.dtype]) -> int:
        name = cl.type_name(dtypes)
        if name not in self._codelet_ids:
            self._codelet_ids[name] = len(self.codelets)
            self.codelets.append((name, cl))
            self.code_bytes.append(cl.code_size(dtypes, self.target))
        return self._codelet_ids[name]

    @staticmethod
    def merged_batches(cs: ComputeSet) -> list[VertexBatch]:
        """Batches of the same codelet, parameters, field shapes and types merged into one, so
        vertices added one at a time are planned and executed as vectorised as add_vertices ones."""
        groups: dict[tuple, list[VertexBatch]] = {}
        for b in cs.batches:
            shapes = tuple((f, t.shape[1:], t.dtype.str) for f, t in sorted(b.fields.items()))
            key = (id(b.codelet), repr(sorted(b.params.items())), shapes, b.debug_context_id)
            groups.setdefault(key, []).append(b)
        merged = []
        for bs in groups.values():
            if len(bs) == 1:
                merged.append(bs[0])
                continue
            fields = {f: concat([b.fields[f] for b in bs], axis=0) for f in bs[0].fields}
            tiles = np.concatenate([b.tiles for b in bs])
            merged.append(VertexBatch(bs[0].codelet, tiles, fields, bs[0].params, bs[0].debug_context_id))
        return merged

    def plan(self, cs: ComputeSet) -> ComputeSetPlan:
        """``cs``'s plan: an earlier compute set's moved to its tiles and variables when it is built
        alike (``plan_reuse``), else planned."""
        merged = self.merged_batches(cs)
        if self.plans is None:
            return self._plan(cs, merged)
        if self._facts is None:
            self._facts = VariableFacts(self.elements.graph.variables, self.elements.packing)
        key = plan_key(merged, cs.kernel, self._facts, self.elements.gid_base, self.target.tiles_per_ipu)
        held = None if key is None else self.plans.get(key.digest)
        if key is not None and held is not None:
            self.plans_reused += 1
            batches = [_batch_plan(b) for b in merged]
            plan = held.at(key, self.target.num_tiles, cs, batches, None)
            plan.kernel = self._kernel(cs, plan.reads, plan.writes)[0]
            return plan
        plan = self._plan(cs, merged)
        if key is not None and {*plan.reads, *plan.writes} <= set(key.variables):
            self.plans[key.digest] = HeldComputeSetPlan(plan, key)
        return plan

    def _kernel(self, cs: ComputeSet, reads: set[int], writes: set[int]) -> tuple[list[BatchPlan] | None, list[Tensor]]:
        """The compute set's kernel (``plan_kernel``) and the fields it writes, once its vertices'
        ``reads`` and ``writes`` are known; None when it has none."""
        if cs.kernel is None:
            return None, []
        # a kernel may read what the compute sets deferring to it read
        self._deferred_touched |= reads | writes
        kernel, kernel_writes = self.plan_kernel(cs, self._deferred_touched)
        if cs.kernel:
            self._deferred_touched = set()
        return kernel, kernel_writes

    def _plan(self, cs: ComputeSet, merged: list[VertexBatch]) -> ComputeSetPlan:
        t = self.target
        n = t.num_tiles
        batches: list[BatchPlan] = []
        receives: list[RemoteReads] = []  # per field, the pieces it reads from other tiles
        short_reads: list[RemoteReads] = []  # the same, of fields planned per element
        short_vars: set[int] = set()
        piece_vars: set[int] = set()
        vt, vc, vstate, vconst, vfield, vcyc, vflops, vmulti = [], [], [], [], [], [], [], []
        reads: set[int] = set()
        writes: set[int] = set()
        all_written: list[tuple[np.ndarray, np.ndarray]] = []  # every write field's regions (ComputeSetPlan.fills)
        for b in merged:
            cl = b.codelet
            shapes = {f: b.fields[f].shape[1:] for f in cl.fields}
            dtypes = {f: b.fields[f].dtype for f in cl.fields}
            cid = self.codelet_id(cl, dtypes)
            cyc, fl = cl.estimate(shapes, dtypes, b.params, t)
            count = b.count
            vt.append(b.tiles)
            vc.append(np.full(count, cid, dtype=np.int32))
            vb = cl.vertex_bytes(shapes, dtypes, b.params, t)
            vstate.append(np.full(count, vb.state, dtype=np.int64))
            vconst.append(np.full(count, vb.constant, dtype=np.int64))
            vfield.append(np.full(count, vb.field_data, dtype=np.int64))
            vcyc.append(np.full(count, cyc, dtype=np.int64))
            vflops.append(np.full(count, fl, dtype=np.int64))
            vmulti.append(np.full(count, cl.multi_worker, dtype=bool))
            for f in cl.fields:
                tensor = b.fields[f]
                if f not in cl.writes and f not in cl.reads:
                    continue
                regions = field_regions(tensor, self.elements.gid_base)
                host_memory.ensure(
                    PLAN_BYTES_PER_REGION * regions.count,
                    f"compiling compute set {cs.name!r} ({regions.count:,} regions of field {f!r})",
                )
                if f in cl.writes:
                    regions = regions.per_row()
                start, length, src, dst, shared = self.elements.field_pieces(regions, b.tiles)
                remote = src != dst
                if f in cl.writes:
                    writes |= variables_of(tensor)
                    all_written.append((regions.start, regions.length))
                    if remote.any():
                        i = int(np.flatnonzero(remote)[0])
                        raise CompileError(
                            f"compute set {cs.name!r}: output field {f!r} of {cl.name} on tile {int(dst[i])} "
                            f"writes {self.elements.element_name(int(start[i]))}, which is mapped to tile {int(src[i])}; "
                            "map vertex outputs to the vertex's tile"
                        )
                if f in cl.reads:
                    reads |= variables_of(tensor)
                    if remote.any():
                        rs, rl, rsrc = start[remote], length[remote], src[remote]
                        # unshared blocks send what is read: the same arrays, not a second copy of them
                        sent = (rs, rl, rsrc) if shared is None else sent_pieces(start, length, src, remote, shared)
                        piece = RemoteReads(rs, rl, rsrc, dst[remote], tensor.dtype.itemsize, sent)
                        short = int(piece.length.sum()) < SHORT_PIECE_ELEMENTS * piece.start.size
                        (short_reads if short else receives).append(piece)
                        (short_vars if short else piece_vars).update(variables_of(tensor))
            batches.append(_batch_plan(b))
        kernel, kernel_writes = self._kernel(cs, reads, writes)

        def cat(parts: list[np.ndarray], dtype: type) -> np.ndarray:
            return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype)

        tiles, codelet = cat(vt, np.int64), cat(vc, np.int32)
        cycles, flops, state, multi = (
            cat(vcyc, np.int64),
            cat(vflops, np.int64),
            cat(vstate, np.int64),
            cat(vmulti, bool),
        )
        tile_cycles = np.asarray(cost_model.tile_compute_cycles(tiles, cycles, multi, n, t), dtype=np.int64)
        tile_flops = np.bincount(tiles, weights=flops, minlength=n).astype(np.int64)
        # vertices aggregated by (tile, codelet)
        ncl = max(len(self.codelets), 1)
        key = tiles * ncl + codelet
        ukey, inv = np.unique(key, return_inverse=True)
        agg = lambda w: np.bincount(inv, weights=w, minlength=ukey.size).astype(np.int64)  # noqa: E731
        if short_vars & piece_vars:  # an element set may not be split between the two ways
            short_reads, receives = short_reads + receives, []
        exchange, global_exchange = self._exchange(receives, short_reads)
        return ComputeSetPlan(
            cs, batches, kernel, exchange, global_exchange, tile_cycles, tile_flops, reads, writes,
            (ukey // ncl).astype(np.int32), (ukey % ncl).astype(np.int32), agg(np.ones(key.size)),
            agg(state), agg(cycles), agg(flops), agg(cat(vconst, np.int64)), agg(cat(vfield, np.int64)),
            self._fully_written(cs, all_written, writes - reads - _kernel_reads(cs), kernel_writes),
        )  # fmt: skip

    def _exchange(
        self, receives: list[RemoteReads], short_reads: list[RemoteReads]
    ) -> tuple[ExchangePlan, ExchangePlan | None]:
        """The compute set's (on-IPU, inter-IPU) exchange plans: planned, or an earlier compute set's
        moved to its tiles when it reads alike (``exchange_reuse``)."""
        address = self.elements.addresses
        key = None if self.exchanges is None else self.exchanges.key(receives, short_reads, address)
        if key is not None and self.exchanges is not None:
            found = self.exchanges.get(key, self.target.num_tiles)
            if found is not None:
                return found
        plans = plan_compute_set_receives(receives, short_reads, int(self.elements.gid_base[-1]), self.target, address)
        if key is not None and self.exchanges is not None:
            self.exchanges.put(key, plans)
        return plans

    def plan_kernel(self, cs: ComputeSet, touched: set[int]) -> tuple[list[BatchPlan], list[Tensor]]:
        """The kernel's batches, with field accesses built now (they run every time), and the fields
        it writes (when values run: compile-only runs no kernel); a kernel must read only what the
        vertices touch, and write exactly what they write (``_fully_written`` checks)."""
        plans, kernel_writes = [], []
        for b in cs.kernel or []:
            for f in b.codelet.fields:
                t = b.fields[f]
                if not variables_of(t) <= touched:
                    raise CompileError(
                        f"compute set {cs.name!r}: its kernel field {f!r} uses variables its vertices do not"
                    )
                if f in b.codelet.writes and self.values:  # compile-only: no kernel runs, none to check
                    kernel_writes.append(t)
            plan = _batch_plan(b)
            if self.values:
                plan.fields  # noqa: B018 - build the accesses at compile time
            plans.append(plan)
        return plans, kernel_writes

    def _fully_written(
        self,
        cs: ComputeSet,
        written: list[tuple[np.ndarray, np.ndarray]],
        candidates: set[int],
        kernel_writes: list[Tensor],
    ) -> frozenset[int]:
        """The ``candidates`` the vertices' ``written`` regions cover whole (ElementMap.fully_written);
        and, with a kernel's written fields, CompileError unless those cover the same elements as
        many times. When the kernel writes whole variables, each once (the usual case: its output),
        the regions are the same elements if they cover every one of those variables and hold no
        more elements than they do: found in the same pass, no regions of the kernel's are made."""
        if not (cs.kernel and self.values):
            return self.elements.fully_written(written, candidates)
        n_want = sum(int(w[1].sum()) for w in written)
        whole = _whole_variables(self.elements, kernel_writes)
        if whole is not None:
            n_got = sum(self.elements.graph.variables[v].numel for v in whole)
            full = self.elements.fully_written(written, candidates | whole)
            same = n_got == n_want and whole <= full
            full = full & candidates
        else:
            full = self.elements.fully_written(written, candidates)
            regions = [field_regions(t, self.elements.gid_base) for t in kernel_writes]
            kernel_written = [(r.start, r.length) for r in regions]
            n_got = sum(int(r.length.sum()) for r in regions)
            same = _same_elements(written, kernel_written)
        if not same:
            raise CompileError(
                f"compute set {cs.name!r}: its kernel writes {n_got} elements, its vertices {n_want}"
                + ("" if n_want != n_got else " (different ones)")
            )
        return full


def _whole_variables(elements: ElementMap, tensors: list[Tensor]) -> set[int] | None:
    """The variables ``tensors`` write when together they take every element of each once (a whole
    variable's view, or elements of several: a concatenation's), no variable in two; else None.
    Elements are marked in a bitmap over those variables: no sort."""
    out: set[int] = set()
    listed: list[Tensor] = []
    for t in tensors:
        v = t.single_variable()
        if v is None or not covers_all(t._lay, elements.graph.variables[v].numel):
            listed.append(t)
        elif v in out:
            return None
        else:
            out.add(v)
    if listed:
        parts = [t.elements() for t in listed]
        var = np.concatenate([p[0] for p in parts]).astype(np.int64, copy=False)
        idx = np.concatenate([p[1] for p in parts]).astype(np.int64, copy=False)
        counts = np.bincount(var)
        ids = np.flatnonzero(counts)
        numel = elements.gid_base[ids + 1] - elements.gid_base[ids]
        if not out.isdisjoint(ids.tolist()) or (counts[ids] != numel).any():
            return None
        first = np.zeros(counts.size, np.int64)
        first[ids] = np.cumsum(numel) - numel
        seen = np.zeros(int(numel.sum()), bool)
        seen[first[var] + idx] = True
        if not seen.all():  # as many elements as the variables hold, so one missing means one twice
            return None
        out.update(ids.tolist())
    return out


def _kernel_reads(cs: ComputeSet) -> set[int]:
    """The variables a compute set's kernel reads."""
    return {v for b in cs.kernel or [] for f in b.codelet.reads for v in variables_of(b.fields[f])}


def _same_elements(a: list[tuple[np.ndarray, np.ndarray]], b: list[tuple[np.ndarray, np.ndarray]]) -> bool:
    """Whether two lists of (start, length) region arrays cover the same elements the same number of
    times: the same total and the same union (so, without overlaps, the same elements)."""

    def cat(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
        if not parts:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    (sa, la), (sb, lb) = cat(a), cat(b)
    if int(la.sum()) != int(lb.sum()):
        return False
    if np.array_equal(sa, sb) and np.array_equal(la, lb):  # the same regions in the same order: no sort
        return True
    ua, ub = canonical(sa, la), canonical(sb, lb)
    return all(np.array_equal(x, y) for x, y in zip(ua, ub, strict=True))


def _batch_plan(b: VertexBatch) -> BatchPlan:
    """What the engine runs of a vertex batch: its codelet, parameters and fields."""
    return BatchPlan(b.codelet, b.params, {f: b.fields[f] for f in b.codelet.fields})


def variables_of(t: Tensor) -> set[int]:
    """The ids of the variables ``t`` views."""
    return set(t.variable_ids())
