"""Operation efficiency: how close each operation of the computing run comes to what its class can do.

An operation's class is its PopLibs op type (the Operations page's ``op_type``: MatMul, Conv,
Binary, Unary, Reduce, ...). Its achieved rate is the Operations page's ``flops_per_cycle`` in the
run (FLOPs summed over IPUs over cycles, the max over IPUs per step). The reference it is measured
against:

- an AMP class (MatMul, Conv) whose plan names float16 or float32 inputs: the target's peak for
  that type, as the report's ``target`` table carries it (FLOPs per tile per cycle) times the tiles
  of every IPU the operation ran on. The table carries the half-partials fp16 rate only, so an fp16
  operation with float partials is measured against the faster half-partials peak (its own peak is
  lower; the text says which peak);
- any other class (and an AMP class in another type, e.g. float8, whose peak the report does not
  carry): the best rate of any operation of the same class in the same report.

The figures are the operations view's (app.views.operations), so they match the Operations page.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from app.views.operations import OUTSIDE_ID, _map, op_of_context, operations
from app.views.runs import opening_run
from report_format.reader import Report
from report_format.vocabulary import Layer

#: PopLibs op types that run on the AMP unit, whose peak the report's target table carries.
AMP_CLASSES = ("MatMul", "Conv")
#: Plan ``dtype`` -> the target table's peak column (report_format/schema.py ``target``).
PEAK_COLUMN = {"float16": "fp16_flops_per_cycle", "float32": "fp32_flops_per_cycle"}

COLUMNS = (
    "op_id",
    "name",
    "model_name",
    "op_type",
    "cycles",
    "tiles",
    "share",
    "flops_per_cycle",
    "reference",
    "reference_kind",
    "efficiency",
)


def _plan_dtype(attributes: str) -> str:
    """The input type a matmul/conv plan records (``dtype``, at the top or under ``plan``), or ''."""
    try:
        a = json.loads(attributes or "{}")
    except ValueError:
        return ""
    if not isinstance(a, dict):
        return ""
    plan = a.get("plan")
    return str((plan if isinstance(plan, dict) else a).get("dtype", ""))


def operation_efficiency(report: Report, run: int | None = None) -> pd.DataFrame:
    """One row per PopLibs operation with FLOPs in ``run`` (the opening run if None): COLUMNS.

    tiles: the tiles running its vertices (the Operations page's); share: the operation's cycles over all the run's cycles on the Operations page (outside work
    included); reference: the FLOPs per cycle it is measured against; reference_kind: "fp16 peak",
    "fp32 peak" or "best <class>"; efficiency: flops_per_cycle / reference; model_name: the ONNX
    node enclosing it, when the report has one ('' otherwise). Sorted by cycles, most first.
    """
    empty = pd.DataFrame(columns=list(COLUMNS))
    if not report.has_execution_profile or report.num_rows("execution_steps") == 0:
        return empty
    run = opening_run(report) if run is None else run
    ops = operations(report, Layer.POPLIBS, run)
    total = float(ops["cycles"].sum())
    ops = ops[(ops["op_id"] != OUTSIDE_ID) & (ops["flops"] > 0) & (ops["cycles"] > 0)].copy()
    if ops.empty or not total:
        return empty
    dc = report.debug_contexts().set_index("debug_context_id")
    ids = ops["op_id"].to_numpy()
    ops["share"] = ops["cycles"] / total
    # the IPUs each operation ran on in the run: its peak is theirs together
    es = report.table("execution_steps", ["run", "program_id", "ipu"]).to_pandas()
    es = es[es["run"] == run]
    prog = report.programs()
    prog_op = pd.Series(
        _map(prog["debug_context_id"].to_numpy(), op_of_context(report, Layer.POPLIBS)), prog["program_id"]
    )
    ipus = es.assign(op=prog_op.reindex(es["program_id"]).to_numpy()).groupby("op")["ipu"].nunique()
    n_ipus = ipus.reindex(ids).fillna(1).clip(lower=1).to_numpy()
    t = report.target_info
    dtype = dc["attributes"].reindex(ids).fillna("").map(_plan_dtype).to_numpy()
    column = np.array([PEAK_COLUMN.get(d, "") for d in dtype])
    amp = ops["op_type"].isin(AMP_CLASSES).to_numpy() & (column != "")
    per_tile = np.array([float(getattr(t, c)) if c else 0.0 for c in column])
    peak = per_tile * t.tiles_per_ipu * n_ipus
    best = ops.groupby("op_type")["flops_per_cycle"].transform("max").to_numpy()
    ops["reference"] = np.where(amp, peak, best)
    ops["reference_kind"] = np.where(
        amp, np.char.add(np.char.replace(column, "_flops_per_cycle", ""), " peak"), "best " + ops["op_type"]
    )
    ops["efficiency"] = np.where(ops["reference"] > 0, ops["flops_per_cycle"] / ops["reference"].clip(lower=1e-12), 0.0)
    # the model's own name: the ONNX node enclosing the operation, when there is one
    onnx_of = op_of_context(report, Layer.ONNX)
    enclosing = _map(ids, onnx_of)
    names = dc["name"].reindex(enclosing).fillna("").to_numpy()
    ops["model_name"] = np.where(enclosing >= 0, names, "")
    return ops[list(COLUMNS)].reset_index(drop=True)
