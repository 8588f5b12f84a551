"""Pipelined training: forward and backward stages on IPUs over micro-batches, stashed activations,
gradient accumulation and one weight update per run, as PopART pipelines a training session.

The schedule is PopART's (willow/src/transforms/pipeline.cpp, and the pipelining slide of seed
004: "warmup", then "Full utilization" with each IPU alternating fwd and bwd, then "WU" on every
IPU). With S stages (stage s on its own IPU) there are P = 2S - 1 *pipeline stages*: the forward of
stage s is pipeline stage s, its backward pipeline stage 2(S - 1) - s, and the last stage's forward,
loss and backward are one (pipeline stage S - 1). In pipeline cycle c, pipeline stage p works on
micro-batch c - p when 0 <= c - p < M, so a run has M + P - 1 cycles: the *fill* (cycles before
every pipeline stage has work), the *main* phase (every pipeline stage busy: one Repeat of M - P + 1
identical cycles, as PopART's main loop) and the *drain*. This is one-forward-one-backward (1F1B)
in the steady state, not GPipe (all forwards, then all backwards).

In a cycle each IPU runs, for the micro-batches it has: forward, stash, restore, backward (PopART's
order "Fwd/Stash/Restore/Bwd"); then the inter-IPU copies move activations to the next stage and
gradients to the previous one (into tensors on the receiving IPU, so no stage overwrites what
another still reads). A stage's forward leaves activations its backward needs 2(S - 1 - s) cycles
later, by when 2(S - 1 - s) more micro-batches have gone forward: PopART's stash holds
2(S - 1 - s) + 1 of them ("a stash size of 2*(IPUs to end) + 1, except for the last IPU, which
has no stash"). The stash is a device tensor [depth, ...] mapped like the activation (its memory is
the stage IPU's, in the report's memory and liveness), written by a DynamicUpdate at a counter and
restored in place by a DynamicSlice at another (each counter advancing modulo the depth, PopART's
IncrementMod).

Weight gradients accumulate over the micro-batches (the stages' backward programs add into
accumulators) and the ``update`` program applies them once, after the drain: the weights after a
run equal those of one unpipelined step over the whole batch when the update uses the mean (the
accumulated sum / M). Timing is the Pipeline's dataflow model (profiler.multi_ipu.pipeline): each IPU keeps its
own clock, so while IPU 1 runs the forward of micro-batch m, IPU 0 runs micro-batch m + 1.
"""

from __future__ import annotations

from collections.abc import Sequence as Seq
from dataclasses import dataclass, field

import numpy as np

from profiler.chip import cost_model
from profiler.multi_ipu.pipeline import Pipeline, check_micro_batches
from profiler.ops.elementwise import apply_map, fill
from profiler.ops.poplibs_codelets import map_codelet
from profiler.ops.slicing import dynamic_slice, dynamic_update
from profiler.poplar.graph import Graph
from profiler.poplar.programs import Copy, Program, Repeat, Sequence, WriteUndef
from profiler.poplar.tensor import Tensor


@dataclass(eq=False)
class TrainingStage:
    """One IPU's share of a training step. ``forward`` reads the stage's inputs (the host's data or
    what the previous stage sent) and ``backward`` the gradients the next stage sent; ``stash`` are
    the tensors forward leaves for backward (activations); ``to_next`` pairs (tensor here, tensor on
    the next stage's IPU) copied after each forward, ``to_previous`` pairs (gradient here, tensor on
    the previous stage's IPU) copied after each backward."""

    forward: Program
    backward: Program
    stash: Seq[Tensor] = ()
    to_next: Seq[tuple[Tensor, Tensor]] = ()
    to_previous: Seq[tuple[Tensor, Tensor]] = ()
    name: str = ""
    stash_tensors: list[Tensor] = field(default_factory=list)  # filled by TrainingPipeline


def stash_depth(stage: int, stages: int) -> int:
    """Micro-batches stage ``stage`` of ``stages`` keeps stashed: 2(S - 1 - s) + 1, none on the last
    stage (PopART, willow/src/transforms/pipeline.cpp)."""
    return 0 if stage == stages - 1 else 2 * (stages - 1 - stage) + 1


def cycle_work(cycle: int, stages: int, micro_batches: int) -> tuple[list[int], list[int]]:
    """Stages that run their forward, and stages that run their backward, in pipeline cycle ``cycle``."""
    busy = lambda p: 0 <= cycle - p < micro_batches  # noqa: E731 - pipeline stage p has a micro-batch
    forward = [s for s in range(stages) if busy(s)]
    backward = [s for s in range(stages) if busy(2 * (stages - 1) - s)]
    return forward, backward


def cycles(stages: int, micro_batches: int) -> int:
    """Pipeline cycles of a run: M + P - 1 with P = 2S - 1 pipeline stages."""
    return micro_batches + 2 * stages - 2


def _increment_mod(x: np.ndarray, modulus: int) -> np.ndarray:
    return (x + 1) % modulus


# PopART's IncrementModOp (a popops map expression Rem(Add(_1, 1), modulus)); costed [INF] as two
# integer adds (the cost model has no integer remainder).
_INCREMENT_MOD = map_codelet(
    "popops::IncrementMod", _increment_mod, 1, (cost_model.binary("add"), cost_model.binary("add")), True
)


