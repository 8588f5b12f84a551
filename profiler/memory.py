"""Memory placement on each tile: always-live data laid out in order, not-always-live variables
sharing addresses by liveness (first-fit interval allocator), regions and gaps.

Layout of a tile (addresses): the general arena starts at 0 (code, vertex state, stack,
instrumentation, constants, always-live variables, then not-always-live variables); variables
that must sit in interleaved memory get their own arena at ``interleaved_memory_start``, and the
general arena skips over it. Bytes past the end of the tile are *overflowed* (out of memory).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from profiler.compile import Compiler
from profiler.liveness import Liveness
from report_format.schema import MEMORY_CATEGORIES, MEMORY_REGIONS

# [INF] 64-bit loads/stores (ref §1 "Load/store datapath") need 8-byte alignment; every allocation
# starts 8-byte aligned.
ALIGNMENT = 8
# [INF] ref §5 controlCode ≈ 100 KiB for a dense layer over 1472 tiles (~70 B per tile for a few
# dozen steps): each program step costs every tile a call/sync pair of 4-byte instructions, each
# control node (Repeat, If, Call...) a loop or branch header of the same size.
CONTROL_CODE_BYTES_PER_STEP = 8
CONTROL_CODE_BYTES_PER_NODE = 8
# [INF] ref §5 controlId ("variables used in switch programs or ... a sync ID for tracking host/device
# synchronisation points"): the 2-IPU profile holds 12 B in all, so a 4-byte id each, on few tiles.
CONTROL_ID_BYTES = 4
# [INF] ref §5: a real 2-IPU profile holds hostExchangePacketHeader 24,448 B, about 8.3 B per tile;
# 8 B on each tile that takes part in host stream copies.
HOST_PACKET_HEADER_BYTES = 8
# [INF] ref §5 instrumentationResults: a 64-bit cycle counter per instrumented point.
INSTRUMENTATION_COUNTER_BYTES = 8

CAT = {c: i for i, c in enumerate(MEMORY_CATEGORIES)}
NON_INTERLEAVED, INTERLEAVED, OVERFLOWED = 0, 1, 2
_BIG = np.int64(1) << 40


def _align(x: np.ndarray | int) -> np.ndarray:
    return (np.asarray(x, dtype=np.int64) + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


@dataclass
class MemoryLayout:
    tile_memory: dict[str, np.ndarray]
    by_category: dict[str, np.ndarray]
    placements: dict[str, np.ndarray]
    liveness_steps: np.ndarray  # (steps, ipus) not-always-live bytes
    var_tiles: np.ndarray  # tiles holding each variable
    var_bytes: np.ndarray

    def out_of_memory_tiles(self) -> np.ndarray:
        return np.flatnonzero(self.tile_memory["overflowed_bytes"] > 0)


def _first_fit(sizes: np.ndarray, firsts: np.ndarray, lasts: np.ndarray) -> np.ndarray:
    """Offsets for allocations live over [first, last] steps; ones whose lifetimes overlap never share bytes."""
    order = sorted(range(len(sizes)), key=lambda i: (firsts[i], -sizes[i], i))
    offsets = np.zeros(len(sizes), dtype=np.int64)
    active: list[tuple[int, int, int]] = []  # (start, end, last step)
    for i in order:
        f, size = int(firsts[i]), int(sizes[i])
        active = sorted(a for a in active if a[2] >= f)
        pos = 0
        for s, e, _ in active:
            if pos + size <= s:
                break
            pos = max(pos, int(_align(e)))
        offsets[i] = pos
        active.append((pos, pos + size, int(lasts[i])))
    return offsets


def _allocate_shared(
    tile: np.ndarray, var: np.ndarray, size: np.ndarray, first: np.ndarray, last: np.ndarray
) -> np.ndarray:
    """Relative offsets of not-always-live allocations per tile; tiles with the same set of
    (variable, size) get the same layout, computed once."""
    out = np.zeros(tile.size, dtype=np.int64)
    if tile.size == 0:
        return out
    order = np.lexsort((var, tile))
    t_sorted = tile[order]
    cuts = np.flatnonzero(t_sorted[1:] != t_sorted[:-1]) + 1
    cache: dict[bytes, np.ndarray] = {}
    for a, b in zip(np.concatenate(([0], cuts)), np.append(cuts, t_sorted.size), strict=True):
        rows = order[a:b]
        key = np.stack([var[rows], size[rows]]).tobytes()
        if key not in cache:
            cache[key] = _first_fit(size[rows], first[rows], last[rows])
        out[rows] = cache[key]
    return out


def _var_tile_bytes(c: Compiler) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(variable, tile, bytes) for every variable and tile holding part of it."""
    vs, ts, bs = [], [], []
    for v in c.graph.variables:
        m = v.mapping
        lengths = np.diff(np.append(m.starts, m.n))
        keep = lengths > 0
        per_tile = np.bincount(m.tiles[keep], weights=lengths[keep], minlength=1).astype(np.int64)
        tiles = np.flatnonzero(per_tile)
        vs.append(np.full(tiles.size, v.id, dtype=np.int64))
        ts.append(tiles.astype(np.int64))
        bs.append(per_tile[tiles] * v.dtype.itemsize)
    if not vs:
        z = np.zeros(0, np.int64)
        return z, z, z
    return np.concatenate(vs), np.concatenate(ts), np.concatenate(bs)


