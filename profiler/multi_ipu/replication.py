"""Replication (data parallelism): R copies of one graph on disjoint IPUs, each fed its own part of
the inputs, and the cross-replica all-reduce that training uses to sum or average gradients.

The graph is one replica's (``Graph(target, replication_factor=R)``); the engine keeps one copy of
every variable per replica and runs the replicas in lockstep, step by step (all replicas run the
same program, so their cycles are the same: the profile is one replica's, chosen by the engine
option ``profiler.replicaToProfile``). Host buffers of R x the stream's elements give each replica
its slice (inputs split across replicas, replica r gets rows r/R..(r+1)/R).

``AllReduce(tensor, op)`` is a program: a ring all-reduce over IPU-Links. Each replica sends
2(R-1)/R of the tensor's bytes (profiler.chip.ipu_links.ring_all_reduce_bytes): each tile holding part of
the tensor sends and receives that share of its own bytes, and the step lasts the ring's 2(R-1)
link transfers and external syncs (ring_all_reduce_cycles).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from profiler.chip.ipu_links import ring_all_reduce_cycles
from profiler.executable.access import Access
from profiler.poplar.graph import Graph
from profiler.poplar.programs import Program
from profiler.poplar.tensor import Tensor

if TYPE_CHECKING:
    from profiler.compiler.compile import Compiler, ControlNode

#: Reductions an all-reduce can apply across replicas.
OPS = ("add", "mean")


@dataclass(eq=False)
class AllReduce(Program):
    """Replace ``tensor`` on every replica with the sum (``op="add"``) or mean over replicas
    (Poplar gcl::allReduceInPlaceCrossReplica)."""

    tensor: Tensor
    op: str = "mean"
    name: str = ""

    def __post_init__(self) -> None:
        if self.op not in OPS:
            raise ValueError(f"AllReduce {self.name!r}: op must be one of {OPS}, got {self.op!r}")
        # The ring's receive buffer: each tile receives 1/R of its part of the tensor per ring step,
        # so it holds ceil(elements on the tile / R) more elements while the all-reduce runs (its
        # memory shows in the report as a variable live at the all-reduce step only).
        g = self.tensor.graph
        assert isinstance(g, Graph)  # a tensor's variables are a Graph's (tensor.py types it structurally)
        tiles = g.tile_of(self.tensor).astype(np.int64)
        held, count = np.unique(tiles, return_counts=True)
        chunk = -(-count // max(g.replication_factor, 1))
        self.buffer = g.add_variable(self.tensor.dtype, [int(chunk.sum())], f"{self.name or 'AllReduce'}/ring buffer")
        g.set_tile_mapping(self.buffer, np.repeat(held, chunk))

    def lower(self, compiler: Compiler, parent: ControlNode) -> None:
        """Steps of the all-reduce: an external sync, then the ring as one GlobalExchange step."""
        g, t = compiler.graph, compiler.target
        replicas = g.replication_factor
        tiles = g.tile_of(self.tensor).astype(np.int64)
        per_tile = np.bincount(tiles, minlength=t.num_tiles).astype(np.int64) * self.tensor.dtype.itemsize
        share = np.ceil(per_tile * 2 * (replicas - 1) / replicas).astype(np.int64)
        ipu_bytes = per_tile.reshape(t.num_ipus, t.tiles_per_ipu).sum(axis=1)
        cycles = np.zeros(t.num_tiles, dtype=np.int64)
        for ipu, nbytes in enumerate(ipu_bytes.tolist()):  # one ring per IPU of the replica
            sl = slice(ipu * t.tiles_per_ipu, (ipu + 1) * t.tiles_per_ipu)
            cycles[sl] = np.where(per_tile[sl] > 0, ring_all_reduce_cycles(int(nbytes), replicas, t), 0)
        name = self.name or f"AllReduce/{self.op}"
        action = AllReduceAction(Access(self.tensor), self.op)
        compiler.add_cross_replica_step(parent, name, cycles, share, action, self.tensor, self.buffer)


@dataclass(frozen=True, eq=False)
class AllReduceAction:
    """What the engine does: reduce ``dst`` over the replicas' states and write it back to each."""

    dst: Access
    op: str

    def run(self, states: list[list[np.ndarray]]) -> None:
        values = [self.dst.gather(s) for s in states]
        total = np.sum(np.stack(values), axis=0, dtype=values[0].dtype)
        if self.op == "mean":
            total = (total / len(states)).astype(values[0].dtype)
        for s in states:
            self.dst.scatter(s, total)


def split_rows(data: np.ndarray, replicas: int) -> list[np.ndarray]:
    """``data`` split along its first dimension into ``replicas`` equal parts (inputs per replica)."""
    if data.shape[0] % replicas:
        raise ValueError(f"replication: {data.shape[0]} rows do not split into {replicas} equal replicas")
    return np.split(data, replicas)


def replica_batch(batch: int, replicas: int) -> int:
    """Samples each replica takes of a global batch (one line if it does not split evenly)."""
    if replicas < 1 or batch % replicas:
        raise ValueError(f"--replicas {replicas}: the batch of {batch} does not split evenly over the replicas")
    return batch // replicas


__all__ = ["AllReduce", "AllReduceAction", "replica_batch", "split_rows"]
