"""Per-tile figures held over the tiles they touch (profiler.compiler.tile_span), by hand."""

import numpy as np
import pytest

from profiler import Engine, Graph, Sequence, ipu_model, ops
from profiler.compiler.tile_span import TileSpan, held_rows, per_ipu_table


def test_a_span_keeps_first_to_last_nonzero_tile_and_gives_the_dense_array_back():
    dense = np.array([0, 0, 5, 0, 7, 0, 0, 0], dtype=np.int64)
    s = TileSpan.of(dense)
    assert (s.lo, s.hi, s.values.tolist(), s.n) == (2, 5, [5, 0, 7], 8)
    np.testing.assert_array_equal(s.dense(), dense)
    s.dense()[2] = 99  # a copy: the span is never written through it
    assert s.values[0] == 5
    empty = TileSpan.of(np.zeros(8, np.int64))
    assert empty.values.size == 0 and empty.dense().tolist() == [0] * 8


def test_per_ipu_reductions_equal_the_dense_reshape():
    rng = np.random.default_rng(0)
    for _ in range(20):
        dense = np.where(rng.random(12) < 0.4, rng.integers(1, 50, 12), 0).astype(np.int64)
        s = TileSpan.of(dense)
        by_ipu = dense.reshape(3, 4)
        assert s.per_ipu(4, "max").tolist() == by_ipu.max(axis=1).tolist()
        assert s.per_ipu(4, "sum").tolist() == by_ipu.sum(axis=1).tolist()
        assert s.per_ipu(4, "count").tolist() == (by_ipu > 0).sum(axis=1).tolist()
    table = per_ipu_table([TileSpan.of(np.array([0, 0, 3, 4, 0, 9])), None], 3, 2, "sum")
    assert table.tolist() == [[3, 13], [0, 0]]
    with pytest.raises(ValueError, match="reduce"):
        TileSpan.of(np.ones(4, np.int64)).per_ipu(2, "mean")


def test_held_rows_lay_each_step_out_per_ipu_and_zero_the_ipus_it_does_not_hold():
    spans = [TileSpan.of(np.array([1, 2, 3, 4])), TileSpan.of(np.array([0, 0, 0, 8])), None]
    rows = np.array([0, 1, 0, 2])
    held = np.array([[True, True], [True, True], [False, True], [True, True]])
    out = held_rows(spans, rows, held, tiles_per_ipu=2)
    assert out.dtype == np.int32
    assert out.tolist() == [[1, 2], [3, 4], [0, 0], [0, 8], [0, 0], [3, 4], [0, 0], [0, 0]]


def test_a_step_on_one_ipu_of_four_holds_only_that_ipus_tiles():
    # host memory follows the tiles a step touches: an op on IPU 3 keeps 4 tiles' figures, not 16
    g = Graph(ipu_model(tiles_per_ipu=4, num_ipus=4))
    prog = Sequence()
    with g.virtual_graph(3):
        x = g.add_variable("float", [16], "x")
        g.map_linearly(x)
        ops.unary(g, "exp", x, prog)
    e = Engine(g, [prog])
    e.load()
    compute = [s for s in e.compiled.steps if s.type == "OnTileExecute"]
    assert compute
    for st in compute:
        span = st.cost.span("tile_cycles")
        assert span is not None and span.lo >= 12 and span.values.size <= 4
        assert st.cost.tile_cycles.shape == (16,) and st.cost.tile_cycles[:12].sum() == 0
