"""The operations view: per operation of a layer (poplibs / onnx / user), its cycles, FLOPs,
memory, code and tiles.

An operation is a debug context of the chosen layer. Programs, compute sets and variables point
at debug contexts; each is attributed to its nearest enclosing context of the layer (itself
included), so a PopLibs matmul inside an ONNX MatMul counts for both layers' views.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pandas as pd

from app.units import plural
from app.views import provenance
from app.views.grouped import executed_by_program, sums_and_tiles
from app.views.runs import opening_run
from report_format.reader import Report
from report_format.vocabulary import Layer

COLUMNS = ("cycles", "flops", "flops_per_cycle", "memory_bytes", "code_bytes", "tiles", "steps", "variables")


#: The row of work attributed to no operation of the layer (stream copies, syncs and variables made
#: outside any debug context of it). Every page and the diff show it under this name, with op_id -1,
#: and never count it as an operation.
OUTSIDE = "(outside any operation)"
OUTSIDE_ID = -1


def op_of_context(report: Report, layer: str | None) -> np.ndarray:
    """For every debug context id, the id of its nearest enclosing context in ``layer`` (or -1);
    with ``layer`` None every context is its own operation."""
    dc = report.debug_contexts().sort_values("debug_context_id")
    n = len(dc)
    if layer is None:
        return np.arange(n)
    parent = dc["parent_id"].to_numpy()
    is_layer = (dc["layer"] == layer).to_numpy()
    out = np.where(is_layer, np.arange(n), -1)
    # follow parents until every context resolved (depth of nesting is small)
    cur = parent.copy()
    for _ in range(64):
        todo = (out < 0) & (cur >= 0)
        if not todo.any():
            break
        hit = todo.copy()
        hit[todo] = is_layer[cur[todo]]
        out[hit] = cur[hit]
        cur = np.where(todo & ~hit, parent[np.maximum(cur, 0)], -1)
    return out


def _map(ids: np.ndarray, op_of: np.ndarray) -> np.ndarray:
    ids = np.asarray(ids, dtype=np.int64)
    ok = (ids >= 0) & (ids < len(op_of))
    return np.where(ok, op_of[np.clip(ids, 0, max(len(op_of) - 1, 0))] if len(op_of) else -1, -1)


def operation_count(ops: pd.DataFrame) -> int:
    """Operations in an ``operations`` table: every row but the OUTSIDE one."""
    return int((ops["op_id"] != OUTSIDE_ID).sum())


def count_sentence(count: int, outside_cycles: int | None, total_cycles: int) -> str:
    """'42 operations, plus work outside any of them (38.2% of cycles)': how every page counts."""
    text = plural(count, "operation")
    if outside_cycles is not None:
        share = f" ({100 * outside_cycles / total_cycles:.1f}% of cycles)" if total_cycles else ""
        text += f", plus one row for work outside any of them{share}"
    return text


@lru_cache(maxsize=16)
def operations(report: Report, layer: str | None = Layer.POPLIBS, run: int | None = None) -> pd.DataFrame:
    """One row per operation of ``layer`` (every debug context if None), plus, when any work or
    memory is attributed to none of them, one OUTSIDE row (op_id -1). This is the one definition of
    an operation's figures: the Operations page, the Operations Graph, Compare mode and
    ``tilescope diff`` all use it.

    cycles: executed cycles of its steps in ``run`` (all runs if None), max over IPUs per step; a
    report without an execution profile uses the compile-time estimates (``cycles_source`` says so).
    flops: FLOPs of its executed steps (summed over IPUs and executions); without an execution
    profile, its compute sets' estimated FLOPs for one execution.
    memory_bytes: bytes of the variables it created; code_bytes: control/exchange code of its
    programs plus vertex state of its compute sets; tiles: tiles running its vertices.
    """
    cols = ["op_id", "name", "op_type", "file", "line", *COLUMNS]
    dc = report.debug_contexts()
    op_of = op_of_context(report, layer) if len(dc) else np.zeros(0, dtype=np.int64)
    ops = (dc if layer is None else dc[dc["layer"] == layer]).set_index("debug_context_id")
    idx = ops.index.append(pd.Index([OUTSIDE_ID]))
    prog = report.programs()
    prog_op = _map(prog["debug_context_id"].to_numpy(), op_of)
    cs = report.compute_sets()
    cs_op = pd.Series(_map(cs["debug_context_id"].to_numpy(), op_of), index=cs["compute_set_id"].to_numpy())
    out = pd.DataFrame(index=idx)
    # executions of each program leaf, its cycles and FLOPs
    if report.has_execution_profile:
        cycles_of, flops_of, _ = executed_by_program(report, run)
        ids = prog["program_id"].to_numpy()
        cyc, prog_flops = cycles_of[ids], flops_of[ids]
        source = "estimated run (compile-only: no values)" if provenance.estimated(report) else "executed (simulated)"
    else:
        cyc, prog_flops = prog["estimated_cycles"].to_numpy(), None
        source = "compile-time estimate (no execution profile)"
    pf = pd.DataFrame(
        {
            "op": prog_op,
            "cycles": cyc,
            "code": prog["code_bytes"].to_numpy(),
            "steps": (prog["step"] >= 0).to_numpy(),
            "cs": prog["compute_set_id"].to_numpy(),
        }
    )
    g = pf.groupby("op").agg(cycles=("cycles", "sum"), code_bytes=("code", "sum"), steps=("steps", "sum"))
    out = out.join(g)
    v = report.table("vertices", ["compute_set_id", "tile", "flops", "state_bytes"]).to_pandas()
    if prog_flops is not None:
        out["flops"] = pd.Series(prog_flops).groupby(prog_op).sum().reindex(out.index).to_numpy()
    else:  # estimated FLOPs of one execution of each of its compute sets
        cs_flops = v.groupby("compute_set_id")["flops"].sum()
        out["flops"] = (
            cs_flops.groupby(cs_op.reindex(cs_flops.index).fillna(-1).to_numpy()).sum().reindex(out.index).to_numpy()
        )
    v_op = cs_op.reindex(v["compute_set_id"]).fillna(OUTSIDE_ID).to_numpy().astype(np.int64)
    # numpy, not groupby().nunique(): a POD16 report has millions of vertex rows (grouped.py)
    by_op = sums_and_tiles(v_op, v["tile"].to_numpy(), sums={"state_bytes": v["state_bytes"].to_numpy()})
    out["tiles"] = by_op["tiles"].reindex(out.index).to_numpy()
    out["code_bytes"] = out["code_bytes"].fillna(0) + by_op["state_bytes"].reindex(out.index).fillna(0)
    var = report.table("variables", ["variable_id", "bytes", "debug_context_id"]).to_pandas()
    var["op"] = _map(var["debug_context_id"].to_numpy(), op_of)
    vg = var.groupby("op").agg(memory_bytes=("bytes", "sum"), variables=("variable_id", "size"))
    out = out.join(vg)
    out = out.fillna(0)
    for c in ("cycles", "flops", "memory_bytes", "code_bytes", "tiles", "steps", "variables"):
        out[c] = out[c].astype(np.int64)
    out["flops_per_cycle"] = np.where(out["cycles"] > 0, out["flops"] / out["cycles"].clip(lower=1), 0.0).round(3)
    out["name"] = ops["name"].reindex(out.index).fillna(OUTSIDE)
    out["op_type"] = ops["op_type"].reindex(out.index).fillna("")
    out["file"] = ops["file"].reindex(out.index).fillna("")
    out["line"] = ops["line"].reindex(out.index).fillna(0).astype(np.int64)
    outside = out.loc[OUTSIDE_ID, ["cycles", "flops", "memory_bytes", "code_bytes", "steps", "variables"]]
    if not outside.any():
        out = out.drop(index=OUTSIDE_ID)
    out.index.name = "op_id"
    res = out.reset_index()[cols].sort_values("cycles", ascending=False, kind="stable").reset_index(drop=True)
    res.attrs["cycles_source"] = source
    return res


def operation_programs(report: Report, layer: str, op_id: int) -> pd.DataFrame:
    """Program steps of one operation."""
    op_of = op_of_context(report, layer)
    p = report.programs()
    mine = p[_map(p["debug_context_id"].to_numpy(), op_of) == op_id]
    return mine[["program_id", "type", "name", "step", "estimated_cycles", "code_bytes"]].reset_index(drop=True)


def operation_variables(report: Report, layer: str, op_id: int) -> pd.DataFrame:
    op_of = op_of_context(report, layer)
    var = report.variables()
    mine = var[_map(var["debug_context_id"].to_numpy(), op_of) == op_id]
    return (
        mine[["variable_id", "name", "bytes", "tiles", "always_live", "dtype"]]
        .sort_values("bytes", ascending=False)
        .reset_index(drop=True)
    )


def operation_tile_cycles(report: Report, layer: str, op_id: int) -> pd.DataFrame:
    """Estimated cycles by tile of an operation's compute sets (sum of its vertices' cycle estimates)."""
    op_of = op_of_context(report, layer)
    cs = report.compute_sets()
    mine = cs.loc[_map(cs["debug_context_id"].to_numpy(), op_of) == op_id, "compute_set_id"].to_numpy()
    v = report.table("vertices", ["compute_set_id", "tile", "cycles"]).to_pandas()
    v = v[v["compute_set_id"].isin(mine)]
    return v.groupby("tile", as_index=False)["cycles"].sum()


def operations_graph(report: Report, layer: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Nodes (the operations table of the run that computes, ``runs.opening_run``, plus layout
    columns ``x``, ``y``) and edges of the operations graph.

    With ``program_variables`` (format 2), op A -> op B when a step of B reads a variable whose last
    write before that step was made by a step of A (the data flow; ``kind`` "data", ``variables`` =
    how many variables flow). Older reports have no data flow: an edge then joins each operation to
    the next one to start executing (``kind`` "order"). Nodes are laid out in layers: ``x`` is the
    longest path from a source over forward edges (a source then moved to the layer before its first
    reader), ``y`` the position within the layer.
    """
    # cycles of the run that computes, as Summary and Operations lead with it: over all runs a
    # one-off weight upload (BERT-base: 8.9 M of 10.8 M cycles) would make each weight's stream
    # copy the heaviest node of its layer
    ops = operations(report, layer, opening_run(report) if report.has_execution_profile else None)
    nodes = ops[ops["op_id"] != OUTSIDE_ID].copy()  # work outside any operation is no node
    op_of = op_of_context(report, layer)
    p = report.programs()
    p = p[p["step"] >= 0]
    p_op = pd.Series(_map(p["debug_context_id"].to_numpy(), op_of), index=p["program_id"].to_numpy())
    step_of = pd.Series(p["step"].to_numpy(), index=p["program_id"].to_numpy())
    first_step = pd.Series(p["step"].to_numpy(), index=p_op.to_numpy())
    first_step = first_step[first_step.index >= 0].groupby(level=0).min()
    pv = report.program_variables()
    pv = pv[pv["program_id"].isin(step_of.index)]
    if len(pv):
        pv = pv.assign(step=step_of.reindex(pv["program_id"]).to_numpy(), op=p_op.reindex(pv["program_id"]).to_numpy())
        cols = ["variable_id", "step", "op", "program_id"]
        writes = pv[pv["access"] != "read"].sort_values("step")[cols]
        reads = pv[pv["access"] != "write"].sort_values("step")[cols]
        # the last write strictly before each read, per variable
        flow = pd.merge_asof(
            reads.assign(step=reads["step"] - 0.5).sort_values("step"),
            writes.astype({"step": float}).rename(columns={"op": "source", "program_id": "writer"}),
            on="step",
            by="variable_id",
            direction="backward",
        ).dropna(subset=["source"])
        flow = _through_outside_steps(flow)
        flow = flow[(flow["source"] >= 0) & (flow["op"] >= 0) & (flow["source"] != flow["op"])]
        edges = (
            flow.astype({"source": np.int64})
            .rename(columns={"op": "target"})
            .groupby(["source", "target"], as_index=False)["variable_id"]
            .nunique()
            .rename(columns={"variable_id": "variables"})
            .assign(kind="data")
        )
    else:
        order = first_step.sort_values(kind="stable").index.to_numpy()
        edges = pd.DataFrame({"source": order[:-1], "target": order[1:], "variables": 0, "kind": "order"})
    # an enclosing op whose steps all belong to nested ops has no steps and no edges: leave it out
    linked = set(edges["source"]) | set(edges["target"])
    keep = (nodes["steps"] > 0) | nodes["op_id"].isin(linked)
    nodes = nodes[keep].reset_index(drop=True)
    nodes.attrs["hidden"] = int((~keep).sum())
    nodes["x"], nodes["y"] = _layers(nodes["op_id"].to_numpy(), edges, first_step)
    return nodes, edges.reset_index(drop=True)


