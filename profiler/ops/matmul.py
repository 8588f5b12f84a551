"""Matrix multiplication through a planner (poplin::matMul; ref §4).

``plan_matmul`` chooses, for ``[G][M][K] x [G][K][N]``, how to split groups, rows (the conv "batch
x field"), input channels (K) and output channels (N) over tiles (parallel splits), how many serial
steps to take over N and K, and which vertex (AMP partials or HMAC) computes each tile's block. The
plan minimises estimated cycles subject to the per-tile temporary memory (operand blocks received +
partials) fitting ``availableMemoryProportion`` of the tile (default 0.6, ref §4.5); when nothing
fits it takes the plan with the least temporary memory. Splitting K leaves partial sums on several
tiles; they are reduced by ``reduce_groups`` (multi-stage when deep). Serial steps are unrolled
into successive compute sets, so their temporaries are live one step at a time.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from profiler import cost_model
from profiler.dtypes import as_dtype
from profiler.graph import Graph
from profiler.ops.codelets import MATMUL_CODELETS, block_cycles
from profiler.ops.core import OpError, cdiv, check_same_graph, execute, linear_tiles, op, set_attributes
from profiler.ops.elementwise import _binary_codelet, _cast, apply_map, map_codelet
from profiler.ops.reduce import reduce_columns
from profiler.programs import Sequence as Prog
from profiler.targets import Target
from profiler.tensor import Tensor

DEFAULT_AVAILABLE_MEMORY_PROPORTION = 0.6  # ref §4.5: "The default proportion is 0.6 for both conv and matmul"
SERIAL_CHOICES = (1, 2, 4, 8, 16)
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
    dt, pdt = as_dtype(dtype), as_dtype(partials_dtype)
    if dt.kind != "f":
        pdt = dt
    tiles = target.num_tiles
    budget = int(target.bytes_per_tile * available_memory_proportion)
    eb, pb = dt.itemsize, pdt.itemsize
    w = target.num_worker_contexts
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
                if (ks_ser > 1 and k_step < kg) or (ns_ser > 1 and n_step < ng):
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
                    if ks > 1:  # partial sums: exchanged once, reduced spread over the tiles
                        outs = groups * m * n_step / np.minimum(tiles, gs * ms * ks * ns)
                        red = partial_bytes / xbpc + outs / w * cost_model.reduce_cycles("add", ks, 1, pdt, target)
                        red = red + sync
                    else:
                        red = 0
                    step = compute + exchange + red + sync
                    total = step * ks_ser * ns_ser
                    if ks_ser > 1:  # accumulate each later in-chan step into the result
                        total = total + (ks_ser - 1) * cost_model.binary_cycles(
                            "add", -(-groups * m * n // tiles), dt, target
                        )
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
    a_flat, b_flat = a.reshape(-1), b.reshape(-1)
    shapes = np.stack([ml[mi], kl[ki], nl[ni]], axis=1)
    for shape in np.unique(shapes, axis=0):
        sel = np.flatnonzero((shapes == shape).all(axis=1))
        ms_, ks_, ns_ = (int(s) for s in shape)
        g, r0, c0, o0 = gi[sel], m0[mi[sel]], k0[ki[sel]], n0[ni[sel]]
        ar_m, ar_k, ar_n = np.arange(ms_), np.arange(ks_), np.arange(ns_)
        a_idx = ((g[:, None, None] * M + r0[:, None, None] + ar_m[None, :, None]) * K) + c0[:, None, None] + ar_k
        b_idx = ((g[:, None, None] * K + c0[:, None, None] + ar_k[None, :, None]) * N) + o0[:, None, None] + ar_n
        o_idx = (g[:, None, None] * M + r0[:, None, None] + ar_m[None, :, None]) * N + o0[:, None, None] + ar_n
        if split_k:
            o_idx = o_idx + (ki[sel] * (G * M * N))[:, None, None]
        dest_tiles[o_idx.reshape(-1)] = np.repeat(tile[sel], ms_ * ns_)
        fields = {"a": a_flat[a_idx], "b": b_flat[b_idx], "out": dest.reshape(-1)[o_idx]}
        graph.add_vertices(cs, codelet, fields, tile[sel])
        del a_idx, b_idx, o_idx
    graph.set_tile_mapping(dest, dest_tiles)
    if split_k:
        reduce_columns(graph, dest.reshape(k0.size, G * M * N), out, "add", prog, name=f"{name}/reduce")
    elif dest is not out:
        graph.set_tile_mapping(out, dest_tiles)
        apply_map(graph, map_codelet("popops::Cast", _cast, 1, (("cast", "cast"),)), [dest], prog, f"{name} cast",
                  out=out)  # fmt: skip


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
    out = graph.add_variable(odt, [G, M, N], "matmul out")
    if plan.in_chan_split > 1:  # reduced results land spread linearly over the tiles
        graph.set_tile_mapping(out, linear_tiles(out.numel(), graph.target.num_tiles))
    k_step = -(-K // plan.in_chan_serial)
    n_step = -(-N // plan.out_chan_serial)
    for sk in range(plan.in_chan_serial):
        k_lo, k_hi = sk * k_step, min(K, (sk + 1) * k_step)
        if k_lo >= k_hi:
            continue
        acc = None
        if sk > 0:  # later in-chan steps accumulate into the result
            acc = graph.add_variable(odt, [G, M, N], f"matmul step {sk}")
            graph.set_tile_mapping(acc, graph.tile_of(out))
        for sn in range(plan.out_chan_serial):
            n_lo, n_hi = sn * n_step, min(N, (sn + 1) * n_step)
            if n_lo >= n_hi:
                continue
            tgt = out if acc is None else acc
            step_name = "matmul" if plan.in_chan_serial * plan.out_chan_serial == 1 else f"matmul[{sk},{sn}]"
            _run_step(graph, a3[:, :, k_lo:k_hi], b3[:, k_lo:k_hi, n_lo:n_hi], tgt[:, :, n_lo:n_hi], plan, prog,
                      step_name)  # fmt: skip
        if acc is not None:
            apply_map(graph, _binary_codelet("add", in_place=True), [out, acc], prog, f"matmul accumulate {sk}")
    return out if grouped else out.reshape(M, N)
