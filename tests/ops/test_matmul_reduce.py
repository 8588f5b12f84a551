"""A matmul's partial-sum reduction (ConvReducePlan-like, profiler/ops/matmul_reduce.py): stage
depths as ref §3.5 gives them, and one stage's cycles, exchange and memory worked by hand."""

import numpy as np
import pytest

from profiler import Engine, Graph, Sequence, ipu_model, ops
from profiler.ops.matmul_reduce import reduce_partials, stage_depths
from tests.ops.helpers import check_created_matmul, created_matmul


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


def _partials_on_4_tiles(outputs: int, **target: int) -> tuple[Graph, object, object, Sequence]:
    """4 float partial rows of ``outputs`` outputs, row r on tile r, and the unmapped result."""
    g = Graph(ipu_model(tiles_per_ipu=4, **target))
    partials = g.add_variable("float", [4, outputs], "partials")
    g.set_tile_mapping(partials, np.repeat(np.arange(4), outputs))
    out = g.add_variable("float", [outputs], "out")
    g.create_host_write("p", partials)
    g.create_host_read("out", out)
    return g, partials, out, Sequence()


def test_one_stage_reduction_worked_by_hand() -> None:
    # 4 partial rows of one 8-output block, row r on tile r (block tile 0, step 1): one stage (4 < 16);
    # the block's 8 outputs are cut into 4 chunks of 2, chunk t reduced on tile t (pos * 4 // 8)
    g, partials, out, prog = _partials_on_4_tiles(8)
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
    assert exch.cost.bytes_in.tolist() == [24] * 4
    # each sends its row minus its own chunk, once (multicast): 6 floats = 24 B; as runs: tile 0 sends
    # [2, 8) (1 region), tile 1 [0, 2) and [4, 8) (2), tile 2 [0, 4) and [6, 8) (2), tile 3 [0, 6) (1)
    assert exch.cost.bytes_out.tolist() == [24] * 4
    # code 4 B x (6 + sent + received): 4 x (6 + 1 + 3) = 40, 4 x (6 + 2 + 3) = 44
    assert exch.cost.code_bytes.tolist() == [40, 44, 44, 40]
    # ceil(16 x 24 / 64) + 64 = 70 (no supertile sharing: the two tiles of a pair receive different outputs)
    assert exch.cost.tile_cycles.tolist() == [70] * 4
    # poplin::ReduceAdd of 2 outputs x 4 partials, float: 2 is not a whole accumulator vector (4 floats),
    # so the multi-input vertex (poplin ConvReduce.cpp); getReduceCycleEstimate: loops 0 + 1 (bit 1 of 2),
    # none whole per worker, a part loop 2 x 4 + 13: 6 x (32 + 21) = 318, + 30 compute-set supervisor
    assert compute.cost.tile_cycles.tolist() == [348] * 4
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
    g, e = created_matmul(8, 8, 64, 16)
    (red,) = [s for s in e.compiled.steps if s.name == "matmul/reduce/stage1/Exchange"]
    assert red.cost.bytes_in.tolist() == [192] * 8 and red.cost.bytes_out.tolist() == [192] * 8
    assert red.cost.code_bytes.tolist() == [40, 40, 44, 44, 44, 44, 40, 40]
    assert red.cost.tile_cycles.tolist() == [112] * 8
    # each reducer's 16 outputs are whole accumulator vectors, but its 3 x 64 B of exchanged partials
    # round up to one 16 KiB memory element, not under 1/16 of this 64 KiB tile: PopLibs keeps the
    # multi-input ReduceAdd (ConvReduce.cpp checkPartialsSizeForSingleInputReduce). getReduceCycleEstimate:
    # 4 loops, none a whole round of 6 workers but whole vectors, so 1 a worker:
    # 6 x (32 + 1 x (3 x 4 + 7)) = 306, + 30 compute-set supervisor
    (stage,) = [s for s in e.compiled.steps if s.name == "matmul/reduce/stage1"]
    assert stage.cost.tile_cycles.tolist() == [336] * 8
    assert {name for name, _ in e.compiled.codelets if name.startswith("poplin::ReduceAdd")} == {
        "poplin::ReduceAdd<float32,float32,false,false>"
    }
    check_created_matmul(e, 8, 64, 16, seed=1)


