"""First-fit placement of allocations with lifetimes (profiler.compiler.first_fit), against a brute-force
reference written here and a hand-worked case."""

from __future__ import annotations

import numpy as np

from profiler.compiler.first_fit import first_fit


def _reference(sizes: np.ndarray, firsts: np.ndarray, lasts: np.ndarray, align: int) -> list[int]:
    """In order of first step, then largest, then index: the lowest offset among 0 and the aligned ends
    of the placed allocations still live at this one's first step that overlaps none of them."""
    order = sorted(range(len(sizes)), key=lambda i: (firsts[i], -sizes[i], i))
    offsets = [0] * len(sizes)
    placed: list[int] = []
    for i in order:
        live = [j for j in placed if lasts[j] >= firsts[i]]
        ends = [-(-(offsets[j] + sizes[j]) // align) * align for j in live]
        for p in sorted({0, *ends}):
            if all(p + sizes[i] <= offsets[j] or p >= offsets[j] + sizes[j] for j in live if sizes[j]):
                offsets[i] = p
                break
        placed.append(i)
    return offsets


def test_hand_worked_lifetimes_share_bytes_only_when_apart() -> None:
    # a [0,2] 100 B at 0; b [1,3] 50 B after a's end 100 -> 104 (8 B aligned); c [3,4] 60 B: a is dead,
    # b lives at 104-154 -> c fits below it at 0; d [4,5] 200 B: b is dead, c at 0-60 -> d at 64
    sizes, firsts, lasts = np.array([100, 50, 60, 200]), np.array([0, 1, 3, 4]), np.array([2, 3, 4, 5])
    assert first_fit(sizes, firsts, lasts, 8).tolist() == [0, 104, 0, 64]


def test_first_fit_matches_a_brute_force_reference() -> None:
    rng = np.random.default_rng(7)
    for _ in range(200):
        n = int(rng.integers(0, 40))
        sizes = rng.integers(0, 300, n) * (rng.random(n) > 0.1)  # some empty allocations
        firsts = rng.integers(0, 20, n)
        lasts = firsts + rng.integers(0, 8, n)
        got = first_fit(sizes, firsts, lasts, 8).tolist()
        assert got == _reference(sizes.tolist(), firsts.tolist(), lasts.tolist(), 8)
