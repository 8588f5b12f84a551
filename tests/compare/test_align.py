"""Sequence alignment of step keys: exact on hand-made edits, optimal (LCS length) against an
independent plain-Python dynamic programme, valid and complete on large inputs."""

from __future__ import annotations

import numpy as np
import pytest

from app.comparison import align as align_mod
from app.comparison.align import align_sequences


def lcs_length(a: list[int], b: list[int]) -> int:
    """Textbook O(n*m) LCS length, written independently of the module under test."""
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def check_valid(a: np.ndarray, b: np.ndarray) -> int:
    """The alignment pairs equal keys, in increasing order, and lists every element exactly once."""
    al = align_sequences(a, b)
    m = al.matched
    np.testing.assert_array_equal(a[al.baseline[m]], b[al.active[m]])
    assert np.all(np.diff(al.baseline[m]) > 0) and np.all(np.diff(al.active[m]) > 0)
    assert sorted(al.baseline[al.baseline >= 0].tolist()) == list(range(a.size))
    assert sorted(al.active[al.active >= 0].tolist()) == list(range(b.size))
    # the edit script is in order on both sides
    assert np.all(np.diff(al.baseline[al.baseline >= 0]) > 0)
    assert np.all(np.diff(al.active[al.active >= 0]) > 0)
    return int(m.sum())


def test_identical_sequences_align_index_by_index() -> None:
    a = np.array([5, 1, 5, 2])
    al = align_sequences(a, a.copy())
    assert al.baseline.tolist() == [0, 1, 2, 3] and al.active.tolist() == [0, 1, 2, 3]


def test_one_inserted_step_shifts_nothing_else() -> None:
    a = np.array([10, 11, 12, 13, 14])
    b = np.array([10, 11, 99, 12, 13, 14])
    al = align_sequences(a, b)
    assert al.baseline.tolist() == [0, 1, -1, 2, 3, 4]
    assert al.active.tolist() == [0, 1, 2, 3, 4, 5]
    assert al.added.tolist() == [2] and al.removed.tolist() == []
    assert al.active_for_baseline(5).tolist() == [0, 1, 3, 4, 5]


def test_removed_and_replaced_steps() -> None:
    a = np.array([1, 2, 3, 4, 5, 6])
    b = np.array([1, 3, 4, 7, 6])  # 2 removed, 5 replaced by 7
    al = align_sequences(a, b)
    assert sorted(al.removed.tolist()) == [1, 4]
    assert al.added.tolist() == [3]
    # removed elements come before the added ones of the same gap
    assert list(zip(al.baseline.tolist(), al.active.tolist(), strict=True)) == [
        (0, 0), (1, -1), (2, 1), (3, 2), (4, -1), (-1, 3), (5, 4)
    ]  # fmt: skip


def test_repeated_keys_insertion_in_a_repeated_body() -> None:
    body = [1, 2, 3, 2, 3]
    a = np.array(body * 3)
    b = np.array(body[:2] + [9] + body[2:] + body * 2)
    assert check_valid(a, b) == a.size


def test_empty_sides() -> None:
    al = align_sequences(np.array([], dtype=np.int64), np.array([1, 2]))
    assert al.baseline.tolist() == [-1, -1] and al.active.tolist() == [0, 1]
    al = align_sequences(np.array([3]), np.array([], dtype=np.int64))
    assert al.removed.tolist() == [0]


@pytest.mark.parametrize("seed", range(40))
def test_optimal_against_plain_dp(seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 6, rng.integers(0, 45))
    b = a.copy()
    for _ in range(rng.integers(0, 8)):
        op = rng.integers(0, 3)
        if op == 0 and b.size:
            b = np.delete(b, rng.integers(0, b.size))
        elif op == 1:
            b = np.insert(b, rng.integers(0, b.size + 1), rng.integers(0, 9))
        elif b.size:
            b[rng.integers(0, b.size)] = rng.integers(0, 9)
    assert check_valid(a, b) == lcs_length(a.tolist(), b.tolist())


def test_anchor_and_block_tiers_on_large_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a tiny exact-DP budget the anchor (patience) and block tiers do the work; unique keys
    with scattered insertions and deletions must still match every surviving element."""
    monkeypatch.setattr(align_mod, "DP_CELLS", 400)
    monkeypatch.setattr(align_mod, "BLOCK_ROWS", 50)
    rng = np.random.default_rng(7)
    a = np.arange(3000)
    dropped = rng.choice(3000, 40, replace=False)
    b = np.delete(a, dropped)
    b = np.insert(b, rng.integers(0, b.size, 40), 10_000 + np.arange(40))
    assert check_valid(a, b) == 3000 - 40
    # a repeated body has no unique keys: occurrence-rank anchors align it
    body = np.arange(200)
    a = np.tile(body, 8)
    b = np.tile(np.insert(body, 70, 999), 8)
    assert check_valid(a, b) == a.size
    # the block tier alone (the last resort) on the same input: valid, and here still optimal
    ri, rj = align_mod._lcs_blocks(a, b)
    np.testing.assert_array_equal(a[ri], b[rj])
    assert np.all(np.diff(ri) > 0) and np.all(np.diff(rj) > 0) and ri.size == a.size


def test_twenty_thousand_steps_with_an_inserted_step_in_a_repeated_body() -> None:
    body = np.arange(2000)
    a = np.tile(body, 10)
    b = np.tile(np.insert(body, 700, 99_999), 10)
    assert check_valid(a, b) == a.size
