"""How much of a long stage's work is done, for its progress line's time left.

An import's and a compile's costs follow the items that are new, not their count: a model's
repeated layers plan a compute set built like an earlier one from that earlier plan (``plan_reuse``)
in a few ms, where a new one takes tens to hundreds, and import a node like an earlier one (the same
operator, attributes and weight shapes) from its remembered plans. Counted alike, the first layer's
slow items made the time left of BERT-base packed at batch 40 (904 compute sets, 12 alike layers)
~4.5 min when 2.5 s were left (the demo's progress line, 2026-11-29). Here an item whose shape an
earlier one had counts REPEAT_WEIGHT of a new one. A shape is a guess at what will be reused, made
before the work; it only paces the progress line, never what is built or planned.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Hashable, Iterable

from profiler.poplar.graph import ComputeSet

# The cost of an item shaped like an earlier one, against a new one's: BERT-base packed b40's 848
# repeated compute sets took 1.4 s after its first 56 took 17 s (~1.7 against ~300 ms: 0.006); the
# weight errs long, as a repeat on other tiles is planned afresh
REPEAT_WEIGHT = 0.02


def compute_set_shape(cs: ComputeSet) -> Hashable:
    """What two compute sets built alike share: per vertex batch its codelet, vertex count, fields'
    shapes and types, and parameters (scalars by value, others by type)."""
    return tuple(
        (
            b.codelet.name,
            b.count,
            tuple((f, t.shape, t.dtype.str) for f, t in sorted(b.fields.items())),
            tuple(
                (k, v if isinstance(v, int | float | str | bool) else type(v).__name__)
                for k, v in sorted(b.params.items())
            ),
        )
        for b in cs.batches
    )


class Pace:
    """The fraction of a stage's work done as its items (keyed by ``shapes``: item -> shape) are done."""

    def __init__(self, shapes: dict[int, Hashable]) -> None:
        self._shapes = shapes
        distinct = len(set(shapes.values()))
        self._total = distinct + REPEAT_WEIGHT * (len(shapes) - distinct)
        self._seen: set[Hashable] = set()
        self._done = 0.0

    def done(self, item: int) -> float:
        """Count ``item`` as done; the fraction of the work done (0 to 1)."""
        shape = self._shapes.get(item, ("item", item))
        self._done += REPEAT_WEIGHT if shape in self._seen else 1.0
        self._seen.add(shape)
        return min(1.0, self._done / self._total) if self._total else 1.0


def planning_pace(compute_sets: Iterable[ComputeSet]) -> Pace:
    """A compile's pace over the compute sets it plans (by id)."""
    return Pace({cs.id: compute_set_shape(cs) for cs in compute_sets})


def with_work(progress: Callable[..., None] | None) -> Callable[..., None] | None:
    """``progress`` called as ``(done, total, work, what=...)`` (``compile.Progress``): a callback of
    ``(done, total)`` alone or of ``(done, total, work)`` (as the import and compile called before they
    reported their work and their later stages) gets what it takes, and no later stage's counts."""
    if progress is None:
        return None
    if _binds(progress, 0, 0, None, what=""):
        return progress
    takes_work = _binds(progress, 0, 0, None)
    count = progress

    def adapted(done: int, total: int, work: float | None = None, what: str | None = None) -> None:
        if what is not None:  # another stage's counts (memory placement): not this callback's
            return
        if takes_work:
            count(done, total, work)
        else:
            count(done, total)

    return adapted


def _binds(f: Callable[..., None], *args: object, **kwargs: object) -> bool:
    try:
        inspect.signature(f).bind(*args, **kwargs)
    except (TypeError, ValueError):  # ValueError: a builtin without a signature
        return False
    return True
