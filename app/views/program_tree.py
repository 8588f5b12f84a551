"""The program tree view: the compiled control program with, per node, its type, name (with the
model's own name first where the report is of an ONNX model, as Liveness and the trace show it),
estimated cycles, executed cycles (summed over runs and over every execution) and code bytes."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pandas as pd

from app.views import model_names
from app.views.grouped import executed_by_program
from report_format.reader import Report


@lru_cache(maxsize=8)
def program_tree(report: Report) -> pd.DataFrame:
    """Programs in pre-order with ``depth``, ``children``, and cycles/code rolled up to control nodes.

    ``executed_cycles`` of a leaf is the sum over every run and every execution of the step's
    length (max over IPUs of cycles_to - cycles_from); a control node sums its subtree.
    ``model_name``: the ONNX node enclosing the program ("" where none); ``shown_name``: the name
    the tree shows, "s3b0_b_conv_365 (matmul)" (``model_names.with_model_name``).
    """
    p = report.programs().sort_values("program_id").reset_index(drop=True)
    parent = p["parent_id"].to_numpy()
    n = len(p)
    depth = np.zeros(n, dtype=np.int64)
    for i in range(n):  # pre-order: a parent precedes its children
        depth[i] = depth[parent[i]] + 1 if parent[i] >= 0 else 0
    children = np.bincount(parent[parent >= 0], minlength=n) if n else np.zeros(0, np.int64)
    executed = np.zeros(n, dtype=np.int64)
    executions = np.zeros(n, dtype=np.int64)
    if report.has_execution_profile:
        cycles_of, _, execs_of = executed_by_program(report)
        ids = p["program_id"].to_numpy()
        executed, executions = cycles_of[ids].copy(), execs_of[ids].copy()
    est = p["estimated_cycles"].to_numpy().astype(np.int64).copy()
    code = p["code_bytes"].to_numpy().astype(np.int64).copy()
    rolled_exec, rolled_est, rolled_code = executed.copy(), est.copy(), code.copy()
    for i in range(n - 1, -1, -1):  # reverse pre-order: children before parents
        if parent[i] >= 0:
            rolled_exec[parent[i]] += rolled_exec[i]
            rolled_est[parent[i]] += rolled_est[i] * max(int(p["repeat_count"].iat[parent[i]]), 1)
            rolled_code[parent[i]] += rolled_code[i]
    # host-transfer nodes: every step under them is a stream copy (the one-off weight upload that
    # runs before inference: hundreds of Begin / Mid / End steps, a weight each)
    leaf = p["step"].to_numpy() >= 0
    stream = p["type"].astype(str).str.startswith("StreamCopy").to_numpy() & leaf
    steps, stream_steps = leaf.astype(np.int64), stream.astype(np.int64)
    for i in range(n - 1, -1, -1):
        if parent[i] >= 0:
            steps[parent[i]] += steps[i]
            stream_steps[parent[i]] += stream_steps[i]
    model = model_names.of_programs(report).reindex(p["program_id"].to_numpy()).fillna("").to_numpy(dtype=object)
    names = p["name"].fillna("").astype(str).to_numpy(dtype=object)
    # a nameless control node keeps its empty name: the page shows its type instead
    shown = np.where(names != "", model_names.with_model_name(model, names), names)
    out = p.assign(
        model_name=model,
        shown_name=shown,
        depth=depth,
        children=children,
        executions=executions,
        executed_cycles=rolled_exec,
        estimated_cycles=rolled_est,
        code_bytes=rolled_code,
        stream_steps=stream_steps,
        host_transfer=(steps > 0) & (stream_steps == steps) & (children > 0),
    )
    return out


def visible_rows(tree: pd.DataFrame, expanded: set[int]) -> pd.DataFrame:
    """Rows whose every ancestor is expanded (top-level programs are always visible)."""
    parent = tree["parent_id"].to_numpy()
    shown = np.zeros(len(tree), dtype=bool)
    exp = np.zeros(len(tree), dtype=bool)
    if expanded:
        idx = np.fromiter((e for e in expanded if 0 <= e < len(tree)), dtype=np.int64)
        exp[idx] = True
    for i in range(len(tree)):  # pre-order: parent decided first
        shown[i] = parent[i] < 0 or (shown[parent[i]] and exp[parent[i]])
    return tree[shown]


def default_expanded(tree: pd.DataFrame, depth: int = 2) -> set[int]:
    """Control nodes down to ``depth`` open at first, but a host transfer (the weight upload) stays
    one folded line: its hundreds of stream-copy steps would otherwise fill the first screens."""
    return set(
        tree.loc[(tree["children"] > 0) & (tree["depth"] < depth) & ~tree["host_transfer"], "program_id"].astype(int)
    )


def search_rows(tree: pd.DataFrame, query: str) -> tuple[pd.DataFrame, int]:
    """(rows, matches): the nodes whose name, model name or type contains ``query`` (any case), with their
    ancestors so each match shows where it sits in the tree; pre-order kept."""
    q = query.strip().lower()
    hit = (
        tree["shown_name"].astype(str).str.lower().str.contains(q, regex=False)
        | tree["type"].astype(str).str.lower().str.contains(q, regex=False)
    ).to_numpy()
    shown = hit.copy()
    parent = tree["parent_id"].to_numpy()
    frontier = np.flatnonzero(hit)
    while frontier.size:  # one step up per pass: as many passes as the tree is deep
        up = parent[frontier]
        up = up[(up >= 0) & ~shown[np.maximum(up, 0)]]
        shown[up] = True
        frontier = np.unique(up)
    return tree[shown], int(hit.sum())


def estimates_repeat_executed(tree: pd.DataFrame, executed: bool) -> bool:
    """Whether the estimated-cycles column only repeats the executed one: with an execution profile,
    every step's executed cycles are its estimate times its executions (a simulated run uses the
    compiler's cost model, so on this simulator they agree unless a step's cycles depend on what it
    ran, e.g. a stream copy's host wait)."""
    if not executed:
        return False
    leaf = tree[tree["step"] >= 0]
    return bool((leaf["executed_cycles"] == leaf["estimated_cycles"] * leaf["executions"]).all())