@pytest.mark.parametrize("store_nb", [None, 4])
@pytest.mark.parametrize(
    "G,M,N,gb,mb,nb", [(1, 10, 12, 1, 4, 4), (3, 7, 8, 2, 3, 4), (2, 5, 4, 1, 5, 4), (1, 6, 16, 1, 3, 8)]
)
def test_block_grid_numbers_columns_as_a_loop_over_blocks_does(G, M, N, gb, mb, nb, store_nb) -> None:
    # the reference: each block's (group, row, col) positions row-major, each element written out; in a
    # store of 4-channel groups narrower than the block (nb 8, one conv group a block) its positions run
    # (channel group, row, channel), as the vertices write the partials
    from profiler.ops.matmul import _block_major_order
    from profiler.ops.matmul_reduce import breaks_of

    m0, n0 = np.arange(0, M, mb), np.arange(0, N, nb)
    ml, nl = np.minimum(mb, M - m0), np.minimum(nb, N - n0)
    want = []
    for g_start in range(0, G, gb):
        for r0, rl in zip(m0, ml, strict=True):
            for c0, cl in zip(n0, nl, strict=True):
                for g in range(g_start, min(G, g_start + gb)):
                    by_group = store_nb is not None and gb == 1
                    positions = (
                        [
                            (m, q * 4 + c)
                            for q in range(c0 // 4, (c0 + cl) // 4)
                            for m in range(r0, r0 + rl)
                            for c in range(4)
                        ]
                        if by_group
                        else [(m, n) for m in range(r0, r0 + rl) for n in range(c0, c0 + cl)]
                    )
                    for m, n in positions:
                        store = ((g * (N // 4) + n // 4) * M + m) * 4 + n % 4
                        want.append(((g * M) + m) * N + n if store_nb is None else store)
    sizes = [min(gb, G - g) * rl * cl for g in range(0, G, gb) for rl in ml for cl in nl]
    off = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    grid = _block_major_order(G, M, N, gb, m0, ml, n0, nl, off, store_nb)
    want = np.array(want)
    assert grid[np.arange(want.size)].tolist() == want.tolist()
    assert grid[np.arange(want.size).reshape(-1, 2)].tolist() == want.reshape(-1, 2).tolist()
    assert breaks_of(grid).tolist() == breaks_of(want).tolist() == (np.flatnonzero(np.diff(want) != 1) + 1).tolist()


@pytest.mark.parametrize("grain,want_bounds,want_single", [(8, [0, 8, 16, 20], True), (1, [0, 5, 10, 15, 20], False)])
def test_block_cut_by_positions_in_whole_grains(grain, want_bounds, want_single) -> None:
    """One block of 20 outputs in one row (fewer rows than its 4 reducers), 4 partial rows on tiles
    0-3. PopLibs' splitRegions (poputil/Util.cpp) cuts it in grains: grain 8 -> 3 grains, at most
    ceil(3 / 4) = 1 a reducer, so 3 reducers take [0, 8), [8, 16), [16, 20) and tile 3 none; each
    chunk a whole number of float accumulator vectors (8, 8, 4): single-input ReduceAdd. Grain 1:
    4 chunks of 5, not whole vectors: multi-input. Cycles (getReduceCycleEstimate, depth 4): single
    6 x (20 + 1 x (2 x 3 + 8)) + 33 = 237; multi, 5 outputs: 1 + 1 (bit 0) = 2 loops, a part loop
    2 x 4 + 13: 6 x (32 + 21) = 318; + 30 compute-set supervisor each."""
    from profiler.ops.matmul_reduce import reduce_block_major
    from profiler.ops.poplibs_codelets import CONV_REDUCE

    g, partials, out, prog = _partials_on_4_tiles(20, bytes_per_tile=638976)  # GC200: 16 KiB < 624 KiB / 16

    def final(cs):
        g.add_kernel(cs, CONV_REDUCE, {"in": partials.expand(0), "out": out.expand(0)})

    reduce_block_major(g, partials, out, np.arange(20), np.array([20]), np.array([20]), np.array([0]), 1, prog,
                       "reduce", final, grain)  # fmt: skip
    tiles = g.tile_of(out).tolist()
    chunks = [tiles[a:b] for a, b in zip(want_bounds[:-1], want_bounds[1:], strict=True)]
    assert [set(c) for c in chunks] == [{t} for t in range(len(chunks))]
    (cs,) = [c for c in g.compute_sets if c.batches]
    assert {b.codelet.single_input for b in cs.batches} == {want_single}
    e = Engine(g, [prog], options={"debug.instrument": "false"})
    e.load()
    (step,) = [s for s in e.compiled.steps if s.type == "OnTileExecute"]
    busy = [237 + 30] * 3 + [0] if want_single else [318 + 30] * 4
    assert step.cost.tile_cycles.tolist() == busy
    p = np.arange(80, dtype=np.float32).reshape(4, 20)
    e.write_tensor("p", p)
    e.run(0)
    np.testing.assert_array_equal(e.read_tensor("out"), p.sum(0))
