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
import math
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from profiler.chip import cost_model
from profiler.chip.dtypes import as_dtype, is_float8
from profiler.chip.targets import Target
from profiler.host import host_memory, sorting
from profiler.ops.core import OpError, cdiv, check_same_graph, execute, linear_tiles, op, set_attributes
from profiler.ops.elementwise import _binary_codelet, _cast, apply_map, copy, fill, map_codelet
from profiler.ops.matmul_reduce import BlockGrid, reduce_block_major, stage_depths
from profiler.ops.poplibs_codelets import (
    MATMUL_CODELETS,
    ConvWindow,
    block_cycles,
    dynamic_slice_cycles,
    runs_nx1,
    slic_allowed,
    slic_tile_cycles,
)
from profiler.ops.slicing import dynamic_slice, dynamic_update, map_slices_alike, replicated_index
from profiler.poplar.graph import Graph
from profiler.poplar.layout import Affine, Factored, VarRuns, Window, WindowBlocks
from profiler.poplar.programs import Repeat, Sequence, WriteUndef
from profiler.poplar.programs import Sequence as Prog
from profiler.poplar.tensor import Tensor
from profiler.poplar.variables import FEW_ELEMENTS

DEFAULT_AVAILABLE_MEMORY_PROPORTION = 0.6  # ref §4.5: "The default proportion is 0.6 for both conv and matmul"
SERIAL_CHOICES = (1, 2, 4, 8, 16)
# Host bytes per vertex-field element while a step's fields are built, for operands that are explicit
# index arrays (views are blocks: a few integers per vertex) and for the result's tile of each
# element (checked with profiler.host.host_memory before building).
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
    # computed as out^T = b^T a^T (PopLibs' swapOperands transform): the vertices' field runs over
    # the block's out chans and their out channels over its rows; splits and blocks stay unswapped
    swap_operands: bool = False
    # a convolution's im2col product: (kernel height, kernel width, output row width), which its AMP
    # vertices are costed by (ConvPartialnx1 for a kernel wider than 1x1); None for a matmul
    conv: ConvWindow | None = None
    # a SLIC plan's innermost output stride (its vertices' cost depends on it); 0 for other methods
    slic_stride: int = 0

    def attributes(self) -> dict[str, Any]:
        d = asdict(self)
        d["block"] = list(self.block)
        if not self.slic_stride:
            del d["slic_stride"]
        if self.conv is None:
            del d["conv"]
        else:
            d["conv"] = list(self.conv)
        return d


class Float8(str):
    """float8 as the planner sees it (the C600's quarter-precision AMP, ref §3.7): both of Graphcore's
    FP8 formats (profiler.chip.dtypes) plan and cost alike, one byte an element."""

    kind, itemsize, name = "f", 1, "float8"

    def __new__(cls) -> Float8:
        return str.__new__(cls, "float8")


def _plan_dtype(dtype: object) -> Any:
    if isinstance(dtype, str) and dtype.strip().lower() in ("float8", "quarter", "fp8", "f8"):
        return Float8()
    if is_float8(dtype):  # type: ignore[arg-type]
        return Float8()
    return as_dtype(dtype)


def _grain(method: str, dtype: np.dtype, partials: np.dtype, target: Target) -> tuple[int, int]:
    """(in-chan grain, out-chan grain) of a vertex type (ref §4.2: AMP in/out chans per group)."""
    if method == "AMP":
        cfg = cost_model.amp_config(dtype, partials, target)
        return cfg.in_chans_per_group, cfg.out_chans_per_group
    if method == "SLIC":  # a block holds its conv groups' whole channels (_search); no channel-grouped store
        return 1, 1
    return (2 if dtype.itemsize == 2 else 1), 1  # HMAC: "inChans any multiple of 2 (half) or 1"


