"""The pace of a long stage: compute sets (and imported nodes) shaped like earlier ones count
REPEAT_WEIGHT of a new one, so the progress line's time left follows the new ones (a model's first
layer), not the count."""

from __future__ import annotations

import io

import numpy as np
import pytest

from profiler.compiler.pace import REPEAT_WEIGHT, planning_pace, with_work
from profiler.frontends.onnx import examples
from tilescope.progress import Counter, remaining


class _T:
    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape, self.dtype = shape, np.dtype(np.float16)


class _Codelet:
    name = "popops::Add"


class _Batch:
    def __init__(self, rows: int) -> None:
        self.codelet, self.count, self.params = _Codelet(), rows, {"scale": 1.0}
        self.fields = {"in": _T((rows, 8)), "out": _T((rows, 8))}


class _CS:
    def __init__(self, i: int, rows: int) -> None:
        self.id, self.batches = i, [_Batch(rows)]


def test_compute_sets_built_alike_count_a_repeat_weight() -> None:
    # shapes A, A, B, A: two new (1 each) and two repeats (REPEAT_WEIGHT each)
    sets = [_CS(0, 4), _CS(1, 4), _CS(2, 6), _CS(3, 4)]
    pace = planning_pace(sets)  # type: ignore[arg-type]
    total = 2 + 2 * REPEAT_WEIGHT
    got = [pace.done(cs.id) for cs in sets]
    want = [1 / total, (1 + REPEAT_WEIGHT) / total, (2 + REPEAT_WEIGHT) / total, 1.0]
    assert got == pytest.approx(want)


def test_the_time_left_follows_the_work_when_given() -> None:
    # 10 of 100 counted in 20 s: 180 s left by the count; by the work (half done), 20 s
    assert remaining(20.0, 10, 100) == pytest.approx(180.0)
    assert remaining(20.0, 10, 100, 0.5) == pytest.approx(20.0)
    now = [0.0]
    log = io.StringIO()
    counter = Counter("compute sets planned", log, clock=lambda: now[0])
    now[0] = 20.0
    counter(10, 100, 0.5)
    assert log.getvalue() == "tilescope run:   10/100 compute sets planned (10%, ~20 s left)\n"


def test_a_compile_of_alike_layers_reports_the_work_done() -> None:
    """Three alike encoder layers: the work reaches 1 at the last compute set and grows by
    REPEAT_WEIGHT / total at a compute set built as an earlier one."""
    from profiler.chip.targets import ipu_model
    from profiler.frontends.onnx import Session, import_model, load_model

    model = import_model(load_model(examples.bert_layer(seq=8, hidden=32, heads=4, ff=64, layers=3)),
                         ipu_model(tiles_per_ipu=16))  # fmt: skip
    seen: list[tuple[int, int, float]] = []
    Session(model).compile(progress=lambda d, t, work=None: seen.append((d, t, work)))
    done, total, work = (np.array(x) for x in zip(*seen, strict=True))
    assert list(done) == list(range(1, total[0] + 1)) and work[-1] == pytest.approx(1.0)
    steps = np.diff(np.concatenate([[0.0], work]))
    assert (steps > 0).all()
    small = steps < steps.max() / 2  # repeats: REPEAT_WEIGHT of a new one
    assert small.sum() > total[0] / 3  # the second and third layers' compute sets, at least
    assert steps[small] == pytest.approx(REPEAT_WEIGHT * steps.max())


def test_an_import_of_alike_layers_reports_the_work_done() -> None:
    """The same three layers imported: a node like an earlier one (operator, attributes, weight
    shapes) advances the work by REPEAT_WEIGHT of a new one's, and the work ends at 1."""
    from profiler.chip.targets import ipu_model
    from profiler.frontends.onnx import import_model, load_model

    onnx_model = examples.bert_layer(seq=8, hidden=32, heads=4, ff=64, layers=3)
    seen: list[tuple[int, int, float]] = []
    import_model(load_model(onnx_model), ipu_model(tiles_per_ipu=16),
                 progress=lambda d, t, work=None: seen.append((d, t, work)))  # fmt: skip
    done, total, work = (np.array(x) for x in zip(*seen, strict=True))
    n = len(onnx_model.graph.node)
    assert list(done) == list(range(1, n + 1)) and work[-1] == pytest.approx(1.0)
    steps = np.diff(np.concatenate([[0.0], work]))
    per_layer = n // 3
    new = steps.max()
    assert steps[per_layer : 2 * per_layer] == pytest.approx(REPEAT_WEIGHT * new)  # the second layer: all repeats


def test_a_callback_of_the_counts_alone_is_given_the_counts() -> None:
    got: list[tuple] = []
    with_work(lambda d, t: got.append((d, t)))(3, 9, 0.5)  # type: ignore[misc]
    with_work(lambda d, t, work=None: got.append((d, t, work)))(3, 9, 0.5)  # type: ignore[misc]
    assert got == [(3, 9), (3, 9, 0.5)] and with_work(None) is None


def test_a_compile_counts_its_memory_layouts_after_its_compute_sets() -> None:
    """After the planning, the compile's progress counts the tiles' distinct memory layouts placed
    (``what=PLACING``), up to their number, on the caller's line; a Counter starts a line for it."""
    from profiler.chip.targets import ipu_model
    from profiler.engine.engine import PLACING
    from profiler.frontends.onnx import Session, import_model, load_model

    model = import_model(load_model(examples.bert_layer(seq=8, hidden=32, heads=4, ff=64, layers=2)),
                         ipu_model(tiles_per_ipu=16))  # fmt: skip
    seen: list[tuple[int, int, str | None]] = []
    Session(model).compile(progress=lambda d, t, work=None, what=None: seen.append((d, t, what)))
    whats = [w for _, _, w in seen]
    first = whats.index(PLACING)
    assert set(whats[:first]) == {None} and set(whats[first:]) == {PLACING}  # planning, then placing
    placing = [(d, t) for d, t, w in seen if w == PLACING]
    assert placing[-1][0] == placing[-1][1] > 0 and all(d <= t for d, t in placing)
    log = io.StringIO()

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    term = Terminal()
    for stream in (log, term):
        c = Counter("compute sets planned", stream)
        c(4, 4)
        c(1, 2, None, what=PLACING)
        c(2, 2, None, what=PLACING)
        c.close()
    assert log.getvalue() == ""  # a quick compile prints nothing extra to a log
    lines = term.getvalue().split("\n")
    assert lines[0].endswith("4/4 compute sets planned") and lines[1].rstrip().endswith("2/2 memory layouts placed")
