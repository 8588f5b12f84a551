"""The runtime's seed setting (ops.set_seed_from_host): a stream copy of the master seed onto tile 0
and a poprand::SetSeed vertex on every tile, each tile holding the measured operation's code and
state (graphcore/popliner tests/test_profile.py: 276,840 B and 53,016 B on 1,472 tiles)."""

from __future__ import annotations

import numpy as np
import pytest

from profiler import Engine, Graph, Sequence, ipu_model, ops
from profiler.ops.poplibs_codelets import SetSeed
from profiler.ops.seed import SEED_STREAM
from report_format.vocabulary import StepType


def _seeded(tiles: int) -> Engine:
    g = Graph(ipu_model(tiles_per_ipu=tiles))
    prog = Sequence()
    seed = ops.set_seed_from_host(g, prog)
    assert seed.shape == (2,) and set(g.tile_of(seed).tolist()) == {0}
    e = Engine(g, [prog], options={"debug.instrument": "false"})
    e.compile()
    e.load()
    e.connect_stream(SEED_STREAM, np.array([7, 9], dtype=np.uint32))
    e.run(0)
    return e


def _per_tile(e: Engine, category: str) -> list[int]:
    bc = e.memory.by_category
    sel = bc["category"] == category
    return (
        np.bincount(bc["tile"][sel], weights=bc["bytes"][sel], minlength=e.compiled.target.num_tiles)
        .astype(int)
        .tolist()
    )


def test_every_tile_holds_one_seed_vertex_of_the_measured_operations_size():
    e = _seeded(4)
    # 276,840 // 1,472 = 188 B of code and 53,016 // 1,472 = 36 B of state on each tile
    assert _per_tile(e, "vertexCode") == [188] * 4
    assert _per_tile(e, "vertexInstanceState") == [36] * 4
    # the seed's two words (8 B) reach the three tiles that do not hold it by internal exchange
    exchange = next(s for s in e.compiled.steps if s.type == StepType.DO_EXCHANGE)
    assert exchange.cost.bytes_in.tolist() == [0, 8, 8, 8]
    # and it arrives from the host onto tile 0 only
    assert _per_tile(e, "hostExchangeCode")[1:] == [0, 0, 0] and _per_tile(e, "hostExchangeCode")[0] > 0


def test_seed_vertex_cycles_are_poprands_estimate():
    # poprandCycleEstimators.cpp SetSeed: 14 + 27 x worker contexts = 14 + 27 x 6 = 176
    t = ipu_model()
    assert SetSeed().estimate({"seed": (2,)}, {"seed": np.dtype("uint32")}, {}, t) == (176, 0)


def test_a_seed_must_be_two_words():
    g = Graph(ipu_model())
    bad = g.add_variable("uint32", [3], "seed")
    g.set_tile_mapping(bad, 0)
    with pytest.raises(ValueError, match="2 words"):
        ops.set_seed(g, bad, Sequence())
