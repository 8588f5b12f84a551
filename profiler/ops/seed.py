"""The runtime's seed setting: what a framework runs on every tile before the model (poprand::setSeed).

TensorFlow sets the hardware random seed on every tile of every program it compiles, even one that
draws no random numbers: the 2019 TensorFlow report of an adder (graphcore/tensorflow
``docs/logging.rst``, "Reading the Poplar textual summary report") holds 1,219 vertices on its
1,216 tiles, ``poprand::SetSeedSupervisor`` among them, for one add and one scaled add. PopART
(PopTorch) streams the seed from the host in its ``randomSeed___fromHost`` operation. Both are a
runtime program: a host stream copy of the two-word master seed onto one tile, then a compute set
with one ``poprand::SetSeed`` vertex on every tile reading it (poprand ``setSeed``:
lib/poprand/RandomGen.cpp), so the seed is exchanged to every tile.
"""

from __future__ import annotations

from profiler.ops.core import execute, op
from profiler.ops.poplibs_codelets import SetSeed
from profiler.poplar.graph import Graph
from profiler.poplar.programs import Copy, Sequence
from profiler.poplar.tensor import Tensor

#: The host stream the framework writes the master seed to (PopART's tensor name).
SEED_STREAM = "randomSeed___fromHost"


@op("SetSeed")
def set_seed(graph: Graph, seed: Tensor, prog: Sequence) -> None:
    """poprand::setSeed: a compute set of one SetSeed vertex on every tile, each reading the two-word
    master ``seed`` (wherever it is mapped: the exchange brings it to every tile)."""
    if seed.shape != (2,):
        raise ValueError(f"set_seed: the master seed is 2 words, got shape {seed.shape}")
    tiles = graph.target.num_tiles
    cs = execute(graph, prog, "setMasterSeed")
    graph.add_vertices(cs, SetSeed(), {"seed": seed.reshape(1, 2).broadcast_to((tiles, 2))}, range(tiles))


@op("RandomSeedFromHost")
def set_seed_from_host(graph: Graph, prog: Sequence) -> Tensor:
    """The framework's seed program: stream the master seed from the host onto tile 0, then
    ``set_seed`` on every tile. Returns the seed tensor."""
    seed = graph.add_variable("uint32", [2], SEED_STREAM)
    graph.set_tile_mapping(seed, 0)
    prog.add(Copy(graph.add_host_to_device_fifo(SEED_STREAM, "uint32", [2]), seed, name=SEED_STREAM))
    set_seed(graph, seed, prog)
    return seed