def place(c: Compiler, live: Liveness, instrument: bool = False, instrumentation_level: str = "tile") -> MemoryLayout:
    t = c.target
    n = t.num_tiles
    all_tiles = np.arange(n, dtype=np.int64)
    items_tile, items_cat, items_size, items_var = [], [], [], []

    def add(cat: str, tiles: np.ndarray, sizes: np.ndarray, var: np.ndarray | None = None) -> None:
        keep = sizes > 0
        items_tile.append(tiles[keep].astype(np.int64))
        items_cat.append(np.full(int(keep.sum()), CAT[cat], dtype=np.int64))
        items_size.append(sizes[keep].astype(np.int64))
        items_var.append(np.full(int(keep.sum()), -1, np.int64) if var is None else var[keep].astype(np.int64))

    # -- always-live data, in layout order ---------------------------------------------------
    code_bytes = np.array([cl.code_bytes for _, cl in c.codelets] or [0], dtype=np.int64)
    plans = list(c.cs_plans.values())
    if plans:
        pair = np.unique(np.concatenate([p.v_tile.astype(np.int64) * len(code_bytes) + p.v_codelet for p in plans]))
        add("vertexCode", pair // len(code_bytes), code_bytes[pair % len(code_bytes)])
    n_control = sum(1 for nd in c.nodes if not nd.is_step)
    control = CONTROL_CODE_BYTES_PER_STEP * len(c.steps) + CONTROL_CODE_BYTES_PER_NODE * n_control
    add("controlCode", all_tiles, np.full(n, control, dtype=np.int64))
    # controlId: a sync id per host synchronisation and a branch id per If/Switch, on each IPU's first tile
    ids = sum(1 for nd in c.nodes if nd.type in ("If", "Switch") or nd.type == "StreamCopyBegin")
    control_id = np.zeros(n, dtype=np.int64)
    control_id[:: t.tiles_per_ipu] = CONTROL_ID_BYTES * ids
    add("controlId", all_tiles, control_id)
    for cat in ("internalExchangeCode", "globalExchangeCode", "hostExchangeCode"):
        code = sum(
            (st.code_bytes for st in c.steps if st.code_category == cat and st.code_bytes is not None),
            np.zeros(n, np.int64),
        )
        add(cat, all_tiles, code)
    descriptors = sum(
        (st.descriptor_bytes for st in c.steps if st.descriptor_bytes is not None), np.zeros(n, np.int64)
    )
    add("copyDescriptor", all_tiles, descriptors)
    host = np.zeros(n, dtype=bool)
    for st in c.steps:
        if st.code_category == "hostExchangeCode":
            host |= st.code_bytes > 0
    add("hostExchangePacketHeader", all_tiles, np.where(host, HOST_PACKET_HEADER_BYTES, 0))
    state = np.zeros(n, dtype=np.int64)
    for p in plans:
        np.add.at(state, p.v_tile, p.v_state)
    add("vertexInstanceState", all_tiles, state)
    # [NF] ref §5 "Default stack sizes": a stack per worker context plus the supervisor's.
    add("stack", all_tiles, np.full(n, (t.num_worker_contexts + 1) * t.stack_bytes_per_worker, dtype=np.int64))
    if instrument:
        steps = sum(1 for st in c.steps if st.type == "OnTileExecute")
        counters = np.zeros(n, dtype=np.int64)
        if instrumentation_level == "tile":
            counters[:] = steps
        elif instrumentation_level == "ipu":
            counters[:: t.tiles_per_ipu] = steps
        elif instrumentation_level == "device":
            counters[0] = steps
        else:  # vertex: one counter per vertex execution point
            for st in c.steps:
                if st.type == "OnTileExecute":
                    np.add.at(counters, st.action.plan.v_tile, st.action.plan.v_count)
        add("instrumentationResults", all_tiles, counters * INSTRUMENTATION_COUNTER_BYTES)

    v_var, v_tile, v_bytes = _var_tile_bytes(c)
    variables = c.graph.variables
    is_const = np.array([v.constant for v in variables] or [False], dtype=bool)
    is_il = np.array([v.interleaved for v in variables] or [False], dtype=bool)
    al = live.always_live if len(variables) else np.zeros(1, bool)
    row_const, row_il, row_al = is_const[v_var], is_il[v_var], al[v_var]
    sel = row_const
    add("constant", v_tile[sel], v_bytes[sel], v_var[sel])
    sel = ~row_const & row_al & ~row_il
    add("variable", v_tile[sel], v_bytes[sel], v_var[sel])

    g_tile, g_cat, g_size, g_var = (np.concatenate(x) for x in (items_tile, items_cat, items_size, items_var))
    # sequential layout per tile: stable sort by tile keeps the layout order within a tile
    order = np.argsort(g_tile, kind="stable")
    g_tile, g_cat, g_size, g_var = g_tile[order], g_cat[order], g_size[order], g_var[order]
    span = _align(g_size)
    cum = np.cumsum(span)
    tile_start = np.searchsorted(g_tile, g_tile, side="left")
    g_off = cum - span - np.concatenate(([0], cum))[tile_start]
    al_end = np.zeros(n, dtype=np.int64)
    np.maximum.at(al_end, g_tile, g_off + span)

    # -- interleaved arena: always-live interleaved variables, then shared ones ---------------
    sel = row_il & row_al & ~row_const
    i_order = np.argsort(v_tile[sel], kind="stable")
    i_tile, i_size, i_var = v_tile[sel][i_order], v_bytes[sel][i_order], v_var[sel][i_order]
    i_span = _align(i_size)
    i_cum = np.cumsum(i_span)
    i_start = np.searchsorted(i_tile, i_tile, side="left")
    i_off = i_cum - i_span - np.concatenate(([0], i_cum))[i_start] if i_tile.size else i_span
    il_al_end = np.zeros(n, dtype=np.int64)
    np.maximum.at(il_al_end, i_tile, i_off + i_span)

    # -- not-always-live variables: shared by liveness ---------------------------------------
    sel = ~row_al
    s_var, s_tile, s_size = v_var[sel], v_tile[sel], v_bytes[sel]
    first = np.array([live.hull[int(v)][0] for v in s_var], dtype=np.int64)
    last = np.array([live.hull[int(v)][1] for v in s_var], dtype=np.int64)
    s_il = is_il[s_var] if s_var.size else np.zeros(0, bool)
    # interleaved-required and general ones share within their own arena only
    rel = np.zeros(s_tile.size, dtype=np.int64)
    for arena in (s_il, ~s_il):
        rel[arena] = _allocate_shared(s_tile[arena], s_var[arena], s_size[arena], first[arena], last[arena])
    s_off = np.where(s_il, il_al_end[s_tile] + rel, al_end[s_tile] + rel)

    # interleaved arena size per tile
    i_size_tile = il_al_end.copy()
    if s_tile.size:
        np.maximum.at(i_size_tile, s_tile[s_il], (s_off + _align(s_size))[s_il])

    # -- all allocations: (tile, category, always_live, arena, virtual/relative offset, size, var)
    a_tile = np.concatenate([g_tile, i_tile, s_tile])
    a_cat = np.concatenate([g_cat, np.full(i_tile.size, CAT["variable"]), np.full(s_tile.size, CAT["variable"])])
    a_al = np.concatenate([np.ones(g_tile.size + i_tile.size, bool), np.zeros(s_tile.size, bool)])
    a_il = np.concatenate([np.zeros(g_tile.size, bool), np.ones(i_tile.size, bool), s_il])
    a_off = np.concatenate([g_off, i_off, s_off]).astype(np.int64)
    a_size = np.concatenate([g_size, i_size, s_size]).astype(np.int64)
    a_var = np.concatenate([g_var, i_var, s_var])

    ilstart, bpt = t.interleaved_memory_start, t.bytes_per_tile
    isz = i_size_tile[a_tile]
    cap = bpt - isz  # end of the general arena in virtual addresses
    end = a_off + a_size
    pieces = []  # (region, lo, hi) per allocation, physical-ish addresses
    # general arena
    g = ~a_il
    pieces.append((NON_INTERLEAVED, g, a_off, np.minimum(end, ilstart)))
    pieces.append((INTERLEAVED, g, np.maximum(a_off, ilstart) + isz, np.minimum(end, cap) + isz))
    pieces.append((OVERFLOWED, g, np.maximum(a_off, cap) - cap, end - cap))
    # interleaved arena (relative offsets from ilstart)
    p0, p1 = ilstart + a_off, ilstart + end
    pieces.append((INTERLEAVED, a_il, p0, np.minimum(p1, bpt)))
    pieces.append((OVERFLOWED, a_il, np.maximum(p0, bpt) - bpt + _BIG // 2, p1 - bpt + _BIG // 2))
    r_tile, r_cat, r_al, r_reg, r_lo, r_hi = [], [], [], [], [], []
    for reg, mask, lo, hi in pieces:
        m = mask & (hi > lo)
        r_tile.append(a_tile[m])
        r_cat.append(a_cat[m])
        r_al.append(a_al[m])
        r_reg.append(np.full(int(m.sum()), reg, np.int64))
        r_lo.append(lo[m])
        r_hi.append(hi[m])
    r_tile, r_cat, r_al, r_reg, r_lo, r_hi = (np.concatenate(x) for x in (r_tile, r_cat, r_al, r_reg, r_lo, r_hi))

    # union of address ranges per (tile, category, region, always_live): shared bytes count once
    key = ((r_tile * len(MEMORY_CATEGORIES) + r_cat) * 3 + r_reg) * 2 + r_al
    ukey, grp = np.unique(key, return_inverse=True)
    order = np.lexsort((r_lo, grp))
    lo_s = r_lo[order] + grp[order] * _BIG
    hi_s = r_hi[order] + grp[order] * _BIG
    prev = np.concatenate(([np.int64(-1)], np.maximum.accumulate(hi_s)[:-1]))
    contrib = np.maximum(0, hi_s - np.maximum(lo_s, prev))
    cat_bytes = np.bincount(grp[order], weights=contrib, minlength=ukey.size).astype(np.int64)
    u_al = (ukey % 2).astype(bool)
    u_reg = (ukey // 2) % 3
    u_cat = (ukey // 6) % len(MEMORY_CATEGORIES)
    u_tile = ukey // (6 * len(MEMORY_CATEGORIES))
    keep = cat_bytes > 0
    by_category = {
        "tile": u_tile[keep].astype(np.int32),
        "category": np.array(MEMORY_CATEGORIES, dtype=object)[u_cat[keep]],
        "region": np.array(MEMORY_REGIONS, dtype=object)[u_reg[keep]],
        "always_live": u_al[keep],
        "bytes": cat_bytes[keep],
    }

    def per_tile(mask: np.ndarray) -> np.ndarray:
        return np.bincount(u_tile[mask], weights=cat_bytes[mask], minlength=n).astype(np.int64)

    ni_excl, il_excl, ov = per_tile(u_reg == 0), per_tile(u_reg == 1), per_tile(u_reg == 2)
    ni_incl = np.zeros(n, np.int64)
    il_incl = np.zeros(n, np.int64)
    m = r_reg == NON_INTERLEAVED
    np.maximum.at(ni_incl, r_tile[m], r_hi[m])
    m = r_reg == INTERLEAVED
    np.maximum.at(il_incl, r_tile[m], r_hi[m] - ilstart)
    tile_memory = {
        "tile": all_tiles.astype(np.int32),
        "ipu": (all_tiles // t.tiles_per_ipu).astype(np.int32),
        "tile_in_ipu": (all_tiles % t.tiles_per_ipu).astype(np.int32),
        "total_bytes_including_gaps": ni_incl + il_incl + ov,
        "total_bytes_excluding_gaps": ni_excl + il_excl + ov,
        "always_live_bytes": per_tile(u_al),
        "not_always_live_bytes": per_tile(~u_al),
        "non_interleaved_bytes_including_gaps": ni_incl,
        "non_interleaved_bytes_excluding_gaps": ni_excl,
        "interleaved_bytes_including_gaps": il_incl,
        "interleaved_bytes_excluding_gaps": il_excl,
        "overflowed_bytes": ov,
    }

    # -- variable placements ----------------------------------------------------------------
    is_v = a_var >= 0
    pv, pt, po, ps, pil = a_var[is_v], a_tile[is_v], a_off[is_v], a_size[is_v], a_il[is_v]
    pcap = bpt - i_size_tile[pt]
    phys = np.where(pil, ilstart + po, np.where(po >= ilstart, po + i_size_tile[pt], po))
    region = np.where(
        pil, np.where(phys < bpt, INTERLEAVED, OVERFLOWED),
        np.where(po < ilstart, NON_INTERLEAVED, np.where(po < pcap, INTERLEAVED, OVERFLOWED)),
    )  # fmt: skip
    order = np.lexsort((pt, pv))
    placements = {
        "variable_id": pv[order].astype(np.int32),
        "tile": pt[order].astype(np.int32),
        "offset": phys[order].astype(np.int64),
        "bytes": ps[order].astype(np.int64),
        "region": np.array(MEMORY_REGIONS, dtype=object)[region[order]],
    }

    # -- liveness per step and IPU -------------------------------------------------------------
    nsteps = len(c.steps)
    diff = np.zeros((nsteps + 1, t.num_ipus), dtype=np.int64)
    if live.intervals and s_var.size:
        ipu_bytes = np.zeros((len(variables), t.num_ipus), dtype=np.int64)
        np.add.at(ipu_bytes, (s_var, s_tile // t.tiles_per_ipu), s_size)
        iv = np.array(live.intervals, dtype=np.int64)
        np.add.at(diff, iv[:, 1], ipu_bytes[iv[:, 0]])
        np.add.at(diff, iv[:, 2] + 1, -ipu_bytes[iv[:, 0]])
    liveness_steps = np.cumsum(diff, axis=0)[:nsteps]

    nv = len(variables)
    var_tiles = np.bincount(v_var, minlength=nv).astype(np.int32)
    var_bytes = np.array([v.nbytes for v in variables], dtype=np.int64)
    return MemoryLayout(tile_memory, by_category, placements, liveness_steps, var_tiles, var_bytes)
