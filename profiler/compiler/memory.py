"""Memory placement on each tile: always-live data laid out in order, not-always-live variables
sharing addresses by liveness (first-fit interval allocator), regions and gaps.

Layout of a tile (addresses): the general arena starts at 0 (code, vertex state, stack,
instrumentation, constants, always-live variables, then not-always-live variables); variables
that must sit in interleaved memory get their own arena at ``interleaved_memory_start``, and the
general arena skips over it. Bytes past the end of the tile are *overflowed* (out of memory).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from profiler.chip.targets import AUTO_SUPERVISOR_STACK_BYTES, AUTO_WORKER_STACK_BYTES
from profiler.compiler.compile import CompiledGraph, Node, Step
from profiler.compiler.liveness import Liveness
from profiler.compiler.tile_span import TileSpan
from profiler.executable.plans import ComputeSetPlan
from profiler.host import sorting
from profiler.host.parallel import in_row_chunks, threads
from profiler.host.sorting import stable_order
from profiler.poplar.recall import tiles_key
from report_format.schema import MEMORY_CATEGORIES, MEMORY_REGIONS
from report_format.vocabulary import ControlType, MemoryCategory, StepType

# [INF] 64-bit loads/stores (ref §1 "Load/store datapath") need 8-byte alignment; every allocation
# starts 8-byte aligned.
ALIGNMENT = 8
# [INF] ref §5 controlCode ("code for Program objects and running compute sets") ≈ 100 KiB for a dense
# layer's named programs over 1472 tiles (its compute sets and exchanges, not its syncs: ~70 B per tile
# for 8 programs): a step costs each tile taking part a call/sync pair of 4-byte instructions (ref §1
# IPUModel instructionBytes), each control node (Repeat, If, Call...) a loop or branch header of the
# same size on every tile. Control code is held per tile (libpva programs[].controlCodeByTile): a tile
# holds the instructions of the steps it takes part in, so a compute set costs only the tiles with its
# vertices, an exchange or a host copy only the tiles that send or receive in it.
CONTROL_CODE_BYTES_PER_STEP = 8
CONTROL_CODE_BYTES_PER_NODE = 8
# A sync (Sync steps, and StreamCopyBegin, the host sync) is a step every tile takes part in (each spends
# the sync's cycles): 8 B on each, no source pricing it apart. StreamCopyEnd, in which no tile spends a
# cycle, holds none. (Charging a sync that opens an exchange only on the tiles outside the exchange, as
# if its instruction were the exchange code's first, takes the PopTorch basics profile's control code
# from 0.85 to 0.69 of the measured, out of its band: not done.)


def control_code_span(node: Node, n: int) -> TileSpan:
    """A program node's control code on each of ``n`` tiles: none for a later call's (the function's body
    is held once, by its first call's nodes); a step's on the tiles taking part in it, those whose
    estimated cycles in it are above 0 (every tile for a sync); a control node's header on every tile."""
    if node.shares_code:
        return TileSpan(0, np.zeros(0, dtype=np.int64), n)
    if not isinstance(node, Step):
        return TileSpan(0, np.full(n, CONTROL_CODE_BYTES_PER_NODE, dtype=np.int64), n)
    cycles = node.cost.span("tile_cycles")
    assert cycles is not None  # every step has its estimated cycles
    return TileSpan(cycles.lo, np.where(cycles.values > 0, CONTROL_CODE_BYTES_PER_STEP, 0).astype(np.int64), n)


def control_code_by_tile(nodes: list[Node], n: int) -> np.ndarray:
    """The control code of ``nodes`` on each of ``n`` tiles (``control_code_span`` summed), span by span."""
    out = np.zeros(n, dtype=np.int64)
    for nd in nodes:
        s = control_code_span(nd, n)
        out[s.lo : s.hi] += s.values
    return out


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
    """Offsets for allocations live over [first, last] steps; ones whose lifetimes overlap never share bytes
    (``profiler.compiler.first_fit``, compiled loops, imported on first use): first-fit in order of first
    step or greedy by size, whichever spans fewer bytes (first-fit on a tie). Poplar allocates once the
    whole program is lowered, knowing every lifetime (its lowered-vars report records interference between
    liveness classes and an allocation order per tile: ref ipu_model.md §5), so it is not held to the
    order in which a program runs."""
    from profiler.compiler.first_fit import extent, first_fit, greedy_by_size

    by_step = first_fit(sizes, firsts, lasts, ALIGNMENT)
    if extent(sizes, by_step) <= _live_peak(_align(sizes), firsts, lasts):  # nothing to gain (a lower bound
        return by_step  # to within the alignment); greedy by size is the dearer of the two loops
    by_size = greedy_by_size(sizes, firsts, lasts, ALIGNMENT)
    return by_size if extent(sizes, by_size) < extent(sizes, by_step) else by_step


def _live_peak(sizes: np.ndarray, firsts: np.ndarray, lasts: np.ndarray) -> int:
    """The most bytes of allocations live at one step (each live over [first, last])."""
    if sizes.size == 0:
        return 0
    steps = np.concatenate([firsts, np.asarray(lasts) + 1])
    delta = np.concatenate([sizes, -np.asarray(sizes)])
    order = np.lexsort((delta, steps))  # at one step, ends (negative) before starts
    return int(np.cumsum(delta[order]).max(initial=0))


def _allocate_shared(
    tile: np.ndarray,
    var: np.ndarray,
    size: np.ndarray,
    first: np.ndarray,
    last: np.ndarray,
    progress: Callable[[int, int], None] | None = None,
) -> np.ndarray:
    """Relative offsets of not-always-live allocations per tile; tiles with the same sizes and
    lifetimes in the same order (the same comparisons between their first and last steps: each layer
    of a pipelined decoder on its own tiles, later in the program) get the same layout, computed once."""
    out = np.zeros(tile.size, dtype=np.int64)
    if tile.size == 0:
        return out
    order = np.lexsort((var, tile))
    # sorted once, so each tile's rows are slices (views), not a fancy-indexed copy per tile
    t_sorted, s_sorted = tile[order], size[order]
    f_sorted, l_sorted = first[order], last[order]
    cuts = np.flatnonzero(t_sorted[1:] != t_sorted[:-1]) + 1
    placed = np.zeros(tile.size, dtype=np.int64)  # offsets in sorted order
    bounds = list(zip([0, *cuts.tolist()], [*cuts.tolist(), t_sorted.size], strict=True))
    distinct: dict[bytes, int] = {}  # a layout's key -> its index among the tiles' distinct layouts
    first_tile: list[tuple[int, int]] = []  # each distinct layout's first tile's rows
    layout_of: list[int] = []  # each tile's
    for a, b in bounds:
        # the placement only compares steps with each other, so the steps' ranks among the tile's
        # first and last steps stand for them (a layer's lifetimes end at other steps than another's
        # where they outlive the layer: the pipeline's copies to the next stage)
        rank = np.unique(np.concatenate((f_sorted[a:b], l_sorted[a:b])), return_inverse=True)[1]
        key = s_sorted[a:b].tobytes() + rank.astype(np.int64, copy=False).tobytes()
        if key not in distinct:
            distinct[key] = len(first_tile)
            first_tile.append((a, b))
        layout_of.append(distinct[key])
    layouts: list[np.ndarray] = [np.zeros(0, np.int64)] * len(first_tile)
    placed_count = itertools.count(1)  # next() is atomic under the GIL: each layout counted once
    caller = threading.current_thread()  # the progress line is the caller's: reported from its thread

    def place(rows: slice) -> None:
        for k in range(rows.start, rows.stop):
            a, b = first_tile[k]
            layouts[k] = _first_fit(s_sorted[a:b], f_sorted[a:b], l_sorted[a:b])
            done = next(placed_count)
            if progress is not None and threading.current_thread() is caller:
                progress(done, len(first_tile))

    # the layouts are independent and their loops compiled without the GIL (first_fit's njit
    # nogil): side by side on the cores, a few layouts a part so the parts even out; the same offsets
    # whichever thread places a layout
    in_row_chunks(place, len(first_tile), len(first_tile), max(1, len(first_tile) // (4 * threads())))
    if progress is not None and first_tile:  # the last may have been placed on another thread
        progress(len(first_tile), len(first_tile))
    for (a, b), k in zip(bounds, layout_of, strict=True):
        placed[a:b] = layouts[k]
    out[order] = placed
    return out


def _var_tile_bytes(c: CompiledGraph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(variable, tile, bytes) for every variable and tile holding part of it. Variables mapped alike
    (the same interval starts, one array for a repeated layer's: profiler.poplar.shared_arrays, and
    tiles a whole number of IPUs apart) are counted once: a decoder's 32 layers hold ~10^8 intervals."""
    vs, ts, bs = [], [], []
    tpi = c.target.tiles_per_ipu
    counted: dict[tuple[int, int, bytes], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for v in c.variables:
        m = v.mapping
        # unmapped elements: counted as given (bincount refuses their negative tiles, as before)
        base, digest = tiles_key(m.tiles, tpi) or (0, b"")
        key = (id(m.starts), m.n, digest)
        found = counted.get(key)
        if found is None or found[0] is not m.starts or not digest:  # the entry holds the starts: their id stays theirs
            lengths = np.diff(np.append(m.starts, m.n))
            keep = lengths > 0
            per_tile = np.bincount(m.tiles[keep] - base, weights=lengths[keep], minlength=1).astype(np.int64)
            held = np.flatnonzero(per_tile)
            found = counted[key] = (m.starts, held, per_tile[held])
        _, held, elements = found
        vs.append(np.full(held.size, v.id, dtype=np.int64))
        ts.append(held + base)
        bs.append(elements * v.dtype.itemsize)
    if not vs:
        z = np.zeros(0, np.int64)
        return z, z, z
    return np.concatenate(vs), np.concatenate(ts), np.concatenate(bs)


@dataclass
class Items:
    """Allocations on tiles, columnar: allocation i is ``size[i]`` bytes of category ``cat[i]`` on
    tile ``tile[i]`` (of variable ``var[i]``, -1 for anything else)."""

    tile: np.ndarray
    cat: np.ndarray
    size: np.ndarray
    var: np.ndarray

    @staticmethod
    def of(cat: str, tiles: np.ndarray, sizes: np.ndarray, var: np.ndarray | None = None) -> Items:
        keep = sizes > 0
        n = int(keep.sum())
        return Items(tiles[keep].astype(np.int64), np.full(n, CAT[cat], dtype=np.int64), sizes[keep].astype(np.int64),
                     np.full(n, -1, np.int64) if var is None else var[keep].astype(np.int64))  # fmt: skip

    @staticmethod
    def join(parts: list[Items]) -> Items:
        if not parts:
            z = np.zeros(0, np.int64)
            return Items(z, z, z, z)
        return Items(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("tile", "cat", "size", "var")))

    def __getitem__(self, sel: np.ndarray) -> Items:
        return Items(self.tile[sel], self.cat[sel], self.size[sel], self.var[sel])


@dataclass
class VariableRows:
    """Every (variable, tile) pair holding part of a variable, with its bytes and kind."""

    var: np.ndarray
    tile: np.ndarray
    bytes: np.ndarray
    constant: np.ndarray
    interleaved: np.ndarray
    always_live: np.ndarray


def _variable_rows(c: CompiledGraph, live: Liveness) -> VariableRows:
    v_var, v_tile, v_bytes = _var_tile_bytes(c)
    variables = c.variables
    is_const = np.array([v.constant for v in variables] or [False], dtype=bool)
    is_il = np.array([v.interleaved for v in variables] or [False], dtype=bool)
    al = live.always_live if len(variables) else np.zeros(1, bool)
    return VariableRows(v_var, v_tile, v_bytes, is_const[v_var], is_il[v_var], al[v_var])


def _always_live_items(
    c: CompiledGraph, rows: VariableRows, instrument: bool, instrumentation_level: str, stacks: tuple[int, int]
) -> Items:
    """Always-live data of the general arena, in layout order: code, control, exchange code,
    descriptors, headers, vertex state and field data, stack, instrumentation, constants, always-live
    variables. ``stacks``: each worker context's and the supervisor's stack bytes."""
    t = c.target
    n = t.num_tiles
    all_tiles = np.arange(n, dtype=np.int64)
    parts: list[Items] = []
    code_bytes = np.array(c.code_bytes or [0], dtype=np.int64)
    plans = list(c.cs_plans.values())
    if plans:
        pair = sorting.unique(
            np.concatenate([p.v_tile.astype(np.int64) * len(code_bytes) + p.v_codelet for p in plans])
        )
        parts.append(Items.of(MemoryCategory.VERTEX_CODE, pair // len(code_bytes), code_bytes[pair % len(code_bytes)]))
    parts.append(Items.of(MemoryCategory.CONTROL_CODE, all_tiles, control_code_by_tile(c.nodes, n)))
    # controlId: a sync id per host synchronisation and a branch id per If/Switch, on each IPU's first tile
    ids = sum(
        1 for nd in c.nodes if nd.type in (ControlType.IF, ControlType.SWITCH) or nd.type == StepType.STREAM_COPY_BEGIN
    )
    control_id = np.zeros(n, dtype=np.int64)
    control_id[:: t.tiles_per_ipu] = CONTROL_ID_BYTES * ids
    parts.append(Items.of(MemoryCategory.CONTROL_ID, all_tiles, control_id))
    for cat in (
        MemoryCategory.INTERNAL_EXCHANGE_CODE,
        MemoryCategory.GLOBAL_EXCHANGE_CODE,
        MemoryCategory.HOST_EXCHANGE_CODE,
    ):
        code = sum(
            (st.cost.code_bytes for st in c.steps if st.cost.code_category == cat and st.cost.code_bytes is not None),
            np.zeros(n, np.int64),
        )
        parts.append(Items.of(cat, all_tiles, code))
    descriptors = sum(
        (st.cost.descriptor_bytes for st in c.steps if st.cost.descriptor_bytes is not None), np.zeros(n, np.int64)
    )
    parts.append(Items.of(MemoryCategory.COPY_DESCRIPTOR, all_tiles, descriptors))
    host = np.zeros(n, dtype=bool)
    for st in c.steps:
        if st.cost.code_category == MemoryCategory.HOST_EXCHANGE_CODE and st.cost.code_bytes is not None:
            host |= st.cost.code_bytes > 0
    parts.append(
        Items.of(MemoryCategory.HOST_EXCHANGE_PACKET_HEADER, all_tiles, np.where(host, HOST_PACKET_HEADER_BYTES, 0))
    )

    def vertices_per_tile(bytes_of: Callable[[ComputeSetPlan], np.ndarray | None]) -> np.ndarray:
        """The (tile, codelet) rows' ``bytes_of`` summed per tile over every compute set."""
        rows = [(p.v_tile, b) for p in plans if (b := bytes_of(p)) is not None]
        if not rows:
            return np.zeros(n, dtype=np.int64)
        tiles, values = (np.concatenate(c) for c in zip(*rows, strict=True))
        return np.bincount(tiles, weights=values, minlength=n).astype(np.int64)

    parts.append(Items.of(MemoryCategory.VERTEX_INSTANCE_STATE, all_tiles, vertices_per_tile(lambda p: p.v_state)))
    parts.append(Items.of(MemoryCategory.VERTEX_FIELD_DATA, all_tiles, vertices_per_tile(lambda p: p.v_field_data)))
    # graph constants that building the vertices adds (PopLibs' conv worklists: Codelet.vertex_bytes)
    parts.append(Items.of(MemoryCategory.CONSTANT, all_tiles, vertices_per_tile(lambda p: p.v_constant)))
    # A stack per worker context plus the supervisor's on every tile (control code runs on all of
    # them); automatic sizes: 6 x 48 + 96 = 384 B (targets.AUTO_*_STACK_BYTES).
    worker, supervisor = stacks
    stack = np.full(n, t.num_worker_contexts * worker + supervisor, dtype=np.int64)
    parts.append(Items.of(MemoryCategory.STACK, all_tiles, stack))
    if instrument:
        parts.append(Items.of(MemoryCategory.INSTRUMENTATION_RESULTS, all_tiles, _counters(c, instrumentation_level)))
    sel = rows.constant
    parts.append(Items.of(MemoryCategory.CONSTANT, rows.tile[sel], rows.bytes[sel], rows.var[sel]))
    sel = ~rows.constant & rows.always_live & ~rows.interleaved
    parts.append(Items.of(MemoryCategory.VARIABLE, rows.tile[sel], rows.bytes[sel], rows.var[sel]))
    return Items.join(parts)


def _counters(c: CompiledGraph, level: str) -> np.ndarray:
    """instrumentationResults bytes per tile: a cycle counter per instrumented point."""
    t = c.target
    counters = np.zeros(t.num_tiles, dtype=np.int64)
    steps = sum(1 for st in c.steps if st.type == StepType.ON_TILE_EXECUTE)
    if level == "tile":
        counters[:] = steps
    elif level == "ipu":
        counters[:: t.tiles_per_ipu] = steps
    elif level == "device":
        counters[0] = steps
    else:  # vertex: one counter per vertex execution point
        for st in c.steps:
            if st.type == StepType.ON_TILE_EXECUTE:
                plan = c.cs_plans[st.compute_set_id]  # what the step's action executes
                np.add.at(counters, plan.v_tile, plan.v_count)
    return counters * INSTRUMENTATION_COUNTER_BYTES


def _pack_per_tile(items: Items, n: int) -> tuple[Items, np.ndarray, np.ndarray]:
    """Lay items out one after another on each tile, in the order given (aligned): the items
    sorted by tile, their offsets from the arena's start, and each tile's arena end."""
    order = stable_order(items.tile)  # stable: keeps the layout order within a tile
    items = items[order]
    span = _align(items.size)
    cum = np.cumsum(span)
    first_of_tile = np.searchsorted(items.tile, items.tile, side="left")
    offset = cum - span - np.concatenate(([0], cum))[first_of_tile] if items.tile.size else span
    end = np.zeros(n, dtype=np.int64)
    np.maximum.at(end, items.tile, offset + span)
    return items, offset, end


def _lookup(
    table: Mapping[int, tuple[int, ...]], ids: np.ndarray, width: int, default: tuple[int, ...] | None
) -> np.ndarray:
    """``table[v]`` (``width`` integers) for each of ``ids`` as rows of an array (``default`` for ids it
    lacks; None: every id must be in it), by one dense array rather than a lookup per id."""
    if ids.size == 0:
        return np.zeros((0, width), dtype=np.int64)
    keys = np.fromiter(table.keys(), np.int64, len(table))
    values = np.fromiter(itertools.chain.from_iterable(table.values()), np.int64, width * len(table))
    size = max(int(ids.max()), int(keys.max()) if keys.size else 0) + 1
    dense = np.empty((size, width), dtype=np.int64)
    dense[:] = default if default is not None else 0
    found = np.zeros(size, dtype=bool)
    dense[keys] = values.reshape(-1, width)
    found[keys] = True
    if default is None and not found[ids].all():
        raise KeyError(int(ids[~found[ids]][0]))
    return dense[ids]


def _share_by_liveness(
    shared: Items, interleaved: np.ndarray, live: Liveness, progress: Callable[[int, int], None] | None = None
) -> np.ndarray:
    """Offsets of not-always-live variables relative to their arena's free space: variables whose
    lifetimes overlap never share bytes; interleaved-required and general ones share within their
    own arena only. A function's temporaries (live only inside its calls) are placed once, by their
    lifetime within a call, in a block of their own that is live over all the calls (a variable has
    one address, and every call reuses it)."""
    # one lookup per distinct variable, not per (variable, tile) item
    ids, item_of = np.unique(np.asarray(shared.var, dtype=np.int64), return_inverse=True)
    item_of = item_of.reshape(-1)
    hull = _lookup(live.hull, ids, 2, None)
    first, last = hull[item_of, 0], hull[item_of, 1]
    fn = _lookup(live.in_calls, ids, 3, (-1, 0, 0))  # per distinct variable, looked up per item below
    rel = np.zeros(shared.tile.size, dtype=np.int64)
    for arena in (interleaved, ~interleaved):
        tile, var, size, f, la = shared.tile[arena], shared.var[arena], shared.size[arena], first[arena], last[arena]
        in_arena = item_of[arena]
        fid = fn[in_arena, 0]
        inner = np.zeros(tile.size, dtype=np.int64)
        members: list[np.ndarray] = []  # per function: which items are its temporaries
        blocks: list[tuple[np.ndarray, ...]] = []  # (tile, pseudo variable, size, first, last) per function
        for k, f_id in enumerate(sorting.unique(fid[fid >= 0]).tolist()):
            m = fid == f_id
            inner[m] = _allocate_shared(tile[m], var[m], size[m], fn[in_arena[m], 1], fn[in_arena[m], 2])
            end = np.zeros(int(tile.max()) + 1, dtype=np.int64)
            np.maximum.at(end, tile[m], inner[m] + _align(size[m]))
            b_tiles = np.flatnonzero(end)
            pseudo = np.full(b_tiles.size, -1 - k, dtype=np.int64)  # sorts before every variable
            members.append(m)
            blocks.append((b_tiles, pseudo, end[b_tiles], np.full(b_tiles.size, f[m].min()),
                           np.full(b_tiles.size, la[m].max())))  # fmt: skip
        own = fid < 0
        if blocks:
            cols = [
                np.concatenate([x[own], *(blk[i] for blk in blocks)]) for i, x in enumerate((tile, var, size, f, la))
            ]
        else:  # no function's temporaries (the usual case): the arena's own arrays, not copies of them
            cols = [tile, var, size, f, la]
        del in_arena, fid
        placed = _allocate_shared(cols[0], cols[1], cols[2], cols[3], cols[4], progress)
        del cols
        out = np.zeros(tile.size, dtype=np.int64)
        at = int(own.sum())
        out[own] = placed[:at]
        for m, blk in zip(members, blocks, strict=True):  # a function's temporaries: its block's offset + theirs
            block_at = np.zeros(int(tile.max()) + 1, dtype=np.int64)
            block_at[blk[0]] = placed[at : at + blk[0].size]
            at += blk[0].size
            out[m] = block_at[tile[m]] + inner[m]
        rel[arena] = out
    return rel


@dataclass
class Placed:
    """Every allocation with its arena-relative offset: general-arena offsets are virtual (the
    interleaved arena is skipped over later), interleaved-arena ones are relative to its start."""

    items: Items
    always_live: np.ndarray
    interleaved: np.ndarray
    offset: np.ndarray
    interleaved_size: np.ndarray  # per tile


def _place_arenas(
    rows: VariableRows, general: Items, live: Liveness, n: int, progress: Callable[[int, int], None] | None = None
) -> tuple[Placed, Items]:
    """The general arena (always-live data, then shared variables after it) and the interleaved
    arena (always-live interleaved variables, then shared interleaved ones)."""
    g_items, g_off, al_end = _pack_per_tile(general, n)
    sel = rows.interleaved & rows.always_live & ~rows.constant
    il_items, il_off, il_al_end = _pack_per_tile(
        Items.of(MemoryCategory.VARIABLE, rows.tile[sel], rows.bytes[sel], rows.var[sel]), n
    )
    sel = ~rows.always_live
    shared = Items.of(MemoryCategory.VARIABLE, rows.tile[sel], rows.bytes[sel], rows.var[sel])
    s_il = rows.interleaved[sel][rows.bytes[sel] > 0]
    rel = _share_by_liveness(shared, s_il, live, progress)
    s_off = np.where(s_il, il_al_end[shared.tile] + rel, al_end[shared.tile] + rel)
    il_size = il_al_end.copy()
    if shared.tile.size:
        np.maximum.at(il_size, shared.tile[s_il], (s_off + _align(shared.size))[s_il])
    items = Items.join([g_items, il_items, shared])
    always = np.concatenate([np.ones(g_items.tile.size + il_items.tile.size, bool), np.zeros(shared.tile.size, bool)])
    interleaved = np.concatenate([np.zeros(g_items.tile.size, bool), np.ones(il_items.tile.size, bool), s_il])
    offset = np.concatenate([g_off, il_off, s_off]).astype(np.int64)
    return Placed(items, always, interleaved, offset, il_size), shared


def _address_ranges(p: Placed, ilstart: int, bpt: int) -> tuple[np.ndarray, ...]:
    """Each allocation cut into its pieces per region: (tile, category, always_live, region, lo, hi)."""
    a = p.items
    cols: list[list[np.ndarray]] = [[], [], [], [], [], []]

    def add(reg: int, rows: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> None:
        """The pieces of ``rows`` (allocation indices, ascending) in region ``reg``: those not empty."""
        m = hi > lo
        at = rows[m]
        for col, v in zip(cols, (a.tile[at], a.cat[at], p.always_live[at], np.full(at.size, reg, np.int64), lo[m],
                                 hi[m]), strict=True):  # fmt: skip
            col.append(v)

    # each arena's rows and each region's bounds made in turn, not all of them over every allocation
    # at once (the memory placement's host peak: millions of (variable, tile) allocations on a POD16)
    g = np.flatnonzero(~p.interleaved)
    off = p.offset[g]
    end = off + a.size[g]
    isz = p.interleaved_size[a.tile[g]]
    cap = bpt - isz  # end of the general arena in virtual addresses
    add(NON_INTERLEAVED, g, off, np.minimum(end, ilstart))
    add(INTERLEAVED, g, np.maximum(off, ilstart) + isz, np.minimum(end, cap) + isz)
    add(OVERFLOWED, g, np.maximum(off, cap) - cap, end - cap)
    del g, off, end, isz, cap
    il = np.flatnonzero(p.interleaved)  # the interleaved arena (relative to ilstart)
    p0 = ilstart + p.offset[il]
    p1 = p0 + a.size[il]
    add(INTERLEAVED, il, p0, np.minimum(p1, bpt))
    add(OVERFLOWED, il, np.maximum(p0, bpt) - bpt + _BIG // 2, p1 - bpt + _BIG // 2)
    del il, p0, p1
    out = []
    for col in cols:  # each column's pieces let go once it is whole
        out.append(np.concatenate(col))
        col.clear()
    return tuple(out)


def _groups_by_start(key: np.ndarray, lo: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(distinct keys sorted, each sorted range's group, the order) of ranges sorted by (key, lo):
    one sort of a packed key where both fit 62 bits, else a unique and a two-key sort. Ranges of
    equal (key, lo) may come in either order: a group's union does not depend on it."""
    if key.size == 0:
        z = np.zeros(0, np.int64)
        return z, z, z
    lo_bits = max(int(lo.max()), 0).bit_length()
    if int(lo.min()) >= 0 and int(key.min()) >= 0 and lo_bits + int(key.max()).bit_length() <= 62:
        packed = key << lo_bits
        packed |= lo
        order = np.argsort(packed)
        k = key[order]
        starts = np.ones(k.size, dtype=bool)
        np.not_equal(k[1:], k[:-1], out=starts[1:])
        return k[starts], np.cumsum(starts) - 1, order
    ukey, grp = np.unique(key, return_inverse=True)
    order = np.lexsort((lo, grp))
    return ukey, grp[order], order


def _memory_tables(
    ranges: tuple[np.ndarray, ...], n: int, tiles_per_ipu: int, ilstart: int
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Bytes per (tile, category, region, liveness) and per tile; shared bytes count once (the
    union of address ranges), gaps included up to the highest address used."""
    r_tile, r_cat, r_al, r_reg, r_lo, r_hi = ranges
    key = ((r_tile * len(MEMORY_CATEGORIES) + r_cat) * 3 + r_reg) * 2 + r_al
    ukey, grp_s, order = _groups_by_start(key, r_lo)
    lo_s = r_lo[order] + grp_s * _BIG
    hi_s = r_hi[order] + grp_s * _BIG
    prev = np.concatenate(([np.int64(-1)], np.maximum.accumulate(hi_s)[:-1]))
    contrib = np.maximum(0, hi_s - np.maximum(lo_s, prev))
    cat_bytes = np.bincount(grp_s, weights=contrib, minlength=ukey.size).astype(np.int64)
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

    all_tiles = np.arange(n, dtype=np.int64)
    ni_excl, il_excl, ov = per_tile(u_reg == 0), per_tile(u_reg == 1), per_tile(u_reg == 2)
    ni_incl = np.zeros(n, np.int64)
    il_incl = np.zeros(n, np.int64)
    m = r_reg == NON_INTERLEAVED
    np.maximum.at(ni_incl, r_tile[m], r_hi[m])
    m = r_reg == INTERLEAVED
    np.maximum.at(il_incl, r_tile[m], r_hi[m] - ilstart)
    tile_memory = {
        "tile": all_tiles.astype(np.int32),
        "ipu": (all_tiles // tiles_per_ipu).astype(np.int32),
        "tile_in_ipu": (all_tiles % tiles_per_ipu).astype(np.int32),
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
    return tile_memory, by_category


def _placements(p: Placed, ilstart: int, bpt: int) -> dict[str, np.ndarray]:
    """Where each variable sits on each tile (physical offset and region)."""
    is_v = np.flatnonzero(p.items.var >= 0)
    pv, pt = p.items.var[is_v], p.items.tile[is_v]
    # by (variable, tile): one stable sort of a packed key (a tile number is below its count); the
    # allocations taken in that order first, so each column below is made once, already in order
    n = int(pt.max()) + 1 if pt.size else 1
    at = is_v[stable_order(pv * n + pt)]
    del is_v, pv, pt
    pt, po, pil = p.items.tile[at], p.offset[at], p.interleaved[at]
    isz = p.interleaved_size[pt]
    phys = np.where(pil, ilstart + po, np.where(po >= ilstart, po + isz, po))
    region = np.where(
        pil, np.where(phys < bpt, INTERLEAVED, OVERFLOWED),
        np.where(po < ilstart, NON_INTERLEAVED, np.where(po < bpt - isz, INTERLEAVED, OVERFLOWED)),
    )  # fmt: skip
    del po, pil, isz
    return {
        "variable_id": p.items.var[at].astype(np.int32),
        "tile": pt.astype(np.int32),
        "offset": phys.astype(np.int64, copy=False),
        "bytes": p.items.size[at].astype(np.int64, copy=False),
        "region": np.array(MEMORY_REGIONS, dtype=object)[region],
    }


def _liveness_steps(c: CompiledGraph, live: Liveness, shared: Items) -> np.ndarray:
    """Not-always-live bytes per program step and IPU."""
    t = c.target
    nsteps = len(c.steps)
    diff = np.zeros((nsteps + 1, t.num_ipus), dtype=np.int64)
    if live.intervals and shared.var.size:
        ipu_bytes = np.zeros((len(c.variables), t.num_ipus), dtype=np.int64)
        np.add.at(ipu_bytes, (shared.var, shared.tile // t.tiles_per_ipu), shared.size)
        iv = np.array(live.intervals, dtype=np.int64)
        np.add.at(diff, iv[:, 1], ipu_bytes[iv[:, 0]])
        np.add.at(diff, iv[:, 2] + 1, -ipu_bytes[iv[:, 0]])
    return np.cumsum(diff, axis=0)[:nsteps]


def place(
    c: CompiledGraph,
    live: Liveness,
    instrument: bool = False,
    instrumentation_level: str = "tile",
    stacks: tuple[int, int] = (AUTO_WORKER_STACK_BYTES, AUTO_SUPERVISOR_STACK_BYTES),
    progress: Callable[[int, int], None] | None = None,
) -> MemoryLayout:
    """Place everything on the tiles: always-live items, packed per tile; not-always-live variables
    shared by liveness; the arenas cut into regions; the memory tables, placements and liveness.
    ``stacks``: each worker context's and the supervisor's stack bytes (engine options
    ``target.workerStackSizeInBytes`` / ``target.supervisorStackSizeInBytes``). ``progress(done,
    total)``: the tiles' distinct layouts of shared variables placed (the slow part)."""
    t = c.target
    rows = _variable_rows(c, live)
    placed, shared = _place_arenas(rows, _always_live_items(c, rows, instrument, instrumentation_level, stacks), live,
                                   t.num_tiles, progress)  # fmt: skip
    ranges = _address_ranges(placed, t.interleaved_memory_start, t.bytes_per_tile)
    tile_memory, by_category = _memory_tables(ranges, t.num_tiles, t.tiles_per_ipu, t.interleaved_memory_start)
    variables = c.variables
    return MemoryLayout(
        tile_memory, by_category, _placements(placed, t.interleaved_memory_start, t.bytes_per_tile),
        _liveness_steps(c, live, shared), np.bincount(rows.var, minlength=len(variables)).astype(np.int32),
        np.array([v.nbytes for v in variables], dtype=np.int64),
    )  # fmt: skip