def _candidates(n_grains: int, limit: int) -> np.ndarray:
    """Split counts to try for a dimension of ``n_grains`` grains: every split giving a distinct
    block size, thinned to at most MAX_CANDIDATES (keeping 1 and the finest)."""
    top = max(1, min(n_grains, limit))
    blocks = sorting.unique(-(-n_grains // np.arange(1, top + 1)))
    splits = sorting.unique(-(-n_grains // blocks))
    splits = splits[splits <= top]
    if splits.size > MAX_CANDIDATES:
        pick = sorting.unique(np.round(np.geomspace(1, splits.size, MAX_CANDIDATES)).astype(int) - 1)
        splits = splits[pick]
    return splits


def _methods(dtype: np.dtype, partials: np.dtype, target: Target, slic: bool = False) -> list[str]:
    methods = ["HMAC"] + (["SLIC"] if slic and cost_model.slic_candidates(dtype, partials, target) else [])
    if dtype.kind == "f":
        try:
            cost_model.peak_flops_per_cycle(dtype, partials, target)
            methods.insert(0, "AMP")
        except ValueError:
            pass
    return methods


# the same layer shape recurs (ResNet blocks, transformer layers); ``conv`` and ``slic_stride`` are
# keyword-only, so every caller asks alike and a problem takes one cache entry (a convolution's
# weights mapped by keyword and its product planned by position took two)
@functools.lru_cache(maxsize=256)
def plan_matmul(
    target: Target,
    groups: int,
    m: int,
    k: int,
    n: int,
    dtype: object,
    partials_dtype: object = "float32",
    available_memory_proportion: float = DEFAULT_AVAILABLE_MEMORY_PROPORTION,
    *,
    conv: ConvWindow | None = None,
    slic_stride: int = 0,
) -> MatMulPlan:
    """The plan for ``groups`` independent ``[m,k] x [k,n]`` products on ``target`` (see module doc).

    Both operand orders are planned, as PopLibs does for a matmul (ConvPlan.cpp
    ``getSwapOperandCandidates``: for the fully-connected and NONE_MATMUL passes the swapped
    candidate first, "more likely to be optimal", so it wins a tie). Swapping computes
    ``out^T = b^T a^T``: the vertex's field runs over ``n`` and its out channels over ``m``, which is
    what makes a few-row matmul (a dense layer's small batch) efficient on the AMP, whose cost per
    out-channel group is paid once per field pass. The data each tile holds and receives is the same
    in both orders, so a swapped plan is returned in the unswapped form (row split over ``m``,
    out-chan split over ``n``) with ``swap_operands`` set: only its vertices are costed swapped.

    ``conv``: the product is a convolution's (its im2col view, ``m`` output positions): with a kernel
    wider than 1x1 its AMP blocks are costed as ConvPartialnx1 and the operands are not swapped (the
    swapped convolution's kernel would be the field: ConvPlan.cpp swapOperands).

    ``slic_stride``: the convolution's innermost output stride when PopLibs may run it on the SLIC vertex
    (1 or 2, no kernel dilation: ConvModel.cpp addSLICConstraints), else 0. SLIC is then one more
    method: a tile's block holds whole conv groups' channels (at most 4 in and out channels a group,
    ConvVertexType.cpp getConvVertexSLICCandidates) and one vertex computes all its conv groups
    (PoplibsCodelets ``slic_tile_cycles``)."""
    if min(groups, m, k, n) < 1:
        raise OpError(f"matmul: empty problem G={groups} M={m} K={k} N={n}")
    if not 0 < available_memory_proportion <= 1:
        raise OpError(f"matmul: availableMemoryProportion must be in (0, 1], got {available_memory_proportion}")
    dt, pdt = _plan_dtype(dtype), as_dtype(partials_dtype)
    if dt.kind != "f":
        pdt = dt
    if dt.name == "float8" and target.fp8_flops_per_cycle <= 0:
        raise OpError(f"matmul: {target.name} ({target.architecture}) has no float8 AMP; float8 needs a C600 (ipu21)")
    budget = int(target.bytes_per_tile * available_memory_proportion)
    # swapped first (PopLibs' order); a swapped plan's out-chan serial split would run over m, which
    # the serial loops (over n) do not implement, so the swapped search keeps out-chan serial 1
    swapped = (None, None) if runs_nx1(conv) else _search(target, groups, n, k, m, dt, pdt, budget, out_serial=False)
    plain = _search(target, groups, m, k, n, dt, pdt, budget, out_serial=True, conv=conv, slic_stride=slic_stride)
    (sw_best, sw_least), (best, least) = swapped, plain
    swap = False
    if sw_best is not None and (best is None or sw_best[:2] <= best[:2]):
        chosen, fits, swap = sw_best, True, True
    elif best is not None:
        chosen, fits = best, True
    else:
        assert least is not None
        swap = sw_least is not None and (sw_least[1], sw_least[0]) <= (least[1], least[0])
        chosen, fits = (sw_least if swap else least), False
    cyc, temp, method, gs, ms, ks, ns, ks_ser, ns_ser, block = chosen
    if swap:  # back to the unswapped form: the swapped rows are n, its out chans m
        ms, ns = ns, ms
        block = (block[0], block[3], block[2], block[1])
    return MatMulPlan(
        method, pdt.name, gs, ms, ks, ns, ks_ser, ns_ser, block, gs * ms * ks * ns, int(math.ceil(cyc)), temp,
        budget, fits, swap, None if swap else conv, slic_stride if method == "SLIC" else 0,
    )  # fmt: skip


def _search(
    target: Target, groups: int, m: int, k: int, n: int, dt: Any, pdt: np.dtype, budget: int, out_serial: bool,
    conv: ConvWindow | None = None, slic_stride: int = 0,
) -> tuple[tuple | None, tuple | None]:  # fmt: skip
    """(fastest plan fitting ``budget``, plan with the least temporary memory) for ``[m,k] x [k,n]``,
    each as a tuple (cycles, temp bytes, method, splits g m k n, serial k n, block).

    Candidates are costed as arrays, all splits of one (serial steps, method) at once; ties go to
    the first in the order (serial pass, method, serial steps, group, in-chan, out-chan, row split)."""
    found: list[dict[str, Any]] = []
    for serial_pass in (False, True):
        slic = slic_allowed(conv, slic_stride, k, n)
        for method in _methods(dt, pdt, target, slic):
            kg, ng = (k, n) if method == "SLIC" else _grain(method, dt, pdt, target)
            serials = [(s1, s2) for s1 in SERIAL_CHOICES for s2 in SERIAL_CHOICES if (s1 * s2 > 1) == serial_pass]
            if method == "SLIC":  # whole channels a tile: no serial split of K or N
                serials = [] if serial_pass else [(1, 1)]
            for ks_ser, ns_ser in serials:
                k_step, n_step = -(-k // ks_ser), -(-n // ns_ser)
                # serial steps slice equal chunks dynamically: they must divide K and N
                if k % ks_ser or n % ns_ser or (ks_ser > 1 and k_step < kg) or (ns_ser > 1 and n_step < ng):
                    continue
                if ns_ser > 1 and not out_serial:
                    continue
                c = _costed(target, groups, m, k_step, n, n_step, dt, pdt, method, kg, ng, ks_ser, ns_ser, conv,
                            slic_stride)  # fmt: skip
                if c is not None:
                    found.append(c)
        fitting = [c for c in found if (c["temp"] <= budget).any()]
        if fitting:
            break
    if not found:
        return None, None
    every = {key: np.concatenate([c[key] for c in found]) for key in found[0]}
    best = None
    if fitting:  # least (cycles, temp) among those fitting; the first of equals (a stable sort)
        fit = np.flatnonzero(every["temp"] <= budget)
        best = _candidate(every, fit[np.lexsort((every["temp"][fit], every["total"][fit]))[0]])
    least = _candidate(every, np.lexsort((every["total"], every["temp"]))[0])
    return best, least


def _costed(
    target: Target, groups: int, m: int, k_step: int, n: int, n_step: int, dt: Any, pdt: np.dtype, method: str,
    kg: int, ng: int, ks_ser: int, ns_ser: int, conv: ConvWindow | None = None, slic_stride: int = 0,
) -> dict[str, Any] | None:  # fmt: skip
    """Every split candidate for one method and serial-step pair, costed as arrays (one entry per
    candidate, in the order group, in-chan, out-chan, row split)."""
    tiles = target.num_tiles
    eb, pb = dt.itemsize, pdt.itemsize
    g_c = _candidates(groups, tiles)
    k_c = _candidates(-(-k_step // kg), tiles)
    n_c = _candidates(-(-n_step // ng), tiles)
    m_c = _candidates(m, tiles)
    gs, ks, ns, ms = (x.ravel() for x in np.meshgrid(g_c, k_c, n_c, m_c, indexing="ij"))
    keep = ms <= tiles // (gs * ks * ns)  # row splits that fit the tiles the other splits leave
    if not keep.any():
        return None
    gs, ks, ns, ms = gs[keep], ks[keep], ns[keep], ms[keep]
    gb = -(-groups // gs)
    kb = np.minimum(k_step, cdiv(cdiv(k_step, kg), ks) * kg)
    nb = np.minimum(n_step, cdiv(cdiv(n_step, ng), ns) * ng)
    mb = -(-m // ms)
    if method == "SLIC":  # one vertex for the tile's gb conv groups
        assert conv is not None
        vertex = slic_tile_cycles(gb, mb, kb, nb, dt, pdt, target, conv, slic_stride)
    else:
        vertex = gb * block_cycles(method, mb, kb, nb, dt, pdt, target, conv)
    compute = vertex + cost_model.COMPUTE_SET_SUPERVISOR_CYCLES
    operand_bytes = gb * (mb * kb + kb * nb) * eb
    exchange = operand_exchange_cycles(gb * mb * kb * eb, gb * kb * nb * eb, ns, ms, target)
    partial_bytes = gb * mb * nb * pb
    red = np.zeros(gs.size, dtype=np.int64)
    for depth in sorting.unique(ks[ks > 1]):  # the reduction's stages depend on its depth
        sel = ks == depth
        red[sel] = reduce_cost(gb[sel] * mb[sel] * nb[sel], int(depth), pdt, target)
    step = compute + exchange + red + cost_model.sync_cycles("internal", target)
    total: Any = step * ks_ser * ns_ser
    if ks_ser * ns_ser > 1:
        total = total + _serial_overhead(groups, m, k_step, n, n_step, ks_ser, ns_ser, dt, target)
    return {
        "total": np.asarray(total, dtype=np.float64), "temp": operand_bytes + partial_bytes,
        "method": np.full(gs.size, method), "gs": gs, "ms": ms, "ks": ks, "ns": ns,
        "ks_ser": np.full(gs.size, ks_ser), "ns_ser": np.full(gs.size, ns_ser),
        "gb": gb, "mb": mb, "kb": kb, "nb": nb,
    }  # fmt: skip


def _candidate(c: dict[str, np.ndarray], i: int) -> tuple:
    """Candidate ``i`` as the planner's tuple (cycles, temp bytes, method, splits g m k n, serial k n, block)."""
    return (float(c["total"][i]), int(c["temp"][i]), str(c["method"][i]), int(c["gs"][i]), int(c["ms"][i]),
            int(c["ks"][i]), int(c["ns"][i]), int(c["ks_ser"][i]), int(c["ns_ser"][i]),
            (int(c["gb"][i]), int(c["mb"][i]), int(c["kb"][i]), int(c["nb"][i])))  # fmt: skip


def _serial_overhead(
    groups: int, m: int, k_step: int, n: int, n_step: int, ks_ser: int, ns_ser: int, dt: np.dtype, target: Target
) -> float:
    """Cycles the serial loops add (ref §4.4 "dynamicSlice/Update; addInPlace"): per in-chan chunk, the
    operand chunks sliced into temporaries; per step, the result chunk updated (and, with in-chan
    chunks, sliced and accumulated first); each spread over the tiles, moved at the exchange rate."""
    tiles, xbpc, eb = target.num_tiles, target.exchange_bytes_per_cycle, dt.itemsize
    # the result chunks are in the matmul's output type: half for FP8 operands (``matmul``'s odt)
    rdt = np.dtype(np.float16) if isinstance(dt, Float8) or is_float8(dt) else dt
    sync = 2 * cost_model.sync_cycles("internal", target)
    per_outer = (groups * (m + n) * k_step * eb / tiles / xbpc + sync) if ks_ser > 1 else 0.0
    chunk = -(-groups * m * n_step // tiles)
    per_step = chunk * rdt.itemsize / xbpc + dynamic_slice_cycles(chunk, rdt, target) + sync
    if ks_ser > 1:
        per_step = 2 * per_step + float(cost_model.binary_cycles("add", chunk, rdt, target, in_place=True))
    rearrange = groups * (m * k_step * ks_ser * (ks_ser > 1) + k_step * ks_ser * n) * eb / tiles / xbpc + sync
    return rearrange + ks_ser * per_outer + ks_ser * ns_ser * per_step


def operand_exchange_cycles(a_block: Any, b_block: Any, out_split: Any, row_split: Any, target: Target) -> Any:
    """Cycles of a step's operand exchange with operands laid out for the plan (``create_matmul_lhs``
    / ``_rhs`` or rearranged first; docs/fidelity.md "Exchange model" item 6, ref §3.8): a tile owns
    1/out_split of its lhs block and 1/row_split of its rhs block and receives the rest (an
    all-gather, each piece sent once); the lhs block is shared by out-chan neighbours, so with an
    even out_split both tiles of a supertile receive it at twice the rate. Vectorised over the splits."""
    row_split, out_split = np.asarray(row_split), np.asarray(out_split)
    a_in = a_block * (1 - 1 / out_split) / np.where(out_split % 2 == 0, 2, 1)
    b_in = b_block * (1 - 1 / row_split)
    total = np.ceil(a_in + b_in).astype(np.int64)
    return np.asarray(cost_model.exchange_cycles(total, np.zeros_like(total), target))


def reduce_cost(block_outputs: Any, depth: int, partials: np.dtype, target: Target) -> Any:
    """Cycles of ``matmul_reduce.reduce_partials`` for ``depth`` partials per output (vectorised over
    ``block_outputs``): per stage a sync, the exchange of the (d - 1) remote partials of each
    reducer's chunk, and the ReduceAdd vertex (cost_model.conv_reduce_cycles) with the compute set's
    supervisor overhead."""
    sync = cost_model.sync_cycles("internal", target)
    bo = np.maximum(1, np.asarray(block_outputs, dtype=np.int64))
    total: Any = 0
    p = depth
    depths = stage_depths(depth)
    for i, d in enumerate(depths):
        nq = 1 if i == len(depths) - 1 else -(-p // d)
        reducers = max(1, depth // nq)
        chunk = -(-bo // reducers)
        recv = chunk * (d - 1) * partials.itemsize
        exchange = cost_model.exchange_cycles(recv, np.zeros_like(recv), target)
        work = cost_model.conv_reduce_cycles(chunk, d, partials, target) + cost_model.COMPUTE_SET_SUPERVISOR_CYCLES
        total = total + sync + exchange + work
        p = nq
    return total


def _blocks(size: int, split: int, grain_block: int) -> tuple[np.ndarray, np.ndarray]:
    """(start, length) of each non-empty block of a dimension cut into ``split`` blocks of
    ``grain_block`` elements (the last shorter)."""
    starts = np.arange(split, dtype=np.int64) * grain_block
    lengths = np.clip(size - starts, 0, grain_block)
    keep = lengths > 0
    return starts[keep], lengths[keep]


def _tile_of_block(plan: MatMulPlan, gi: Any, mi: Any, ki: Any, ni: Any) -> Any:
    """The tile of block (group, row block, in-chan block, out-chan block), linearised as PopLibs orders a
    convolution's partition (lib/poplin/Convolution.cpp ``linearizeConvIndices``, outer to inner: conv
    group, in-chan, kernel, batch, field, out-chan): out channels innermost "to increase the chance that
    tiles in a supertile both read the same activations" (ref §4.6), in channels outermost. The
    convolution's field and out channels are ``m`` and ``n`` unswapped, ``n`` and ``m`` in a swapped plan
    (``out^T = b^T a^T``), as ``operand_exchange_cycles`` plans them."""
    g = gi // plan.block[0]
    if plan.swap_operands:
        return ((g * plan.in_chan_split + ki) * plan.out_chan_split + ni) * plan.row_split + mi
    return ((g * plan.in_chan_split + ki) * plan.row_split + mi) * plan.out_chan_split + ni


# PopLibs maps a conv/matmul operand by use with at least this many bytes per tile, "to reduce the
# amount of exchange code" at some cost in balance (poplin Convolution.cpp mapActivationsOrWeights:
# minBytesPerTile = isActs ? 128 : 256; the weights are the rhs, or the lhs when operands are swapped).
MIN_OPERAND_BYTES_PER_TILE = {"acts": 128, "weights": 256}


def by_columns(t: Tensor) -> bool:
    """Whether ``t`` (a matmul operand) is stored column by column (its rows' stride 1, as a conv's
    weights [Cout, kh, kw, Cin] are for their [K, Cout] view): its shares then follow columns."""
    lay = t.affine
    return lay is not None and min(lay.shape[-2:]) > 1 and lay.strides[-2] == 1 and lay.strides[-1] != 1


def operand_tiles(
    plan: MatMulPlan, shape: tuple[int, int, int, int], side: str, elem_bytes: int, columns: bool = False
) -> np.ndarray:
    """The tile of each element of the lhs ``[G, M, K]`` (side "lhs") or rhs ``[G, K, N]`` (side
    "rhs"), flattened, as PopLibs' createMatMulInputLHS / RHS lay them out for ``plan`` (ref §3.8,
    §4): each tile's block is shared by the tiles that read it (lhs: the out-chan split; rhs: the row
    split) and cut into shares owned by the sharing tiles, so the step's exchange is one all-gather
    per block. As in PopLibs' mapping by use (TensorUseTracker::mapTensorsByUse), a share holds at
    least MIN_OPERAND_BYTES_PER_TILE, so small blocks are owned by fewer tiles than share them. Shares
    follow block rows where there are enough rows: for an operand mapped in its own (row-major) order
    a whole block row is the contiguous run (a share cut mid-row would be two regions), or with
    ``columns`` (an operand stored column by column, ``by_columns``) block columns. Operands the
    planner creates are stored in PopLibs' grouped order instead (``grouped_store``, ``grouped_runs``)."""
    rows, rb, cols, cb, owners, tile, group = _share_plan(plan, shape, side, elem_bytes)
    if columns:  # the same over the transposed blocks: shares follow block columns
        grid = _share_tiles(cols, cb, rows, rb, owners, lambda c, r, share: tile(r, c, share)).T
    else:
        grid = _share_tiles(rows, rb, cols, cb, owners, tile)
    return (group[:, None, None] + grid[None, :, :]).reshape(-1).astype(np.int64, copy=False)


def operand_runs(
    plan: MatMulPlan, shape: tuple[int, int, int, int], side: str, elem_bytes: int, columns: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``operand_tiles`` as its maximal runs of elements on one tile: (start, length, tile) of each,
    in element order; with ``columns`` (shares by block columns, an operand stored column by column)
    in the order of the operand transposed, its storage order (``columns_view``). Built per row and
    column block (per element only in rows of blocks with fewer rows than owners), so mapping an
    operand or comparing its mapping takes no tile per element."""
    rows, rb, cols, cb, owners, tile, group = _share_plan(plan, shape, side, elem_bytes)
    if columns:  # the transposed grid's pieces: row-major over [cols, rows]
        start, _, tiles = _share_pieces(cols, cb, rows, rb, owners, lambda c, r, share: tile(r, c, share))
    else:
        start, _, tiles = _share_pieces(rows, rb, cols, cb, owners, tile)
    start = (np.arange(group.size)[:, None] * (rows * cols) + start[None, :]).reshape(-1)
    tiles = (group[:, None] + tiles[None, :]).reshape(-1)
    keep = np.ones(tiles.size, dtype=bool)
    keep[1:] = tiles[1:] != tiles[:-1]  # neighbouring pieces on one tile are one run
    start, tiles = start[keep], tiles[keep]
    return start, np.diff(np.append(start, group.size * rows * cols)), tiles


def _share_plan(plan: MatMulPlan, shape: tuple[int, int, int, int], side: str, elem_bytes: int) -> tuple:
    """What ``operand_tiles`` cuts into shares: (rows, row block, cols, col block, owners(rows, cols)
    of a block, tile(row block, col block, share) of group 0, the tile offset of each group)."""
    G, M, K, N = shape
    _, mb, kb, nb = plan.block
    nm, nn = -(-M // mb), -(-N // nb)
    acts_side = "rhs" if plan.swap_operands else "lhs"
    min_bytes = MIN_OPERAND_BYTES_PER_TILE["acts" if side == acts_side else "weights"]
    rb, cb, rows, cols, sharers = (mb, kb, M, K, nn) if side == "lhs" else (kb, nb, K, N, nm)

    def tile(ri: Any, ci: Any, share: Any) -> Any:  # of group 0: a group adds _tile_of_block(plan, g, 0, 0, 0)
        return _tile_of_block(plan, 0, ri, ci, share) if side == "lhs" else _tile_of_block(plan, 0, share, ri, ci)

    def owners(rl: np.ndarray, cl: np.ndarray) -> np.ndarray:  # tiles owning a share of a block
        return np.clip(rl * cl * elem_bytes // min_bytes, 1, sharers)

    group = _tile_of_block(plan, np.arange(G), 0, 0, 0).astype(np.int64)
    return rows, rb, cols, cb, owners, tile, group


def _share_tiles(rows: int, rb: int, cols: int, cb: int, owners: Callable, tile: Callable) -> np.ndarray:
    """``operand_tiles`` of one group as a [rows, cols] grid of rb x cb blocks whose shares follow
    block rows: its pieces (``_share_pieces``) expanded to columns once, not a dozen passes over
    every element. ``tile(row block, column block, share)``."""
    _, length, tiles = _share_pieces(rows, rb, cols, cb, owners, tile)
    return np.repeat(tiles, length).reshape(rows, cols)


def _share_pieces(
    rows: int, rb: int, cols: int, cb: int, owners: Callable, tile: Callable
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The [rows, cols] grid of ``_share_tiles`` as pieces in row-major order: (start, length, tile)
    of each. A share is whole block rows unless a block has fewer rows than owners, so a row's piece
    is a column block; in rows of such blocks, one element."""
    r = np.arange(rows)
    ri = r // rb
    rl, row = np.minimum(rb, rows - ri * rb), r - ri * rb
    cbi = np.arange(-(-cols // cb))
    cl_b = np.minimum(cb, cols - cbi * cb)
    own = owners(rl[:, None], cl_b[None, :])  # [rows, column blocks]
    few = ~(rl[:, None] >= own).all(axis=1)  # rows of blocks with fewer rows than owners
    pieces = np.where(few, cols, cbi.size)
    first = np.cumsum(pieces) - pieces  # each row's first piece
    start = np.empty(int(pieces.sum()), dtype=np.int64)
    length = np.ones(start.size, dtype=np.int64)
    tiles = np.empty(start.size, dtype=np.int64)
    whole = np.flatnonzero(~few)
    at = (first[whole][:, None] + np.arange(cbi.size)).reshape(-1)
    start[at] = (whole[:, None] * cols + cbi * cb).reshape(-1)
    length[at] = np.tile(cl_b, whole.size)
    tiles[at] = tile(ri[whole][:, None], cbi, row[whole][:, None] * own[whole] // rl[whole][:, None]).reshape(-1)
    some = np.flatnonzero(few)
    if some.size:
        c = np.arange(cols)
        ci = c // cb
        col, cl = c - ci * cb, cl_b[ci]
        o, lr = own[some][:, ci], rl[some][:, None]
        per_row = np.maximum(1, o // lr)  # shares per block row
        share = np.where(lr >= o, row[some][:, None] * o // lr, row[some][:, None] * per_row + col * per_row // cl)
        at = (first[some][:, None] + c).reshape(-1)
        start[at] = (some[:, None] * cols + c).reshape(-1)
        tiles[at] = np.broadcast_to(tile(ri[some][:, None], ci, share), (some.size, cols)).reshape(-1)
    return start, length, tiles


def _run_step(
    graph: Graph,
    a: Tensor,
    b: Tensor,
    out: Tensor,
    plan: MatMulPlan,
    prog: Prog,
    name: str,
    store: Tensor | None = None,
    host_operands: tuple[Tensor, Tensor] | None = None,
    log2_scale: int = 0,
) -> None:
    """One serial step: a[G,M,Kc] x b[G,Kc,Nc] -> out[G,M,Nc] (an unmapped variable, mapped here).
    ``store``: ``out``'s block-major store [G, N/nb, M, nb] when ``out`` is its grouped view
    (``output_store``): each tile's output block is then one contiguous region. ``host_operands``:
    what the step's kernel computes the product from (``matmul``), else ``a`` and ``b``. ``log2_scale``:
    the product is scaled by 2^log2_scale (``matmul``)."""
    host_a, host_b = host_operands or (a, b)
    scaled = {"log2_scale": log2_scale} if log2_scale else {}
    G, M, K = a.shape
    N = b.shape[2]
    gb, mb, kb, nb = plan.block
    pdt = as_dtype(plan.partials_dtype)
    out_store = store
    sg = int(store.shape[3]) if store is not None else nb  # the store's out-channel group (_store_group)
    ks = plan.in_chan_split
    g0, gl = _blocks(G, plan.group_split, gb)
    m0, ml = _blocks(M, plan.row_split, mb)
    k0, kl = _blocks(K, ks, kb)
    n0, nl = _blocks(N, plan.out_chan_split, nb)
    # block grid (group, row block, in block, out block)
    gi, mi, ki, ni = (x.ravel() for x in np.meshgrid(
        np.arange(G), np.arange(m0.size), np.arange(k0.size), np.arange(n0.size), indexing="ij"))  # fmt: skip
    tile = _tile_of_block(plan, gi, mi, ki, ni)
    split_k = k0.size > 1
    if split_k:
        # output blocks (group block, row block, out block): their sizes, row lengths (out-chan extent)
        # and tiles, one entry per block
        bg, bm, bn = np.unravel_index(np.arange(-(-G // gb) * m0.size * n0.size), (-(-G // gb), m0.size, n0.size))
        glen = np.minimum(gb, G - bg * gb)
        sizes = (glen * ml[bm] * nl[bn]).astype(np.int64)
        row = nl[bn].astype(np.int64)
        block_tile = _tile_of_block(plan, bg * gb, bm, 0, bn).astype(np.int64)
        # PopLibs creates a split conv's partials per tile (Convolution.cpp getCreatePartialsLevel stops
        # above a level that needs a reduction), so a tile's partial block is one contiguous buffer: the
        # partials are held block-major, column off[block] + pos of each output element
        off = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        e_total = G * M * N
        partials = graph.add_variable(pdt, [k0.size, e_total], f"{name} partials")
        dest = partials
    elif pdt != out.dtype:
        partials, store = output_store(graph, pdt, G, M, N, sg if store is not None else N, f"{name} partials")
        dest = partials
    else:
        dest = out
    # dest's mapping as intervals, one per vertex (split K: its block-major run) or per block row, in the
    # order of the variable (``store``'s, if any)
    map_starts: list[np.ndarray] = []
    map_lengths: list[np.ndarray] = []
    map_tiles: list[np.ndarray] = []
    codelet = MATMUL_CODELETS["AMP_NX1" if plan.method == "AMP" and runs_nx1(plan.conv) else plan.method]
    cs = execute(graph, prog, name)
    # a SLIC vertex computes a tile's gb conv groups at once; tilescope keeps a vertex per group (each
    # computes its own product) and shares the SLIC vertex's estimate among them: the tile's block's
    # group count and whether the vertex is its first (which takes the remainder), as a vertex batch's
    # parameters
    slic = plan.method == "SLIC"
    glen_v = np.minimum(gb, G - (gi // gb) * gb) if slic else np.zeros_like(gi)
    first_v = (gi % gb == 0) if slic else np.zeros_like(gi)
    shapes = np.stack([ml[mi], kl[ki], nl[ni], glen_v, first_v], axis=1)
    for shape in sorting.unique_rows(shapes):
        sel = np.flatnonzero((shapes == shape).all(axis=1))
        ms_, ks_, ns_ = (int(s) for s in shape[:3])
        # operands held as views cost a few integers per vertex; only explicit ones an index per element
        refs = sel.size * (ms_ * ks_ * _explicit(a) + ks_ * ns_ * _explicit(b) + ms_ * ns_)
        host_memory.ensure(
            BUILD_BYTES_PER_FIELD_ELEMENT * refs, f"{name} [{G},{M},{K}]x[{K},{N}] ({refs:,} field elements)"
        )
        g, r0, c0, o0 = gi[sel], m0[mi[sel]], k0[ki[sel]], n0[ni[sel]]
        # each vertex's operand blocks (a few integers per vertex when the operands are affine views)
        if split_k:  # this group's part of the vertex's block: ms x ns consecutive block-major columns
            b_v = ((g // gb) * m0.size + mi[sel]) * n0.size + ni[sel]
            first = off[b_v] + (g - (g // gb) * gb) * ms_ * ns_
            o_field = dest.blocks([ki[sel], first], (1, ms_ * ns_), drop=(0,))
        elif store is not None and sg == nb:  # the block is rows r0.. of out-chan group o0 // nb: one region
            o_field = store.blocks([g, o0 // nb, r0, 0 * o0], (1, 1, ms_, ns_), drop=(0, 1))
        else:
            o_field = dest.blocks([g, r0, o0], (1, ms_, ns_), drop=(0,))
        fields = {"a": a.blocks([g, r0, c0], (1, ms_, ks_), drop=(0,)),
                  "b": b.blocks([g, c0, o0], (1, ks_, ns_), drop=(0,)), "out": o_field}  # fmt: skip
        if split_k:
            map_starts.append(ki[sel] * e_total + first)
            map_lengths.append(np.full(sel.size, ms_ * ns_, dtype=np.int64))
            map_tiles.append(tile[sel])
        elif store is not None:  # the vertex's block is a run of the store per out-chan group
            q = (g * (N // sg) + o0 // sg)[:, None] + np.arange(ns_ // sg)  # [vertices, groups]
            map_starts.append(((q * M + r0[:, None]) * sg).reshape(-1))
            map_lengths.append(np.full(q.size, ms_ * sg, dtype=np.int64))
            map_tiles.append(np.repeat(tile[sel], ns_ // sg))
        else:
            o_rows = (g * M + r0)[:, None] + np.arange(ms_)  # [vertices, ms] rows of dest's [G*M, N] view
            map_starts.append((o_rows * N + o0[:, None]).reshape(-1))
            map_lengths.append(np.full(o_rows.size, ns_, dtype=np.int64))
            map_tiles.append(np.repeat(tile[sel], ms_))
        # a swapped plan's vertex takes the same blocks, costed as out^T = b^T a^T (MatMulPlan.swap_operands)
        params: dict[str, Any] = (
            {"swap_operands": True} if plan.swap_operands else {"conv": plan.conv} if plan.conv else {}
        )
        params |= scaled
        if slic:
            params["slic"] = (plan.slic_stride, int(shape[3]), bool(shape[4]))
        if split_k and store is not None and sg < ns_:  # the block's partials in the store's out-chan groups
            params["out_group"] = sg
        graph.add_vertices(cs, codelet, fields, tile[sel], **params)
    if split_k:  # the partials are op-internal: the reduction's last kernel computes the product at once
        graph.defer_kernel(cs)
    else:  # the step's kernel: the whole product in one coarse vertex per group (a window stays a view)
        graph.add_kernel(cs, codelet, {"a": host_a, "b": host_b, "out": dest}, **scaled)
    dest_map = np.concatenate(map_starts), np.concatenate(map_lengths), np.concatenate(map_tiles)
    graph.map_intervals(dest if split_k or store is None else store, *dest_map)
    if split_k:

        def final(last: Any) -> None:  # out = a @ b in one coarse vertex per group (a window stays a view)
            graph.add_kernel(last, codelet, {"a": host_a, "b": host_b, "out": out}, **scaled)

        result = out if store is None else store  # reduced in the order of the variable holding it
        order = _block_major_order(G, M, N, gb, m0, ml, n0, nl, off, sg if store is not None else None)
        if store is not None:  # a block's positions run (out-chan group, row, channel): rows of sg
            row = np.minimum(row, sg)
        # PopLibs splits a reduction's outputs over its reducers in grains of the partials' channel group,
        # at least a vector of the result (ConvReduce.cpp partialGroupedReduce: grainSize)
        vec = cost_model.vector_width(out.dtype) if out.dtype.kind == "f" else 1
        grain = -(-max(_grain(plan.method, a.dtype, pdt, graph.target)[1], vec) // vec) * vec
        in_chan_step = int(_tile_of_block(plan, 0, 0, 1, 0) - _tile_of_block(plan, 0, 0, 0, 0))
        reduce_block_major(graph, dest, result, order, sizes, row, block_tile, in_chan_step, prog,
                           f"{name}/reduce", final, grain)  # fmt: skip
    elif dest is not out:
        graph.map_intervals(out if out_store is None else out_store, *dest_map)
        apply_map(graph, map_codelet("popops::Cast", _cast, 1, (cost_model.CAST,)), [dest], prog, f"{name} cast",
                  out=out)  # fmt: skip


def _block_major_order(
    G: int, M: int, N: int, gb: int, m0: np.ndarray, ml: np.ndarray, n0: np.ndarray, nl: np.ndarray,
    off: np.ndarray, store_nb: int | None,
) -> BlockGrid:  # fmt: skip
    """The result element of each block-major partials column: block (group block, row block, out
    block) b's columns start at off[b] and run over its (group, row, out chan) positions row-major.
    Elements are numbered in the order of the variable holding the result: ``[G, M, N]``, or the
    store ``[G, N/nb, M, nb]`` (``store_nb``). Held by the blocks' geometry (BlockGrid), not per element."""
    bg, bm, bn = np.unravel_index(np.arange(off.size), (-(-G // gb), m0.size, n0.size))
    glen = np.minimum(gb, G - bg * gb)
    if store_nb is None:  # element ((g * M) + m) * N + n
        base, strides = (bg * gb * M + m0[bm]) * N + n0[bn], (M * N, N)
        extent = np.stack([glen, ml[bm], nl[bn]], axis=1).astype(np.int64)
    elif gb == 1:  # element ((g * N/sg + n // sg) * M + m) * sg + n % sg: positions (n // sg, m, n % sg)
        sg = store_nb
        base, strides = ((bg * (N // sg) + n0[bn] // sg) * M + m0[bm]) * sg, (M * sg, sg)
        extent = np.stack([nl[bn] // sg, ml[bm], np.full(bn.size, sg)], axis=1).astype(np.int64)
    else:  # several conv groups a block (the store group is then the block's out chans): (g, m, n)
        base, strides = ((bg * gb * (N // store_nb) + n0[bn] // store_nb) * M + m0[bm]) * store_nb, (M * N, store_nb)
        extent = np.stack([glen, ml[bm], nl[bn]], axis=1).astype(np.int64)
    return BlockGrid(np.asarray(off, dtype=np.int64), np.asarray(base, dtype=np.int64), extent, strides)


def _store_group(plan: MatMulPlan, N: int, dtype: np.dtype, target: Target) -> int:
    """The out-channel group a grouped result is stored in: the tile's out-channel block, or when
    that is wider than an AMP vertex's partial channels per group can be (PopLibs' candidates
    {numConvUnits, weightsPerConvUnit, 8}, ref §4.2), the widest of those dividing it: PopLibs
    creates a conv's output {..., C/ocpg, batch, field..., ocpg} whatever the tile split
    (lib/poplin/Convolution.cpp getPartialOutputShape). A wider group (a swapped plan's block holds
    every out channel: a plain [positions][C] store) made the next conv, whose tiles take a few
    groups each, read a region per position. One conv group per block only."""
    nb = plan.block[3]
    if plan.method != "AMP" or plan.block[0] != 1:
        return nb
    in_grp, out_grp = _grain(plan.method, dtype, as_dtype(plan.partials_dtype), target)
    candidates = sorted({in_grp, out_grp, 8}, reverse=True)
    if nb <= candidates[0]:
        return nb
    return next((c for c in candidates if nb % c == 0 and N % c == 0), nb)


def output_store(
    graph: Graph, dtype: object, G: int, M: int, N: int, nb: int, name: str
) -> tuple[Tensor, Tensor | None]:
    """A new ``[G, M, N]`` result and the variable holding it: block-major ``[G, N/nb, M, nb]`` (a
    tile's block of rows x ``nb`` out channels is then one region, as PopLibs creates a conv's output
    grouped by channels - lib/poplin/Convolution.cpp getPartialOutputShape: {G/cgpg, C/ocpg, batch,
    field..., cgpg, ocpg}; the result is a grouped view of it, profiler.poplar.layout.Factored) when ``nb``
    cuts N into several whole blocks, else plain ``[G, M, N]`` (and None)."""
    if nb >= N or N % nb:
        return graph.add_variable(dtype, [G, M, N], name), None
    store = graph.add_variable(dtype, [G, N // nb, M, nb], name)
    return store.transpose(0, 2, 1, 3).group_dims(1, 1, 2), store


def _explicit(t: Tensor) -> int:
    """1 when a vertex's block of ``t`` is an index per element (not an affine, blocked or window view)."""
    return int(isinstance(t._lay, np.ndarray | VarRuns))  # runs of several variables: an index per element held per run


def _rearrangeable(t: Tensor) -> bool:
    """Whether an operand can be copied into the plan's layout first: a view without repeated
    elements (a convolution's window or a broadcast would be materialised several times over)."""
    lay = t._lay
    if isinstance(lay, Affine | Factored):
        flat = lay.flat if isinstance(lay, Factored) else lay
        return all(st != 0 for n, st in zip(flat.shape, flat.strides, strict=True) if n > 1)
    if isinstance(lay, Window | WindowBlocks):
        return False
    vid = t.single_variable()
    if vid is not None:  # an explicit or blocked view of one variable: each element once? (a bitmap, no sort)
        idx = t._idx.reshape(-1)
        seen = np.zeros(t.graph.variables[vid].numel, dtype=bool)
        seen[idx] = True
        return int(np.count_nonzero(seen)) == idx.size
    # several variables: the same bitmap over all of them end to end (no sort of a key per element:
    # DenseNet-121's concatenated operands spent 6 s of its compile in np.unique)
    ids = np.asarray(t.variable_ids(), dtype=np.int64)
    numel = np.array([t.graph.variables[i].numel for i in ids.tolist()], dtype=np.int64)
    base = np.zeros(int(ids.max()) + 1, dtype=np.int64)
    base[ids] = np.cumsum(numel) - numel
    var, idx = t.elements()
    seen = np.zeros(int(numel.sum()), dtype=bool)
    seen[base[var] + idx] = True
    return int(np.count_nonzero(seen)) == idx.size


# elements of a large operand compared with the plan's tiles before all of them (_mapped_as)
PROBE_ELEMENTS = 4096
PROBED_FROM = FEW_ELEMENTS * PROBE_ELEMENTS  # the probe then searches the mapping (no lookup built)


def _head_differs(graph: Graph, t: Tensor, wanted_head: Callable[[int], np.ndarray]) -> bool:
    """Whether a large operand's first elements lie elsewhere than ``wanted_head(k)`` (the wanted
    tiles of its first k) says: one mapped otherwise (most that are rearranged) differs there, which
    is then found without a tile per element."""
    head = t.head(PROBE_ELEMENTS) if t.numel() >= PROBED_FROM else None
    return head is not None and not np.array_equal(graph.tile_of(head), wanted_head(head.numel()))


def _mapped_as(graph: Graph, t: Tensor, wanted: np.ndarray) -> bool:
    """Whether ``t``'s elements (flattened) are on the ``wanted`` tiles (its first ones compared first)."""
    if _head_differs(graph, t, lambda k: wanted[:k]):
        return False
    return bool(np.array_equal(graph.tile_of(t).reshape(-1), wanted))


def _laid_out(
    graph: Graph, t: Tensor, plan: MatMulPlan, shape: tuple[int, int, int, int], prog: Prog, side: str
) -> Tensor:
    """``t`` if it is mapped as the plan wants, else a copy of it in the plan's layout (PopLibs
    rearranges a badly mapped operand before the matmul, ref §4.4 "transform copy + exchange"; docs/
    fidelity.md "Exchange model" item 4): a step and a temporary, but the matmul's own exchange is
    then one regular all-gather per block instead of pieces from wherever the operand lies. The copy
    is created as PopLibs creates it: in the channel-grouped store of ``create_matmul_lhs`` / ``_rhs``
    where the plan groups the operand (lib/poplin/Convolution.cpp convolutionPreprocess: ``actsRearranged
    = createInputImpl(..)``, ``weightsRearranged = createWeightsImpl(..)``), so a tile's block is a region
    per channel group, not one per block row (BERT-base at batch 8, sequence 384: a 3072 x 3072 lhs
    block of 384 rows)."""
    if not _rearrangeable(t) or _grouped_as_planned(graph, t, plan, shape, side):
        return t
    runs = operand_runs(plan, shape, side, t.dtype.itemsize)  # shares by rows: also a rearranged copy's
    if by_columns(t):
        if _runs_mapped_as(graph, columns_view(t), operand_runs(plan, shape, side, t.dtype.itemsize, columns=True)):
            return t
    elif _runs_mapped_as(graph, t, runs):
        return t
    store = grouped_store(plan, shape, side, t.dtype, graph.target)
    if store is not None:
        var = graph.add_variable(t.dtype, store.dims, f"matmul {side} (rearranged)")
        graph.map_intervals(var, *grouped_runs(plan, shape, side, store, t.dtype.itemsize))
        view = store.view(var)
        return copy(graph, t, prog, dst=view.expand(0) if view.rank < t.rank else view)
    tmp = graph.add_variable(t.dtype, t.shape, f"matmul {side} (rearranged)")
    _map_runs(graph, tmp, runs)
    return copy(graph, t, prog, dst=tmp)


def _runs_mapped_as(graph: Graph, t: Tensor, runs: tuple[np.ndarray, np.ndarray, np.ndarray]) -> bool:
    """``_mapped_as`` for the wanted tiles as maximal runs (``operand_runs``): a whole variable's
    mapping is compared run by run, any other view element by element."""
    start, length, tiles = runs
    found = graph.tile_runs(t)
    if found is not None:
        return bool(np.array_equal(found[0], start) and np.array_equal(found[1], tiles))
    if _head_differs(graph, t, lambda k: tiles[np.searchsorted(start, np.arange(k), side="right") - 1]):
        return False
    return bool(np.array_equal(graph.tile_of(t).reshape(-1), np.repeat(tiles, length)))


def columns_view(t: Tensor) -> Tensor:
    """A matmul operand stored column by column (``by_columns``) seen transposed, in its storage
    order: ``operand_runs(columns=True)``'s runs are its elements' (a convolution's weights
    ``[Cout, Cg, kh, kw]``: all of the variable, mapped and compared by intervals)."""
    axes = list(range(t.rank))
    axes[-2:] = axes[-1], axes[-2]
    return t.transpose(*axes)


def _map_runs(graph: Graph, t: Tensor, runs: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    """Map ``t`` as ``operand_runs`` gives it: by intervals (element by element for a view)."""
    if t.numel():
        graph.map_intervals(t, *runs)


def _operand_plan(
    graph: Graph, a_shape: tuple[int, ...], b_shape: tuple[int, ...], dtype: object, partials_dtype: object,
    available_memory_proportion: float,
) -> tuple[MatMulPlan, tuple[int, int, int, int]]:  # fmt: skip
    grouped = len(a_shape) == 3
    G = a_shape[0] if grouped else 1
    M, K = a_shape[-2], a_shape[-1]
    N = b_shape[-1]
    plan = plan_matmul(graph.target, G, M, K, N, as_dtype(dtype), partials_dtype, available_memory_proportion)
    return plan, (G, M, K, N)


def map_for_matmul(
    graph: Graph, t: Tensor, side: str, a_shape: Iterable[int], b_shape: Iterable[int],
    partials_dtype: object = "float32", available_memory_proportion: float = DEFAULT_AVAILABLE_MEMORY_PROPORTION,
) -> bool:  # fmt: skip
    """Map ``t`` (unmapped; the lhs or rhs of ``matmul(a[a_shape], b[b_shape])``) as that matmul's plan
    wants it (createMatMulInputLHS / RHS); False (nothing mapped) for a serial plan, whose loops
    rearrange their operands anyway, unless ``t`` is the rhs stored as ``serial_rhs_store`` (mapped a
    step's layout per slice: the loops then slice it where it lies)."""
    a_shape, b_shape = tuple(a_shape), tuple(b_shape)
    plan, shape = _operand_plan(graph, a_shape, b_shape, t.dtype, partials_dtype, available_memory_proportion)
    if plan.in_chan_serial * plan.out_chan_serial > 1:
        serial = serial_rhs_store(plan, shape, t.dtype, graph.target) if side == "rhs" else None
        whole = serial.whole(t) if serial is not None else None
        if whole is None:
            return False
        graph.map_intervals(whole, *serial_rhs_runs(plan, shape, t.dtype, graph.target))
        return True
    store = grouped_store(plan, shape, side, t.dtype, graph.target)
    whole = store.whole(t) if store is not None else None
    if whole is not None:  # a variable stored as PopLibs creates the operand (operand_storage)
        graph.map_intervals(whole, *grouped_runs(plan, shape, side, store, t.dtype.itemsize))
        return True
    if by_columns(t):
        _map_runs(graph, columns_view(t), operand_runs(plan, shape, side, t.dtype.itemsize, columns=True))
    else:
        _map_runs(graph, t, operand_runs(plan, shape, side, t.dtype.itemsize))
    return True


@dataclass(frozen=True)
class GroupedStore:
    """How PopLibs stores a matmul operand it creates (lib/poplin/Convolution.cpp ``createInput`` /
    ``createWeights``), in channel groups of the plan's vertex: activations ``[IC/icpg, batch, icpg]``,
    weights ``[OC/ocpg, IC/icpg, ocpg, icpg]``. The lhs is the activations (batch M) and the rhs the
    weights (OC = N), or the other way round when the plan swaps them (rhs: batch N; lhs: OC = M). A
    grouped matmul's operand (``conv_groups`` G > 1, poplin::matMulGrouped: a convolution of G groups,
    one group each per ``createInput`` group) leads with G: ``[G, IC/icpg, batch, icpg]``, seen as
    ``[G, rows, cols]``."""

    dims: tuple[int, ...]  # the variable's shape
    axes: tuple[int, ...]  # its dims in the view's order, before grouping
    groups: tuple[int, ...]  # store dims merged into the view's (groups,) rows and columns
    conv_groups: int = 1  # G > 1: dims[0] is G

    def per_group(self) -> GroupedStore:
        """The store of one conv group (the whole store when there is one)."""
        if self.conv_groups == 1:
            return self
        return GroupedStore(self.dims[1:], tuple(a - 1 for a in self.axes[1:]), self.groups[1:])

    def shape(self, view_shape: tuple[int, ...]) -> list[int]:
        """The variable's shape for a ``view_shape`` operand (the builder's storage protocol, as
        ops.conv.WeightStorage)."""
        return list(self.dims)

    def view(self, store: Tensor) -> Tensor:
        return store.transpose(*self.axes).group_dims(*self.groups)

    def stored(self, data: np.ndarray) -> np.ndarray:
        """Host values of the operand (its [rows, cols]) in the variable's order."""
        return data.reshape([self.dims[a] for a in self.axes]).transpose(np.argsort(self.axes))

    def whole(self, t: Tensor) -> Tensor | None:
        """The variable ``t`` views, when ``t`` is this store's view of all of it (else None)."""
        vid = t.single_variable()
        if vid is None or not isinstance(t._lay, Factored) or t.graph.variables[vid].numel != t.numel():
            return None
        whole = Tensor(t.graph, vid, Affine.contiguous(self.dims), t.dtype)
        view = self.view(whole)
        view = view.expand(0) if view.rank < t.rank else view  # one group's matmul: [1, M, K]
        return whole if view._lay == t._lay else None


def grouped_store(plan: MatMulPlan, shape: tuple[int, int, int, int], side: str, dtype: np.dtype,
                  target: Target) -> GroupedStore | None:  # fmt: skip
    """PopLibs' grouped store of the ``side`` operand of a matmul, or None where tilescope keeps it
    row-major: a serial plan, a vertex without channel groups, dims or blocks that are not whole
    groups (PopLibs pads those), or blocks of several conv groups. A grouped matmul's store leads
    with its G groups (``GroupedStore.conv_groups``)."""
    G, M, K, N = shape
    gb, mb, kb, nb = plan.block
    if G > 1:
        one = grouped_store(plan, (1, M, K, N), side, dtype, target) if gb == 1 else None
        if one is None:
            return None
        return GroupedStore((G, *one.dims), (0, *(a + 1 for a in one.axes)), (1, *one.groups), G)
    ig, og = _grain(plan.method, dtype, as_dtype(plan.partials_dtype), target)
    if plan.in_chan_serial * plan.out_chan_serial > 1 or ig == 1 or K % ig or kb % ig:
        return None
    acts = (side == "rhs") == plan.swap_operands
    if acts:  # [K/ig, batch, ig]: the lhs' batch is M, a swapped rhs' N
        if side == "lhs":
            return GroupedStore((K // ig, M, ig), (1, 0, 2), (1, 2))
        return GroupedStore((K // ig, N, ig), (0, 2, 1), (2, 1))
    out, ob = (N, nb) if side == "rhs" else (M, mb)
    if og == 1 or out % og or ob % og:
        return None
    if side == "rhs":  # [N/og, K/ig, og, ig] seen as [K, N]
        return GroupedStore((N // og, K // ig, og, ig), (1, 3, 0, 2), (2, 2))
    return GroupedStore((M // og, K // ig, og, ig), (0, 2, 1, 3), (2, 2))  # a swapped lhs: OC = M


def grouped_runs(plan: MatMulPlan, shape: tuple[int, int, int, int], side: str, store: GroupedStore,
                 elem_bytes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """(start, length, tile) of the maximal runs of a grouped store on one tile, in store order, as
    PopLibs maps it by use (as ``operand_runs`` gives them for an operand in its own order): each block
    of the operand (its elements in store order: a run per channel group) is cut into as many
    contiguous shares as ``operand_tiles`` gives it owners, share s on the tile ``operand_tiles``
    gives share s, so a share is one or two regions of the store, not one per block row. A grouped
    matmul's groups repeat group 0's runs, each on its own tiles (as ``operand_runs`` gives them)."""
    rows, rb, cols, cb, owners, tile, group = _share_plan(plan, shape, side, elem_bytes)
    one = store.per_group()
    ri, ci = (a.reshape(-1) for a in np.meshgrid(np.arange(-(-rows // rb)), np.arange(-(-cols // cb)), indexing="ij"))
    rl, cl = np.minimum(rb, rows - ri * rb), np.minimum(cb, cols - ci * cb)
    own = owners(rl, cl).astype(np.int64)
    # the view's (row, column) dims as store dims: which is in-chan (K), which the batch or out-chans
    k0, kl, x0, xl = (ci * cb, cl, ri * rb, rl) if side == "lhs" else (ri * rb, rl, ci * cb, cl)
    if len(one.dims) == 3:  # activations [K/ig, X, ig]: a run of xl * ig per in-chan group
        _, x_total, ig = one.dims
        n_runs, run_len = kl // ig, xl * ig
        first = (k0 // ig * x_total + x0) * ig
        step = x_total * ig
    else:  # weights [X/og, K/ig, og, ig]: a run of (kl / ig) * og * ig per out-chan group
        _, k_groups, og, ig = one.dims
        n_runs, run_len = xl // og, kl * og
        first = (x0 // og * k_groups + k0 // ig) * og * ig
        step = k_groups * og * ig
    starts, lengths, tiles = [], [], []
    for nr, ln, o in {(int(a), int(b), int(c)) for a, b, c in zip(n_runs, run_len, own, strict=True)}:
        sel = np.flatnonzero((n_runs == nr) & (run_len == ln) & (own == o))
        e = nr * ln
        # cuts in the block's concatenated runs: run ends and share ends, each interval in one of each
        cuts = sorting.union(np.arange(nr + 1) * ln, (np.arange(o + 1) * e) // o)
        lo, hi = cuts[:-1], cuts[1:]
        run, share = lo // ln, np.searchsorted((np.arange(o + 1) * e) // o, lo, side="right") - 1
        starts.append((first[sel][:, None] + run[None, :] * step + (lo - run * ln)[None, :]).reshape(-1))
        lengths.append(np.broadcast_to(hi - lo, (sel.size, lo.size)).reshape(-1))
        tiles.append(np.asarray(tile(ri[sel][:, None], ci[sel][:, None], share[None, :])).reshape(-1))
    start, tiles_ = np.concatenate(starts), np.concatenate(tiles).astype(np.int64)
    order = np.argsort(start)
    start, tiles_ = start[order], tiles_[order]
    if store.conv_groups > 1:  # group g: group 0's runs g stores on, on group 0's tiles + its offset
        size = int(np.prod(one.dims))
        start = (np.arange(store.conv_groups)[:, None] * size + start[None, :]).reshape(-1)
        tiles_ = (group[:, None] + tiles_[None, :]).reshape(-1)
    keep = np.ones(start.size, dtype=bool)
    keep[1:] = tiles_[1:] != tiles_[:-1]  # neighbouring pieces on one tile are one run
    start = start[keep]
    return start, np.diff(np.append(start, int(np.prod(store.dims)))), tiles_[keep]


def _grouped_as_planned(graph: Graph, t: Tensor, plan: MatMulPlan, shape: tuple[int, int, int, int],
                        side: str) -> bool:  # fmt: skip
    """Whether ``t`` is a grouped store for this plan (``create_matmul_lhs`` / ``_rhs``, or an imported
    weight): the store's view, mapped as ``grouped_runs`` maps it."""
    store = grouped_store(plan, shape, side, t.dtype, graph.target)
    whole = store.whole(t) if store is not None else None
    return whole is not None and _runs_mapped_as(graph, whole, grouped_runs(plan, shape, side, store, t.dtype.itemsize))


def serial_rhs_store(plan: MatMulPlan, shape: tuple[int, int, int, int], dtype: np.dtype,
                     target: Target) -> GroupedStore | None:  # fmt: skip
    """The rhs (weights) of a plan with serial splits as PopLibs creates it: a grouped store per serial
    slice, the slices outermost (lib/poplin/Convolution.cpp ``createWeightsImpl`` with ``serial``:
    weightsShape ``{outChanSerialSplit, inChanSerialSplit, G, outChanGroupsPerSerialSplit,
    inChanGroupsPerSerialSplit, .., ocpg, icpg}``, each slice mapped by its use in a step), here
    ``[sk, sn, *step store]`` as the loops slice in-chan chunks outermost. A step's dynamic slice is then
    laid out as the step reads it: its shares are a region or two, not a region per block row. None for
    a non-serial plan, a grouped matmul, or a step whose rhs is not grouped (``grouped_store``)."""
    G, M, K, N = shape
    sk, sn = plan.in_chan_serial, plan.out_chan_serial
    if sk * sn == 1 or G != 1 or K % sk or N % sn:
        return None
    one = _step_rhs_store(plan, shape, dtype, target)
    if one is None:
        return None
    rows = one.groups[0]  # the step store's dims merged into its rows (in chans), then its columns
    axes = [a + 2 for a in one.axes]
    return GroupedStore((sk, sn, *one.dims), (0, *axes[:rows], 1, *axes[rows:]), (1 + rows, 1 + one.groups[1]))


def _step_rhs_store(plan: MatMulPlan, shape: tuple[int, int, int, int], dtype: np.dtype,
                    target: Target) -> GroupedStore | None:  # fmt: skip
    """The grouped store of one serial step's rhs (``grouped_store`` of the step's plan)."""
    G, M, K, N = shape
    step = replace(plan, in_chan_serial=1, out_chan_serial=1)
    return grouped_store(step, (G, M, K // plan.in_chan_serial, N // plan.out_chan_serial), "rhs", dtype, target)


def serial_rhs_runs(plan: MatMulPlan, shape: tuple[int, int, int, int], dtype: np.dtype,
                    target: Target) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """(start, length, tile) of ``serial_rhs_store``'s runs: every slice mapped as one step's rhs is
    (``grouped_runs`` of the step's plan), so each tile holds the same positions of every slice and the
    dynamic slices stay on their tiles. Built from one slice's runs (host cost follows the runs)."""
    G, M, K, N = shape
    sk, sn = plan.in_chan_serial, plan.out_chan_serial
    one = _step_rhs_store(plan, shape, dtype, target)
    assert one is not None, "serial_rhs_runs maps a serial_rhs_store"
    step = replace(plan, in_chan_serial=1, out_chan_serial=1)
    start, length, tile = grouped_runs(step, (G, M, K // sk, N // sn), "rhs", one, dtype.itemsize)
    per, n = int(np.prod(one.dims)), sk * sn
    start = (np.arange(n, dtype=np.int64)[:, None] * per + start[None, :]).reshape(-1)
    tile = np.tile(tile, n)
    keep = np.ones(start.size, dtype=bool)
    keep[1:] = tile[1:] != tile[:-1]  # a slice's last run and the next one's first on one tile are one run
    start, tile = start[keep], tile[keep]
    return start, np.diff(np.append(start, n * per)), tile


def operand_storage(
    graph: Graph, side: str, dtype: object, a_shape: Iterable[int], b_shape: Iterable[int],
    partials_dtype: object = "float32", available_memory_proportion: float = DEFAULT_AVAILABLE_MEMORY_PROPORTION,
) -> GroupedStore | None:  # fmt: skip
    """How PopLibs would store the ``side`` operand of ``matmul(a[a_shape], b[b_shape])`` it creates
    (``grouped_store``), for a caller creating it itself (the ONNX importer's weights); None: in its
    own order. ``map_for_matmul`` then maps the view of such a variable."""
    a_shape, b_shape = tuple(a_shape), tuple(b_shape)
    dt = as_dtype(dtype)
    plan, shape = _operand_plan(graph, a_shape, b_shape, dt, partials_dtype, available_memory_proportion)
    if plan.in_chan_serial * plan.out_chan_serial > 1:
        return serial_rhs_store(plan, shape, dt, graph.target) if side == "rhs" else None
    return grouped_store(plan, shape, side, dt, graph.target)


def _create_operand(
    graph: Graph, side: str, dtype: object, a_shape: Iterable[int], b_shape: Iterable[int], name: str,
    partials_dtype: object, available_memory_proportion: float,
) -> Tensor:  # fmt: skip
    a_shape, b_shape = tuple(a_shape), tuple(b_shape)
    # in PopLibs' grouped order where it groups the operand (map_for_matmul then maps that store)
    store = operand_storage(graph, side, dtype, a_shape, b_shape, partials_dtype, available_memory_proportion)
    if store is not None:
        t = store.view(graph.add_variable(dtype, list(store.dims), name))
    else:
        t = graph.add_variable(dtype, a_shape if side == "lhs" else b_shape, name)
    if not map_for_matmul(graph, t, side, a_shape, b_shape, partials_dtype, available_memory_proportion):
        graph.set_tile_mapping(t, linear_tiles(t.numel(), graph.target.num_tiles))
    return t


def create_matmul_lhs(
    graph: Graph, dtype: object, a_shape: Iterable[int], b_shape: Iterable[int], name: str = "lhs",
    partials_dtype: object = "float32", available_memory_proportion: float = DEFAULT_AVAILABLE_MEMORY_PROPORTION,
) -> Tensor:  # fmt: skip
    """A new ``[M, K]`` lhs of ``matmul(a[a_shape], b[b_shape])``, laid out for that matmul's plan
    (poplin::createMatMulInputLHS): stored in PopLibs' channel-grouped order where the plan's vertex
    groups channels (``grouped_store``; the result is a view of that variable), each tile's share of
    the block it reads a region or two, so its exchange is an all-gather with no rearrangement."""
    return _create_operand(graph, "lhs", dtype, a_shape, b_shape, name, partials_dtype, available_memory_proportion)


def create_matmul_rhs(
    graph: Graph, dtype: object, a_shape: Iterable[int], b_shape: Iterable[int], name: str = "rhs",
    partials_dtype: object = "float32", available_memory_proportion: float = DEFAULT_AVAILABLE_MEMORY_PROPORTION,
) -> Tensor:  # fmt: skip
    """A new ``[K, N]`` rhs (the weights) of ``matmul(a[a_shape], b[b_shape])``, laid out for that
    matmul's plan (poplin::createMatMulInputRHS), stored grouped as ``create_matmul_lhs`` is: each tile
    holds its share of the weight block it uses, so weights created this way need no exchange when
    the rows are not split."""
    return _create_operand(graph, "rhs", dtype, a_shape, b_shape, name, partials_dtype, available_memory_proportion)


@op("MatMul")
def matmul(
    graph: Graph,
    a: Tensor,
    b: Tensor,
    prog: Prog,
    partials_dtype: object = "float32",
    available_memory_proportion: float = DEFAULT_AVAILABLE_MEMORY_PROPORTION,
    out_dtype: object | None = None,
    grouped_out: bool = False,
    host_operands: tuple[Tensor, Tensor] | None = None,
    conv: ConvWindow | None = None,
    slic_stride: int = 0,
    log2_scale: int = 0,
) -> Tensor:
    """``a @ b`` for ``a[M,K] b[K,N]`` or grouped ``a[G,M,K] b[G,K,N]`` (poplin::matMul / matMulGrouped).
    ``conv``: ``a`` is a convolution's im2col view (see ``plan_matmul``, as ``slic_stride``).
    ``grouped_out``: hold the result block-major by the plan's out-channel blocks (``output_store``),
    as a convolution's output is; its readers must take grouped views (windows, elementwise ops).
    ``host_operands``: the same operands with K in another order (the same variables), which the
    host computes the product from when neither operand is rearranged first; the vertices keep
    ``a`` and ``b`` (a convolution's modelled column order, its host's fastest copy).
    ``log2_scale``: the product times 2^log2_scale, as PopXL's matmul_pow2scaled undoes its FP8
    operands' power-of-two scales; the AMP applies it with the quarter type's metadata at no cost."""
    check_same_graph(graph, a, b, what="matmul")
    grouped = a.rank == 3
    if a.rank not in (2, 3) or b.rank != a.rank or a.shape[-1] != b.shape[-2] or (grouped and a.shape[0] != b.shape[0]):
        raise OpError(f"matmul: shapes {a.shape} and {b.shape} do not multiply ([G,]M,K x [G,]K,N)")
    if a.dtype != b.dtype:
        raise OpError(f"matmul: operands have types {a.dtype.name} and {b.dtype.name}; cast one first")
    a3, b3 = (a, b) if grouped else (a.expand(0), b.expand(0))
    G, M, K = a3.shape
    N = b3.shape[2]
    plan = plan_matmul(graph.target, G, M, K, N, a.dtype, partials_dtype, available_memory_proportion, conv=conv,
                       slic_stride=slic_stride)  # fmt: skip
    set_attributes(graph, {"shape": {"G": G, "M": M, "K": K, "N": N}, "dtype": a.dtype.name, **plan.attributes()})
    # FP8 operands give a half result unless told otherwise: the quarter AMP accumulates into half or
    # float partials and PopLibs/PopXL return half (popxl matmul_pow2scaled: float8 x float8 -> float16)
    odt = (np.dtype(np.float16) if is_float8(a.dtype) else a.dtype) if out_dtype is None else as_dtype(out_dtype)
    if plan.in_chan_serial * plan.out_chan_serial > 1:
        out = _serial_loop(graph, a3, b3, plan, odt, prog, log2_scale, grouped_out)
    else:
        shape = (G, M, K, N)
        a_in, b_in = a3, b3
        a3 = _laid_out(graph, a3, plan, shape, prog, "lhs")
        b3 = _laid_out(graph, b3, plan, shape, prog, "rhs")
        if a3 is not a_in or b3 is not b_in or not grouped:
            host_operands = None  # a rearranged operand is a new variable: the host reads the copies
        group = _store_group(plan, N, a.dtype, graph.target) if grouped_out else N
        out, store = output_store(graph, odt, G, M, N, group, "matmul out")
        _run_step(graph, a3, b3, out, plan, prog, "matmul", store, host_operands, log2_scale)
    return out if grouped else out.reshape(M, N)


def _sliceable(graph: Graph, dtype: np.dtype, shape: tuple[int, ...], levels: int) -> Tensor:
    """A tensor whose first ``levels`` dims are slice indices: the positions of a slice are spread
    linearly over the tiles, identically for every slice (so dynamic slices stay on-tile)."""
    t = graph.add_variable(dtype, shape, "serial operand")
    map_slices_alike(graph, t, levels)
    return t


def _slices_as_step_rhs(graph: Graph, dtype: np.dtype, plan: MatMulPlan, shape: tuple[int, int, int, int],
                        one: GroupedStore) -> Tensor:  # fmt: skip
    """``[sk, sn, *one.dims]``: a serial plan's rhs slices, each stored and mapped as one step creates
    its rhs (``one``, the step's grouped store; ``serial_rhs_runs``), as PopLibs' createWeightsImpl
    with ``serial`` creates the tensor it rearranges an rhs it did not create into
    (lib/poplin/Convolution.cpp: ``weightsRearranged``), so each step's dynamic slice is laid out as
    the step reads it."""
    t = graph.add_variable(dtype, [plan.in_chan_serial, plan.out_chan_serial, *one.dims], "serial operand")
    graph.map_intervals(t, *serial_rhs_runs(plan, shape, dtype, graph.target))
    return t


def _slices_like(graph: Graph, dtype: np.dtype, slices: tuple[int, ...], like: Tensor, name: str) -> Tensor:
    """A new ``[*slices, *like.shape]`` variable whose every slice is mapped as ``like`` (a whole mapped
    variable) is: popops::createSliceableTensorFromSlice, so a dynamic update of it from ``like``
    moves no data between tiles. Mapped by ``like``'s runs, never a tile per element."""
    t = graph.add_variable(dtype, [*slices, *like.shape], name)
    runs = graph.tile_runs(like)
    assert runs is not None, "_slices_like copies the mapping of a whole variable"
    start, tile = runs
    per, n = like.numel(), int(np.prod(slices, dtype=np.int64))
    length = np.diff(np.append(start, per))
    graph.map_intervals(t, (np.arange(n, dtype=np.int64)[:, None] * per + start).ravel(), np.tile(length, n),
                        np.tile(tile, n))  # fmt: skip
    return t


def _increment(x: np.ndarray) -> np.ndarray:
    return x + 1


def _serial_loop(
    graph: Graph, a3: Tensor, b3: Tensor, plan: MatMulPlan, odt: np.dtype, prog: Prog, log2_scale: int = 0,
    grouped_out: bool = False,
) -> Tensor:  # fmt: skip
    """Serial splits as PopLibs runs them (ref §4.3; lib/poplin/Convolution.cpp): loops over in-chan
    chunks (outer) and out-chan chunks (inner) whose bodies dynamically slice the operand chunks, run
    the per-step plan and dynamically update (accumulating over in-chan chunks) the result. A whole lhs
    is laid out as the step wants it, and the result is a sliceable tensor made from a step's
    channel-grouped output (``createSliceableTensorFromSlice``), so the updates stay on their tiles and
    the result's readers get it grouped, as a non-serial plan's."""
    G, M, K = a3.shape
    N = b3.shape[2]
    sk_n, sn_n = plan.in_chan_serial, plan.out_chan_serial
    k_step, n_step = K // sk_n, N // sn_n
    step = replace(plan, in_chan_serial=1, out_chan_serial=1)  # the plan of one serial step
    shape = (G, M, k_step, n_step)
    # the operands, rearranged once before the loops ("rearrangeBeforeSlice", ref §4.4). With the
    # in-chans whole the lhs is every step's: laid out as the step wants it (PopLibs' createInputImpl with
    # ``serial``: mapped by its use in a step), if it is not already, as a non-serial plan's is. The
    # chunks of a split lhs and the rhs chunks stay spread linearly slice by slice: laid out by use
    # (grouped_runs per slice) their copies' fields and mappings followed the runs, 0.5 GB of host
    # memory for a 4,096 x 32,000 LM head's weights (tests/onnx/test_host_cost.py), unless the rhs was
    # created so (``serial_rhs_store``, as PopLibs creates a serial plan's weights): nothing to copy then
    if sk_n > 1:
        a_src = a3.reshape(G, M, sk_n, k_step).transpose(2, 0, 1, 3)
        a_s = copy(graph, a_src, prog, dst=_sliceable(graph, a3.dtype, a_src.shape, 1), debug_name="rearrange lhs")
    else:
        a_chunk = _laid_out(graph, a3, step, shape, prog, "lhs")
    # an rhs created as PopLibs creates a serial plan's weights (``serial_rhs_store``: the importer's
    # weights) is sliced where it lies, each step's chunk a view of its slice in the step's grouped order
    b_store = serial_rhs_store(plan, (G, M, K, N), b3.dtype, graph.target)
    b_var = b_store.whole(b3) if b_store is not None else None
    if b_var is not None and not _runs_mapped_as(graph, b_var, serial_rhs_runs(plan, (G, M, K, N), b3.dtype,
                                                                                graph.target)):  # fmt: skip
        b_var = None
    # the step's rhs store: the created rhs's, or a grouped matmul's rearranged into it (below)
    step_rhs = _step_rhs_store(plan, (G, M, K, N), b3.dtype, graph.target) if b_var is not None or G > 1 else None
    if b_var is None:
        b_src = b3.reshape(G, sk_n, k_step, sn_n, n_step).transpose(1, 3, 0, 2, 4)
        if step_rhs is not None:
            # a grouped matmul's rhs it did not create (attention's K^T) is copied into slices stored
            # and mapped as a step creates its rhs (PopLibs' createWeightsImpl with ``serial``),
            # walked in the store's order so the copy moves channel groups, not an element at a time.
            # One group's rhs stays spread linearly: every slice would sit on the step's tiles (a
            # 256 x 512 rhs at 16 x 16 serial steps: 64 KiB on each of 4 of 16 tiles)
            b_s = _slices_as_step_rhs(graph, b3.dtype, plan, (G, M, K, N), step_rhs)
            in_store = b_src.reshape(sk_n, sn_n, *(step_rhs.dims[a] for a in step_rhs.axes))
            back = np.argsort(step_rhs.axes)
            copy(
                graph, in_store.transpose(0, 1, *(int(a) + 2 for a in back)), prog, dst=b_s, debug_name="rearrange rhs"
            )
        else:
            b_s = copy(graph, b_src, prog, dst=_sliceable(graph, b3.dtype, b_src.shape, 2), debug_name="rearrange rhs")
    else:
        b_s = b_var  # [sk, sn, *step store]
    # loop counters replicated on every tile, so no slice waits for an index broadcast from one tile
    ck, cn = replicated_index(graph, "in-chan chunk"), replicated_index(graph, "out-chan chunk")
    inc = map_codelet("popops::AddScalarInPlace", _increment, 1, (cost_model.binary("add"),), True)
    outer = Sequence(name="matmul in-chan serial loop")
    if sk_n > 1:
        a_chunk = dynamic_slice(graph, a_s, ck, outer)
        b_chunk = dynamic_slice(graph, b_s, ck, outer)
    else:
        b_chunk = b_s[0]
    inner = Sequence(name="matmul out-chan serial loop")
    b_step = b_chunk[0] if sn_n == 1 else dynamic_slice(graph, b_chunk, cn, inner)
    if step_rhs is not None:  # the step store's [K, N] view of the chunk, as the step's [G, K, N] rhs
        b_step = step_rhs.view(b_step)
        b_step = b_step.expand(0) if b_step.rank == 2 else b_step
    group = _store_group(step, n_step, a3.dtype, graph.target) if grouped_out else n_step
    step_out, step_store = output_store(graph, odt, G, M, n_step, group, "matmul step out")
    _run_step(graph, a_chunk, b_step, step_out, step, inner, "matmul step", step_store, log2_scale=log2_scale)
    held = step_out if step_store is None else step_store  # the variable holding a step's result
    # the result: sn_n slices each mapped as a step's result, so each tile updates its own positions
    store = _slices_like(graph, odt, (sn_n,), held, "matmul out")
    fill(graph, ck, 0, prog)
    if sk_n > 1:
        fill(graph, store, 0.0, prog)
    else:
        # each out-chan step reads and writes the store (a dynamic update keeps what it does not write),
        # but the loop writes all of it: PopLibs marks it undefined first so liveness does not carry it
        # from the program's start (lib/poplin/Convolution.cpp: "WriteUndef the output as it is
        # Read/Write in each iteration but in the course of the entire loop is completely written")
        prog.add(WriteUndef(store, name="matmul out undefined"))
    if sk_n > 1:  # accumulate this in-chan chunk's contribution
        current = dynamic_slice(graph, store, cn, inner)
        apply_map(graph, _binary_codelet("add", in_place=True), [current, held], inner, "accumulate")
        held = current
    dynamic_update(graph, store, held, cn, inner)
    apply_map(graph, inc, [cn], inner, "next out-chan chunk")
    fill(graph, cn, 0, outer)
    outer.add(Repeat(sn_n, inner, name="out-chan serial"))
    apply_map(graph, inc, [ck], outer, "next in-chan chunk")
    prog.add(Repeat(sk_n, outer, name="in-chan serial"))
    # the result as a grouped view of the store: out channel s * n_step + j of slice s (a reshape would
    # merge dims whose strides do not chain, an index per element carried by every op that reads it)
    if step_store is None:  # [sn, G, M, n_step]
        return store.transpose(1, 2, 0, 3).group_dims(1, 1, 2)
    return store.transpose(1, 3, 0, 2, 4).group_dims(1, 1, 3)  # [sn, G, n_step/sg, M, sg]
