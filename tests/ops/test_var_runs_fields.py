"""An elementwise op over runs of several variables (a rotary embedding's [-x2, x1], layout.VarRuns):
its result's mapping, its vertices' fields and its kernel's field are built from the runs
(Graph.view_runs, Tensor.var_runs_rows, Tensor.expand), never an index per element, and hold the
same elements as indexing element by element (issue 38: the rotary Mul was 30 % of a 2-layer
S = 2,048 decoder import)."""

from __future__ import annotations

import numpy as np
import pytest

from profiler import Graph, Sequence, ipu_model, ops
from profiler.poplar.layout import VarRuns
from profiler.poplar.tensor import Tensor, concat
from tests.ops.helpers import graph_snapshot, rng, run


def _rotated(g: Graph, rows: int = 6, dh: int = 64) -> tuple[Tensor, Tensor]:
    """([-x2, x1] of x [rows, dh] mapped linearly over the tiles, sin [rows, dh] mapped per row):
    each row of the concatenation is a run of ``neg`` and a run of ``x``."""
    x = ops.add_mapped(g, np.float16, (rows, dh), "x")
    half = dh // 2
    neg = ops.unary(g, "neg", x[:, half:], Sequence())
    turned = concat([neg, x[:, :half]], axis=1)
    sin = g.add_variable(np.float16, (rows, dh), "sin")
    g.set_tile_mapping(sin, np.repeat(np.arange(rows) % g.target.num_tiles, dh))
    return turned, sin


def test_the_result_of_an_op_over_runs_is_mapped_from_them() -> None:
    g = Graph(ipu_model(tiles_per_ipu=4))
    turned, sin = _rotated(g)
    assert isinstance(turned._lay, VarRuns)
    want = g.tile_of(turned)  # a tile per element, from the explicit view
    runs = g.view_runs(turned)
    assert runs is not None
    pos, tiles = runs
    assert pos.size < turned.numel() // 8  # per run and interval
    assert np.repeat(tiles, np.diff(np.append(pos, turned.numel()))).tolist() == want.tolist()
    y = ops.mul(g, turned, sin, Sequence())
    assert g.tile_of(y).tolist() == want.tolist()


def _expand_by_index(t: Tensor, axis: int) -> Tensor:
    return t._explicit()._view(lambda a: a.expand(axis), lambda a: np.expand_dims(a, axis))


def test_fields_over_runs_are_runs_with_the_elements_indexing_gives(monkeypatch: pytest.MonkeyPatch) -> None:
    snaps = []
    for by_runs in (True, False):
        g = Graph(ipu_model(tiles_per_ipu=4))
        turned, sin = _rotated(g)
        with monkeypatch.context() as m:
            if by_runs:  # nothing asks the runs for an index per element
                m.setattr(VarRuns, "elements", lambda *a: pytest.fail("an index per element of the runs"))
            else:  # the reference: the result's tiles and the op's fields indexed element by element
                m.setattr(Graph, "_var_runs_tiles", lambda *a: None)
                m.setattr(Tensor, "var_runs_rows", lambda *a: None)
                m.setattr(Tensor, "expand", _expand_by_index)
            ops.mul(g, turned, sin, Sequence())
        cs = g.compute_sets[-1]
        fields = [b.fields["in1"] for b in cs.batches] + [b.fields["in1"] for b in cs.kernel or []]
        assert not by_runs or all(isinstance(f._lay, VarRuns) for f in fields)
        snaps.append(graph_snapshot(g))
    assert snaps[0] == snaps[1]


