"""Max and average pooling (popnn::pooling) and their gradients.

The forward ops read each output position's window through the convolution's im2col view
(profiler.poplar.layout.Window: the geometry, never an index per element). The result is stored as the
input is (channels innermost when the input is a convolution's result) and mapped linearly in
whole positions; each tile's positions are split over its workers, one pooling vertex each
(popnn's MaxPooling / SumPooling, costed by cost_model.pool_cycles), so the vertex count follows
tiles and workers, not the batch. Inputs that are not affine views are pooled by ``reduce_groups``.
"""

from __future__ import annotations

import numpy as np

from profiler.chip import cost_model
from profiler.host import sorting
from profiler.ops import elementwise as ew
from profiler.ops.conv import Window, _channel_grouped, _pair, _scatter_add, _window_view, window
from profiler.ops.core import OpError, cdiv, execute, op, set_attributes
from profiler.ops.poplibs_codelets import POOLING_CODELETS, map_codelet, reduce_identity
from profiler.ops.reduce import reduce_groups
from profiler.poplar.graph import Graph
from profiler.poplar.programs import Sequence as Prog
from profiler.poplar.tensor import Tensor


def _pool_members(x: Tensor, kernel: int | tuple[int, int], stride: int | tuple[int, int] | None,
                  padding: int | tuple[int, int], what: str,
                  dilation: int | tuple[int, int] = 1) -> tuple[Window, np.ndarray, np.ndarray]:  # fmt: skip
    """(window, member input index, output group) of every valid window element (the per-element
    form: gradients, and inputs that are not affine views)."""
    if x.rank != 4:
        raise OpError(f"{what}: needs x[B,C,H,W], got {x.shape}")
    k = _pair(kernel)
    win = window(x.shape, k, _pair(stride if stride is not None else kernel), _pair(padding), _pair(dilation), what)
    # [B, Ho, Wo, C, kh, kw] -> output index order [B, C, Ho, Wo]
    src = win.src.transpose(0, 3, 1, 2, 4, 5).reshape(-1, k[0] * k[1])
    valid = win.valid.transpose(0, 3, 1, 2, 4, 5).reshape(-1, k[0] * k[1])
    group = np.broadcast_to(np.arange(src.shape[0])[:, None], src.shape)
    return win, src[valid], group[valid]


def _by_groups(graph: Graph, x: Tensor, op_name: str, kernel: tuple[int, int], stride: tuple[int, int],
               padding: tuple[int, int], dilation: tuple[int, int], prog: Prog, what: str) -> Tensor:  # fmt: skip
    win, member, group = _pool_members(x, kernel, stride, padding, what, dilation)
    y = graph.add_variable(x.dtype, (win.batch, win.channels, win.out_h, win.out_w), "pool out")
    graph.map_linearly(y)
    scale = 1.0 if op_name == "max" else 1.0 / (win.kh * win.kw)
    pdt = x.dtype if op_name == "max" else None
    set_attributes(graph, reduce_groups(graph, x, member, group, y, op_name, prog, scale, partials_dtype=pdt))
    return y


def _pool(graph: Graph, x: Tensor, op_name: str, kernel: int | tuple[int, int], stride: int | tuple[int, int] | None,
          padding: int | tuple[int, int], dilation: int | tuple[int, int], prog: Prog, what: str) -> Tensor:  # fmt: skip
    k, s = _pair(kernel), _pair(stride if stride is not None else kernel)
    p, d = _pair(padding), _pair(dilation)
    # channels innermost (a convolution's result): windows read runs of channels; else by groups
    innermost = x.affine is not None and x.affine.strides[1] == 1
    if x.rank != 4 or not (innermost or _channel_grouped(x) is not None) or x.shape[1] == 1:
        return _by_groups(graph, x, op_name, k, s, p, d, prog, what)
    pad_value = reduce_identity(op_name, x.dtype) if op_name == "max" else 0.0  # padding never wins a max
    cols = _window_view(graph, x, k, s, p, d, 1, pad_value)
    if not cols.structured:
        return _by_groups(graph, x, op_name, k, s, p, d, prog, what)
    b, c = x.shape[:2]
    ho, wo = cols._lay.out  # type: ignore[union-attr]
    m = b * ho * wo
    # the result is stored channels innermost, as the convolution results pooling reads are
    store = graph.add_variable(x.dtype, (b, ho, wo, c), "pool out")
    y = store.transpose(0, 3, 1, 2)
    scale = 1.0 if op_name == "max" else 1.0 / (k[0] * k[1])
    codelet = POOLING_CODELETS[op_name]
    cs = execute(graph, prog, what)
    _add_vertices(graph, cs, cols, store.reshape(m, c), m, wo, scale, codelet)
    graph.add_kernel(cs, codelet, {"in": cols, "out": store.reshape(1, m, c)}, scale=scale)
    set_attributes(graph, {"kernel": list(k), "stride": list(s), "padding": list(p), "layout": "channels innermost"})
    return y


