"""Pipelining: a sharded model's stages (its IPUs, in order) work on different micro-batches at once.

``Pipeline(body, micro_batches)`` repeats ``body`` (one micro-batch through every stage) once per
micro-batch, as a Repeat does, but inside it the IPUs are not held together by external syncs:
each IPU runs its own steps on its own clock, a step costs nothing on IPUs not taking part in it
(a sync or stream copy begin: those of the step after it), and an IPU receiving a global exchange
waits until its senders have reached it: data flows from stage to stage, buffered on arrival
(PopART stashes inter-stage tensors), so a sender never waits for a receiver. So while IPU 1 runs
stage 1 of micro-batch m, IPU 0 already runs stage 0 of micro-batch m + 1: the fill / main / drain
schedule of PopART's pipelining, whose length for S balanced stages of T cycles is (S + M - 1) x T;
the slowest stage (its compute plus its exchanges) sets the pace. The functional results are those
of running the micro-batches one after another (each is computed whole), so they equal the
unpipelined model's.

Micro-batches are PopART's gradient accumulation count in training; here (inference) they are the
batches streamed per run. Training (forward and backward stages, stashed activations, gradient
accumulation) is profiler.multi_ipu.pipeline_training, which schedules its pipeline cycles inside a Pipeline of
one iteration. Recomputation is not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from profiler.poplar.programs import Program, Repeat
from report_format.vocabulary import StepType


@dataclass(eq=False)
class Pipeline(Repeat):
    """``body`` once per micro-batch, stages overlapping across IPUs (see the module docstring)."""

    pipelined: bool = True

    def __init__(self, body: Program, micro_batches: int, name: str = "Pipeline") -> None:
        check_micro_batches(micro_batches)
        super().__init__(int(micro_batches), body, name)
        self.pipelined = True
        #: micro-batches per run (what the report's pipeline_stages says); the Repeat count here
        self.micro_batches = int(micro_batches)


def check_micro_batches(micro_batches: object) -> None:
    """One line unless ``micro_batches`` is an integer >= 1."""
    if not isinstance(micro_batches, (int, np.integer)) or micro_batches < 1:
        raise ValueError(f"pipeline: micro-batches must be an integer >= 1, got {micro_batches!r}")


def participants(step_types: list[str], step_ipu_cycles: np.ndarray) -> np.ndarray:
    """Per step, the IPUs a pipelined step holds back (bool, steps x IPUs): those busy in the step
    itself, and for a Sync or StreamCopyBegin those busy in the step after it (what it synchronises)."""
    busy = step_ipu_cycles > 0
    out = busy.copy()
    follows = np.array([t in (StepType.SYNC, StepType.STREAM_COPY_BEGIN) for t in step_types], dtype=bool)
    follows[-1:] = False  # a last step has nothing after it
    idx = np.flatnonzero(follows)
    out[idx] = busy[idx + 1]
    return out


def schedule_length(stage_cycles: list[int] | np.ndarray, micro_batches: int) -> int:
    """Cycles of a pipeline with no exchange cost: stage s of micro-batch m starts when stage s is
    done with m - 1 and stage s - 1 is done with m. Balanced stages of T: (S + M - 1) x T."""
    t = np.asarray(stage_cycles, dtype=np.int64)
    done = np.zeros(t.size, dtype=np.int64)  # finish time of each stage's latest micro-batch
    for _ in range(micro_batches):  # S x M is tiny (stages x micro-batches), not tiles x steps
        prev = 0
        for s in range(t.size):
            prev = done[s] = max(done[s], prev) + t[s]
    return int(done[-1]) if t.size else 0


def senders_receivers(steps: list[Any], target: Any) -> tuple[np.ndarray, np.ndarray]:
    """Per step (bool, steps x IPUs): IPUs sending and IPUs receiving in a GlobalExchange step."""
    n, ni, tpi = len(steps), target.num_ipus, target.tiles_per_ipu
    send, recv = np.zeros((n, ni), dtype=bool), np.zeros((n, ni), dtype=bool)
    for i, st in enumerate(steps):
        cost = st.cost
        if st.type == StepType.GLOBAL_EXCHANGE and cost.bytes_in is not None and cost.bytes_out is not None:
            send[i] = cost.bytes_out.reshape(ni, tpi).sum(axis=1) > 0
            recv[i] = cost.bytes_in.reshape(ni, tpi).sum(axis=1) > 0
    return send, recv
