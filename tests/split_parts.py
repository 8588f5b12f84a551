"""The parts the run's thread splits are handed (``profiler.host.parallel.in_row_chunks``), recorded
for tests that check how an operation is split."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from profiler.host import parallel


def record_parts(monkeypatch: pytest.MonkeyPatch, threads: int = 2) -> list[slice]:
    """Set the run's threads to ``threads`` and return the list every later split's parts are noted
    in (the parts still run)."""
    monkeypatch.setattr(parallel, "threads", lambda: threads)
    parts: list[slice] = []
    real = parallel.in_row_chunks

    def seen(work: Callable[[slice], object], rows: int, elements: int, chunk: int | None = None) -> None:
        def recorded(r: slice) -> None:
            parts.append(r)
            work(r)

        real(recorded, rows, elements, chunk)

    monkeypatch.setattr(parallel, "in_row_chunks", seen)
    return parts
