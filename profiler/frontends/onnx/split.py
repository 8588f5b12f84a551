"""The compute-balanced split of an ONNX model over IPUs (``import_model(..., split="compute")``).

PopART's automatic virtual graphs balance memory (profiler.multi_ipu.sharding). Pipeline stages run at the
pace of the slowest, so for pipelining the cut should balance time: the model is imported with the
memory split and compiled, each node's simulated cycles are summed over the compute and exchange
steps its debug context owns (on its IPU: a step's slowest tile), the host copies charged to the node
before them (the inputs' upload, which the first stage does every micro-batch, to the first node), and
the nodes are cut again into contiguous groups of about equal cycles (sharding.balance). Costs twice
the import and one compile.
"""

from __future__ import annotations

import numpy as np

from profiler.compiler.compile import compile_programs
from report_format.vocabulary import StepType

from .builder import LAYER, ImportedModel


def node_cycles(model: ImportedModel) -> np.ndarray:
    """Simulated cycles of each ONNX node of ``model`` (its OnTileExecute and DoExchange steps in the
    inference program, and the host copies next to it: the inputs' upload is charged to the first
    node; the weight upload, global exchanges and syncs are left out)."""
    g = model.graph
    nodes = model.onnx_model.graph.node
    index = {(n.name or f"{n.op_type}_{i}"): i for i, n in enumerate(nodes)}
    contexts = g.debug_contexts
    owner = np.full(len(contexts), -1, dtype=np.int64)  # node index of each debug context (-1: none)
    for ctx in contexts:  # parents are created before their children
        if ctx.layer == LAYER and ctx.name in index:
            owner[ctx.id] = index[ctx.name]
        elif ctx.parent_id >= 0:
            owner[ctx.id] = owner[ctx.parent_id]
    compiled = compile_programs(g, model.programs, values=False)  # cycles only: no value accessors
    first, last = compiled.program_ranges[1]
    out = np.zeros(len(nodes), dtype=np.float64)
    previous = 0  # the node whose work came last: a host copy is charged to the stage it feeds or drains
    for step in compiled.steps[first : last + 1]:  # steps of one inference (thousands at most)
        node = owner[step.debug_context_id] if step.debug_context_id >= 0 else -1
        if node >= 0 and step.type in (StepType.ON_TILE_EXECUTE, StepType.DO_EXCHANGE):
            out[node] += float(step.cost.tile_cycles.max())
            previous = node
        elif node < 0 and step.type in _HOST_COPY:
            # the inputs' upload, every micro-batch, on the first stage's IPU (it holds the inputs),
            # the outputs' download on the last's: without them a stage fed by the host looks short
            out[previous] += float(step.cost.tile_cycles.max())
    return out


_HOST_COPY = (StepType.STREAM_COPY_BEGIN, StepType.STREAM_COPY_MID, StepType.STREAM_COPY_END)