class TrainingPipeline(Pipeline):
    """A run of pipelined training over ``micro_batches``: the stages' cycles (fill, main, drain),
    then ``update`` (see the module docstring). Stage s's tensors must be on IPU s."""

    def __init__(
        self,
        graph: Graph,
        stages: list[TrainingStage],
        micro_batches: int,
        update: Program,
        name: str = "Pipeline",
    ) -> None:
        check_micro_batches(micro_batches)
        if len(stages) < 2:
            raise ValueError(f"pipeline: training needs 2 or more stages, got {len(stages)}")
        m, n = int(micro_batches), len(stages)
        start = Sequence(name="reset stash counters")
        stash, restore = [], []
        for s, st in enumerate(stages):
            put, get = Sequence(name=f"stage {s} stash"), Sequence(name=f"stage {s} restore")
            depth = stash_depth(s, n)
            if depth and st.stash:
                put_at = _counter(graph, st.stash[0], f"stage {s} stash")
                get_at = _counter(graph, st.stash[0], f"stage {s} restore")
                fill(graph, put_at, 0, start)
                fill(graph, get_at, 0, start)
                for t in st.stash:
                    buf = _stash_like(graph, t, depth, f"stage {s} stash of {_name(graph, t)}")
                    st.stash_tensors.append(buf)
                    # undefined until the first stash writes it: live from there, not the program's start
                    # (a DynamicUpdate writes part of it, which alone would not end its liveness)
                    start.add(WriteUndef(buf, name=f"stage {s} stash undefined"))
                    dynamic_update(graph, buf, t, put_at, put)
                    dynamic_slice(graph, buf, get_at, get, out=t)  # restored in place
                apply_map(graph, _INCREMENT_MOD, [put_at], put, "stash index", modulus=depth)
                apply_map(graph, _INCREMENT_MOD, [get_at], get, "restore index", modulus=depth)
                # the restore overwrites the activations before the end-of-cycle copies send them: send a
                # clone taken after the forward (PopART's insertClonesBeforeIpuCopyConsumers)
                sends = []
                for src, dst in st.to_next:
                    clone = _stash_like(graph, src, 1, f"stage {s} {_name(graph, src)} to send").reshape(src.shape)
                    put.add(Copy(src, clone, name=f"stage {s} clone for sending"))
                    sends.append((clone, dst))
                st.to_next = sends
            stash.append(put)
            restore.append(get)
        body = Sequence(start, name="pipelined training")
        filling, draining = Sequence(name="fill"), Sequence(name="drain")
        main: Repeat | None = None
        full = 2 * n - 2  # the first cycle with every pipeline stage busy
        for c in range(cycles(n, m)):
            cycle = _cycle(stages, stash, restore, *cycle_work(c, n, m), name=f"cycle {c}")
            if full <= c < m:  # main phase: identical cycles, one Repeat
                if main is None:
                    main = Repeat(m - full, cycle, name="main")
            else:
                (filling if c < full else draining).add(cycle)
        for p in (filling, main, draining):
            if p is not None:
                body.add(p)
        body.add(Sequence(update, name="weight update"))
        super().__init__(body, 1, name)
        self.micro_batches = m
        self.stages = stages


def _cycle(
    stages: list[TrainingStage],
    stash: list[Sequence],
    restore: list[Sequence],
    fwd: list[int],
    bwd: list[int],
    name: str,
) -> Sequence:
    """One pipeline cycle: on each IPU forward, stash, restore, backward; then the inter-IPU copies."""
    seq = Sequence(name=name)
    for s, st in enumerate(stages):
        if s in fwd:
            seq.add(st.forward)
            seq.add(stash[s])
        if s in bwd:
            seq.add(restore[s])
            seq.add(st.backward)
    for s, st in enumerate(stages):
        if s in fwd:
            for src, dst in st.to_next:
                seq.add(Copy(src, dst, name=f"stage {s} -> {s + 1}"))
        if s in bwd:
            for src, dst in st.to_previous:
                seq.add(Copy(src, dst, name=f"stage {s} -> {s - 1} (gradient)"))
    return seq


def _name(graph: Graph, t: Tensor) -> str:
    return graph.variables[t.variable_ids()[0]].name


def _counter(graph: Graph, like: Tensor, name: str) -> Tensor:
    """A one-element int32 index on the first tile holding ``like`` (the stage's IPU)."""
    t = graph.add_variable(np.int32, [1], f"{name} index")
    graph.set_tile_mapping(t, int(graph.tile_of(like.reshape(-1)[:1])[0]))
    return t


def _stash_like(graph: Graph, t: Tensor, depth: int, name: str) -> Tensor:
    """A [depth, *t.shape] tensor whose every slice is mapped like ``t`` (stash and restore stay on tile)."""
    buf = graph.add_variable(t.dtype, [depth, *t.shape], name)
    graph.set_tile_mapping(buf, np.tile(graph.tile_of(t).astype(np.int64), depth))
    return buf


__all__ = ["TrainingPipeline", "TrainingStage", "cycle_work", "cycles", "stash_depth"]
