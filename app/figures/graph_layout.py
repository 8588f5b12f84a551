"""Where the Operations Graph's nodes go: a layered, left-to-right layout computed on the server and
wrapped into rows, so a long chain of layers (a 32-layer decoder, ResNet-50's 16 blocks) reads like
text at the zoom that fits the panel instead of one thin diagonal line.

Why not dagre in the browser: dagre lays a long chain out as one row (fit to the panel, an 11 px
label shrinks below 4 px) and routes every long edge (the inputs each layer reads, the KV-cache
outputs each layer writes) through a dummy node per rank it spans, which pushes each next layer one
slot down: the chain runs diagonally. Here long edges take no room, and the row length is chosen to
make the zoom that fits the panel as large as possible (``wrap``).

Each open group is laid out inside first (its members, recursively) and then placed as one box in
its parent's layout, as Cytoscape draws a compound node around its children. Per level, the
classic steps of a layered drawing (Sugiyama et al. 1981; Gansner et al., "A technique for drawing
directed graphs", 1993, which dagre follows): ranks by longest path from the sources in program
order (sources moved next to their first reader), order in a rank by the barycentre of the
neighbours in the rank before, y at the mean of the computed predecessors (a chain stays straight).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

#: The graph's panel at a 1600x1000 window (app.pages.operations_graph: 9 of 12 columns, height
#: 100vh - 230 px), the size the wrapping aims at; a larger window only zooms in further.
VIEWPORT = (1170.0, 770.0)
#: Gaps in model units (px at zoom 1): between nodes of a rank, between ranks, between rows (the
#: latter wider, so a row's edges back to the next row's start are told apart from a rank's).
NODE_SEP, RANK_SEP, ROW_SEP = 14.0, 40.0, 56.0
#: An open group's box: the stylesheet's padding around its members and its label above the box.
GROUP_PAD, GROUP_LABEL = 10.0, 20.0
#: Cytoscape's fit margin (app.pages.operations_graph's client-side fit uses 24 px).
FIT_PADDING = 24.0
#: Rows tried when wrapping a level (a 1,000-operation flat layer stays a few dozen rows).
MAX_ROWS = 40
#: A level wraps only while the fit zoom is below this (labels at their own size): a graph that
#: fits already stays one row, as data flows, rather than zoomed in further.
ZOOM_ENOUGH = 1.0


@dataclass(frozen=True)
class Placed:
    """Leaf centres (id -> (x, y)), the edges that span more than the next rank (drawn lighter:
    they are the long ones), and the whole drawing's size."""

    positions: dict[str, tuple[float, float]]
    far_edges: frozenset[tuple[str, str]]
    width: float
    height: float


def fit_zoom(width: float, height: float, viewport: tuple[float, float] = VIEWPORT) -> float:
    """The zoom at which Cytoscape's fit shows a ``width`` x ``height`` drawing in the panel."""
    return min((viewport[0] - 2 * FIT_PADDING) / max(width, 1.0), (viewport[1] - 2 * FIT_PADDING) / max(height, 1.0))