def program_details(report: Report, program_id: int) -> dict[str, object]:
    """What the details panel shows for one node."""
    tree = program_tree(report)
    row = tree[tree["program_id"] == program_id].iloc[0]
    out: dict[str, object] = {
        "program_id": int(program_id),
        "type": row["type"],
        "name": row["name"],
        **({"model_name": row["model_name"]} if row["model_name"] else {}),
        "estimated_cycles": int(row["estimated_cycles"]),
        "executed_cycles": int(row["executed_cycles"]),
        "code_bytes": int(row["code_bytes"]),
        "code_tiles": int(row["code_tiles"]),
    }
    if int(row["step"]) >= 0:  # a step of the program; a control node has no step and no executions of its own
        out.update(step=int(row["step"]), executions=int(row["executions"]))
    if int(row["repeat_count"]) > 0:
        out["repeat_count"] = int(row["repeat_count"])
    cs = int(row["compute_set_id"])
    if cs >= 0:
        c = report.compute_sets().set_index("compute_set_id").loc[cs]
        out.update(compute_set=c["name"], vertices=int(c["vertices"]), tiles=int(c["tiles"]))
    x = report.exchanges()
    x = x[x["program_id"] == program_id]
    if len(x):
        out.update(
            exchange_tiles=int(x["tile"].nunique()),
            bytes_in=int(x["bytes_in"].sum()),
            bytes_out=int(x["bytes_out"].sum()),
        )
    dc = int(row["debug_context_id"])
    if dc >= 0 and report.num_rows("debug_contexts"):
        d = report.debug_contexts().set_index("debug_context_id").loc[dc]
        out.update(debug_context=f"{d['layer']}: {d['name']} ({d['op_type']})")
        if d["file"]:
            out.update(source=f"{d['file']}:{d['line']}")
    return out
