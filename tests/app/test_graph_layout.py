"""The Operations Graph's layout (app.figures.graph_layout): a chain is one straight row, a long
chain of layers wraps into rows whose labels stay legible at the zoom that fits the panel, and
long edges (a table every layer reads) neither take room nor bend the chain, on graphs small
enough to check by hand."""

from __future__ import annotations

import pytest

from app.figures import graph_layout as gl
from app.figures.operations_graph import FONT_PX


def chain_layout(n: int, w: float = 100.0, h: float = 30.0, sources: int = 0, sink: bool = False) -> gl.Placed:
    """``n`` layers in a chain; ``sources`` tables each read by every layer; a sink every layer writes."""
    ids = [f"s{i}" for i in range(sources)] + [f"l{i}" for i in range(n)] + (["out"] if sink else [])
    edges = [(f"l{i}", f"l{i + 1}") for i in range(n - 1)]
    edges += [(f"s{j}", f"l{i}") for j in range(sources) for i in range(n)]
    edges += [(f"l{i}", "out") for i in range(n)] if sink else []
    return gl.layout(ids, [""] * len(ids), [(w, h)] * len(ids), [False] * len(ids), list(range(len(ids))), edges)


def test_a_short_chain_is_one_straight_row():
    """Three 100x30 boxes: centres 50, 190, 330 (100 wide + 40 between ranks), all at y 15."""
    placed = chain_layout(3)
    assert placed.positions == {"l0": (50.0, 15.0), "l1": (190.0, 15.0), "l2": (330.0, 15.0)}
    assert (placed.width, placed.height) == (380.0, 30.0) and not placed.far_edges


def test_a_long_chain_wraps_into_straight_rows_legible_at_the_fit_zoom():
    """32 layers plus 3 tables every layer reads and an output every layer writes (the POD16
    decoder's top level): in one row the fit zoom would be 0.29 (3.5 px labels) and dagre drew it
    as a diagonal; wrapped, each row's layers share one y and labels are at least 10 px."""
    placed = chain_layout(32, w=64, h=36, sources=3, sink=True)
    ys = [placed.positions[f"l{i}"][1] for i in range(32)]
    rows = sorted(set(ys))
    assert 3 <= len(rows) <= 8
    xs = [placed.positions[f"l{i}"][0] for i in range(32)]
    for i in range(31):  # next in its row to the right, or the first of the next row
        assert (ys[i + 1] == ys[i] and xs[i + 1] > xs[i]) or (ys[i + 1] > ys[i] and xs[i + 1] < xs[i])
    one_row = gl.fit_zoom(32 * 64 + 33 * gl.RANK_SEP + 2 * 64, 4 * 36)
    assert FONT_PX * one_row < 4
    assert FONT_PX * gl.fit_zoom(placed.width, placed.height) >= 10
    assert ("s0", "l31") in placed.far_edges and ("l0", "l1") not in placed.far_edges


def test_a_table_sits_before_its_first_reader_and_does_not_pull_the_chain():
    """A table every layer reads goes in the rank before layer 0 (not at the far left), and the
    layers stay on one line: a layer lines up with the layer before, not with the table."""
    placed = chain_layout(4, sources=1)
    (x_s, _), (x0, y0) = placed.positions["s0"], placed.positions["l0"]
    assert x_s < x0 and {placed.positions[f"l{i}"][1] for i in range(4)} == {y0}


def test_an_open_group_is_laid_out_inside_its_box():
    """a -> [g: b -> c] -> d with g open: b and c in a row inside g's box (10 padding, 20 label),
    the box one rank of the top level between a and d."""
    ids = ["a", "g", "b", "c", "d"]
    parents = ["", "", "g", "g", ""]
    sizes = [(100.0, 30.0), (40.0, 0.0), (100.0, 30.0), (100.0, 30.0), (100.0, 30.0)]
    placed = gl.layout(
        ids, parents, sizes, [False, True, False, False, False], [0, 1, 1, 2, 3], [("a", "b"), ("b", "c"), ("c", "d")]
    )
    pos = placed.positions
    assert "g" not in pos and pos["b"][1] == pos["c"][1]
    assert pos["c"][0] - pos["b"][0] == 140.0  # 100 wide + 40
    box_left, box_right = pos["b"][0] - 50 - gl.GROUP_PAD, pos["c"][0] + 50 + gl.GROUP_PAD
    assert pos["a"][0] + 50 + gl.RANK_SEP == pytest.approx(box_left)
    assert box_right + gl.RANK_SEP + 50 == pytest.approx(pos["d"][0])