def layout(
    ids: list[str],
    parents: list[str],
    sizes: list[tuple[float, float]],
    is_open: list[bool],
    order: list[int],
    edges: list[tuple[str, str]],
    viewport: tuple[float, float] = VIEWPORT,
) -> Placed:
    """Place the nodes ``ids`` (``parents[i]``: the open group drawn around node i, '' at the top;
    ``sizes``: a leaf's (width, height), an open group's label's; ``order``: program order, the first operation each node
    holds). ``edges`` join leaves. Open groups get no position: Cytoscape draws them around their
    members."""
    parent = dict(zip(ids, parents, strict=True))
    size = dict(zip(ids, sizes, strict=True))
    first = dict(zip(ids, order, strict=True))
    opened = {i for i, o in zip(ids, is_open, strict=True) if o}
    members: dict[str, list[str]] = defaultdict(list)
    for i in sorted(ids, key=lambda x: (first[x], x)):
        members[parent[i] if parent[i] in opened else ""].append(i)

    def path(node: str) -> list[str]:  # the open groups around node, outermost first, then node
        out = [node]
        while parent.get(out[-1], "") in opened:
            out.append(parent[out[-1]])
        return out[::-1]

    # each edge belongs to the innermost level holding both ends, between the members there
    level_edges: dict[str, set[tuple[str, str]]] = defaultdict(set)
    stands_for: dict[tuple[str, str], tuple[str, str]] = {}  # a leaf edge -> the members' edge
    for s, t in edges:
        ps, pt = path(s), path(t)
        d = 0
        while d < min(len(ps), len(pt)) and ps[d] == pt[d]:
            d += 1
        if d < len(ps) and d < len(pt):
            level_edges[ps[d - 1] if d else ""].add((ps[d], pt[d]))
            stands_for[(s, t)] = (ps[d], pt[d])

    rel: dict[str, dict[str, tuple[float, float]]] = {}  # level -> member -> centre in the level
    box: dict[str, tuple[float, float]] = {}
    far: set[tuple[str, str]] = set()

    def place(level: str) -> tuple[float, float]:
        for m in members[level]:
            if m in opened:
                w, h = place(m)
                # an open group's size is its label's: the box is never narrower than that
                box[m] = (max(w + 2 * GROUP_PAD, size[m][0]), h + 2 * GROUP_PAD + GROUP_LABEL)
            else:
                box[m] = size[m]
        centres, far_here, w, h = _layered(members[level], sorted(level_edges[level]), box, first, viewport)
        rel[level] = centres
        far.update(far_here)
        return w, h

    width, height = place("")
    positions: dict[str, tuple[float, float]] = {}

    def absolute(level: str, ox: float, oy: float) -> None:
        for m, (x, y) in rel[level].items():
            if m in opened:  # its members' level starts at its box's top-left, inside pad and label
                w, h = box[m]
                inner_w = w - 2 * GROUP_PAD
                content_w = _extent(rel[m], box)[0]
                left = ox + x - w / 2 + GROUP_PAD + (inner_w - content_w) / 2
                absolute(m, left, oy + y - h / 2 + GROUP_LABEL + GROUP_PAD)
            else:
                positions[m] = (ox + x, oy + y)

    absolute("", 0.0, 0.0)
    leaf_far = frozenset(e for e, m in stands_for.items() if m in far)
    return Placed(positions, leaf_far, width, height)


def _extent(centres: dict[str, tuple[float, float]], box: dict[str, tuple[float, float]]) -> tuple[float, float]:
    if not centres:
        return 0.0, 0.0
    xs = [x + s * box[m][0] / 2 for m, (x, _) in centres.items() for s in (-1, 1)]
    ys = [y + s * box[m][1] / 2 for m, (_, y) in centres.items() for s in (-1, 1)]
    return max(xs) - min(xs), max(ys) - min(ys)


def _layered(
    nodes: list[str],
    edges: list[tuple[str, str]],
    box: dict[str, tuple[float, float]],
    first: dict[str, int],
    viewport: tuple[float, float],
) -> tuple[dict[str, tuple[float, float]], set[tuple[str, str]], float, float]:
    """One level: centres relative to its top-left corner, its far edges, its width and height."""
    if not nodes:
        return {}, set(), 0.0, 0.0
    pos = {n: i for i, n in enumerate(nodes)}  # program order
    preds: dict[str, list[str]] = defaultdict(list)
    succs: dict[str, list[str]] = defaultdict(list)
    for s, t in edges:
        if pos[s] < pos[t]:  # data flows forward in program order; a backward edge (groups that
            preds[t].append(s)  # interleave) does not rank
            succs[s].append(t)
    rank: dict[str, int] = {}
    for n in nodes:
        rank[n] = max((rank[p] + 1 for p in preds[n]), default=0)
    for n in reversed(nodes):  # a source (weights, inputs) sits just before its first reader
        if not preds[n] and succs[n]:
            rank[n] = max(min(rank[s] for s in succs[n]) - 1, 0)
    prev = 0
    for n in nodes:  # an unconnected node stays beside its neighbours in program order
        if not preds[n] and not succs[n]:
            rank[n] = prev
        prev = rank[n]

    columns: list[list[str]] = [[] for _ in range(max(rank.values()) + 1)]
    for n in nodes:
        columns[rank[n]].append(n)
    index: dict[str, float] = {}
    for col in columns:  # barycentre of the predecessors' places; program order breaks ties
        col.sort(key=lambda n: (np.mean([index[p] for p in preds[n]]) if preds[n] else np.inf, pos[n]))
        index.update({n: float(i) for i, n in enumerate(col)})

    # a node lines up with its predecessors that are computed (not sources such as weights or a
    # RoPE table read by every layer, which would pull each layer of a chain a little lower); a
    # source, on the second pass, with its first reader
    inner = {n: [p for p in preds[n] if preds[p]] or preds[n] for n in nodes}
    y: dict[str, float] = {}
    for use_succs in (False, True):
        for col in columns:
            want = []
            for n in col:
                near = [y[p] for p in inner[n] if p in y]
                if not near and use_succs and succs[n]:
                    near = [y[min(succs[n], key=pos.__getitem__)]]
                want.append(float(np.mean(near)) if near else np.nan)
            y.update(_stack(col, want, box))

    widths = [max(box[n][0] for n in col) for col in columns]
    tops = [min(y[n] - box[n][1] / 2 for n in col) for col in columns]
    bottoms = [max(y[n] + box[n][1] / 2 for n in col) for col in columns]
    rows = wrap(widths, tops, bottoms, viewport)
    centres: dict[str, tuple[float, float]] = {}
    row_of: dict[str, int] = {}
    oy, width = 0.0, 0.0
    for r, (a, b) in enumerate(rows):
        top, bottom = min(tops[a:b]), max(bottoms[a:b])
        x = 0.0
        for c in range(a, b):
            for n in columns[c]:
                centres[n] = (x + widths[c] / 2, oy + y[n] - top)
                row_of[n] = r
            x += widths[c] + RANK_SEP
        width = max(width, x - RANK_SEP)
        oy += bottom - top + ROW_SEP
    far = {(s, t) for s, t in edges if abs(rank[t] - rank[s]) > 1}  # a chain's turn to the next row is no long edge
    return centres, far, width, oy - ROW_SEP


