"""A matmul's partial-sum reduction (ConvReducePlan-like, profiler/ops/matmul_reduce.py): stage
depths as ref §3.5 gives them, and one stage's cycles, exchange and memory worked by hand."""

import numpy as np
import pytest

from profiler import Engine, Graph, Sequence, ipu_model, ops
from profiler.ops.matmul_reduce import reduce_partials, stage_depths


@pytest.mark.parametrize(
    "depth,want",
    [
        (1, [1]),
        (15, [15]),  # < 16: one stage
        (16, [4, 4]),  # 16 <= depth < 125: two stages of ceil(sqrt(16)) = 4, then ceil(16 / 4) = 4
        (22, [5, 5]),  # ceil(sqrt(22)) = 5, then ceil(22 / 5) = 5 groups
        (92, [10, 10]),
        (124, [12, 11]),  # ceil(sqrt(124)) = 12, then ceil(124 / 12) = 11
        (125, [5, 5, 5]),  # >= 125: three stages, ceil(125^(1/3)) = 5, then ceil(sqrt(25)) = 5, then 5
    ],
)
def test_stage_depths_follow_conv_reduce_plan(depth: int, want: list[int]) -> None:
    assert stage_depths(depth) == want


def test_one_stage_reduction_worked_by_hand() -> None:
    # 4 partial rows of one 8-output block, row r on tile r (block tile 0, step 1): one stage (4 < 16);
    # the block's 8 outputs are cut into 4 chunks of 2, chunk t reduced on tile t (pos * 4 // 8)
    g = Graph(ipu_model(tiles_per_ipu=4))
    partials = g.add_variable("float", [4, 8], "partials")
    g.set_tile_mapping(partials, np.repeat(np.arange(4), 8))
    out = g.add_variable("float", [8], "out")
    g.create_host_write("p", partials)
    g.create_host_read("out", out)
    prog = Sequence()
    tiles = reduce_partials(g, partials, out, np.zeros(8, np.int64), np.arange(8), np.array([8]), np.array([0]), 1,
                            prog, "reduce")  # fmt: skip
    assert tiles.tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    e = Engine(g, [prog], options={"debug.instrument": "false"})
    e.load()
    e.write_tensor("p", np.arange(32, dtype=np.float32).reshape(4, 8))
    e.run(0)
    np.testing.assert_array_equal(e.read_tensor("out"), np.arange(32, dtype=np.float32).reshape(4, 8).sum(0))
    sync, exch, compute = e.compiled.steps
    # each tile receives its 2 outputs from the 3 other rows: 3 regions of 8 B = 24 B
    assert exch.bytes_in.tolist() == [24] * 4
    # each sends its row minus its own chunk, once (multicast): 6 floats = 24 B; as runs: tile 0 sends
    # [2, 8) (1 region), tile 1 [0, 2) and [4, 8) (2), tile 2 [0, 4) and [6, 8) (2), tile 3 [0, 6) (1)
    assert exch.bytes_out.tolist() == [24] * 4
    # code 4 B x (6 + sent + received): 4 x (6 + 1 + 3) = 40, 4 x (6 + 2 + 3) = 44
    assert exch.code_bytes.tolist() == [40, 44, 44, 40]
    # ceil(16 x 24 / 64) + 64 = 70 (no supertile sharing: the two tiles of a pair receive different outputs)
    assert exch.tile_cycles.tolist() == [70] * 4
    # poplin::ReduceAdd of 2 outputs x 4 partials, float: accW 4, cyclesPerLoop 4 / min(4, 2) + 1 = 3,
    # loops ceil(ceil(2 / 4) / 6) = 1: 6 x (32 + 1 x (3 x 4 + 9)) = 318, + 30 compute-set supervisor
    assert compute.tile_cycles.tolist() == [348] * 4
    # vertex state: partials and out as compact pointers (2 x 2 B), numPartials and numElems (2 x 2 B)
    # = 8 B on each tile; the partials' 4 inner pointers out of line, 4 x 4 B = 16 B of vertexFieldData
    bc = e.memory.by_category
    state = bc["bytes"][(bc["category"] == "vertexInstanceState")]
    assert state.tolist() == [8] * 4
    field_data = bc["bytes"][(bc["category"] == "vertexFieldData")]
    assert field_data.tolist() == [16] * 4


