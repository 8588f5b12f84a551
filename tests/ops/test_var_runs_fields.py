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
