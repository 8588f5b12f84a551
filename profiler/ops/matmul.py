"""Matrix multiplication through a planner (poplin::matMul; ref §4).

``plan_matmul`` chooses, for ``[G][M][K] x [G][K][N]``, how to split groups, rows (the conv "batch
x field"), input channels (K) and output channels (N) over tiles (parallel splits), how many serial
steps to take over N and K, and which vertex (AMP partials or HMAC) computes each tile's block. The
plan minimises estimated cycles subject to the per-tile temporary memory (operand blocks received +
partials) fitting ``availableMemoryProportion`` of the tile (default 0.6, ref §4.5); when nothing
fits it takes the plan with the least temporary memory. Splitting K leaves partial sums on several
tiles; they are reduced by ``reduce_groups`` (multi-stage when deep). Serial steps run as loops
(Repeat) whose bodies dynamically slice operand chunks and update the result, as PopLibs does.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from profiler import cost_model, host_memory, layout
from profiler.dtypes import as_dtype
from profiler.graph import Graph
from profiler.ops.core import OpError, cdiv, check_same_graph, execute, linear_tiles, op, set_attributes
from profiler.ops.elementwise import _binary_codelet, _cast, apply_map, copy, fill, map_codelet
from profiler.ops.poplibs_codelets import MATMUL_CODELETS, block_cycles, dynamic_slice_cycles
from profiler.ops.reduce import COLUMN_PIECE, SINGLE_STAGE_MAX_PARTIALS, reduce_columns
from profiler.ops.slicing import dynamic_slice, dynamic_update, replicated_index, sliceable
from profiler.programs import Repeat, Sequence
from profiler.programs import Sequence as Prog
from profiler.targets import Target
from profiler.tensor import Tensor

DEFAULT_AVAILABLE_MEMORY_PROPORTION = 0.6  # ref §4.5: "The default proportion is 0.6 for both conv and matmul"
SERIAL_CHOICES = (1, 2, 4, 8, 16)
# Host bytes per vertex-field element while a step's fields are built, for operands that are explicit
# index arrays (views are blocks: a few integers per vertex) and for the result's tile of each
# element (checked with profiler.host_memory before building).
BUILD_BYTES_PER_FIELD_ELEMENT = 28
MAX_CANDIDATES = 24  # split candidates per dimension (keeps planning fast)


@dataclass(frozen=True)
class MatMulPlan:
    method: str  # "AMP" or "HMAC"
    partials_dtype: str
    group_split: int
    row_split: int  # M (conv batch x field)
    in_chan_split: int  # K, parallel
    out_chan_split: int  # N, parallel
    in_chan_serial: int
    out_chan_serial: int
    block: tuple[int, int, int, int]  # groups, rows, in chans, out chans per tile and step
    tiles: int
    cycles: int  # estimate
    temp_bytes_per_tile: int  # estimate
    budget_bytes_per_tile: int
    fits: bool

    def attributes(self) -> dict[str, Any]:
        d = asdict(self)
        d["block"] = list(self.block)
        return d


class Float8(str):
    """float8 for planning only (the C600's quarter-precision AMP, ref §3.7): graphs have no float8
    element type yet, but the planner and cost model can size and cost a float8 matmul."""

    kind, itemsize, name = "f", 1, "float8"

    def __new__(cls) -> Float8:
        return str.__new__(cls, "float8")


def _plan_dtype(dtype: object) -> Any:
    if isinstance(dtype, str) and dtype.strip().lower() in ("float8", "quarter", "fp8", "f8"):
        return Float8()
    return as_dtype(dtype)


def _grain(method: str, dtype: np.dtype, partials: np.dtype, target: Target) -> tuple[int, int]:
    """(in-chan grain, out-chan grain) of a vertex type (ref §4.2: AMP in/out chans per group)."""
    if method == "AMP":
        cfg = cost_model.amp_config(dtype, partials, target)
        return cfg.in_chans_per_group, cfg.out_chans_per_group
    return (2 if dtype.itemsize == 2 else 1), 1  # HMAC: "inChans any multiple of 2 (half) or 1"


def _candidates(n_grains: int, limit: int) -> np.ndarray:
    """Split counts to try for a dimension of ``n_grains`` grains: every split giving a distinct
    block size, thinned to at most MAX_CANDIDATES (keeping 1 and the finest)."""
    top = max(1, min(n_grains, limit))
    blocks = np.unique(-(-n_grains // np.arange(1, top + 1)))
    splits = np.unique(-(-n_grains // blocks))
    splits = splits[splits <= top]
    if splits.size > MAX_CANDIDATES:
        pick = np.unique(np.round(np.geomspace(1, splits.size, MAX_CANDIDATES)).astype(int) - 1)
        splits = splits[pick]
    return splits


def _methods(dtype: np.dtype, partials: np.dtype, target: Target) -> list[str]:
    methods = ["HMAC"]
    if dtype.kind == "f":
        try:
            cost_model.peak_flops_per_cycle(dtype, partials, target)
            methods.insert(0, "AMP")
        except ValueError:
            pass
    return methods


@functools.lru_cache(maxsize=256)  # the same layer shape recurs (ResNet blocks, transformer layers)
def plan_matmul(
    target: Target,
    groups: int,
    m: int,
    k: int,
    n: int,
    dtype: object,
    partials_dtype: object = "float32",
    available_memory_proportion: float = DEFAULT_AVAILABLE_MEMORY_PROPORTION,
) -> MatMulPlan:
    """The plan for ``groups`` independent ``[m,k] x [k,n]`` products on ``target`` (see module doc)."""
    if min(groups, m, k, n) < 1:
        raise OpError(f"matmul: empty problem G={groups} M={m} K={k} N={n}")
    if not 0 < available_memory_proportion <= 1:
        raise OpError(f"matmul: availableMemoryProportion must be in (0, 1], got {available_memory_proportion}")
    dt, pdt = _plan_dtype(dtype), as_dtype(partials_dtype)
    if dt.kind != "f":
        pdt = dt
    if dt.name == "float8" and target.fp8_flops_per_cycle <= 0:
        raise OpError(f"matmul: {target.name} ({target.architecture}) has no float8 AMP; float8 needs a C600 (ipu21)")
    tiles = target.num_tiles
    budget = int(target.bytes_per_tile * available_memory_proportion)
    eb, pb = dt.itemsize, pdt.itemsize
    xbpc = target.exchange_bytes_per_cycle
    sync = 2 * cost_model.sync_cycles("internal", target)
    best: tuple | None = None
    least: tuple | None = None
    for serial_pass in (False, True):
        for method in _methods(dt, pdt, target):
            kg, ng = _grain(method, dt, pdt, target)
            serials = [(s1, s2) for s1 in SERIAL_CHOICES for s2 in SERIAL_CHOICES if (s1 * s2 > 1) == serial_pass]
            for ks_ser, ns_ser in serials:
                k_step, n_step = -(-k // ks_ser), -(-n // ns_ser)
                # serial steps slice equal chunks dynamically: they must divide K and N
                if k % ks_ser or n % ns_ser or (ks_ser > 1 and k_step < kg) or (ns_ser > 1 and n_step < ng):
                    continue
                g_c = _candidates(groups, tiles)
                k_c = _candidates(-(-k_step // kg), tiles)
                n_c = _candidates(-(-n_step // ng), tiles)
                m_c = _candidates(m, tiles)
                for gs, ks, ns in itertools.product(g_c, k_c, n_c):
                    rest = tiles // (gs * ks * ns)
                    if rest < 1:
                        continue
                    ms = m_c[m_c <= rest]
                    gb = -(-groups // gs)
                    kb = min(k_step, cdiv(cdiv(k_step, kg), ks) * kg)
                    nb = min(n_step, cdiv(cdiv(n_step, ng), ns) * ng)
                    mb = -(-m // ms)
                    compute = gb * block_cycles(method, mb, kb, nb, dt, pdt, target)
                    operand_bytes = gb * (mb * kb + kb * nb) * eb
                    exchange = operand_bytes / xbpc
                    partial_bytes = gb * mb * nb * pb
                    if ks > 1:  # partial sums: exchanged, then reduced on the output's tile (spread linearly)
                        red = partial_bytes / xbpc + reduce_estimate(
                            gb * mb * nb, -(-groups * m * n_step // tiles), int(ks), pdt, target
                        )
                    else:
                        red = 0
                    step = compute + exchange + red + sync
                    total = step * ks_ser * ns_ser
                    if ks_ser * ns_ser > 1:
                        total = total + _serial_overhead(groups, m, k_step, n, n_step, ks_ser, ns_ser, dt, target)
                    temp = operand_bytes + partial_bytes
                    for i in range(ms.size):
                        cand = (float(total[i]), int(temp[i]), method, int(gs), int(ms[i]), int(ks), int(ns),
                                ks_ser, ns_ser, (int(gb), int(mb[i]), int(kb), int(nb)))  # fmt: skip
                        if temp[i] <= budget and (best is None or cand[:2] < best[:2]):
                            best = cand
                        if least is None or (cand[1], cand[0]) < (least[1], least[0]):
                            least = cand
        if best is not None:
            break
    chosen = best or least
    assert chosen is not None
    cyc, temp, method, gs, ms, ks, ns, ks_ser, ns_ser, block = chosen
    return MatMulPlan(
        method, pdt.name, gs, ms, ks, ns, ks_ser, ns_ser, block, gs * ms * ks * ns, int(math.ceil(cyc)), temp,
        budget, best is not None,
    )  # fmt: skip


def _serial_overhead(
    groups: int, m: int, k_step: int, n: int, n_step: int, ks_ser: int, ns_ser: int, dt: np.dtype, target: Target
) -> float:
    """Cycles the serial loops add (ref §4.4 "dynamicSlice/Update; addInPlace"): per in-chan chunk, the
    operand chunks sliced into temporaries; per step, the result chunk updated (and, with in-chan
    chunks, sliced and accumulated first); each spread over the tiles, moved at the exchange rate."""
    tiles, xbpc, eb = target.num_tiles, target.exchange_bytes_per_cycle, dt.itemsize
    sync = 2 * cost_model.sync_cycles("internal", target)
    per_outer = (groups * (m + n) * k_step * eb / tiles / xbpc + sync) if ks_ser > 1 else 0.0
    chunk = -(-groups * m * n_step // tiles)
    per_step = chunk * eb / xbpc + dynamic_slice_cycles(chunk, dt, target) + sync
    if ks_ser > 1:
        per_step = 2 * per_step + float(cost_model.binary_cycles("add", chunk, dt, target, in_place=True))
    rearrange = groups * (m * k_step * ks_ser * (ks_ser > 1) + k_step * ks_ser * n) * eb / tiles / xbpc + sync
    return rearrange + ks_ser * per_outer + ks_ser * ns_ser * per_step


def reduce_estimate(block_outputs: Any, outputs_per_tile: int, depth: int, dtype: np.dtype, target: Target) -> Any:
    """Cycles of ``reduce_columns`` for ``depth`` partials per output: per stage, pieces of
    COLUMN_PIECE outputs dealt over the workers on the busiest tile, plus a sync. With depth >= 16 a
    first stage of ~sqrt(depth) partials (ref §3.5) spreads each block's ``block_outputs`` over the
    tiles holding its partials; the last stage has ``outputs_per_tile`` (the result spread linearly)
    and receives the first stage's partials."""
    w = target.num_worker_contexts
    sync = cost_model.sync_cycles("internal", target)

    def stage(outputs: Any, d: int) -> Any:  # vectorised over outputs
        outputs = np.maximum(1, np.asarray(outputs, dtype=np.int64))
        pieces = -(-outputs // COLUMN_PIECE)
        piece = np.minimum(outputs, COLUMN_PIECE)
        return w * -(-pieces // w) * cost_model.reduce_cycles("add", d * piece, piece, dtype, target) + sync

    if depth < SINGLE_STAGE_MAX_PARTIALS:
        return stage(outputs_per_tile, depth)
    c = math.ceil(math.sqrt(depth))
    chunks = -(-depth // c)
    exchange = outputs_per_tile * chunks * dtype.itemsize / target.exchange_bytes_per_cycle
    return stage(-(-block_outputs // c), c) + exchange + stage(outputs_per_tile, chunks)


def _blocks(size: int, split: int, grain_block: int) -> tuple[np.ndarray, np.ndarray]:
    """(start, length) of each non-empty block of a dimension cut into ``split`` blocks of
    ``grain_block`` elements (the last shorter)."""
    starts = np.arange(split, dtype=np.int64) * grain_block
    lengths = np.clip(size - starts, 0, grain_block)
    keep = lengths > 0
    return starts[keep], lengths[keep]


def _run_step(
    graph: Graph,
    a: Tensor,
    b: Tensor,
    out: Tensor,
    plan: MatMulPlan,
    prog: Prog,
    name: str,
) -> None:
    """One serial step: a[G,M,Kc] x b[G,Kc,Nc] -> out[G,M,Nc] (mapped here when K is not split)."""
    G, M, K = a.shape
    N = b.shape[2]
    gb, mb, kb, nb = plan.block
    pdt = as_dtype(plan.partials_dtype)
    ks = plan.in_chan_split
    g0, gl = _blocks(G, plan.group_split, gb)
    m0, ml = _blocks(M, plan.row_split, mb)
    k0, kl = _blocks(K, ks, kb)
    n0, nl = _blocks(N, plan.out_chan_split, nb)
    # block grid (group, row block, out block, in block); the in-chan block is innermost so the
    # partials of one output block sit on consecutive tiles
    gi, mi, ni, ki = (x.ravel() for x in np.meshgrid(
        np.arange(G), np.arange(m0.size), np.arange(n0.size), np.arange(k0.size), indexing="ij"))  # fmt: skip
    tile = (((gi // gb) * plan.row_split + mi) * plan.out_chan_split + ni) * ks + ki
    split_k = k0.size > 1
    if split_k:
        partials = graph.add_variable(pdt, [k0.size, G, M, N], f"{name} partials")
        dest = partials
    elif pdt != out.dtype:
        partials = graph.add_variable(pdt, [G, M, N], f"{name} partials")
        dest = partials
    else:
        dest = out
    dest_tiles = np.empty(dest.numel(), dtype=np.int64)
    codelet = MATMUL_CODELETS[plan.method]
    cs = execute(graph, prog, name)
    shapes = np.stack([ml[mi], kl[ki], nl[ni]], axis=1)
    for shape in np.unique(shapes, axis=0):
        sel = np.flatnonzero((shapes == shape).all(axis=1))
        ms_, ks_, ns_ = (int(s) for s in shape)
        # operands held as views cost a few integers per vertex; only explicit ones an index per element
        refs = sel.size * (ms_ * ks_ * _explicit(a) + ks_ * ns_ * _explicit(b) + ms_ * ns_)
        host_memory.ensure(
            BUILD_BYTES_PER_FIELD_ELEMENT * refs, f"{name} [{G},{M},{K}]x[{K},{N}] ({refs:,} field elements)"
        )
        g, r0, c0, o0 = gi[sel], m0[mi[sel]], k0[ki[sel]], n0[ni[sel]]
        # each vertex's operand blocks (a few integers per vertex when the operands are affine views)
        o_field = dest.blocks([ki[sel], g, r0, o0], (1, 1, ms_, ns_), drop=(0, 1)) if split_k else (
            dest.blocks([g, r0, o0], (1, ms_, ns_), drop=(0,)))  # fmt: skip
        fields = {"a": a.blocks([g, r0, c0], (1, ms_, ks_), drop=(0,)),
                  "b": b.blocks([g, c0, o0], (1, ks_, ns_), drop=(0,)), "out": o_field}  # fmt: skip
        o_rows = (g * M + r0)[:, None] + np.arange(ms_)  # [vertices, ms] rows of dest's [G*M, N] view
        if split_k:
            o_rows = o_rows + (ki[sel] * (G * M))[:, None]
        dest_tiles.reshape(-1, N)[o_rows[:, :, None], (o0[:, None] + np.arange(ns_))[:, None, :]] = tile[sel][
            :, None, None
        ]
        graph.add_vertices(cs, codelet, fields, tile[sel])
    _add_kernel(graph, cs, codelet, a, b, dest, k0, kl)
    graph.set_tile_mapping(dest, dest_tiles)
    if split_k:
        reduce_columns(graph, dest.reshape(k0.size, G * M * N), out, "add", prog, name=f"{name}/reduce")
    elif dest is not out:
        graph.set_tile_mapping(out, dest_tiles)
        apply_map(graph, map_codelet("popops::Cast", _cast, 1, (("cast", "cast"),)), [dest], prog, f"{name} cast",
                  out=out)  # fmt: skip


def _explicit(t: Tensor) -> int:
    """1 when a vertex's block of ``t`` is an index per element (not an affine, blocked or window view)."""
    return int(isinstance(t._lay, np.ndarray))


def _add_kernel(
    graph: Graph, cs: Any, codelet: Any, a: Tensor, b: Tensor, dest: Tensor, k0: np.ndarray, kl: np.ndarray
) -> None:
    """The step's kernel: one coarse vertex per group and in-chan block, ``a[g, :, kblock] @ b[g,
    kblock, :]`` into that block's partials (or the result when K is not split) - the same sums as
    the per-tile blocks, without gathering operands once per tile."""
    G, M, K = a.shape
    N = b.shape[2]
    split_k = k0.size > 1
    for length in np.unique(kl):
        blocks = np.flatnonzero(kl == length)
        kb, nb = int(length), blocks.size
        first = int(k0[blocks[0]])
        if nb == 1 and kb == K:  # the whole operands (kept as views: a convolution window stays one)
            av, bv = a, b
        elif np.array_equal(k0[blocks], first + np.arange(nb) * kb):  # consecutive blocks: views, no index each
            if isinstance(a._lay, layout.Window):
                av = Tensor(a.graph, a.single_variable(), layout.WindowSplit(a._lay, first, nb, kb), a.dtype)  # type: ignore[arg-type]
            else:
                av = a[:, :, first : first + nb * kb].reshape(G, M, nb, kb).transpose(0, 2, 1, 3).reshape(G * nb, M, kb)
            bv = b[:, first : first + nb * kb, :].reshape(G * nb, kb, N)
        else:
            cols = (k0[blocks][:, None] + np.arange(kb)).reshape(-1)  # [blocks * kb]
            av = a[:, :, cols].reshape(G, M, nb, kb).transpose(0, 2, 1, 3).reshape(G * nb, M, kb)
            bv = b[:, cols, :].reshape(G, nb, kb, N).reshape(G * nb, kb, N)
        consecutive = blocks.size and np.array_equal(blocks, blocks[0] + np.arange(blocks.size))
        chosen = dest[int(blocks[0]) : int(blocks[-1]) + 1] if consecutive else dest[blocks]
        ov = chosen.transpose(1, 0, 2, 3) if split_k else dest.expand(1)  # [G, nb, M, N]
        graph.add_kernel(cs, codelet, {"a": av, "b": bv, "out": ov.reshape(G * nb, M, N)})


@op("MatMul")
def matmul(
    graph: Graph,
    a: Tensor,
    b: Tensor,
    prog: Prog,
    partials_dtype: object = "float32",
    available_memory_proportion: float = DEFAULT_AVAILABLE_MEMORY_PROPORTION,
    out_dtype: object | None = None,
) -> Tensor:
    """``a @ b`` for ``a[M,K] b[K,N]`` or grouped ``a[G,M,K] b[G,K,N]`` (poplin::matMul / matMulGrouped)."""
    check_same_graph(graph, a, b, what="matmul")
    grouped = a.rank == 3
    if a.rank not in (2, 3) or b.rank != a.rank or a.shape[-1] != b.shape[-2] or (grouped and a.shape[0] != b.shape[0]):
        raise OpError(f"matmul: shapes {a.shape} and {b.shape} do not multiply ([G,]M,K x [G,]K,N)")
    if a.dtype != b.dtype:
        raise OpError(f"matmul: operands have types {a.dtype.name} and {b.dtype.name}; cast one first")
    a3, b3 = (a, b) if grouped else (a.expand(0), b.expand(0))
    G, M, K = a3.shape
    N = b3.shape[2]
    plan = plan_matmul(graph.target, G, M, K, N, a.dtype, partials_dtype, available_memory_proportion)
    set_attributes(graph, {"shape": {"G": G, "M": M, "K": K, "N": N}, "dtype": a.dtype.name, **plan.attributes()})
    odt = a.dtype if out_dtype is None else as_dtype(out_dtype)
    if plan.in_chan_serial * plan.out_chan_serial > 1:
        out = _serial_loop(graph, a3, b3, plan, odt, prog)
    else:
        out = graph.add_variable(odt, [G, M, N], "matmul out")
        if plan.in_chan_split > 1:  # reduced results land spread linearly over the tiles
            graph.map_linearly(out)
        _run_step(graph, a3, b3, out, plan, prog, "matmul")
    return out if grouped else out.reshape(M, N)


def _sliceable(graph: Graph, dtype: np.dtype, shape: tuple[int, ...], levels: int) -> Tensor:
    """A tensor whose first ``levels`` dims are slice indices: the positions of a slice are spread
    linearly over the tiles, identically for every slice (so dynamic slices stay on-tile)."""
    t = graph.add_variable(dtype, shape, "serial operand")
    slices = int(np.prod(shape[:levels], dtype=np.int64))
    per = int(np.prod(shape[levels:], dtype=np.int64))
    graph.set_tile_mapping(t, np.broadcast_to(linear_tiles(per, graph.target.num_tiles), (slices, per)).reshape(-1))
    return t


def _increment(x: np.ndarray) -> np.ndarray:
    return x + 1


def _serial_loop(graph: Graph, a3: Tensor, b3: Tensor, plan: MatMulPlan, odt: np.dtype, prog: Prog) -> Tensor:
    """Serial splits as PopLibs runs them (ref §4.3): loops over in-chan chunks (outer) and out-chan
    chunks (inner) whose bodies dynamically slice the operand chunks into temporaries, run the
    per-step plan and dynamically update (accumulating over in-chan chunks) the result."""
    G, M, K = a3.shape
    N = b3.shape[2]
    sk_n, sn_n = plan.in_chan_serial, plan.out_chan_serial
    k_step, n_step = K // sk_n, N // sn_n
    # the result as sn_n slices mapped alike, so each tile updates its own positions of any slice
    store = sliceable(graph, odt, (sn_n, G, M, n_step), "matmul out")
    # loop counters replicated on every tile, so no slice waits for an index broadcast from one tile
    ck, cn = replicated_index(graph, "in-chan chunk"), replicated_index(graph, "out-chan chunk")
    inc = map_codelet("popops::AddScalarInPlace", _increment, 1, (("binary", "add"),), True)
    fill(graph, ck, 0, prog)
    if sk_n > 1:
        fill(graph, store, 0.0, prog)
    # rearrange the operands once so every chunk of a position sits on one tile ("rearrangeBeforeSlice",
    # ref §4.4): the slices in the loops are then on-tile copies
    b_src = b3.reshape(G, sk_n, k_step, sn_n, n_step).transpose(1, 3, 0, 2, 4)
    b_s = copy(graph, b_src, prog, dst=_sliceable(graph, b3.dtype, b_src.shape, 2), debug_name="rearrange rhs")
    outer = Sequence(name="matmul in-chan serial loop")
    if sk_n > 1:
        a_src = a3.reshape(G, M, sk_n, k_step).transpose(2, 0, 1, 3)
        a_s = copy(graph, a_src, prog, dst=_sliceable(graph, a3.dtype, a_src.shape, 1), debug_name="rearrange lhs")
        a_chunk = dynamic_slice(graph, a_s, ck, outer)
        b_chunk = dynamic_slice(graph, b_s, ck, outer)
    else:
        a_chunk, b_chunk = a3, b_s[0]
    fill(graph, cn, 0, outer)
    inner = Sequence(name="matmul out-chan serial loop")
    b_step = b_chunk[0] if sn_n == 1 else dynamic_slice(graph, b_chunk, cn, inner)
    step_out = graph.add_variable(odt, [G, M, n_step], "matmul step out")
    if plan.in_chan_split > 1:
        graph.map_linearly(step_out)
    _run_step(graph, a_chunk, b_step, step_out, plan, inner, "matmul step")
    if sk_n > 1:  # accumulate this in-chan chunk's contribution
        current = dynamic_slice(graph, store, cn, inner)
        apply_map(graph, _binary_codelet("add", in_place=True), [current, step_out], inner, "accumulate")
        step_out = current
    dynamic_update(graph, store, step_out, cn, inner)
    apply_map(graph, inc, [cn], inner, "next out-chan chunk")
    outer.add(Repeat(sn_n, inner, name="out-chan serial"))
    apply_map(graph, inc, [ck], outer, "next in-chan chunk")
    prog.add(Repeat(sk_n, outer, name="in-chan serial"))
    return store.transpose(1, 2, 0, 3).reshape(G, M, N)
