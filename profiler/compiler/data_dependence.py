"""Which program-tree nodes have cycles that depend on the values the program computes.

The cost model charges every step one estimate, whatever the data (PopLibs' cycle estimators do the
same). That estimate is exact for most steps and an assumption for a few: a compute set whose
codelets' work follows an index (dynamic slices, embedding gathers: ``Codelet.data_dependent``
says why), and control flow that follows a tensor's value (If, Switch: which branch runs). Both an
executed and a compile-only report record these nodes, so a reader knows which cycles to doubt.
"""

from __future__ import annotations

from profiler.compiler.compile import CompiledGraph, ControlNode, Step
from profiler.executable import actions
from report_format.vocabulary import ControlType

#: Why an If's or a Switch's cycles depend on data; a compile-only run takes the longest branch.
BRANCH_REASON = "{kind}: which branch runs depends on a tensor's value (a compile-only estimate takes the longest)"


def data_dependent_nodes(c: CompiledGraph) -> dict[int, str]:
    """Program-tree node id -> why its cycles depend on data (one reason per node)."""
    out: dict[int, str] = {}
    for node in c.nodes:
        if isinstance(node, ControlNode) and node.type in (ControlType.IF, ControlType.SWITCH):
            out[node.id] = BRANCH_REASON.format(kind=node.type.value)
        elif isinstance(node, Step) and isinstance(node.action, actions.Execute):
            reasons = sorted({b.codelet.data_dependent for b in node.action.plan.batches if b.codelet.data_dependent})
            if reasons:
                out[node.id] = "; ".join(reasons)
    return out