def _stack(col: list[str], want: list[float], box: dict[str, tuple[float, float]]) -> dict[str, float]:
    """Centres for a rank's nodes, in order, none overlapping, as near their wanted y as the order
    lets them be: each goes where it wants or just below the one above, then the rank moves as a
    whole so that the nodes that want a place are, on average, there."""
    out: dict[str, float] = {}
    bottom = -np.inf
    for n, w in zip(col, want, strict=True):
        h = box[n][1]
        c = w if np.isfinite(w) else (bottom + NODE_SEP + h / 2 if np.isfinite(bottom) else h / 2)
        c = max(c, bottom + NODE_SEP + h / 2)
        out[n] = c
        bottom = c + h / 2
    wanted = [(out[n], w) for n, w in zip(col, want, strict=True) if np.isfinite(w)]
    if wanted:
        shift = float(np.mean([w - c for c, w in wanted]))
        out = {n: c + shift for n, c in out.items()}
    return out


def wrap(
    widths: list[float], tops: list[float], bottoms: list[float], viewport: tuple[float, float] = VIEWPORT
) -> list[tuple[int, int]]:
    """Cut the ranks (columns of ``widths``, each spanning ``tops``..``bottoms``) into rows, as
    ranges [a, b), so that the drawing fits the panel at the largest zoom up to ZOOM_ENOUGH; fewer
    rows on a tie."""
    n = len(widths)
    total = sum(widths) + RANK_SEP * (n - 1)
    best: tuple[float, list[tuple[int, int]]] = (-1.0, [(0, n)])
    for k in range(1, min(n, MAX_ROWS) + 1):
        target = total / k
        rows = _fill(widths, target)
        while len(rows) > k:  # ranks of unequal widths: rows a little longer, not a lone last rank
            target *= 1.05
            rows = _fill(widths, target)
        w = max(_row_width(widths, r) for r in rows)
        h = sum(max(bottoms[r0:r1]) - min(tops[r0:r1]) for r0, r1 in rows) + ROW_SEP * (len(rows) - 1)
        zoom = min(fit_zoom(w, h, viewport), ZOOM_ENOUGH)
        if zoom > best[0] * 1.02:
            best = (zoom, rows)
    return best[1]


def _fill(widths: list[float], target: float) -> list[tuple[int, int]]:
    """Ranks into rows as words into lines: a row takes ranks while it stays within ``target``."""
    rows, a, x = [], 0, 0.0
    for c in range(len(widths)):
        step = widths[c] + (RANK_SEP if c > a else 0.0)
        if c > a and x + step > target + 1e-6:
            rows.append((a, c))
            a, x = c, widths[c]
        else:
            x += step
    rows.append((a, len(widths)))
    return rows


def _row_width(widths: list[float], row: tuple[int, int]) -> float:
    return sum(widths[row[0] : row[1]]) + RANK_SEP * (row[1] - row[0] - 1)
