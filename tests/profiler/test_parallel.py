"""The run's helper threads (profiler.host.parallel): every chunk runs once, on a helper too, a
chunk's error reaches the caller, and two threads splitting at once do not share a helper."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from profiler.host import parallel


@pytest.fixture
def two_threads(monkeypatch):
    monkeypatch.setattr(parallel, "threads", lambda: 2)


def test_chunks_run_once_each_and_some_on_a_helper(two_threads) -> None:
    hits = np.zeros(100, dtype=int)
    names: set[str] = set()
    entered = threading.Barrier(2, timeout=10)

    def work(rows: slice) -> None:
        names.add(threading.current_thread().name)
        if rows.start == 0 or rows.start == 50:
            entered.wait()  # both parts inside at once: only possible on two threads
        hits[rows] += 1

    parallel.in_row_chunks(work, 100, 100, 50)  # two parts
    assert (hits == 1).all()
    assert len(names) == 2 and any(n.startswith("tilescope-run") for n in names)


def test_a_chunks_error_is_raised_on_the_caller_and_the_helpers_still_work(two_threads) -> None:
    helper_ran = threading.Event()

    def failing(rows: slice) -> None:
        if threading.current_thread().name.startswith("tilescope-run"):
            helper_ran.set()
            raise ValueError("in a helper")
        helper_ran.wait(10)  # the caller's part waits until the helper's has failed

    with pytest.raises(ValueError, match="in a helper"):
        parallel.in_row_chunks(failing, 2, 2, 1)
    hits = np.zeros(10, dtype=int)
    parallel.in_row_chunks(lambda r: hits.__setitem__(r, hits[r] + 1), 10, 10, 5)
    assert (hits == 1).all()


def test_two_threads_splitting_at_once_each_cover_their_rows_once(two_threads) -> None:
    hits = np.zeros((2, 400), dtype=int)
    go = threading.Barrier(2, timeout=10)

    def caller(i: int) -> None:
        go.wait()
        for _ in range(50):
            parallel.in_row_chunks(lambda r: hits[i].__setitem__(r, hits[i][r] + 1), 400, 400, 100)

    threads = [threading.Thread(target=caller, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads)
    assert (hits == 50).all()
