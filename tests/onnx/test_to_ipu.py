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
