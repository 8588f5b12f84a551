import json

import numpy as np
import pytest

from profiler import ops
from tests.ops.helpers import fd_grad, rng, run, tol


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize(
    "shape,axes",
    [
        ((7, 40, 3), 1),
        ((7, 40, 3), (0, 2)),
        ((7, 40, 3), None),
        ((1, 5), 0),
        ((5, 1), 1),
        ((13,), 0),
        ((3, 4, 5, 2), (1, 3)),
    ],
)
@pytest.mark.parametrize("op_name", ["add", "max", "min", "mean"])
def test_reduce_matches_numpy(op_name, shape, axes, dtype):
    x = rng(10).standard_normal(shape).astype(dtype)
    fn = {"add": ops.reduce_sum, "max": ops.reduce_max, "mean": ops.reduce_mean}.get(op_name)

    def build(g, t, p):
        if fn is None:
            return {"y": ops.reduce(g, t["x"], axes, p, op_name="min")}
        return {"y": fn(g, t["x"], axes, p)}

    out, _, _ = run({"x": x}, build, tiles=7)
    npfn = {"add": np.sum, "max": np.max, "min": np.min, "mean": np.mean}[op_name]
    ref = npfn(x.astype(np.float64), axis=axes)
    np.testing.assert_allclose(out["y"], ref, rtol=tol(dtype), atol=tol(dtype) * 4)


def test_keepdims_and_scale():
    x = rng(11).standard_normal((4, 6)).astype(np.float32)
    out, _, _ = run({"x": x}, lambda g, t, p: {"y": ops.reduce(g, t["x"], 1, p, scale=0.5, keepdims=True)})
    assert out["y"].shape == (4, 1)
    np.testing.assert_allclose(out["y"], 0.5 * x.sum(1, keepdims=True), rtol=1e-5)


def test_deep_reductions_use_more_stages():
    """An output whose inputs sit on >= 16 tiles is reduced through an intermediate stage (ref §3.5)."""
    x = rng(12).standard_normal((2, 640)).astype(np.float32)
    out, g, e = run({"x": x}, lambda g, t, p: {"y": ops.reduce_sum(g, t["x"], 1, p, debug_name="deep")}, tiles=64)
    np.testing.assert_allclose(out["y"], x.sum(1), rtol=1e-5)
    attrs = json.loads(next(c for c in g.debug_contexts if c.name == "deep").attributes)
    assert attrs["stages"] == 3 and attrs["max_partials_per_output"] >= 16
    shallow = rng(13).standard_normal((2, 40)).astype(np.float32)
    _, g2, _ = run({"x": shallow}, lambda g, t, p: {"y": ops.reduce_sum(g, t["x"], 1, p, debug_name="s")}, tiles=4)
    assert json.loads(next(c for c in g2.debug_contexts if c.name == "s").attributes)["stages"] == 2


def test_partials_are_exchanged_between_stages():
    x = rng(14).standard_normal((1, 64)).astype(np.float32)
    _, g, e = run({"x": x}, lambda g, t, p: {"y": ops.reduce_sum(g, t["x"], 1, p)}, tiles=8)
    types = [lf.type for lf in e.compiled.steps]
    assert types.count("OnTileExecute") == 2 and "DoExchange" in types


@pytest.mark.parametrize("shape,axes,mean", [((4, 5), 1, False), ((3, 1, 4), (0, 2), True), ((6,), None, True)])
def test_reduce_gradient_by_finite_differences(shape, axes, mean):
    x = rng(15).standard_normal(shape).astype(np.float32)

    def ref(v):
        return v.mean(axis=axes) if mean else v.sum(axis=axes)

    dy = np.asarray(rng(16).standard_normal(np.shape(ref(x))), dtype=np.float32)
    scale = dy.size / x.size if mean else 1.0

    def build(g, t, p):
        return {"dx": ops.reduce_sum_grad(g, t["dy"], shape, axes, p, scale=scale)}

    out, _, _ = run({"x": x, "dy": dy}, build)
    np.testing.assert_allclose(out["dx"], fd_grad(ref, x, dy.astype(np.float64)), rtol=1e-5, atol=1e-6)