#: How many steps outside any operation a flow is followed through (an inter-IPU copy is one; a
#: copy to a stage's I/O tiles and on to the next IPU would be two).
OUTSIDE_HOPS = 4


def _through_outside_steps(flow: pd.DataFrame) -> pd.DataFrame:
    """Data that reaches an operation through a step outside any operation (the pipeline's
    inter-IPU copy, ``IpuCopy to IPU 1``, which Poplar places outside the ops it joins) comes
    from whatever that step read: follow such a writer back to the writers of its own reads, so
    the layer on IPU 1 gets an edge from the layer on IPU 0 instead of none. ``flow`` has a row
    per read (``program_id``, ``op``) with its last writer (``writer``, ``source``)."""
    # what each step read and who wrote it, keyed by that step as a writer
    own = flow[["program_id", "source", "writer"]].set_axis(["writer", "via_source", "via_writer"], axis=1)
    for _ in range(OUTSIDE_HOPS):
        outside = flow["source"] < 0
        if not outside.any():
            break
        passed = flow[outside].merge(own, on="writer", how="inner")
        passed = passed.assign(source=passed["via_source"], writer=passed["via_writer"]).drop(
            columns=["via_source", "via_writer"]
        )
        flow = pd.concat([flow[~outside], passed], ignore_index=True)
    return flow


