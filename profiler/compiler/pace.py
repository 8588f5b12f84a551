"""How much of a compile's planning is done, for its progress line's time left.

Planning costs follow the compute sets that are new, not their count: a model's repeated layers
plan a compute set built like an earlier one from that earlier plan (``plan_reuse``) in a few ms,
where a new one takes tens to hundreds. Counted alike, the first layer's slow compute sets made the
time left of BERT-base packed at batch 40 (904 compute sets, 12 alike layers) ~4.5 min when 2.5 s
were left (the demo's progress line, 2026-11-29). Here a compute set whose shape (codelets, vertex
counts, field shapes and types, parameters) an earlier one had counts REPEAT_WEIGHT of a new one.
The shape is a guess at what ``plan_reuse`` will recognise, made without the element map; it only
paces the progress line, never what is planned.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable

from profiler.poplar.graph import ComputeSet

# The cost of planning a compute set built like an earlier one, against a new one's: BERT-base
# packed b40's 848 repeats took 1.4 s after its first 56 compute sets took 17 s (~1.7 against ~300
# ms: 0.006); the weight errs long, as a repeat on other tiles is planned afresh
REPEAT_WEIGHT = 0.02


def shape_of(cs: ComputeSet) -> Hashable:
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


class PlanningPace:
    """The fraction of a compile's planning work done as its compute sets are planned."""

    def __init__(self, compute_sets: Iterable[ComputeSet]) -> None:
        self._shapes = {cs.id: shape_of(cs) for cs in compute_sets}
        distinct = len(set(self._shapes.values()))
        self._total = distinct + REPEAT_WEIGHT * (len(self._shapes) - distinct)
        self._seen: set[Hashable] = set()
        self._done = 0.0

    def planned(self, cs: ComputeSet) -> float:
        """Count ``cs`` as planned; the fraction of the work done (0 to 1)."""
        shape = self._shapes.get(cs.id)
        if shape is None:
            shape = self._shapes[cs.id] = shape_of(cs)
        self._done += REPEAT_WEIGHT if shape in self._seen else 1.0
        self._seen.add(shape)
        return min(1.0, self._done / self._total) if self._total else 1.0
