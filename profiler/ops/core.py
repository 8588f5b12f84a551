"""What every op shares: its debug context, tile-mapping helpers and vertex-field builders.

An op is a function ``op(graph, *inputs, prog, ..., debug_name="")`` (Poplar/PopLibs style): it adds
variables, compute sets and vertices to ``graph``, appends the programs that run them to the
``Sequence`` ``prog`` and returns its result tensor(s). Every op runs inside its own debug context
(layer "poplibs", op type, parent = the enclosing context), so each variable and compute set it
creates - and so every step they lower to - carries it; the planner's choices are written into the
context's attributes.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import numpy as np

from profiler.chip.dtypes import as_dtype
from profiler.host import sorting
from profiler.poplar import recall
from profiler.poplar.graph import Graph
from profiler.poplar.layout import Affine, Factored, Runs, VarRuns, inner_run
from profiler.poplar.programs import Execute, Sequence
from profiler.poplar.tensor import RUNS_WORTH_IT, Tensor
from profiler.poplar.tile_fields import fields_by_tile
from report_format.vocabulary import Layer

F = TypeVar("F", bound=Callable[..., Any])
LAYER = Layer.POPLIBS


class OpError(ValueError):
    """An op was called with inputs it cannot take (one line naming the op and the problem)."""


def op(op_type: str) -> Callable[[F], F]:
    """Run the decorated op inside a debug context named ``debug_name`` (default: the op type)."""

    def deco(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(graph: Graph, *args: Any, debug_name: str = "", **kwargs: Any) -> Any:
            # ops taking an operation name first (unary(graph, "exp", ...)) default to that name
            default = args[0] if args and isinstance(args[0], str) else op_type
            caller = sys._getframe(1)
            with graph.debug_context(debug_name or default, op_type=op_type, layer=LAYER) as ctx_id:
                # record where the op was called, not this wrapper (Graph.debug_context looks two
                # frames up, which from here is the wrapper itself)
                ctx = graph.debug_contexts[ctx_id]
                graph.debug_contexts[ctx_id] = dataclasses.replace(
                    ctx, file=caller.f_code.co_filename, line=caller.f_lineno
                )
                return fn(graph, *args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return deco


def set_attributes(graph: Graph, attributes: Mapping[str, Any]) -> None:
    """Merge ``attributes`` into the innermost open debug context (e.g. the planner's choices)."""
    ctx_id = graph._current_context()
    if ctx_id < 0:
        return
    ctx = graph.debug_contexts[ctx_id]
    merged = json.loads(ctx.attributes or "{}") | dict(attributes)
    graph.debug_contexts[ctx_id] = dataclasses.replace(ctx, attributes=json.dumps(merged, sort_keys=True, default=str))


def execute(graph: Graph, prog: Sequence, name: str) -> Any:
    """A new compute set, appended to ``prog`` (callers then add vertices to it)."""
    cs = graph.add_compute_set(name)
    prog.add(Execute(cs))
    return cs


def cdiv(a: Any, b: Any) -> Any:
    """Ceiling division (ints or numpy arrays)."""
    return -(-a // b)


# -- tile mapping ------------------------------------------------------------------------------
def linear_tiles(n: int, num_tiles: int, grain: int = 1, start: int = 0, min_elements: int = 1) -> np.ndarray:
    """Tile of each of ``n`` elements spread evenly in grains over ``num_tiles`` tiles
    (poputil::mapTensorLinearly: each tile takes ceil(grains / tiles) consecutive grains, and at
    least ``min_elements``)."""
    grains = max(1, -(-n // grain))
    per_tile = max(1, -(-grains // num_tiles), -(-min_elements // grain))
    return ((np.arange(n, dtype=np.int64) // grain) // per_tile + start) % num_tiles


# poputil::calcLinearTileMapping's defaults (graphcore/poplibs lib/poputil/TileMapping.cpp): at least
# 128 bytes per tile, in grains of the target's vector width (64-bit data path: 4 halves or 2 floats,
# ref §1 "Load/store datapath")
LINEAR_MIN_BYTES_PER_TILE = 128
DATA_PATH_BYTES = 8


def default_linear_tiles(n: int, itemsize: int, num_tiles: int, start: int = 0) -> np.ndarray:
    """``linear_tiles`` with poputil::mapTensorLinearly's default grain and minimum per tile: a small
    tensor (a layer norm's gamma, a bias) sits on a few tiles, not one element on each of n tiles."""
    grain = max(1, DATA_PATH_BYTES // itemsize)
    return linear_tiles(n, num_tiles, grain, start, -(-LINEAR_MIN_BYTES_PER_TILE // itemsize))


def default_linear_runs(n: int, itemsize: int, num_tiles: int, start: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``default_linear_tiles`` as runs: (first element, tile) of each tile's consecutive elements,
    one a tile used, so a weight's mapping costs its tiles, not its elements."""
    grain = max(1, DATA_PATH_BYTES // itemsize)
    min_elements = -(-LINEAR_MIN_BYTES_PER_TILE // itemsize)
    per_tile = max(1, -(-max(1, -(-n // grain)) // num_tiles), -(-min_elements // grain))
    starts = np.arange(0, max(n, 1), per_tile * grain, dtype=np.int64)
    return starts, (np.arange(starts.size, dtype=np.int64) + start) % num_tiles


def add_mapped(graph: Graph, dtype: object, shape: tuple[int, ...], name: str, grain: int = 1) -> Tensor:
    """A new variable mapped linearly over all tiles in ``grain``-element grains."""
    t = graph.add_variable(dtype, shape, name)
    graph.map_linearly(t, grain)
    return t


def add_like(graph: Graph, like: Tensor, name: str, dtype: object | None = None) -> Tensor:
    """A new variable shaped and mapped like ``like`` (Poplar ``Graph::clone``): laid out like the
    variable ``like`` views when it views all of one, so a transposed view's clone is that view of
    a new variable and each tile's elements stay intervals."""
    cloned = graph.clone(like, name, dtype)
    if cloned is not None:
        return cloned
    t = graph.add_variable(like.dtype if dtype is None else dtype, like.shape, name)
    runs = graph.view_runs(like)
    if (
        runs is not None and t.numel() and (runs[1] >= 0).all()
    ):  # a range of one variable (x[i]), a strided view or runs of several: intervals, not a tile per element
        start, tiles = runs
        graph.map_intervals(t, start, np.diff(np.append(start, t.numel())), tiles)
    else:
        graph.set_tile_mapping(t, graph.tile_of(like))
    graph.variable(t).clone_layout = True  # a clone of several variables' view: its tiles' memory as theirs
    return t


def constant_per_tile(graph: Graph, dtype: object, value: float | int) -> Tensor:
    """One constant element on every tile (padding / identity values for vertices); cached per graph."""
    dt = as_dtype(dtype)
    cache: dict[tuple[str, float | int], Tensor] = graph.__dict__.setdefault("_ops_tile_constants", {})
    key = (dt.name, int(value) if dt.kind in "iub" else float(value))  # int64 extremes do not survive float()
    if key not in cache:
        n = graph.target.num_tiles
        with graph.debug_context(f"constant {value} per tile", op_type="Constant", layer=LAYER):
            c = graph.add_constant(dt, [n], value, name=f"ops_const_{dt.name}_{value}")
        graph.set_tile_mapping(c, np.arange(n))
        cache[key] = c
    return cache[key]


# -- vertex fields -----------------------------------------------------------------------------
def groups_by_tile(tiles: np.ndarray, within: np.ndarray | None = None) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Split elements by tile into vertex batches of equal size: yields (vertex tiles, element-index
    matrix [vertices, elements per vertex]) with one vertex per tile holding elements, a tile's
    elements in the order ``within`` (a permutation of them; default: their own)."""
    if tiles.size == 0:
        return
    order = np.argsort(tiles, kind="stable") if within is None else within[np.argsort(tiles[within], kind="stable")]
    utiles, starts, counts = np.unique(tiles[order], return_index=True, return_counts=True)
    for c in sorting.unique(counts):
        sel = counts == c
        yield utiles[sel], order[starts[sel][:, None] + np.arange(c)]


def address_order(t: Tensor) -> np.ndarray | None:
    """The order of ``t``'s flattened elements by address: by variable, then by element (a tile holds
    a variable's elements on it in their order); None when that is their own order. PopLibs' vertices
    over a tensor's elements take a tile's regions sorted by address (poplar
    ``Graph::getSortedContiguousRegions``, as popops' elementwise ops do), so that a view whose
    neighbours lie apart in memory (a concatenation of channels-last and channel-grouped stores seen
    as NCHW, DenseNet's batch norms) reads runs, not an element a region."""
    var, idx = t.elements()
    if var.size < 2:
        return None
    idx = idx.astype(np.int64, copy=False)
    if int(var.min()) == int(var.max()):
        key = idx
    else:  # variables' ids and elements packed in one key: numpy's sort of int64 keys is SIMD
        width = int(idx.max()) + 1
        if int(var.max()) >= (1 << 62) // width:
            return np.lexsort((idx, var))
        key = var.astype(np.int64) * width + idx
    if bool((key[1:] >= key[:-1]).all()):
        return None
    return np.argsort(key, kind="stable")


def tile_order(start: np.ndarray, tile: np.ndarray, n: int) -> tuple[np.ndarray, ...]:
    """``n`` elements held as runs (run i: elements ``start[i]`` up to the next run's start, on
    ``tile[i]``) ordered tile by tile, in element order within a tile, as a stable sort of their
    tiles orders them but per run: (tiles, elements on each, the order, where the order stops
    counting up by one)."""
    length = np.diff(np.append(start, n))
    by_tile = np.argsort(tile, kind="stable")
    utiles, first_run = np.unique(tile[by_tile], return_index=True)
    counts = np.add.reduceat(length[by_tile], first_run)
    s, sl = start[by_tile], length[by_tile]
    at = np.cumsum(sl) - sl  # each run's place in the order
    order = np.repeat(s - at, sl) + np.arange(n, dtype=np.int64)
    breaks = at[1:][s[1:] != s[:-1] + sl[:-1]]
    return utiles, counts, order, breaks


def vertex_fields(
    graph: Graph, tensors: list[Tensor], names: tuple[str, ...]
) -> Iterator[tuple[np.ndarray, dict[str, Tensor]]]:
    """One vertex per tile holding ``tensors[0]``, each field (named ``names``) that tile's part of
    one tensor (all of one shape): from mapping intervals when the tensors are affine views (see
    profiler.poplar.tile_fields), else by element - grouped per run of the mapping when ``tensors[0]`` is a
    whole variable, a range or a strided view of one (Graph.view_runs), whose own field then comes from
    those runs (Tensor.permuted_rows, affine_rows), as do strided operands' fields.

    What this reads is the views, which variables they read and the first one's mapping: a call
    reading them as an earlier one did, its mapping's tiles a whole number of IPUs on, takes that
    call's fields on its own variables and tiles (``profiler.poplar.recall``): a decoder's repeated
    layers make the same elementwise ops 32 times, a rotary product's operand runs of two variables."""
    batches = recall.remembered_batches(
        graph, tensors, ("vertex_fields",), lambda: list(_vertex_fields(graph, tensors))
    )
    for vtiles, fields in batches:
        yield vtiles, dict(zip(names, fields, strict=True))


def _vertex_fields(graph: Graph, tensors: list[Tensor]) -> Iterator[tuple[np.ndarray, list[Tensor]]]:
    """``vertex_fields`` worked out: each batch's tiles and fields in the order of ``tensors``."""
    batches = fields_by_tile(graph, tensors)
    if batches is not None:
        yield from batches
        return
    runs, n = graph.view_runs(tensors[0]), tensors[0].numel()
    if runs is None:
        for vtiles, idx in groups_by_tile(graph.tile_of(tensors[0]), address_order(tensors[0])):
            yield vtiles, [rows(t, idx) for t in tensors]
        return
    utiles, counts, order, breaks = tile_order(*runs, n)
    starts = np.cumsum(counts) - counts
    flat = tensors[0].reshape(-1)
    for c in sorting.unique(counts):
        sel = counts == c
        # the rows' elements, an index each: only for a field that is none of the views below
        at: np.ndarray | None = None
        if flat.affine is None:  # a transposed or grouped view (view_runs): runs of its inner dims
            fields = [tensors[0].affine_rows(order, breaks, starts[sel], int(c))]
        else:
            fields = [flat.permuted_rows(order, breaks, starts[sel], int(c))]
        for t in tensors[1:]:
            if t.strided and t.rank > 1 and t.reshape(-1).affine is None:
                # a broadcast or transposed operand: runs of its inner dims, not an index per element
                fields.append(t.affine_rows(order, breaks, starts[sel], int(c)))
                continue
            found = t.var_runs_rows(order, breaks, starts[sel], int(c))  # runs of several variables stay runs
            if found is None:
                at = order[starts[sel][:, None] + np.arange(c)] if at is None else at
                found = rows(t, at)
            fields.append(found)
        yield utiles[sel], fields


def rows(t: Tensor, idx: np.ndarray) -> Tensor:
    """View of ``t``'s flattened elements at ``idx`` (any shape): a vertex field."""
    return t.reshape(-1)[idx]


def padded_rows(src: Tensor, idx: np.ndarray, valid: np.ndarray, pad: Tensor, pad_tile: np.ndarray) -> Tensor:
    """Like ``rows`` but positions where ``valid`` is false read ``pad[pad_tile]`` (a per-tile
    constant; ``pad_tile`` per row or per position) instead: rectangular fields over ragged groups,
    zero padding."""
    pt = np.asarray(pad_tile)
    ptile = pt if pt.shape == idx.shape else np.broadcast_to(pt.reshape(-1, *([1] * (idx.ndim - 1))), idx.shape)
    flat_src = src.reshape(-1)
    safe = np.where(valid, idx, 0)
    sv, pv = flat_src.single_variable(), pad.single_variable()
    if sv is not None and pv is not None:  # the common case, without per-element variable arrays
        _, src_idx = flat_src.elements()
        _, pad_idx = pad.elements()
        var = np.where(valid, np.int32(sv), np.int32(pv))
        flat = np.where(valid, src_idx[safe], pad_idx[ptile])
        return Tensor(src.graph, var, flat, src.dtype)
    src_var, src_idx = flat_src.elements()
    pad_var, pad_idx = pad.elements()
    var = np.where(valid, src_var[safe], pad_var[ptile]).astype(np.int32)
    flat = np.where(valid, src_idx[safe], pad_idx[ptile])
    return Tensor(src.graph, var, flat, src.dtype)


def padded_runs(
    src: Tensor,
    start: np.ndarray,
    count: np.ndarray,
    width: int,
    pad: Tensor,
    pad_tile: np.ndarray,
    ranges: np.ndarray | None = None,
) -> Tensor | None:
    """``padded_rows`` for rows of ranges, kept per run: row v's part j reads ``src``'s flattened
    positions ``[start[v, j], start[v, j] + count[v, j])``, then ``pad[pad_tile[v]]`` up to ``width``
    (a ragged reduction's field, shape ``[V, k, width]``), as runs of the two variables
    (profiler.poplar.layout.VarRuns): each range cut where ``src``'s inner contiguous dims end, plus
    one repeated pad element, never an index per element. With ``ranges`` ([V, k]), part (v, j) is
    ``ranges[v, j]`` ranges read one after another, and ``start`` and ``count`` are one per range,
    part by part (a reduction's output whose members on one tile are several runs: a row of
    attention scores computed in column chunks). None when ``src`` is not an affine or factored view
    whose inner dims read its variable with step 1, ``pad`` is not one variable, or runs are not
    worth it (``RUNS_WORTH_IT``)."""
    flat = src.reshape(-1)
    aff = flat._lay.flat if isinstance(flat._lay, Factored) else flat.affine
    sv, pv = flat.single_variable(), pad.single_variable()
    start, count = np.asarray(start, dtype=np.int64), np.asarray(count, dtype=np.int64)
    shape = start.shape if ranges is None else np.shape(ranges)
    if not isinstance(aff, Affine) or sv is None or pv is None or sv == pv or len(shape) != 2 or start.size == 0:
        return None
    inner, step = inner_run(aff)
    p, c = start.reshape(-1), count.reshape(-1)
    per = np.ones(p.size, np.int64) if ranges is None else np.asarray(ranges, dtype=np.int64).reshape(-1)
    if step != 1 or (c < 0).any() or (per < 0).any() or int(per.sum()) != p.size:
        return None
    end_range = np.cumsum(per)  # one past each part's last range
    c_sum = np.append(0, np.cumsum(c))
    filled = c_sum[end_range] - c_sum[end_range - per]  # positions each part reads from ``src``
    if (filled > width).any():
        return None
    # each range: its pieces cut at multiples of ``inner`` (a run of the variable each); each part: its
    # ranges' pieces in order, then its padding. Over a store in groups of ``inner`` columns (a matmul
    # result held as PopLibs creates it, {C/ocpg, rows, ocpg}) a range of whole groups within one row is
    # one run of blocks (``Runs.block``): its groups lie a fixed stride apart
    block, stride = _blocked(aff, inner, p, c)
    cuts = np.where(c > 0, 1 if block else (p + c - 1) // inner - p // inner + 1, 0)
    cuts_sum = np.append(0, np.cumsum(cuts))
    part_cuts = cuts_sum[end_range] - cuts_sum[end_range - per]
    padded = (filled < width).astype(np.int64)
    per_part = part_cuts + padded
    total = int(per_part.sum())
    if total * RUNS_WORTH_IT > per.size * width:
        return None
    first_run = np.cumsum(per_part) - per_part
    part_of = np.repeat(np.arange(per.size), per)  # the part of each range
    base = first_run[part_of] + cuts_sum[:-1] - cuts_sum[(end_range - per)[part_of]]  # each range's first slot
    rng = np.repeat(np.arange(p.size), cuts)  # the range of each piece
    k = np.arange(rng.size) - cuts_sum[rng]  # the piece's rank within its range
    sub = np.where(k == 0, p[rng], (p[rng] // inner + k) * inner)
    end = p[rng] + c[rng] if block else np.minimum(p[rng] + c[rng], (sub // inner + 1) * inner)
    coords = np.unravel_index(sub, aff.shape)
    elem = aff.offset + sum((x.astype(np.int64) * st for x, st in zip(coords, aff.strides, strict=True)),
                            np.zeros(sub.size, np.int64))  # fmt: skip
    _, pad_idx = pad.elements()
    tile = np.repeat(np.asarray(pad_tile, dtype=np.int64).reshape(-1), shape[1])  # per part
    pads = np.flatnonzero(padded)
    run_start, length = np.empty(total, np.int64), np.empty(total, np.int64)
    run_step, var = np.ones(total, np.int64), np.full(total, sv, np.int32)
    slot = base[rng] + k
    run_start[slot], length[slot] = elem, end - sub
    slot = first_run[pads] + part_cuts[pads]
    run_start[slot], length[slot] = pad_idx[tile[pads]], width - filled[pads]
    run_step[slot], var[slot] = 0, pv
    row_first = np.append(0, np.cumsum(per_part.reshape(shape).sum(axis=1))).astype(np.int64)
    runs = Runs(run_start, length, run_step, row_first, shape[1] * width, (shape[1], width), block=block, stride=stride)
    return Tensor(src.graph, -1, VarRuns(runs, var), src.dtype)


def _blocked(aff: Affine, inner: int, start: np.ndarray, count: np.ndarray) -> tuple[int, int]:
    """(block, stride) when every range ``[start, start + count)`` of ``aff``'s positions is whole runs of
    its ``inner`` trailing positions lying a fixed ``stride`` apart (whole groups of a grouped store,
    within one index of the dim outside the next one), else (0, 0)."""
    dims = [(n, st) for n, st in zip(aff.shape, aff.strides, strict=True) if n != 1]
    size = 1
    while dims and size < inner:
        size *= dims.pop()[0]
    if size != inner or not dims or inner < 2:
        return 0, 0
    n_next, stride = dims[-1]
    if stride <= 0 or (start % inner).any() or (count % inner).any():
        return 0, 0
    if ((start // inner) % n_next + count // inner > n_next).any():
        return 0, 0
    return inner, int(stride)  # its variables are the runs' (variable_ids)


def check_same_graph(graph: Graph, *tensors: Tensor, what: str) -> None:
    for t in tensors:
        if not isinstance(t, Tensor) or t.graph is not graph:
            raise OpError(f"{what}: {t!r} is not a tensor of this graph")


def float_accumulator(dtype: np.dtype) -> np.dtype:
    """PopLibs accumulates half in float (partials default to float, ref §4.7)."""
    return np.dtype(np.float32) if dtype == np.float16 else dtype