def _layers(ops: np.ndarray, edges: pd.DataFrame, first_step: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Longest-path layer of each op over edges that go forward in first-execution order; an op
    nothing flows into (a weight's Fill or Copy, a one-hot of the labels) then moves right to the
    layer just before its first reader, so its edges stay short instead of crossing the graph."""
    pos = {int(o): i for i, o in enumerate(ops)}
    start = first_step.reindex(ops).fillna(np.inf).to_numpy()
    src = np.array([pos.get(int(a), -1) for a in edges["source"]], dtype=np.int64)
    dst = np.array([pos.get(int(b), -1) for b in edges["target"]], dtype=np.int64)
    ok = (src >= 0) & (dst >= 0)
    src, dst = src[ok], dst[ok]
    fwd = start[src] < start[dst]
    src, dst = src[fwd], dst[fwd]
    depth = np.zeros(len(ops), dtype=np.int64)
    for _ in range(len(ops)):  # relax: a DAG settles within its longest path (vectorised per pass)
        new = depth.copy()
        np.maximum.at(new, dst, depth[src] + 1)
        if (new == depth).all():
            break
        depth = new
    source = np.ones(len(ops), dtype=bool)
    source[dst] = False
    reader = np.full(len(ops), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(reader, src, depth[dst])
    move = source & (reader < np.iinfo(np.int64).max)
    move &= reader - 1 > depth  # only those that move right (a chain's head stays where it is)
    depth[move] = reader[move] - 1
    order = np.lexsort((start, move, depth))  # a moved source below the layer's own ops: chains stay rows
    y = np.empty(len(ops), dtype=np.int64)
    slot = pd.Series(depth[order]).groupby(depth[order]).cumcount().to_numpy()
    y[order] = slot
    return depth, y
