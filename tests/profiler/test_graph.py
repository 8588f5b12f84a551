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


class _Index:
    """The same views as numpy expressions over the element indices (the reference)."""

    def __init__(self, a: np.ndarray) -> None:
        self.a = a

    def transpose(self, *axes: int) -> "_Index":
        return _Index(self.a.transpose(*axes))

    def __getitem__(self, key: object) -> "_Index":
        return _Index(self.a[key])

    def broadcast_to(self, shape: tuple[int, ...]) -> "_Index":
        return _Index(np.broadcast_to(self.a, shape))

    def reshape(self, *shape: int) -> "_Index":
        return _Index(self.a.reshape(shape))

    def group_dims(self, *sizes: int) -> "_Index":
        dims = np.split(np.array(self.a.shape), np.cumsum(sizes)[:-1])
        return _Index(self.a.reshape([int(np.prod(d)) for d in dims]))


@pytest.mark.parametrize(
    "view",
    [
        lambda t: t,  # the whole variable: its tiles are the mapping
        lambda t: t.transpose(1, 0, 2),  # one-to-one, not in order: written through a strided view
        lambda t: t[:, 1:3, ::2],  # part of it, strided
        lambda t: t[::-1],  # a negative stride: by element index
        lambda t: t[:, :1].broadcast_to((2, 3, 4)),  # repeated elements: the last write wins, as numpy's
        lambda t: t.reshape(2, 3, 2, 2).transpose(0, 2, 1, 3).group_dims(1, 1, 2),  # factored: by its factors
    ],
)
def test_mapping_and_tile_of_through_a_view_match_numpy_indexing(view):
    # the one-variable fast paths (no per-element variable ids) against numpy on the index array
    g = Graph(ipu_model(tiles_per_ipu=32))
    v = g.add_variable("float", [2, 3, 4], "v")
    g.set_tile_mapping(v, 0)
    t = view(v)
    idx = view(_Index(np.arange(24).reshape(2, 3, 4))).a.reshape(-1)
    tiles = np.arange(t.numel()) % 7 + 1
    g.set_tile_mapping(t, tiles)
    want = np.zeros(24, dtype=np.int64)
    want[idx] = tiles
    assert g.tile_of(v).tolist() == want.tolist()
    assert g.tile_of(t).tolist() == want[idx].tolist()
    g.set_tile_mapping(t, 9)
    want[idx] = 9
    assert g.tile_of(v).tolist() == want.tolist()


def test_map_intervals_takes_blocks_in_any_order_and_refuses_gaps():
    g = Graph(ipu_model(tiles_per_ipu=4))
    v = g.add_variable("float", [10], "v")
    g.map_intervals(v, np.array([6, 0, 3]), np.array([4, 3, 3]), np.array([1, 2, 1]))
    assert g.tile_of(v).tolist() == [2, 2, 2, 1, 1, 1, 1, 1, 1, 1]
    assert g.variables[0].mapping.intervals() == [(0, 3, 2), (3, 10, 1)]  # neighbours on one tile merge
    with pytest.raises(GraphError, match="do not cover"):
        g.map_intervals(v, np.array([0, 4]), np.array([3, 6]), np.array([0, 1]))
    g.map_intervals(v[::3], np.array([2, 0]), np.array([2, 2]), np.array([3, 0]))  # a view: by element
    assert g.tile_of(v).tolist() == [0, 2, 2, 0, 1, 1, 3, 1, 1, 3]


def test_pattern_rows_are_the_blocks_indexing_finds():
    g = Graph(ipu_model(tiles_per_ipu=4))
    flat = g.add_variable("float", [6, 10], "p").reshape(-1)
    first = np.array([0, 3, 21, 42])
    for shape, strides in [((2, 3), (10, 1)), ((1, 4), (10, 1)), ((3,), (1,)), ((1, 1), (10, 1))]:
        key = first.reshape((-1,) + (1,) * len(shape)) + (
            np.indices(shape).reshape(len(shape), -1).T @ np.array(strides)
        ).reshape(shape)
        got, want = flat.pattern_rows(first, shape, strides), flat[key]
        assert got.shape == want.shape and np.array_equal(got._idx, want._idx)
        assert np.array_equal(got._lay.offsets, want._lay.offsets) and got._lay.inner == want._lay.inner
    # past the end: indexed by the key like any other (here an error naming the index)
    with pytest.raises(IndexError):
        flat.pattern_rows(np.array([58]), (2, 3), (10, 1))
