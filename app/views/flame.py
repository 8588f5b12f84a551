"""The Execution Trace's flame: each executed step nested under the program structure that ran it
and then under the model's own structure, so a flame of ResNet-50 or BERT reads layers ->
operations -> steps rather than Program -> Sequence -> 672 steps.

A program step's *frames*, outermost first:

1. its program-tree ancestors (Program, Sequence, Repeat, ...);
2. the repeated block its operation sits in (BERT's encoder layers, found as the model's node names
   repeating with a fixed period: ``app.views.operations_graph.repeated_block``), as ``block k``;
3. the name scopes of its outermost debug context (``s3b0_b_conv_365``: ``s3`` > ``s3b0`` >
   ``s3b0_b``; ``/encoder/layer.3/attention/...``: ``encoder`` > ``layer.3`` > ``attention``);
4. its debug contexts, outermost first (an ONNX node, then the PopLibs operations it called);
5. the step itself.

A step made outside any debug context (the Sync before an operation's exchange) sits in the frames
its neighbours share (the longest common prefix of the previous and next steps' frames under the
same program), so it does not cut a layer in two.

Consecutive executed steps with the same frame at a depth merge into one span (a layer, or a Repeat
iteration); every executed step is a span of its own at its deepest level. A span's ``cycles`` is
its length; ``self_cycles`` is what its children leave uncovered (the IPU idle between its steps,
waiting for another IPU), so ``cycles == sum(children's cycles) + self_cycles``.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd

from app.units import plural
from app.views.operations_graph import name_scopes, repeated_block, scope_label, stem
from app.views.step_kinds import KIND_OF_TYPE
from report_format.reader import Report

#: Columns of a flame table (``flame_spans``); the first six are every timeline's.
COLUMNS = ("row", "start", "end", "kind", "label", "step", "cycles", "self_cycles", "steps", "span", "parent", "about",
           "busy")  # fmt: skip
#: Frame kinds besides the step kinds of ``app.views.execution_trace.KINDS``: program-tree control
#: nodes, the model's layers (blocks and name scopes) and its operations (debug contexts).
CONTROL, LAYER, OPERATION = "control", "layer", "operation"


Frame = tuple[str, object]  # ("p", program id) | ("b", block) | ("s", scope) | ("c", context id)


@dataclass(frozen=True)
class FrameTable:
    """Frames of every program (position = program id's row in ``programs()``): ``node[d, i]`` the
    interned id of program i's frame path up to depth d (-1 past its end), ``leaf_depth[i]`` its
    deepest depth (-1 for a control node), and per interned id its label, kind and hover line."""

    node: np.ndarray
    leaf_depth: np.ndarray
    label: np.ndarray
    kind: np.ndarray
    about: np.ndarray


def _context_chains(report: Report) -> tuple[dict[int, list[int]], dict[int, str], dict[int, str], dict[int, str]]:
    """For every debug context, its chain outermost first, and its name, op type and layer."""
    dc = report.debug_contexts()
    if dc.empty:
        return {}, {}, {}, {}
    ids = dc["debug_context_id"].to_numpy()
    parent = dict(zip(ids.tolist(), dc["parent_id"].to_numpy().tolist(), strict=True))
    chains: dict[int, list[int]] = {}
    for c in ids.tolist():  # contexts are few (hundreds to thousands); nesting is shallow
        chain = [c]
        p = parent[c]
        while p >= 0 and p in parent and len(chain) < 64:
            chain.append(p)
            p = parent[p]
        chains[c] = chain[::-1]
    names = dict(zip(ids.tolist(), dc["name"].astype(str).tolist(), strict=True))
    types = dict(zip(ids.tolist(), dc["op_type"].astype(str).tolist(), strict=True))
    layers = dict(zip(ids.tolist(), dc["layer"].astype(str).tolist(), strict=True))
    return chains, names, types, layers


def _common_prefix(a: list[Frame], b: list[Frame]) -> list[Frame]:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


@lru_cache(maxsize=8)
def frame_table(report: Report) -> FrameTable:
    """Every program's frames (see the module docstring), interned by path prefix. Built once per
    report from the programs and debug contexts tables (a loop over programs, not executed steps)."""
    p = report.programs().sort_values("program_id").reset_index(drop=True)
    n = len(p)
    parent = p["parent_id"].to_numpy()
    row_of = {int(pid): i for i, pid in enumerate(p["program_id"].to_numpy())}
    ptype, pname = p["type"].astype(str).to_numpy(), p["name"].astype(str).to_numpy()
    is_leaf = p["step"].to_numpy() >= 0
    ctx = p["debug_context_id"].to_numpy()
    chains, names, types, layers = _context_chains(report)

    # the model's blocks: outermost contexts of the program steps, in program order
    roots: list[int] = []
    seen: set[int] = set()
    for i in np.flatnonzero(is_leaf).tolist():
        c = int(ctx[i])
        if c in chains and chains[c][0] not in seen:
            seen.add(chains[c][0])
            roots.append(chains[c][0])
    block_of: dict[int, int] = {}
    block = repeated_block([stem(names[r]) for r in roots]) if roots else None
    if block is not None:
        start, period, k = block
        for j in range(k):
            for r in roots[start + j * period : start + (j + 1) * period]:
                block_of[r] = j

    def model_frames(c: int) -> list[Frame]:
        if c not in chains:
            return []
        chain = chains[c]
        root = chain[0]
        out: list[Frame] = [("b", block_of[root])] if root in block_of else []
        out += [("s", (block_of.get(root), s)) for s in name_scopes(names[root])]
        return out + [("c", x) for x in chain]

    # program-tree ancestors (pre-order: a parent's path is known before its children's)
    pid = p["program_id"].to_numpy()
    anc: list[list[Frame]] = [[] for _ in range(n)]
    for i in range(n):
        up = row_of.get(int(parent[i]), -1)
        if up >= 0:
            anc[i] = [*anc[up], ("p", int(pid[up]))]
    model = [model_frames(int(ctx[i])) if is_leaf[i] else [] for i in range(n)]
    # a step outside any context takes the frames its neighbours (same parent) share
    by_parent: dict[int, list[int]] = {}
    for i in np.flatnonzero(is_leaf).tolist():
        by_parent.setdefault(int(parent[i]), []).append(i)
    for leaves in by_parent.values():
        with_model = [i for i in leaves if model[i]]
        for i in leaves:
            if model[i]:
                continue
            j = bisect.bisect_left(with_model, i)
            if 0 < j < len(with_model):
                model[i] = _common_prefix(model[with_model[j - 1]], model[with_model[j]])
    paths = [[*anc[i], *model[i], ("p", int(pid[i]))] for i in range(n)]

    depth = max((len(x) for x in paths), default=0)
    node = np.full((depth, n), -1, dtype=np.int64)
    intern: dict[tuple[Frame, ...], int] = {}
    label: list[str] = []
    kind: list[str] = []
    about: list[str] = []
    for i, path in enumerate(paths):
        for d in range(len(path)):
            key = tuple(path[: d + 1])
            got = intern.get(key)
            if got is None:
                got = intern[key] = len(label)
                lab, fk, ab = _describe(path[d], row_of, ptype, pname, is_leaf, names, types, layers)
                label.append(lab)
                kind.append(fk)
                about.append(ab)
            node[d, i] = got
    leaf_depth = np.where(is_leaf, np.array([len(x) - 1 for x in paths], dtype=np.int64), -1)
    return FrameTable(node, leaf_depth, np.array(label, dtype=object), np.array(kind, dtype=object),
                      np.array(about, dtype=object))  # fmt: skip


def _describe(
    frame: Frame,
    row_of: dict[int, int],
    ptype: np.ndarray,
    pname: np.ndarray,
    is_leaf: np.ndarray,
    names: dict[int, str],
    types: dict[int, str],
    layers: dict[int, str],
) -> tuple[str, str, str]:
    """(label, kind, hover line) of one frame."""
    what, ref = frame
    if what == "p":
        i = row_of[int(ref)]  # type: ignore[call-overload]
        t = str(ptype[i])
        kind = KIND_OF_TYPE.get(t, "other") if is_leaf[i] else CONTROL
        return f"{pname[i]} ({t})", kind, "program step" if kind != CONTROL else f"program: {t}"
    if what == "b":
        return f"block {int(ref) + 1}", LAYER, "repeated block of the model"  # type: ignore[call-overload]
    if what == "s":
        scope = str(ref[1])  # type: ignore[index]
        return scope_label(scope), LAYER, f"name scope {scope}"
    c = int(ref)  # type: ignore[call-overload]
    op = types.get(c, "")
    return (f"{names[c]} ({op})" if op else names[c]), OPERATION, f"{layers.get(c, '')} operation"


def flame_spans(report: Report, steps: pd.DataFrame) -> pd.DataFrame:
    """The flame of one IPU's executed ``steps`` in a run (columns step, program_id, cycles_from,
    cycles_to; any order): one row per span with COLUMNS. ``span`` numbers the spans
    and ``parent`` is the enclosing span's number (-1 at depth 0); ``with_hover`` adds the hover
    text of the spans drawn."""
    ft = frame_table(report)
    es = steps.sort_values("step", kind="stable")
    prog = report.programs()["program_id"].sort_values().to_numpy()
    pos = np.searchsorted(prog, es["program_id"].to_numpy())
    start = es["cycles_from"].to_numpy().astype(np.int64)
    end = es["cycles_to"].to_numpy().astype(np.int64)
    busy = np.r_[0, np.cumsum(end - start)]
    step_ids = es["step"].to_numpy()
    m = len(es)
    parts = []
    span_of_row = np.full(m, -1, dtype=np.int64)  # at the previous depth
    offset = 0
    for d in range(ft.node.shape[0]):
        node = ft.node[d, pos]
        leaf_here = ft.leaf_depth[pos] == d
        change = np.ones(m, dtype=bool)
        change[1:] = (node[1:] != node[:-1]) | leaf_here[1:] | leaf_here[:-1]
        first = np.flatnonzero(change)
        last = np.r_[first[1:], m] - 1
        keep = node[first] >= 0
        ids = np.cumsum(change) - 1 + offset  # span number of every row at this depth
        parent = span_of_row[first[keep]]
        first, last = first[keep], last[keep]
        nd = node[first]
        is_leaf = leaf_here[first]
        parts.append(
            pd.DataFrame(
                {
                    "row": d,
                    "start": start[first],
                    "end": end[last],
                    # text columns kept as the frame table's Python strings (object): inferring pandas'
                    # Arrow strings for ~300,000 spans took 0.2 s of a POD16 decoder's first flame
                    "kind": pd.Series(ft.kind[nd], dtype=object, copy=False),
                    "label": pd.Series(ft.label[nd], dtype=object, copy=False),
                    "step": np.where(is_leaf, step_ids[first], -1),
                    "busy": busy[last + 1] - busy[first],
                    "steps": last - first + 1,
                    "span": ids[first],
                    "parent": parent,
                    "about": pd.Series(ft.about[nd], dtype=object, copy=False),
                }
            )
        )
        span_of_row = np.where(node >= 0, ids, -1)
        offset = int(ids[-1]) + 1 if m else offset
    if not parts:
        return pd.DataFrame(columns=list(COLUMNS))
    out = pd.concat(parts, ignore_index=True)
    out["cycles"] = out["end"] - out["start"]
    # cycles its children cover, by span number (bincount: a Series.map over ~300,000 spans took ~1 s)
    parent, cycles, span = out["parent"].to_numpy(), out["cycles"].to_numpy(), out["span"].to_numpy()
    has = parent >= 0
    covered = np.bincount(parent[has], weights=cycles[has], minlength=int(span.max()) + 1)
    out["self_cycles"] = cycles - np.rint(covered[span]).astype(np.int64)
    return out[list(COLUMNS)]


def with_hover(spans: pd.DataFrame) -> pd.DataFrame:
    """``spans`` (flame spans, exact or binned by ``level_of_detail``) with ``hover``, each exact
    span's hover line: its total, self and busy cycles and steps (a bin keeps none: NaN). Made only
    for the spans drawn: a POD16 decoder's flame has ~300,000 spans, whose text took seconds."""
    out = spans.copy()
    exact = out["about"].notna().to_numpy() if "about" in out else np.zeros(len(out), dtype=bool)
    hover = np.full(len(out), np.nan, dtype=object)
    e = out[exact]
    hover[exact] = [
        f"{lab}<br>{ab}: {int(c):,} cycles ({int(s):,} self), {int(b):,} busy in {plural(int(k), 'step')}"
        for lab, ab, c, s, b, k in zip(
            e["label"], e["about"], e["cycles"], e["self_cycles"], e["busy"], e["steps"], strict=True
        )
    ]
    out["hover"] = hover
    return out


#: What a flame row mostly holds, by the kind of its frames (weighted by cycles).
_ROW_NOUN = {CONTROL: "program", LAYER: "layers", OPERATION: "operations"}


def row_names(spans: pd.DataFrame) -> dict[int, str]:
    """Each flame row's name: its depth and what most of its cycles are (program, layers,
    operations or steps), e.g. '3 layers'."""
    if spans.empty:
        return {}
    kind = spans["kind"].to_numpy()
    noun = np.full(len(kind), "steps", dtype=object)
    for k, n in _ROW_NOUN.items():  # vectorised: one comparison per noun, not a lambda per span
        noun[kind == k] = n
    by = spans.assign(noun=noun).groupby(["row", "noun"])["cycles"].sum().reset_index()
    top = by.sort_values("cycles", ascending=False, kind="stable").drop_duplicates("row")
    return {int(r): f"{int(r)} {n}" for r, n in zip(top["row"], top["noun"], strict=True)}