def _channel_chunk(m: int, c: int, tiles: int) -> int:
    """Channels per vertex: all of them when there are positions enough for every tile, else the
    largest divisor of ``c`` that gives every tile work (a global pool has one position per image)."""
    if m >= tiles:
        return c
    best = 1
    for d in range(1, c + 1):
        if c % d == 0 and m * (c // d) >= tiles:
            best = d
    return best


def _add_vertices(graph: Graph, cs: object, cols: Tensor, out_rows: Tensor, m: int, wo: int, scale: float,
                  codelet: object) -> None:  # fmt: skip
    """Map the result linearly in units of (position, channel chunk) and put one vertex per (tile,
    worker share of the tile's units): positions with all their channels when there are enough,
    else one chunk each. A few shapes, so a few batches."""
    c = out_rows.shape[1]
    k = cols.shape[2] // c
    tiles, workers = graph.target.num_tiles, graph.target.num_worker_contexts
    cc = _channel_chunk(m, c, tiles)
    units = m * (c // cc)
    per_tile = max(1, cdiv(units, tiles))
    graph.map_linearly(out_rows, cc)  # units [t * per_tile, (t + 1) * per_tile) on tile t
    share = max(1, cdiv(per_tile, workers)) if cc == c else 1  # a chunk is not a whole position: one each
    used = cdiv(units, per_tile)
    tile = np.repeat(np.arange(used, dtype=np.int64), cdiv(per_tile, share))
    first = tile * per_tile + (np.arange(tile.size) - np.searchsorted(tile, tile)) * share
    keep = first < np.minimum(units, (tile + 1) * per_tile)
    tile, first = tile[keep], first[keep]
    rows = np.minimum(first + share, np.minimum(units, (tile + 1) * per_tile)) - first
    pos, chan = (first, np.zeros_like(first)) if cc == c else (first // (c // cc), first % (c // cc) * cc)
    segments = (pos + rows - 1) // wo - pos // wo + 1  # output rows each vertex's positions lie in
    key = rows * (m + 1) + segments
    for kv in sorting.unique(key):
        sel = np.flatnonzero(key == kv)
        n, seg = int(rows[sel[0]]), int(segments[sel[0]])
        zeros = np.zeros(sel.size, dtype=np.int64)
        fields = {"in": cols.blocks([zeros, pos[sel], chan[sel] * k], (1, n, cc * k), drop=(0,)),
                  "out": out_rows.blocks([pos[sel], chan[sel]], (n, cc))}  # fmt: skip
        graph.add_vertices(cs, codelet, fields, tile[sel], segments=seg, scale=scale)  # type: ignore[arg-type]


@op("MaxPool")
def max_pool2d(graph: Graph, x: Tensor, kernel: int | tuple[int, int], prog: Prog,
               stride: int | tuple[int, int] | None = None, padding: int | tuple[int, int] = 0,
               dilation: int | tuple[int, int] = 1) -> Tensor:  # fmt: skip
    """Max over each window (padding never wins); ``dilation`` spaces the window's elements."""
    return _pool(graph, x, "max", kernel, stride, padding, dilation, prog, "max_pool2d")


@op("AvgPool")
def avg_pool2d(graph: Graph, x: Tensor, kernel: int | tuple[int, int], prog: Prog,
               stride: int | tuple[int, int] | None = None, padding: int | tuple[int, int] = 0,
               dilation: int | tuple[int, int] = 1) -> Tensor:  # fmt: skip
    """Mean over each window, padding counted as zeros (count_include_pad)."""
    return _pool(graph, x, "add", kernel, stride, padding, dilation, prog, "avg_pool2d")


def _max_pool_contrib(xv: np.ndarray, yv: np.ndarray, dyv: np.ndarray) -> np.ndarray:
    return dyv * (xv == yv)


@op("MaxPoolGrad")
def max_pool2d_grad(graph: Graph, x: Tensor, y: Tensor, dy: Tensor, kernel: int | tuple[int, int], prog: Prog,
                    stride: int | tuple[int, int] | None = None, padding: int | tuple[int, int] = 0) -> Tensor:  # fmt: skip
    """dx: each window's gradient goes to the input element(s) equal to its maximum."""
    _, member, group = _pool_members(x, kernel, stride, padding, "max_pool2d_grad")
    cl = map_codelet(
        "popnn::MaxPoolingGrad", _max_pool_contrib, 3, (cost_model.binary("equal"), cost_model.binary("multiply"))
    )
    contrib = ew.apply_map(graph, cl, [x.reshape(-1)[member], y.reshape(-1)[group], dy.reshape(-1)[group]], prog,
                           "max pool grad contributions")  # fmt: skip
    return _scatter_add(graph, contrib, member, x, prog)


@op("AvgPoolGrad")
def avg_pool2d_grad(graph: Graph, x: Tensor, dy: Tensor, kernel: int | tuple[int, int], prog: Prog,
                    stride: int | tuple[int, int] | None = None, padding: int | tuple[int, int] = 0) -> Tensor:  # fmt: skip
    win, member, group = _pool_members(x, kernel, stride, padding, "avg_pool2d_grad")
    return _scatter_add(graph, dy.reshape(-1)[group], member, x, prog, scale=1.0 / (win.kh * win.kw))