@pytest.mark.parametrize("dh", [16, 64])
def test_an_op_over_runs_computes_as_numpy(dh: int) -> None:
    x = rng(5).standard_normal((6, dh)).astype(np.float32)
    s = rng(6).standard_normal((6, dh)).astype(np.float32)

    def build(g, t, p):  # type: ignore[no-untyped-def]
        half = dh // 2
        turned = concat([ops.unary(g, "neg", t["x"][:, half:], p), t["x"][:, :half]], axis=1)
        return {"y": ops.mul(g, turned, t["s"], p)}

    out, _, _ = run({"x": x, "s": s}, build)
    want = np.concatenate([-x[:, dh // 2 :], x[:, : dh // 2]], axis=1) * s
    np.testing.assert_allclose(out["y"], want, rtol=1e-6)


def _elements_by_row(r: object) -> list[tuple[int, int]]:
    """(row, element id) of every element regions cover, sorted: a field's elements to the exchange."""
    start, length, owner = r.start, r.length, r.owner  # type: ignore[attr-defined]
    gid = np.repeat(start - (np.cumsum(length) - length), length) + np.arange(int(length.sum()))
    return sorted(zip(np.repeat(owner, length).tolist(), gid.tolist(), strict=True))


def test_the_compilers_regions_of_runs_are_the_elements_indexing_gives(monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiler's regions of a field over runs of several variables are made per run (issue 38:
    a 2-layer S = 2,048 decoder's compile spent a third of its time indexing them element by element)
    and cover, row by row, the elements of the same field indexed element by element."""
    from profiler.poplar.regions import field_regions

    g = Graph(ipu_model(tiles_per_ipu=4))
    turned, sin = _rotated(g, rows=10, dh=32)
    ops.mul(g, turned, sin, Sequence())
    base = np.append(0, np.cumsum([v.numel for v in g.variables])).astype(np.int64)
    fields = [b.fields["in1"] for b in g.compute_sets[-1].batches]
    assert fields and all(isinstance(f._lay, VarRuns) for f in fields)
    for f in fields:
        with monkeypatch.context() as m:
            m.setattr(VarRuns, "elements", lambda *a: pytest.fail("an index per element of the runs"))
            by_runs = field_regions(f, base)
        by_index = field_regions(f._explicit(), base)
        assert by_runs.start.size < f.numel() // 4
        assert _elements_by_row(by_runs) == _elements_by_row(by_index)


def _general(g: Graph, parts: list[Tensor], axis: int) -> Tensor:
    """``concat`` worked out element by element (its general path), to hold the block path to."""
    from profiler.poplar import tensor as tensor_mod

    explicit = [t._explicit() for t in parts]
    idx = np.concatenate([t._idx for t in explicit], axis=axis)
    if len({t._var for t in explicit}) == 1:  # one variable: an index per element, as concat keeps it
        return Tensor(g, explicit[0]._var, idx, parts[0].dtype)
    var = np.concatenate([np.full(t.shape, t._var, np.int32) for t in explicit], axis=axis)
    found = tensor_mod._var_runs(g, var, idx, parts[0].dtype)
    return found if found is not None else Tensor(g, var, idx, parts[0].dtype)


def _assert_same_view(got: Tensor, want: Tensor) -> None:
    """The same elements, and, as runs, the same runs with the same types."""
    gv, gi = got.elements()
    wv, wi = want.elements()
    np.testing.assert_array_equal(np.broadcast_to(gv, gi.shape), np.broadcast_to(wv, wi.shape))
    np.testing.assert_array_equal(gi, wi)
    assert type(got._lay) is type(want._lay)
    if isinstance(got._lay, VarRuns):
        a, b = got._lay, want._lay
        assert isinstance(b, VarRuns)
        for f in ("start", "length", "row_first"):
            np.testing.assert_array_equal(getattr(a.runs, f), getattr(b.runs, f))
            assert getattr(a.runs, f).dtype == getattr(b.runs, f).dtype
        np.testing.assert_array_equal(np.broadcast_to(a.runs.step, a.runs.length.shape), b.runs.step)
        np.testing.assert_array_equal(a.var, b.var)
        assert (a.runs.width, a.runs.inner) == (b.runs.width, b.runs.inner)


@pytest.mark.parametrize("seed", range(40))
def test_a_concatenation_of_blocks_is_the_runs_indexing_finds(seed: int) -> None:
    """Views of several variables joined along a dim after the first (halves of a row, slices of a
    [B, H, S, D] head dim, a view joined with itself between others): the runs made from the views'
    integers are exactly those ``_var_runs`` cuts from an index per element, or the view is left to
    that path (a block continuing its neighbour, a one-element block)."""
    r = np.random.default_rng(seed)
    g = Graph(ipu_model(tiles_per_ipu=4))
    shape = [int(r.integers(1, 4)), int(r.integers(1, 5)), int(r.integers(2, 9)), 2 * int(r.integers(1, 9))]
    axis = int(r.integers(1, 4))
    variables = [g.add_variable(np.float16, shape, f"v{i}") for i in range(3)]
    for v in variables:
        g.map_linearly(v)
    parts = []
    for _ in range(int(r.integers(2, 5))):
        v = variables[int(r.integers(0, 3))]
        n = shape[axis]
        lo = int(r.integers(0, n))
        hi = int(r.integers(lo + 1, n + 1))
        parts.append(v.slice(lo, hi, axis))
    _assert_same_view(concat(parts, axis=axis), _general(g, parts, axis))


def test_the_rotary_halves_are_joined_as_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """[-x2, x1] of [B, H, S, D] heads: the block path takes it (no index per element is made)."""
    from profiler.poplar import tensor as tensor_mod

    g = Graph(ipu_model(tiles_per_ipu=4))
    x = ops.add_mapped(g, np.float16, (1, 2, 16, 64), "x")
    neg = ops.unary(g, "neg", x.slice(32, 64, 3), Sequence())
    monkeypatch.setattr(tensor_mod, "_var_runs", lambda *a: pytest.fail("an index per element was made"))
    turned = concat([neg, x.slice(0, 32, 3)], axis=3)
    assert isinstance(turned._lay, VarRuns) and turned._lay.runs.start.size == 2 * 2 * 16


@pytest.mark.parametrize("seed", range(24))
def test_a_concatenation_with_grouped_views_is_the_runs_indexing_finds(seed: int) -> None:
    """As above with views of a store held in groups of columns (a matmul result, [C/G][rows][G] seen
    as [rows, C], profiler.poplar.layout.Factored): a run a group of each row."""
    r = np.random.default_rng(100 + seed)
    g = Graph(ipu_model(tiles_per_ipu=4))
    group, n_groups = int(r.choice([2, 4, 8])), int(r.integers(2, 5))
    d0, d1 = int(r.integers(1, 3)), int(r.integers(2, 40))
    store = g.add_variable(np.float16, (n_groups, d0, d1, group), "store")
    g.map_linearly(store)
    grouped = store.transpose(1, 2, 0, 3).group_dims(1, 1, 2)  # [d0, d1, n_groups * group]
    plain = g.add_variable(np.float16, (d0, d1, n_groups * group), "plain")
    g.map_linearly(plain)
    cut = group * int(r.integers(1, n_groups))
    parts = [plain.slice(cut, n_groups * group, 2), grouped.slice(0, cut, 2)]
    if r.integers(0, 2):
        parts = parts[::-1]
    _assert_same_view(concat(parts, axis=2), _general(g, parts, 2))
