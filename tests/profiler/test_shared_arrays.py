"""Equal index arrays held once (``profiler.poplar.shared_arrays``): a repeated layer's runs and
mappings are the first layer's arrays, read-only, and the graph still computes each layer's own
values."""

import numpy as np
import pytest

from profiler import Engine, Graph, Sequence, ipu_model, ops
from profiler.poplar.layout import Runs
from profiler.poplar.shared_arrays import MIN_BYTES, shared

TPI = 8  # tiles per IPU


def test_an_equal_array_is_the_one_held() -> None:
    a = np.arange(1000, dtype=np.int32)
    first = shared(a)
    assert first is a and not a.flags.writeable  # held, and never written from now on
    assert shared(np.arange(1000, dtype=np.int32)) is a
    assert shared(np.arange(1000, dtype=np.int64)) is not a  # another type: other bytes
    assert shared(np.arange(1000, dtype=np.int32).reshape(10, 100)) is not a  # another shape
    other = np.arange(1000, dtype=np.int32)
    other[-1] = 0
    assert shared(other) is other
    with pytest.raises(ValueError, match="read-only"):
        a[0] = 5


def test_views_and_small_arrays_are_not_held() -> None:
    big = np.arange(2000, dtype=np.int32)
    view = big[:1000]  # its memory is big's: big could still change it
    assert shared(view) is view and view.flags.writeable
    small = np.arange(MIN_BYTES // 8 - 1, dtype=np.int64)
    assert shared(small) is small and small.flags.writeable


def _layers(ipus: int, per_ipu: int) -> tuple[Graph, Sequence, list]:
    """``per_ipu`` copies of one layer on each IPU: two variables mapped alike (8 elements a tile, at
    random, so a field is many runs) and their sum read across the transpose."""
    g = Graph(ipu_model(tiles_per_ipu=TPI, num_ipus=ipus))
    prog = Sequence()
    chunks = np.random.default_rng(1).integers(0, TPI, 128 * 96 // 8)
    outs = []
    for layer in range(ipus * per_ipu):
        ipu = layer // per_ipu
        a = g.add_variable("float", (128, 96), f"a{layer}")
        b = g.add_variable("float", (96, 128), f"b{layer}")
        for v in (a, b):
            g.set_tile_mapping(v, np.repeat(chunks, 8) + ipu * TPI)
        outs.append((a, b, ops.add(g, a, b.T, prog)))
    return g, prog, outs


def _arrays(g: Graph, cs_ids: range) -> dict[int, np.ndarray]:
    """The run arrays of the fields of the compute sets ``cs_ids``, by identity."""
    got = {}
    for cs in (g.compute_sets[i] for i in cs_ids):
        for batch in cs.batches:
            for t in batch.fields.values():
                lay = t._lay
                if isinstance(lay, Runs):
                    for a in (lay.start, lay.length, lay.row_first):
                        got[id(a)] = a
    return got


def test_a_layer_on_another_ipu_holds_the_first_layer_s_runs_and_mapping_starts() -> None:
    g, _, outs = _layers(ipus=2, per_ipu=1)
    (a0, _, _), (a1, _, _) = outs
    m0, m1 = g.variable(a0).mapping, g.variable(a1).mapping
    assert m0.starts.size > 100 and m1.starts is m0.starts  # offsets: the same on every IPU
    assert not np.array_equal(m1.tiles, m0.tiles)  # tiles: each IPU's own
    half = len(g.compute_sets) // 2
    first, second = _arrays(g, range(half)), _arrays(g, range(half, len(g.compute_sets)))
    large = {i for i, a in first.items() if a.nbytes >= MIN_BYTES}
    assert large and large <= set(second)  # every large run array of layer 1 is layer 0's own


def test_layers_sharing_arrays_compute_their_own_values() -> None:
    g, prog, outs = _layers(ipus=2, per_ipu=2)
    for i, (a, b, c) in enumerate(outs):
        g.create_host_write(f"a{i}", a)
        g.create_host_write(f"b{i}", b)
        g.create_host_read(f"c{i}", c)
    e = Engine(g, [prog])
    e.load()
    rng = np.random.default_rng(2)
    data = [(rng.standard_normal((128, 96)).astype(np.float32), rng.standard_normal((96, 128)).astype(np.float32))
            for _ in outs]  # fmt: skip
    for i, (a, b) in enumerate(data):
        e.write_tensor(f"a{i}", a)
        e.write_tensor(f"b{i}", b)
    e.run(0)
    for i, (a, b) in enumerate(data):
        np.testing.assert_array_equal(e.read_tensor(f"c{i}"), a + b.T)