def test_broadcast_matches_numpy():
    x = rng(17).standard_normal((3, 1)).astype(np.float16)
    out, _, _ = run({"x": x}, lambda g, t, p: {"y": ops.broadcast(g, t["x"], (2, 3, 5), p)})
    np.testing.assert_array_equal(out["y"], np.broadcast_to(x, (2, 3, 5)))


@pytest.mark.parametrize("presorted", [True, False])
def test_unique_inverse_is_numpys_without_its_sort(presorted):
    # reduce_groups' (group, tile) keys: sorted when a reduction runs over trailing axes of a linear
    # mapping, else long ascending runs; either way the same as np.unique(return_inverse=True)
    from profiler.ops.reduce import _unique_inverse

    key = np.random.default_rng(5).integers(0, 50, 1000)
    key = np.sort(key) if presorted else key
    want, got = np.unique(key, return_inverse=True), _unique_inverse(key)
    assert np.array_equal(want[0], got[0]) and np.array_equal(want[1], got[1])


def _mapped(g, shape, tiles):  # type: ignore[no-untyped-def]
    t = g.add_variable(np.float16, shape, "x")
    g.set_tile_mapping(t, np.asarray(tiles))
    return t


# (shape, tile of each element (None: linear over the tiles), tiles); every case reduces the last axis
CONSECUTIVE_CASES = {
    "ragged runs (padded rows)": ((6, 40), None, 7),
    "equal runs": ((8, 64), None, 16),
    "one tile per group (one stage)": ((4, 8), None, 4),
    "deep (three stages)": ((2, 640), None, 64),
    "a group leaves a tile and comes back": ((4, 6), np.tile([0, 0, 1, 1, 0, 0], 4), 4),
    "tiles falling within a group": ((3, 8), np.repeat([3, 2, 1, 0], 6), 4),
}


@pytest.mark.parametrize("case", sorted(CONSECUTIVE_CASES))
@pytest.mark.parametrize("op_name", ["add", "max"])
def test_reduce_consecutive_builds_what_reduce_groups_builds(case, op_name):
    # reduce_groups with a member per element and group = member // size is the reference: the
    # same variables, mappings, vertices (fields' layouts and elements) and kernels
    from profiler import Graph, Sequence, ipu_model
    from profiler.ops.core import linear_tiles
    from profiler.ops.reduce import reduce_consecutive, reduce_groups
    from tests.ops.helpers import graph_snapshot

    shape, tiles, nt = CONSECUTIVE_CASES[case]
    n, size = int(np.prod(shape)), shape[-1]
    tiles = linear_tiles(n, nt) if tiles is None else tiles
    snaps = []
    for fast in (True, False):
        g = Graph(ipu_model(tiles_per_ipu=nt))
        x, prog = _mapped(g, shape, tiles), Sequence()
        out = ops.add_mapped(g, np.float16, shape[:-1], "out")
        if fast:
            plan = reduce_consecutive(g, x, size, out, op_name, prog, scale=0.5)
        else:
            member, group = np.arange(n), np.arange(n) // size
            plan = reduce_groups(g, x, member, group, out, op_name, prog, scale=0.5)
        snaps.append((plan, graph_snapshot(g)))
    assert snaps[0] == snaps[1]


@pytest.mark.parametrize(
    "case",
    ["equal runs", "ragged runs (padded rows)", "tiles falling within a group", "a group leaves a tile and comes back"],
)
def test_consecutive_groups_are_planned_by_runs(case):
    # a group that leaves a tile and comes back is a pair of several runs (it was planned per element)
    from profiler import Graph, ipu_model
    from profiler.ops.core import linear_tiles
    from profiler.ops.reduce import _RunPairs

    shape, tiles, nt = CONSECUTIVE_CASES[case]
    g = Graph(ipu_model(tiles_per_ipu=nt))
    x = _mapped(g, shape, linear_tiles(int(np.prod(shape)), nt) if tiles is None else tiles)
    pairs = _RunPairs.find(g, x, shape[-1])
    assert pairs is not None and (pairs.ranges is not None) is (case == "a group leaves a tile and comes back")
    assert _RunPairs.find(g, x.transpose(1, 0), shape[0]) is None  # flattened, not an affine view


