"""ElementMap.fully_written: which candidate variables a compute set's write regions cover wholly."""

import numpy as np

from profiler import Graph, ipu_model


def test_fully_written_counts_each_variables_union_of_regions() -> None:
    from profiler.compiler.element_map import ElementMap

    g = Graph(ipu_model(tiles_per_ipu=4))
    for name, n in (("a", 6), ("b", 4), ("empty", 0), ("c", 5)):
        v = g.add_variable("float", (n,), name)
        g.set_tile_mapping(v, np.zeros(n, dtype=np.int64))
    em = ElementMap(g)  # global ids: a 0-5, b 6-9, empty none, c 10-14
    a, b, empty, c = range(4)
    parts = [
        (np.array([0, 3]), np.array([4, 3])),  # a: [0, 4) and [3, 6), overlapping: all 6
        (np.array([6, 6, 8]), np.array([2, 2, 1])),  # b: [6, 8) twice and 8: 3 of 4
        (np.array([10]), np.array([5])),  # c: all 5
    ]
    assert em.fully_written(parts, {a, b, empty, c}) == {a, empty, c}  # no element of "empty" is missing
    assert em.fully_written(parts, {b}) == frozenset()
    assert em.fully_written([(np.zeros(0, np.int64), np.zeros(0, np.int64))], {a, empty}) == {empty}
