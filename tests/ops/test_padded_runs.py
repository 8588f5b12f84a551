"""A ragged reduction's padded fields held as runs of its input and the pad (ops.core.padded_runs,
layout.VarRuns): the same elements as indexing element by element (padded_rows), and host memory
that follows the runs, not the elements (issue 38)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from profiler import Graph, Sequence, ipu_model, ops
from profiler.ops.core import padded_rows, padded_runs
from profiler.poplar.layout import VarRuns
from tests.ops.helpers import rng, run


def _graph() -> tuple[Graph, object, object]:
    g = Graph(ipu_model(tiles_per_ipu=4))
    x = g.add_variable("float16", [2, 12], "x")
    pad = g.add_variable("float16", [4], "pad")  # one element a tile, as constant_per_tile makes it
    g.set_tile_mapping(pad, np.arange(4))
    return g, x, pad


def test_padded_runs_are_the_hand_computed_elements() -> None:
    g, x, pad = _graph()
    xv, pv = x.single_variable(), pad.single_variable()
    start, count = np.array([[0, 8], [2, 0]]), np.array([[5, 3], [16, 0]])
    field = padded_runs(x, start, count, 16, pad, np.array([1, 2]))
    assert field is not None and isinstance(field._lay, VarRuns)
    # row 0: x[0:5], pad[1] x 11, x[8:11], pad[1] x 13; row 1: x[2:18], pad[2] x 16
    want_idx = np.array([list(range(5)) + [1] * 11 + [8, 9, 10] + [1] * 13, list(range(2, 18)) + [2] * 16]).reshape(
        2, 2, 16
    )
    want_var = np.array([[xv] * 5 + [pv] * 11 + [xv] * 3 + [pv] * 13, [xv] * 16 + [pv] * 16]).reshape(2, 2, 16)
    var, idx = field.elements()
    assert field.shape == (2, 2, 16)
    assert np.array_equal(var.reshape(field.shape), want_var) and np.array_equal(idx.reshape(field.shape), want_idx)
    assert field.variable_ids() == sorted([xv, pv]) and field.single_variable() is None
    assert field._lay.runs.start.size == 6  # four of x, two repeated pad elements: not 64 indices
    # a vertex per output reads it as one row ([vertices, k * partials]): still runs, the same elements
    flat = field.reshape(2, -1)
    assert isinstance(flat._lay, VarRuns) and flat.shape == (2, 32)
    assert np.array_equal(flat.elements()[1], want_idx.reshape(-1))
    # and what indexing element by element gives
    valid = np.arange(16) < count[:, :, None]
    old = padded_rows(x, np.where(valid, start[:, :, None] + np.arange(16), 0), valid, pad, np.array([1, 2]))
    assert all(np.array_equal(a, b) for a, b in zip(field.elements(), old.elements(), strict=True))


def test_padded_runs_leave_a_view_without_inner_runs_to_indexing() -> None:
    g, x, pad = _graph()
    # x transposed reads its variable 12 apart: a run per element is not worth it
    assert padded_runs(x.transpose(), np.array([[0]]), np.array([[5]]), 16, pad, np.array([0])) is None


def _ragged_rows(cols: int) -> tuple[Graph, object]:
    """[6, cols] mapped linearly over 4 tiles: tile boundaries cut rows 1 and 4 in half, so a reduction
    along the rows has ragged (padded) partial groups."""
    g = Graph(ipu_model(tiles_per_ipu=4))
    x = g.add_variable("float16", [6, cols], "x")
    g.map_linearly(x)
    return g, x


def _kept_by_reduce(cols: int) -> int:
    g, x = _ragged_rows(cols)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        out = ops.reduce(g, x, 1, Sequence(), op_name="max")
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert out.shape == (6,)
    return kept


def test_ragged_reduction_fields_do_not_follow_elements() -> None:
    _kept_by_reduce(1000)  # one-time caches out of the comparison
    a, b = _kept_by_reduce(4000), _kept_by_reduce(16_000)
    # 4x the elements, the same vertices and runs (8 B an element of padded fields before: 0.4 -> 1.6 MiB)
    assert b < 1.5 * a + (64 << 10), f"{a / 2**10:.0f} KiB -> {b / 2**10:.0f} KiB kept for 4x the elements"


@pytest.mark.parametrize("op_name", ["add", "max"])
def test_ragged_reduction_values(op_name: str) -> None:
    x = rng(3).standard_normal((6, 1000)).astype(np.float32)
    out, _, _ = run({"x": x}, lambda g, t, p: {"y": ops.reduce(g, t["x"], 1, p, op_name=op_name)})
    want = x.sum(axis=1) if op_name == "add" else x.max(axis=1)
    np.testing.assert_allclose(out["y"], want, rtol=1e-4, atol=1e-4)


def test_padded_runs_over_a_grouped_store_are_a_run_of_blocks_a_range() -> None:
    """A [4 rows, 16 cols] view of a store in groups of 4 columns ([16/4, 4 rows, 4], as PopLibs creates
    a matmul's result: {C/ocpg, rows, ocpg}): a range of whole groups of one row reads 4-element blocks
    16 apart, one run of blocks (Runs.block), not a run a group; the same elements as indexing."""
    g = Graph(ipu_model(tiles_per_ipu=4))
    store = g.add_variable("float16", [4, 4, 4], "store")
    view = store.transpose(1, 0, 2).group_dims(1, 2)  # [rows, cols]: (r, c) at (c // 4) * 16 + r * 4 + c % 4
    pad = g.add_variable("float16", [4], "pad")
    g.set_tile_mapping(pad, np.arange(4))
    # part 0: row 1, cols 4..11 (groups 1, 2), then padding to 12; part 1: row 2, cols 0..11 (groups 0-2)
    start, count = np.array([[1 * 16 + 4], [2 * 16 + 0]]), np.array([[8], [12]])
    field = padded_runs(view, start, count, 12, pad, np.array([3, 0]))
    assert field is not None and isinstance(field._lay, VarRuns)
    runs = field._lay.runs
    assert (runs.block, runs.stride) == (4, 16)
    assert runs.start.size == 3  # row 1's groups, its padding, row 2's groups: 6 runs a group before
    want_idx = np.array([[20, 21, 22, 23, 36, 37, 38, 39, 3, 3, 3, 3], [8, 9, 10, 11, 24, 25, 26, 27, 40, 41, 42, 43]])
    var, idx = field.elements()
    assert np.array_equal(idx.reshape(2, 12), want_idx)
    sv, pv = store.single_variable(), pad.single_variable()
    assert np.array_equal(var.reshape(2, 12)[0], [sv] * 8 + [pv] * 4) and (var.reshape(2, 12)[1] == sv).all()
    valid = np.arange(12) < count[:, :, None]
    old = padded_rows(view, np.where(valid, start[:, :, None] + np.arange(12), 0), valid, pad, np.array([3, 0]))
    assert all(np.array_equal(a, b) for a, b in zip(field.elements(), old.elements(), strict=True))


def test_padded_runs_across_a_grouped_row_stay_a_run_a_group() -> None:
    """A range that runs past a row's last group (into the next row) is not evenly spaced blocks: a run
    a group, as before."""
    g = Graph(ipu_model(tiles_per_ipu=4))
    store = g.add_variable("float16", [4, 4, 8], "store")  # [4 rows, 32 cols] in groups of 8
    view = store.transpose(1, 0, 2).group_dims(1, 2)
    pad = g.add_variable("float16", [4], "pad")
    g.set_tile_mapping(pad, np.arange(4))
    start, count = np.array([[16]]), np.array([[32]])  # row 0's groups 2, 3 and row 1's groups 0, 1
    field = padded_runs(view, start, count, 32, pad, np.array([0]))
    assert field is not None and field._lay.runs.block == 0 and field._lay.runs.start.size == 4
    valid = np.ones((1, 1, 32), bool)
    old = padded_rows(view, start[:, :, None] + np.arange(32), valid, pad, np.array([0]))
    assert np.array_equal(field.elements()[1].reshape(-1), old.elements()[1].reshape(-1))