def _elements_only(snapshot: list) -> list:
    """A graph snapshot with each field's (kind, shape, dtype, vars, elements) less its kind."""

    def strip(batches):  # type: ignore[no-untyped-def]
        return None if batches is None else [b[:3] + ({k: f[1:] for k, f in b[3].items()},) for b in batches]

    return [x if len(x) != 3 or not isinstance(x[1], list) else (x[0], strip(x[1]), strip(x[2])) for x in snapshot]


def _column_chunks(g, rows: int, chunk: int, runs: list[int]):  # type: ignore[no-untyped-def]
    """Attention scores [rows, 2 * chunk] computed in two column chunks, the store [2, rows, chunk]
    (a serial matmul's result), each chunk's rows mapped over tiles 0, 1, ... in ``runs`` elements:
    row r's members on a tile are two runs, one per chunk."""
    store = g.add_variable(np.float16, (2, rows, chunk), "scores")
    g.set_tile_mapping(store, np.tile(np.repeat(np.arange(len(runs)), runs), 2 * rows))
    return store.transpose(1, 0, 2).group_dims(1, 2)


@pytest.mark.parametrize(("runs", "op_name"), [([13, 13, 14], "max"), ([16, 16, 8], "add")], ids=["padded", "exact"])
def test_scores_in_column_chunks_are_planned_by_runs_as_per_element(runs, op_name):
    """Each row's members on a tile are two runs of the store (26 or 28 members: 26 padded to 28;
    32 and 16 exactly): planned by runs, the pairs' fields runs of the store, into the same variables,
    mappings, vertices and kernel elements as the per-element reference (an index per score before:
    S^2 at a decoder's prefill, 1 GiB at S = 2,048)."""
    from profiler import Graph, Sequence, ipu_model
    from profiler.ops.reduce import _RunPairs, reduce_consecutive, reduce_groups
    from profiler.poplar.layout import VarRuns
    from tests.ops.helpers import graph_snapshot

    rows, chunk = 12, sum(runs)
    snaps = []
    for fast in (True, False):
        g = Graph(ipu_model(tiles_per_ipu=4))
        x, prog = _column_chunks(g, rows, chunk, runs), Sequence()
        pairs = _RunPairs.find(g, x, 2 * chunk)
        assert pairs is not None and pairs.ranges is not None and pairs.count.tolist() == [2 * n for n in runs] * rows
        out = ops.add_mapped(g, np.float16, (rows,), "out")
        if fast:
            plan = reduce_consecutive(g, x, 2 * chunk, out, op_name, prog, scale=0.5)
            stage1 = g.compute_sets[0].batches
            assert all(isinstance(b.fields["in"]._lay, VarRuns) for b in stage1)  # runs, not an index each
        else:
            n = rows * 2 * chunk
            plan = reduce_groups(g, x, np.arange(n), np.arange(n) // (2 * chunk), out, op_name, prog, scale=0.5)
        snaps.append((plan, _elements_only(graph_snapshot(g))))
    assert snaps[0] == snaps[1]
    assert snaps[0][0]["stages"] == 2  # each row's 3 partials (one per tile) reduced on its output's tile


@pytest.mark.parametrize("op_name", ["add", "max"])
def test_scores_in_column_chunks_reduce_as_numpy(op_name):
    from profiler import Copy

    x = rng(21).standard_normal((12, 80)).astype(np.float32)

    def build(g, t, p):  # type: ignore[no-untyped-def]
        scores = _column_chunks(g, 12, 40, [13, 13, 14])
        p.add(Copy(t["x"], scores))
        return {"y": ops.reduce(g, scores, 1, p, op_name=op_name)}

    out, _, _ = run({"x": x.astype(np.float16)}, build)
    want = x.astype(np.float16).astype(np.float32)
    want = want.sum(axis=1) if op_name == "add" else want.max(axis=1)
    np.testing.assert_allclose(out["y"].astype(np.float32), want, rtol=2e-2, atol=2e-2)


def test_a_channel_grouped_view_is_planned_by_runs_as_per_element():
    """A layer norm's input held in a matmul result's channel groups: the store [3, 4, 2] (in-chan
    groups of 2, 4 rows) seen as x[4, 6], group a of rows 0-1 on tile a and of rows 2-3 on tile 3 + a,
    so each row's members on a tile are one run of 2. Reducing its rows is planned by runs (no sort
    of a key per element) into the same variables, mappings, vertices and kernel elements as the
    per-element reference; only the kernel's field stays a grouped view instead of an index each."""
    from profiler import Graph, Sequence, ipu_model
    from profiler.ops.reduce import _RunPairs, reduce_consecutive, reduce_groups
    from tests.ops.helpers import graph_snapshot

    def elements_only(snapshot: list) -> list:  # a field's (kind, shape, dtype, vars, elements) less its kind
        def strip(batches):  # type: ignore[no-untyped-def]
            return None if batches is None else [b[:3] + ({k: f[1:] for k, f in b[3].items()},) for b in batches]

        return [x if len(x) != 3 or not isinstance(x[1], list) else (x[0], strip(x[1]), strip(x[2])) for x in snapshot]

    snaps = []
    for fast in (True, False):
        g = Graph(ipu_model(tiles_per_ipu=6))
        store = g.add_variable(np.float16, (3, 4, 2), "x")
        a, m = np.meshgrid(np.arange(3), np.arange(4), indexing="ij")
        g.set_tile_mapping(store, np.repeat((a + 3 * (m >= 2)).reshape(-1), 2))
        x, prog = store.transpose(1, 0, 2).group_dims(1, 2), Sequence()
        assert x.shape == (4, 6) and (_RunPairs.find(g, x, 6) is not None)
        out = ops.add_mapped(g, np.float16, (4,), "out")
        if fast:
            plan = reduce_consecutive(g, x, 6, out, "add", prog, scale=0.5)
        else:
            plan = reduce_groups(g, x, np.arange(24), np.arange(24) // 6, out, "add", prog, scale=0.5)
        snaps.append((plan, elements_only(graph_snapshot(g))))
    assert snaps[0] == snaps[1]
    assert snaps[0][0]["stages"] == 2  # each row's 3 partials (one per tile) reduced on its output's tile


def test_reduce_over_a_transposed_view_still_matches_numpy():
    x = rng(18).standard_normal((6, 40)).astype(np.float32)
    out, _, _ = run({"x": x}, lambda g, t, p: {"y": ops.reduce_sum(g, t["x"].transpose(1, 0), 1, p)}, tiles=7)
    np.testing.assert_allclose(out["y"], x.sum(0), rtol=1e-5)


def test_runs_within_groups_from_the_mapping_or_per_element_are_the_same():
    from profiler import Graph, ipu_model
    from profiler.ops.reduce import _runs_and_groups

    g = Graph(ipu_model(tiles_per_ipu=4))
    x = _mapped(g, (6, 10), np.repeat([0, 0, 1, 3, 3, 2, 1, 1], [7, 5, 9, 3, 11, 8, 12, 5]))
    for t, size in ((x.reshape(-1), 10), (x.reshape(-1), 7), (x[1:].reshape(-1), 5), (x[:, 1:].reshape(-1), 5)):
        tiles = g.tile_of(t)
        want = np.flatnonzero((np.arange(tiles.size) % size == 0) | (np.diff(tiles, prepend=-9) != 0))
        first, tile = _runs_and_groups(g, t, size)
        assert first.tolist() == want.tolist() and tile.tolist() == tiles[want].tolist()
    # both paths ran: a variable or a range of it (x[1:]) by its mapping, a strided view per element
    assert g.tile_runs(x[1:].reshape(-1)) is not None and g.tile_runs(x[:, 1:].reshape(-1)) is None


def test_default_linear_mapping_keeps_128_bytes_per_tile_in_vector_grains():
    # poputil::mapTensorLinearly's defaults: at least 128 B per tile, grains of the 64-bit vector
    from profiler.ops.core import default_linear_tiles

    # 768 halves (a BERT-base layer norm's gamma): 128 B = 64 elements per tile -> 12 tiles, not 768
    t = default_linear_tiles(768, 2, 1472)
    assert np.unique(t).tolist() == list(range(12))
    assert (np.bincount(t) == 64).all()
    # 100 floats from tile 1470: 32 per tile (128 B), in grains of 2, wrapping past the last tile
    t = default_linear_tiles(100, 4, 1472, start=1470)
    assert np.bincount(t, minlength=1472)[[1470, 1471, 0, 1]].tolist() == [32, 32, 32, 4]
    # a large tensor: ceil(grains / tiles) grains each, whole grains of 4 halves
    t = default_linear_tiles(1472 * 100, 2, 1472)
    assert (np.bincount(t) == 100).all() and (np.diff(t.reshape(-1, 4), axis=1) == 0).all()


def test_default_linear_runs_are_the_linear_mapping_as_one_interval_a_tile():
    # the importer maps a weight no plan lays out by these runs (a tile per element of a 4,096 x 32,000
    # LM head was 2 GB of host memory): the same tiles as default_linear_tiles, element for element
    from profiler.ops.core import default_linear_runs, default_linear_tiles

    for n, itemsize, start in [(1, 2, 0), (768, 2, 5), (100, 4, 1470), (1472 * 100 + 3, 2, 0), (10**6 + 1, 4, 1471)]:
        first, tiles = default_linear_runs(n, itemsize, 1472, start)
        assert first.size <= 1472 and first[0] == 0 and (np.diff(first) > 0).all()
        got = np.repeat(tiles, np.diff(np.append(first, n)))
        assert got.tolist() == default_linear_tiles(n, itemsize, 1472, start).tolist()


def test_partials_are_stored_tile_by_tile_and_read_as_one_region_per_tile():
    """x[4, 8] float32 with columns 0-3 of every row on tile 0 and 4-7 on tile 1, summed over rows
    into y[4] on tile 2. Stage 1 reduces each row's part on its tile: 8 partials, (row, tile) in row
    order. PopLibs keeps a tile's partials together (popops IntermediatePartials: a tensor per tile),
    so the partials variable is stored tile by tile - 2 mapping intervals, not 8 alternating ones -
    and tile 2 receives rows 0-3's partials from each tile as one 16-byte region: 2 regions in, one
    out from each sender. Exchange code 4 B x (6 + regions sent + received): tiles 0 and 1
    4 x (6 + 1) = 28, tile 2 4 x (6 + 2) = 32 (stored in row order it was 4 regions each way: 40 and 56)."""
    from profiler import Engine, Graph, Sequence, ipu_model
    from profiler.ops.reduce import reduce_consecutive

    g = Graph(ipu_model(tiles_per_ipu=4))
    x = g.add_variable("float32", [4, 8], "x")
    g.variables[x.single_variable()].mapping.set_dense(np.where(np.arange(32) % 8 < 4, 0, 1).astype(np.int32))
    y = g.add_variable("float32", [4], "y")
    g.set_tile_mapping(y, 2)
    prog = Sequence()
    reduce_consecutive(g, x, 8, y, "add", prog)
    partials = next(v for v in g.variables if v.name == "reduce partials")
    assert partials.mapping.starts.tolist() == [0, 4] and partials.mapping.tiles.tolist() == [0, 1]
    g.create_host_write("x", x)
    g.create_host_read("y", y)
    xv = rng(15).standard_normal((4, 8)).astype(np.float32)
    e = Engine(g, [prog], options={"debug.instrument": "false"})
    e.load()
    e.write_tensor("x", xv)
    e.run(0)
    np.testing.assert_allclose(e.read_tensor("y"), xv.sum(1), rtol=1e-6)
    (exch,) = [s for s in e.compiled.steps if s.type == "DoExchange"]
    assert exch.cost.code_bytes.tolist() == [28, 28, 32, 0]


@pytest.mark.parametrize("rows,runs,tile_cycles", [(12, [2] * 6, 6 * 49 + 30), (7, [3, 2, 2], 6 * 65 + 30)])
def test_a_tiles_reductions_run_as_popops_hands_them_to_its_workers(rows, runs, tile_cycles):
    """x[rows, 8] float32 on tile 0 summed over its rows into y[rows] on tile 0: one stage, every output's
    8 partials contiguous. popops splits a tile's equal reductions into at most 6 runs of near-equal size,
    2 outputs at least (splitRowsToWorkers: 12 -> 6 x 2; 7 -> 3, 2, 2), each a ContinuousReduce vertex of
    12 B (two pointers, two shorts). Its estimate (getCycleEstimateReduceAllRegionsContinuous), float:
    k x (8 // min(4, 2)) + 12 k + 17 -> 49 for k = 2, 65 for k = 3; single-worker vertices one per
    context, so the tile takes 6 x the longest + the compute set's 30."""
    from profiler import Engine, Graph, Sequence, ipu_model
    from profiler.ops.reduce import reduce_consecutive

    g = Graph(ipu_model(tiles_per_ipu=4))
    x = g.add_variable("float32", [rows, 8], "x")
    y = g.add_variable("float32", [rows], "y")
    g.set_tile_mapping(x, 0)
    g.set_tile_mapping(y, 0)
    g.create_host_write("x", x)
    g.create_host_read("y", y)
    prog = Sequence()
    reduce_consecutive(g, x, 8, y, "add", prog)
    e = Engine(g, [prog], options={"debug.instrument": "false"})
    e.load()
    xv = rng(19).standard_normal((rows, 8)).astype(np.float32)
    e.write_tensor("x", xv)
    e.run(0)
    np.testing.assert_allclose(e.read_tensor("y"), xv.sum(1), rtol=1e-6)
    (plan,) = e.compiled.cs_plans.values()
    names = [e.compiled.codelets[c][0] for c in plan.v_codelet]
    assert names == ["popops::ContinuousReduce<popops::ReduceAdd,float32,float32>"]
    assert plan.v_count.tolist() == [len(runs)] and plan.v_state.tolist() == [12 * len(runs)]
    (step,) = [s for s in e.compiled.steps if s.type == "OnTileExecute"]
    assert step.cost.tile_cycles.tolist() == [tile_cycles, 0, 0, 0]
    # the vertices' outputs: runs of consecutive rows, in order
    outs = [b.fields["out"].elements()[1].reshape(b.count, -1) for b in g.compute_sets[0].batches]
    got = sorted(tuple(r.tolist()) for o in outs for r in o)
    first = np.cumsum([0, *runs[:-1]])
    assert got == sorted(tuple(range(f, f + k)) for f, k in zip(first, runs, strict=True))


@pytest.mark.parametrize("op_name", ["add", "square_add", "max", "min"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_reduce_vertices_split_over_threads_give_each_rows_own_value(op_name, dtype):
    """A batch of single-worker Reduce vertices large enough to split over the run's threads
    (``parallel.in_row_chunks``) gives every vertex the value numpy gives its row alone, bit for bit."""
    from profiler.host import parallel
    from profiler.ops.poplibs_codelets import REDUCE_CODELETS

    rows, k = 96, 4096  # over two parts' worth of elements: split wherever there are two cores
    assert rows * k >= 2 * parallel.PART_ELEMENTS
    x = rng(12).standard_normal((rows, k)).astype(dtype)
    codelet = REDUCE_CODELETS[op_name]
    read = codelet.read_dtypes({"in": np.dtype(dtype), "out": np.dtype(dtype)})["in"]
    got = codelet.run_batch({"in": x.astype(read), "out": np.empty((rows, 1), dtype)}, {"scale": 0.5})["out"]
    wide = x.astype(read).astype(np.float64) if op_name in ("add", "square_add") else x.astype(read)
    want = {"add": lambda r: r.sum(), "square_add": lambda r: (r * r).sum(), "max": np.max, "min": np.min}[op_name]
    for i in (0, rows // 2, rows - 1):
        assert got[i, 0] == np.asarray(want(wide[i]) * 0.5).astype(dtype)
    assert got.dtype == dtype and got.shape == (rows, 1)
