"""builder.to_ipu, asked for every input of every node of a pipelined model: an input whose variables
are all on the node's IPU comes back as it is from their intervals, without cutting the view into
runs (a POD16 decoder's attention scores: a million intervals, on every node's every input); one
elsewhere is copied once, laid out as it is."""

from __future__ import annotations

import numpy as np
import pytest

from profiler import Graph, Sequence, ipu_model
from profiler.frontends.onnx.builder import Builder


def _builder() -> tuple[Builder, Graph]:
    g = Graph(ipu_model(tiles_per_ipu=4, num_ipus=2))
    return Builder(g, Sequence(), Sequence(), 13, False, "variables"), g


def test_an_input_on_its_ipu_is_returned_from_its_variables_intervals(monkeypatch: pytest.MonkeyPatch) -> None:
    b, g = _builder()
    x = g.add_variable("float16", [6, 64], "x")
    g.set_tile_mapping(x, np.repeat([0, 1, 2, 3, 1, 2], 64))  # all on IPU 0's tiles
    monkeypatch.setattr(Graph, "view_runs", lambda *a: pytest.fail("runs of a view already on its IPU"))
    for view in (x, x.transpose(), x[:, 8:40]):
        assert b.to_ipu(view, 0) is view


def test_an_input_on_another_ipu_is_copied_once_laid_out_as_it_is() -> None:
    b, g = _builder()
    x = g.add_variable("float16", [6, 64], "x")
    g.set_tile_mapping(x, np.repeat([0, 1, 2, 3, 1, 2], 64))
    view = x.transpose()
    copy = b.to_ipu(view, 1)
    assert copy is not view and b.to_ipu(view, 1) is copy
    assert (g.tile_of(copy) == g.tile_of(view) + 4).all()  # the same tiles of IPU 1


def test_a_host_value_used_on_two_ipus_is_made_on_the_first_and_copied_once_to_the_second() -> None:
    # a table every pipeline stage reads (a decoder's rotary sin and cos): IPU 1's ops read their own
    # copy of it, made by one inter-IPU copy, not the first IPU's over the IPU-Links
    b, g = _builder()
    table = np.arange(6 * 64, dtype=np.float32).reshape(6, 64)
    with g.virtual_graph(0):
        on_0 = b.device(table, "table")
    with g.virtual_graph(1):
        on_1 = b.device(table, "table")
        assert b.device(table, "table") is on_1  # once per IPU
    with g.virtual_graph(0):
        assert b.device(table, "table") is on_0
    assert set((g.tile_of(on_0) // 4).tolist()) == {0} and set((g.tile_of(on_1) // 4).tolist()) == {1}
    assert [p.name for p in b.prog.programs] == ["IpuCopy to IPU 1"]
