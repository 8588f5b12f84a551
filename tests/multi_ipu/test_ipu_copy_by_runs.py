"""A copy of a grouped view to another IPU (a pipeline stage's activations, held in a matmul
result's column groups, sent to the next stage) is planned from the views' runs
(``Compiler._cross_ipu_pieces``), never element by element: its plan must be the one planning it
element by element gives, and it must copy the right values."""

import numpy as np
import pytest

from profiler import Engine, Graph, Sequence, ipu_model
from profiler.compiler import compile as compile_mod
from profiler.compiler.compile import compile_programs
from profiler.poplar.programs import Copy

TPI = 16  # tiles per IPU
ROWS, COLS, GROUP = 24, 64, 16


def _graph(seed: int) -> tuple[Graph, Sequence]:
    """[ROWS, COLS] values stored as [COLS / GROUP, ROWS, GROUP] on IPU 0 (randomly mapped in runs of
    4), copied into a [ROWS, COLS] variable mapped linearly on IPU 1."""
    g = Graph(ipu_model(tiles_per_ipu=TPI, num_ipus=2))
    stored = g.add_variable("half", [COLS // GROUP, ROWS, GROUP], "stored")
    rng = np.random.default_rng(seed)
    g.set_tile_mapping(stored, np.repeat(rng.integers(0, TPI, ROWS * COLS // 4), 4))
    view = stored.transpose(1, 0, 2).reshape(ROWS, COLS)  # row r, column c = stored[c // 16, r, c % 16]
    dst = g.add_variable("half", [ROWS, COLS], "next stage")
    g.map_linearly(dst, tiles=np.arange(TPI, 2 * TPI))
    g.create_host_write("stored", stored)
    g.create_host_read("dst", dst)
    return g, Sequence(Copy(view, dst, name="IpuCopy to IPU 1"))


@pytest.mark.parametrize("seed", [0, 1])
def test_the_copy_by_runs_plans_as_element_by_element(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    pieces: list[int] = []
    real = compile_mod.Compiler._cross_ipu_pieces

    def counted(self, s, d):  # type: ignore[no-untyped-def]
        found = real(self, s, d)
        pieces.append(0 if found is None else found[0].size)
        return found

    monkeypatch.setattr(compile_mod.Compiler, "_cross_ipu_pieces", counted)
    g, prog = _graph(seed)
    by_runs = compile_programs(g, [prog])
    # planned by runs: far fewer pieces than elements (runs of 4 cut at the 16-column groups)
    assert pieces and 0 < pieces[0] <= ROWS * COLS // 4, pieces
    monkeypatch.setattr(compile_mod.Compiler, "_cross_ipu_pieces", lambda self, s, d: None)
    g, prog = _graph(seed)
    by_element = compile_programs(g, [prog])
    got = [s for s in by_runs.steps if s.name == "IpuCopy to IPU 1"]
    want = [s for s in by_element.steps if s.name == "IpuCopy to IPU 1"]
    assert [s.type for s in got] == [s.type for s in want] and got
    for a, b in zip(got, want, strict=True):
        for name in ("tile_cycles", "bytes_in", "bytes_out", "code_bytes"):
            x, y = getattr(a.cost, name), getattr(b.cost, name)
            assert (x is None) == (y is None), name
            if x is not None:
                np.testing.assert_array_equal(x, y, err_msg=name)


def test_the_copy_by_runs_moves_the_values() -> None:
    g, prog = _graph(2)
    e = Engine(g, [prog])
    e.load()
    data = np.random.default_rng(3).standard_normal((COLS // GROUP, ROWS, GROUP)).astype(np.float16)
    e.write_tensor("stored", data)
    e.run(0)
    np.testing.assert_array_equal(e.read_tensor("dst"), data.transpose(1, 0, 2).reshape(ROWS, COLS))
