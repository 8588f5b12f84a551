"""Graph API: interval tile mappings and tensor views (checked against numpy indexing)."""

import numpy as np
import pytest

from profiler import CompileError, Engine, Graph, GraphError, Sequence, concat, ipu_model


def test_mapping_is_stored_as_intervals_and_queried_per_element():
    g = Graph(ipu_model(tiles_per_ipu=4))
    v = g.add_variable("float", [10], "v")
    g.set_tile_mapping(v, 0)
    g.set_tile_mapping(v[3:7], 2)
    m = g.variables[0].mapping
    assert m.intervals() == [(0, 3, 0), (3, 7, 2), (7, 10, 0)]
    assert g.tile_of(v).tolist() == [0, 0, 0, 2, 2, 2, 2, 0, 0, 0]
    assert g.get_tile_mapping(v) == {0: [(0, 3), (7, 10)], 2: [(3, 7)]}


def test_map_linearly_spreads_grains_over_tiles():
    g = Graph(ipu_model(tiles_per_ipu=4))
    v = g.add_variable("half", [10], "v")
    g.map_linearly(v, grain_size=2)  # 5 grains over 4 tiles: ceil(5/4) = 2 grains per tile
    assert g.tile_of(v).tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2]


def test_views_select_the_same_elements_as_numpy():
    g = Graph(ipu_model())
    a = g.add_variable("float", [3, 4], "a")
    b = g.add_variable("float", [2, 4], "b")
    ref_a = np.arange(12).reshape(3, 4)
    ref_b = 100 + np.arange(8).reshape(2, 4)

    def values(t):  # element -> value through the view's (variable, index) pairs
        var, idx = t.elements()
        return np.where(
            var == 0, ref_a.reshape(-1)[np.minimum(idx, 11)], ref_b.reshape(-1)[np.minimum(idx, 7)]
        ).reshape(t.shape)

    assert (values(a.T) == ref_a.T).all()
    assert (values(a[1:, ::2]) == ref_a[1:, ::2]).all()
    assert (values(a.slice(1, 3, dim=1)) == ref_a[:, 1:3]).all()
    assert (values(a.reshape(4, 3)) == ref_a.reshape(4, 3)).all()
    assert (values(a[0].broadcast(2, 0)) == np.concatenate([ref_a[0]] * 2)).all()
    assert (values(concat([a, b], 0)) == np.concatenate([ref_a, ref_b])).all()
    assert (values(concat([a.T, b.T], 1)) == np.concatenate([ref_a.T, ref_b.T], 1)).all()


def test_unmapped_variable_is_a_compile_error_naming_it():
    g = Graph(ipu_model())
    v = g.add_variable("float", [8], "weights")
    g.set_tile_mapping(v[:4], 0)
    with pytest.raises(CompileError, match=r"variable 'weights' .* 4 of 8 elements without a tile mapping"):
        Engine(g, [Sequence()]).compile()


def test_bad_tile_and_bad_field_shapes_are_clear_errors():
    g = Graph(ipu_model(tiles_per_ipu=4))
    v = g.add_variable("float", [4], "v")
    with pytest.raises(GraphError, match="tile 9 does not exist"):
        g.set_tile_mapping(v, 9)
    cs = g.add_compute_set("cs")
    with pytest.raises(GraphError, match="leading dimension of 2"):
        g.add_vertices(cs, "popops::Neg", {"in": v, "out": v}, tiles=[0, 1])
    with pytest.raises(ValueError, match="missing \\['out'\\]"):
        g.add_vertex(cs, "popops::Neg", {"in": v}, tile=0)