def test_block_major_partials_reach_each_reducer_as_one_region_per_tile() -> None:
    """x[8, 64] @ w[64, 16] fp32 on an 8-tile IPU-Model: in split 4, out split 2 (block 8 x 16 x 8; tile
    = 2 x in block + out block). PopLibs creates a split conv's partials per tile (Convolution.cpp
    getCreatePartialsLevel), so tile (k, n)'s 8 x 8 partial block is one contiguous buffer (here:
    block-major columns). Depth 4 < 16: one stage; each block's 8 rows go 2 per reducer (tiles n, n + 2,
    n + 4, n + 6), so a reducer takes 2 rows = 16 consecutive partials (64 B) from each of the other 3
    tiles: 3 regions, 192 B (with row-major partials each 2-row chunk was 2 runs of 8: 6 regions).
    A tile sends its 3 other chunks; with in block 0 or 3 they are consecutive (1 region), with 1 or 2
    split around its own chunk (2 regions): code 4 x (6 + 3 + 1) = 40 or 4 x (6 + 3 + 2) = 44 B;
    cycles ceil(16 x 192 / 64) + 64 = 112 (the two tiles of a supertile reduce different blocks)."""
    t = ipu_model(tiles_per_ipu=8)
    plan = ops.plan_matmul(t, 1, 8, 64, 16, "float32", "float32")
    assert (plan.row_split, plan.in_chan_split, plan.out_chan_split, plan.block) == (1, 4, 2, (1, 8, 16, 8))
    assert not plan.swap_operands
    g = Graph(t)
    x = ops.create_matmul_lhs(g, "float32", (8, 64), (64, 16), "x")
    w = ops.create_matmul_rhs(g, "float32", (8, 64), (64, 16), "w")
    g.create_host_write("x", x)
    g.create_host_write("w", w)
    prog = Sequence()
    g.create_host_read("y", ops.matmul(g, x, w, prog))
    e = Engine(g, prog, {"debug.instrument": "false"})
    e.compile()
    (red,) = [s for s in e.compiled.steps if s.name == "matmul/reduce/stage1/Exchange"]
    assert red.bytes_in.tolist() == [192] * 8 and red.bytes_out.tolist() == [192] * 8
    assert red.code_bytes.tolist() == [40, 40, 44, 44, 44, 44, 40, 40]
    assert red.tile_cycles.tolist() == [112] * 8
    rng = np.random.default_rng(1)
    xv, wv = rng.standard_normal((8, 64), dtype=np.float32), rng.standard_normal((64, 16), dtype=np.float32)
    e.load()
    e.write_tensor("x", xv)
    e.write_tensor("w", wv)
    e.run(0)
    np.testing.assert_allclose(e.read_tensor("y"), xv @ wv, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("store_nb", [None, 4])
@pytest.mark.parametrize("G,M,N,gb,mb,nb", [(1, 10, 12, 1, 4, 4), (3, 7, 8, 2, 3, 4), (2, 5, 4, 1, 5, 4)])
def test_block_grid_numbers_columns_as_a_loop_over_blocks_does(G, M, N, gb, mb, nb, store_nb) -> None:
    # the reference: each block's (group, row, col) positions row-major, each element written out
    from profiler.ops.matmul import _block_major_order
    from profiler.ops.matmul_reduce import breaks_of

    m0, n0 = np.arange(0, M, mb), np.arange(0, N, nb)
    ml, nl = np.minimum(mb, M - m0), np.minimum(nb, N - n0)
    want = []
    for g_start in range(0, G, gb):
        for r0, rl in zip(m0, ml, strict=True):
            for c0, cl in zip(n0, nl, strict=True):
                for g in range(g_start, min(G, g_start + gb)):
                    for m in range(r0, r0 + rl):
                        for n in range(c0, c0 + cl):
                            store = ((g * (N // 4) + n // 4) * M + m) * 4 + n % 4
                            want.append(((g * M) + m) * N + n if store_nb is None else store)
    sizes = [min(gb, G - g) * rl * cl for g in range(0, G, gb) for rl in ml for cl in nl]
    off = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    grid = _block_major_order(G, M, N, gb, m0, ml, n0, nl, off, store_nb)
    want = np.array(want)
    assert grid[np.arange(want.size)].tolist() == want.tolist()
    assert grid[np.arange(want.size).reshape(-1, 2)].tolist() == want.reshape(-1, 2).tolist()
    assert breaks_of(grid).tolist() == breaks_of(want).tolist() == (np.flatnonzero(np.diff(want) != 1) + 1).tolist()
