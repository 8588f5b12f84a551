"""The Operations Graph as a hierarchy: the operations of a layer grouped by the model's own
structure, collapsed to what a screen can show, with the data flow between the visible groups.

A real model has hundreds of operations (ResNet-50 ~230, BERT-base ~700), too many to draw as one
flat graph. They are grouped, outermost first, by

1. **repeated blocks**: when the outermost operations' names (minus the exporter's ``_<n>``
   counter) repeat with a fixed period, e.g. BERT's 33 ONNX nodes per encoder layer, each repeat is
   a group ``block 1`` .. ``block 12``;
2. **name scopes** of the outermost operation: ``/``-separated scopes as PyTorch's exporter writes
   them (``/encoder/layer.0/attention/...``), else ``_``-separated words with a stage-block word
   split in two (``s0b0_a_conv_11``: ``s0`` > ``s0b0`` > ``s0b0_a``); a scope groups a contiguous
   run of operations only, so two far-apart ``query`` matmuls are never one group;
3. **enclosing debug contexts**: an ONNX node around its PopLibs operations, a user layer
   (``forward``, ``block0``, ``fc1``) around what it calls, a PopLibs operation around those it
   calls.

A group with a single member is no group (its member takes its place). The page shows the
outermost level collapsed and expands a group on click (``frontier``); edges between visible nodes
are the operations' data-flow edges (``app.views.operations.operations_graph``) summed.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd
from plotly.colors import sample_colorscale

from app.views import operations as ops_view
from report_format.reader import Report
from report_format.vocabulary import Layer

#: Measures a node can be coloured by (summed over a group's operations).
MEASURES = ("cycles", "flops", "memory_bytes")
#: Operation types of uploads from the host (a weight, a constant table): outside every name scope,
#: they do not end the scope run they are uploaded in (``_root_groups``).
UPLOADS = frozenset({"WeightsFromHost", "Constant"})
#: A repeated block must cover at least this share of the outermost operations to be used.
MIN_BLOCK_COVER = 0.5
#: Sequential colour scale (low -> high) and the diverging one for a delta: the Compare banner's
#: green for "costs less" (app.comparison.figures.DOWN), grey for no change, its red for "costs more" (UP).
SEQUENTIAL = "YlOrRd"
DIVERGING = [[0.0, "#009E73"], [0.5, "#E5E5E5"], [1.0, "#D55E00"]]
NO_VALUE = "#D9D9D9"

_COUNTER = re.compile(r"_\d+$")
_STAGE_BLOCK = re.compile(r"[A-Za-z]+\d+")


@dataclass(frozen=True)
class Hierarchy:
    """``ops``: the drawable operations (the operations graph's nodes) with ``chain``, their
    groups outermost first (tuple of group ids), and ``label``, the name they are shown by;
    ``groups``: id -> label, parent, title and the
    summed measures; ``edges``: the operations' data-flow edges."""

    ops: pd.DataFrame
    groups: pd.DataFrame
    edges: pd.DataFrame


def first_layer(report: Report) -> str:
    """The layer the graph opens on: the model's own (ONNX) when the report has it, else PopLibs."""
    dc = report.debug_contexts()
    return Layer.ONNX if len(dc) and bool((dc["layer"] == Layer.ONNX).any()) else Layer.POPLIBS


def stem(name: str) -> str:
    """An ONNX exporter's unique counter dropped: 'query_matmul_58' -> 'query_matmul'."""
    return _COUNTER.sub("", name)


def name_scopes(name: str) -> list[str]:
    """The scopes a name sits in, outermost first, each as the name's prefix up to it.

    '/encoder/layer.0/attention/MatMul' -> ['/encoder', '/encoder/layer.0', '/encoder/layer.0/attention'];
    's0b0_a_conv_11' -> ['s0', 's0b0', 's0b0_a']; 'attn_out_bias_31' -> ['attn', 'attn_out'];
    'present.3.key' -> ['present', 'present.3']; 'softmax_24' -> []; 'stem_bn_7/scale' -> ['stem'].
    """
    s = stem(name)
    if "/" in s and not s.startswith("/"):  # 'stem_bn_7/scale', a node's weight upload: the node's scopes
        return name_scopes(s.split("/", 1)[0])
    if "/" in s:
        parts = s.split("/")
        return ["/".join(parts[:i]) for i in range(1, len(parts)) if parts[i - 1]]
    if "." in s:  # Hugging Face's graph outputs 'present.3.key': 64 of them on a 32-layer decoder
        parts = s.split(".")
        return [".".join(parts[:i]) for i in range(1, len(parts)) if parts[i - 1]]
    words = s.split("_")[:-1]
    out: list[str] = []
    for i, w in enumerate(words):
        prefix = "_".join(words[:i])
        pieces = _STAGE_BLOCK.findall(w)
        if i == 0 and len(pieces) > 1 and "".join(pieces) == w:  # 's0b0' -> 's0', 's0b0'
            out += ["".join(pieces[: j + 1]) for j in range(len(pieces))]
        else:
            out.append(f"{prefix}_{w}" if prefix else w)
    return out


def scope_label(scope: str) -> str:
    """What a scope group is called: the last part of a '/' scope, the whole of a '_' one."""
    return scope.rsplit("/", 1)[-1] if "/" in scope else scope


def repeated_block(stems: list[str]) -> tuple[int, int, int] | None:
    """(start, period, repeats) of the longest run of a sequence repeating exactly with a fixed
    period of at least 2 (the earliest such run on a tie), if it covers MIN_BLOCK_COVER of it. A
    run starts at a name's first occurrence and its period is the gap to the next one."""
    pos: dict[str, list[int]] = defaultdict(list)
    for i, s in enumerate(stems):
        pos[s].append(i)
    best: tuple[int, int, int] | None = None
    for where in pos.values():
        if len(where) < 2 or where[1] - where[0] < 2:
            continue
        start, period = where[0], where[1] - where[0]
        seg = stems[start : start + period]
        k = 1  # repeats from the first occurrence on, while each is the same run of names
        while stems[start + k * period : start + (k + 1) * period] == seg:
            k += 1
        if k < 2:
            continue
        if best is None or k * period > best[1] * best[2] or (k * period == best[1] * best[2] and start < best[0]):
            best = (start, period, k)
    if best is None or best[1] * best[2] < MIN_BLOCK_COVER * len(stems):
        return None
    return best


@lru_cache(maxsize=16)
def hierarchy(report: Report, layer: str) -> Hierarchy:
    """The drawable operations of ``layer`` and the groups they sit in (see the module docstring)."""
    nodes, edges = ops_view.operations_graph(report, layer)
    hidden = nodes.attrs.get("hidden", 0)
    nodes = nodes.sort_values("op_id", kind="stable").reset_index(drop=True)  # program order
    dc = report.debug_contexts().set_index("debug_context_id")
    parent = dc["parent_id"].to_dict()
    names = dc["name"].to_dict()

    def ancestors(ctx: int) -> list[int]:  # enclosing contexts, outermost first
        out = []
        p = parent.get(ctx, -1)
        while p >= 0 and len(out) < 64:
            out.append(p)
            p = parent.get(p, -1)
        return out[::-1]

    op_ids = nodes["op_id"].to_numpy()
    anc = {int(o): ancestors(int(o)) for o in op_ids}
    root = {o: (a[0] if a else o) for o, a in anc.items()}
    roots = sorted(set(root.values()))  # debug contexts are made in program order: ids order them
    uploads = {c for c in roots if dc["op_type"].get(c, "") in UPLOADS}
    root_chain = _root_groups(roots, names, uploads)

    labels: dict[str, str] = {}
    parents: dict[str, str] = {}
    for chain in root_chain.values():
        for i, (gid, label) in enumerate(chain):
            labels[gid] = label
            parents[gid] = chain[i - 1][0] if i else ""
    chains: list[tuple[str, ...]] = []
    for o in op_ids:
        o = int(o)
        ch = [g for g, _ in root_chain[root[o]]]
        for ctx in anc[o]:  # every enclosing context (the root included) is a group
            gid = f"c{ctx}"
            labels[gid] = names[ctx]
            parents[gid] = ch[-1] if ch else ""
            ch.append(gid)
        chains.append(tuple(ch))
    full = chains
    chains = _drop_single_member_groups(chains)
    # an operation alone in its enclosing context (a PopLibs MatMul alone in ONNX node
    # query_matmul_5) is named after it too, the model's name first: 'query_matmul_5/MatMul'
    shown_as = []
    for name, before, after in zip(nodes["name"], full, chains, strict=True):
        gone = [g for g in before if g.startswith("c") and g not in after]
        shown_as.append(f"{labels[gone[-1]]}/{name}" if gone and labels[gone[-1]] != name else name)
    ops = nodes.assign(chain=chains, label=shown_as)
    ops.attrs["hidden"] = hidden

    long = pd.DataFrame([(i, g) for i, ch in enumerate(chains) for g in ch], columns=["row", "group"])
    rows_of = long.groupby("group", sort=False)["row"].apply(list)  # groups in order of their first member
    used = list(rows_of.index)
    rows = []
    member_sum = (
        ops[list(MEASURES)].iloc[long["row"]].assign(group=long["group"].to_numpy()).groupby("group")[list(MEASURES)]
    )
    # plain dicts and arrays in the loop: pandas lookups per group cost ~1 ms each, and a
    # 32-layer decoder has hundreds of groups
    totals = member_sum.sum().astype(np.int64).to_dict("index")
    counts = long.groupby("group").size().to_dict()
    op_names = ops["name"].to_numpy()
    rows_lists = rows_of.to_dict()
    for g in used:
        # the nearest used ancestor is the parent (single-member groups above are gone)
        p = parents.get(g, "")
        while p and p not in counts:
            p = parents.get(p, "")
        rows_g = rows_lists[g]
        first, last = op_names[rows_g[0]], op_names[rows_g[-1]]
        rows.append(
            {
                "group": g,
                "parent": p,
                "label": labels[g],
                "operations": int(counts[g]),
                "title": f"{len(rows_g):,} operations: {first} … {last}" if len(rows_g) > 1 else first,
                **{m: int(totals[g][m]) for m in MEASURES},
            }
        )
    cols = ["group", "parent", "label", "operations", "title", *MEASURES]
    groups = pd.DataFrame(rows, columns=cols).set_index("group")
    return Hierarchy(ops=ops, groups=groups, edges=edges)


def _root_groups(
    roots: list[int], names: dict[int, str], uploads: frozenset[int] | set[int] = frozenset()
) -> dict[int, list[tuple[str, str]]]:
    """For each outermost context (in program order), its groups above it: a repeated block, then
    name scopes that span a contiguous run of roots. Ids: 'b<i>' blocks, 's<n>' scopes. An upload
    in ``uploads`` from outside the run it sits in (a RoPE table, a causal mask: read by every layer,
    uploaded where layer 0 first needs it) stays outside and leaves the run unbroken."""
    stems = [stem(names[r]) for r in roots]
    block = repeated_block(stems)
    out: dict[int, list[tuple[str, str]]] = {}
    open_scopes: list[tuple[str, str]] = []  # (scope text, group id) from outermost
    block_of: list[int | None] = [None] * len(roots)
    if block is not None:
        start, period, k = block
        for j in range(k):
            for i in range(start + j * period, start + (j + 1) * period):
                block_of[i] = j
    # the scopes of the next root that is no upload, for each root (to see a run go on past an upload)
    next_scopes: list[list[str]] = [[] for _ in roots]
    ahead: list[str] = []
    for i in range(len(roots) - 1, -1, -1):
        next_scopes[i] = ahead
        if roots[i] not in uploads:
            ahead = name_scopes(names[roots[i]])
    count = 0
    prev_block = None
    for i, r in enumerate(roots):
        b = block_of[i]
        if b != prev_block:
            open_scopes = []  # scopes never cross a block's edge
            prev_block = b
        scopes = name_scopes(names[r])
        if r in uploads and _interrupts(scopes, open_scopes, next_scopes[i]):
            out[r] = [(f"b{b}", f"block {b + 1}") for _ in (0,) if b is not None]
            continue
        if not scopes and open_scopes and open_scopes[-1][0] == stems[i]:
            scopes = [s for s, _ in open_scopes]  # 'gelu_47' closes the run of 'gelu_*' it ends
        keep = 0
        while keep < min(len(scopes), len(open_scopes)) and open_scopes[keep][0] == scopes[keep]:
            keep += 1
        open_scopes = open_scopes[:keep]
        for s in scopes[keep:]:
            open_scopes.append((s, f"s{count}"))
            count += 1
        chain = [(f"b{b}", f"block {b + 1}") for _ in (0,) if b is not None]
        chain += [(gid, scope_label(s)) for s, gid in open_scopes]
        out[r] = chain
    return out


def _interrupts(scopes: list[str], open_scopes: list[tuple[str, str]], after: list[str]) -> bool:
    """An upload whose scopes share nothing with the run it is uploaded in, which the next root
    goes on with: it would cut the run in two."""
    if not open_scopes or (scopes and scopes[0] == open_scopes[0][0]):
        return False
    return bool(after) and after[0] == open_scopes[0][0]


def _drop_single_member_groups(chains: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """Remove every group holding exactly one thing (one operation, or one group and nothing else),
    and a group that is its only child's twin: its member takes its place."""
    while True:
        children: dict[str, set[str]] = defaultdict(set)
        for i, ch in enumerate(chains):
            for depth, g in enumerate(ch):
                children[g].add(ch[depth + 1] if depth + 1 < len(ch) else f"op{i}")
        single = {g for g, c in children.items() if len(c) == 1}
        if not single:
            return chains
        chains = [tuple(g for g in ch if g not in single) for ch in chains]


def default_expanded(h: Hierarchy) -> frozenset[str]:
    """Open groups while the outermost level is one group (a user's 'forward' around everything)."""
    expanded: set[str] = set()
    for _ in range(len(h.groups)):
        nodes, _ = frontier(h, frozenset(expanded))
        shown = nodes[~nodes["expanded"]]
        if len(shown) != 1 or not shown["is_group"].iat[0]:
            break
        expanded.add(str(shown["id"].iat[0])[1:])  # node 'g<group>'
    return frozenset(expanded)


def frontier(h: Hierarchy, expanded: frozenset[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The nodes and edges to draw with ``expanded`` groups open.

    Nodes: ``id`` ('g<group>' or 'op<op_id>'), ``parent`` (the open group drawn around it, '' at
    the top), ``label``, ``is_group``, ``expanded`` (an open group: a box around its members, no
    edges), ``operations``, ``first`` (program order: the row in ``h.ops`` of its first operation)
    and the MEASURES. Each operation is shown by its outermost closed group,
    or by itself when every group around it is open. Edges: ``source``, ``target``, ``variables``
    (summed over the operations' edges between them), self-loops dropped.
    """
    node_cols = ["id", "parent", "label", "title", "is_group", "expanded", "operations", "first", *MEASURES]
    if h.ops.empty:
        return pd.DataFrame(columns=node_cols), pd.DataFrame(columns=["source", "target", "variables"])
    reps: list[str] = []
    shown_groups: dict[str, int] = {}  # group -> its first operation's row (dicts keep that order)
    open_groups: dict[str, int] = {}
    for row, (op, chain) in enumerate(zip(h.ops["op_id"], h.ops["chain"], strict=True)):
        rep = f"op{op}"
        for g in chain:
            if g not in expanded:
                rep = f"g{g}"
                shown_groups.setdefault(g, row)
                break
            open_groups.setdefault(g, row)
        reps.append(rep)
    ops = h.ops.assign(id=reps)
    is_op = ops["id"].str.startswith("op")
    parent_of_op = [
        next((f"g{g}" for g in reversed(ch) if g in expanded and f"g{g}" != rid), "") if rid.startswith("op") else ""
        for rid, ch in zip(ops["id"], ops["chain"], strict=True)
    ]
    op_rows = pd.DataFrame(
        {
            "id": ops.loc[is_op, "id"],
            "parent": np.asarray(parent_of_op, dtype=object)[is_op.to_numpy()],
            "label": ops.loc[is_op, "label"],
            "title": ops.loc[is_op, "name"] + " (" + ops.loc[is_op, "op_type"] + ")",
            "is_group": False,
            "expanded": False,
            "operations": 1,
            "first": np.flatnonzero(is_op.to_numpy()),
            **{m: ops.loc[is_op, m] for m in MEASURES},
        }
    )
    g = h.groups

    def group_rows(which: dict[str, int], is_open: bool) -> pd.DataFrame:
        sub = g.loc[list(which)]
        return pd.DataFrame(
            {
                "id": ["g" + x for x in which],
                "parent": ["g" + p if p else "" for p in sub["parent"]],
                "label": sub["label"].to_numpy(),
                "title": sub["title"].to_numpy(),
                "is_group": True,
                "expanded": is_open,
                "operations": sub["operations"].to_numpy(),
                "first": np.fromiter(which.values(), dtype=np.int64, count=len(which)),
                **{m: sub[m].to_numpy() for m in MEASURES},
            }
        )

    nodes = pd.concat([group_rows(open_groups, True), group_rows(shown_groups, False), op_rows], ignore_index=True)
    rep_of = pd.Series(reps, index=h.ops["op_id"].to_numpy())
    e = h.edges.assign(
        source=rep_of.reindex(h.edges["source"]).to_numpy(), target=rep_of.reindex(h.edges["target"]).to_numpy()
    ).dropna(subset=["source", "target"])
    e = e[e["source"] != e["target"]]
    edges = e.groupby(["source", "target"], as_index=False, sort=False)["variables"].sum()
    return nodes.reset_index(drop=True), edges.reset_index(drop=True)


def toggle(h: Hierarchy, expanded: frozenset[str], node: str) -> frozenset[str]:
    """Click on ``node`` ('g<id>'): a closed group opens; an open one closes, with every group inside it."""
    if not node.startswith("g") or node[1:] not in h.groups.index:
        return expanded
    g = node[1:]
    if g not in expanded:
        return expanded | {g}
    inside = {x for x in expanded if g in _group_chain(h, x)}
    return expanded - inside


def _group_chain(h: Hierarchy, group: str) -> list[str]:
    """The group and those around it."""
    out = [group]
    p = h.groups.at[group, "parent"]
    while p:
        out.append(p)
        p = h.groups.at[p, "parent"]
    return out


@dataclass(frozen=True)
class ColourScale:
    """A colour per value on a log scale over [lo, hi] (signed: symmetric log over [-hi, hi]),
    with legend ticks (value, colour)."""

    lo: float
    hi: float
    signed: bool

    def position(self, values: np.ndarray) -> np.ndarray:
        """0..1 along the scale (NaN for a value with no colour: zero or negative on an unsigned scale)."""
        v = np.asarray(values, dtype=np.float64)
        if self.signed:
            span = math.log10(1 + self.hi)
            t = np.sign(v) * np.log10(1 + np.abs(v)) / span if span > 0 else np.zeros_like(v)
            return np.clip(0.5 + 0.5 * t, 0.0, 1.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            lv = np.log10(np.where(v > 0, v, np.nan))
        span = math.log10(self.hi) - math.log10(self.lo)
        t = (lv - math.log10(self.lo)) / span if span > 0 else np.ones_like(lv)
        return np.clip(t, 0.0, 1.0)

    def colours(self, values: np.ndarray) -> list[str]:
        t = self.position(values)
        scale = DIVERGING if self.signed else SEQUENTIAL
        ok = np.isfinite(t)
        sampled = sample_colorscale(scale, list(t[ok]), colortype="rgb") if ok.any() else []
        it = iter(sampled)
        return [next(it) if k else NO_VALUE for k in ok]

    def ticks(self) -> list[float]:
        """Powers of ten inside the scale, at most about six; a delta's both signs and 0, from ±10
        on when it reaches 100 (±1 would crowd 0 on a symmetric log scale)."""
        hi = max(self.hi, 1.0)
        top = math.floor(math.log10(hi) + 1e-9)
        if self.signed:
            exps = list(range(1 if top >= 2 else 0, top + 1))
            step = max(1, math.ceil(len(exps) / 3))
            mags = [10.0**e for e in exps[::-1][::step][::-1]]
            return sorted([-m for m in mags] + [0.0] + mags)
        exps = list(range(math.ceil(math.log10(max(self.lo, 1e-12)) - 1e-9), top + 1))
        step = max(1, math.ceil(len(exps) / 6))
        return [10.0**e for e in exps[::step]]


def colour_scale(h: Hierarchy, measure: str, values: pd.Series | None = None) -> ColourScale:
    """The scale for ``measure`` over every operation and group of the hierarchy, so a value has the
    same colour whatever is open. ``values``: a signed measure (Δ cycles) given per operation id."""
    if values is not None:
        per_op = values.reindex(h.ops["op_id"]).fillna(0).to_numpy(dtype=np.float64)
        group_vals = group_sums(h, per_op)
        hi = float(np.abs(np.r_[per_op, group_vals]).max(initial=0.0))
        return ColourScale(0.0, hi, True)
    vals = np.r_[h.ops[measure].to_numpy(dtype=np.float64), h.groups[measure].to_numpy(dtype=np.float64)]
    pos = vals[vals > 0]
    if pos.size == 0:
        return ColourScale(1.0, 1.0, False)
    return ColourScale(float(pos.min()), float(pos.max()), False)


def group_sums(h: Hierarchy, per_op: np.ndarray) -> np.ndarray:
    """A per-operation value summed over each group (in ``h.groups`` order)."""
    acc = dict.fromkeys(h.groups.index, 0.0)
    for v, chain in zip(per_op, h.ops["chain"], strict=True):
        for g in chain:
            acc[g] += float(v)
    return np.array([acc[g] for g in h.groups.index], dtype=np.float64)


def node_values(h: Hierarchy, nodes: pd.DataFrame, per_op: pd.Series) -> np.ndarray:
    """A per-operation value (indexed by op id) for each frontier node: its own, or its group's sum."""
    gs = pd.Series(group_sums(h, per_op.reindex(h.ops["op_id"]).fillna(0).to_numpy()), index=h.groups.index)
    out = []
    for nid in nodes["id"]:
        if nid.startswith("op"):
            out.append(float(per_op.get(int(nid[2:]), 0.0)))
        else:
            out.append(float(gs.get(nid[1:], 0.0)))
    return np.array(out, dtype=np.float64)


def slowest(nodes: pd.DataFrame, measure: str = "cycles", n: int = 8) -> pd.DataFrame:
    """The ``n`` shown (not open) nodes with most of ``measure``, most first."""
    shown = nodes[~nodes["expanded"]]
    return shown.sort_values(measure, ascending=False, kind="stable").head(n)
