"""Planning once what repeats on other IPUs: a compute set reading as an earlier one does, a whole
number of IPUs further on and over other variables, takes the earlier exchange plan moved to its
tiles (``profiler.compiler.exchange_reuse``); memory placement shares one first-fit layout between
tiles whose allocations have the same sizes and lifetimes in the same order. Both must give exactly
what planning each anew gives."""

import numpy as np
import pytest

from profiler import Graph, Sequence, ipu_model, ops
from profiler.compiler import compute_sets, memory
from profiler.compiler.compile import compile_programs
from profiler.compiler.exchange_reuse import ExchangeReuse

TPI = 8  # tiles per IPU
FIGURES = ("bytes_in", "bytes_out", "messages", "code_bytes", "cycles", "regions_in", "regions_out")


def _stages(seed: int, ipus: int, odd_one: int | None = None) -> tuple[Graph, Sequence]:
    """The same layer on each IPU: variables made in the same order and mapped alike (randomly, so
    runs are cut everywhere) on each IPU's tiles; ``odd_one``'s mapping drawn afresh."""
    g = Graph(ipu_model(tiles_per_ipu=TPI, num_ipus=ipus))
    prog = Sequence()
    rng = np.random.default_rng(seed)
    shapes = {"a": (12, 20), "b": (20, 6), "c": (6, 40)}
    mappings = {k: rng.integers(0, TPI, int(np.prod(s))) for k, s in shapes.items()}
    for ipu in range(ipus):
        own = np.random.default_rng(seed + 100) if ipu == odd_one else None
        vs = {}
        for k, s in shapes.items():
            vs[k] = g.add_variable("half" if k != "c" else "float", s, f"{k}{ipu}")
            tiles = mappings[k] if own is None else own.integers(0, TPI, int(np.prod(s)))
            g.set_tile_mapping(vs[k], tiles + ipu * TPI)
        ops.add(g, vs["a"], vs["a"][::-1], prog)
        ops.add(g, vs["b"].T, vs["b"][::-1].T, prog)
        ops.add(g, vs["c"], vs["c"].T.reshape(6, 40)[::-1], prog)
    return g, prog


def _plans(g: Graph, prog: Sequence) -> list:
    compiled = compile_programs(g, [prog])
    return [(p.exchange, p.global_exchange) for p in compiled.cs_plans.values()]


def _count_reuse(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each exchange-plan lookup found a plan to reuse, in order (filled as compiles run).
    Whole plans are not reused (``plan_reuse`` would take these layers' plans before any lookup)."""
    monkeypatch.setattr(compute_sets, "plan_key", lambda *a, **k: None)
    reused: list[bool] = []
    real_get = ExchangeReuse.get

    def counting_get(self: ExchangeReuse, key: tuple[bytes, int], n: int):  # type: ignore[no-untyped-def]
        found = real_get(self, key, n)
        reused.append(found is not None)
        return found

    monkeypatch.setattr(ExchangeReuse, "get", counting_get)
    return reused


@pytest.mark.parametrize("seed", [0, 1])
def test_reused_exchange_plans_equal_plans_made_anew(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    reused = _count_reuse(monkeypatch)
    got = _plans(*_stages(seed, ipus=3))
    monkeypatch.setattr(ExchangeReuse, "get", lambda self, key, n: None)  # every plan made anew
    want = _plans(*_stages(seed, ipus=3))
    assert len(got) == len(want)
    for (g_local, g_cross), (w_local, w_cross) in zip(got, want, strict=True):
        assert g_cross is None and w_cross is None  # each stage stays on its IPU
        for name in FIGURES:
            np.testing.assert_array_equal(getattr(g_local, name), getattr(w_local, name), err_msg=name)
    # IPUs 1 and 2 read as IPU 0 does: their compute sets with an exchange all take IPU 0's plans
    assert len(reused) >= 6 and reused == [False] * (len(reused) // 3) + [True] * (2 * len(reused) // 3)


def test_a_stage_mapped_otherwise_is_planned_anew(monkeypatch: pytest.MonkeyPatch) -> None:
    reused = _count_reuse(monkeypatch)
    got = _plans(*_stages(3, ipus=2, odd_one=1))
    assert reused and not any(reused)  # IPU 1's reads differ from IPU 0's: nothing to reuse
    monkeypatch.setattr(ExchangeReuse, "get", lambda self, key, n: None)
    want = _plans(*_stages(3, ipus=2, odd_one=1))
    for (g_local, _), (w_local, _) in zip(got, want, strict=True):
        np.testing.assert_array_equal(g_local.bytes_in, w_local.bytes_in)
        np.testing.assert_array_equal(g_local.regions_out, w_local.regions_out)


def test_the_moved_plan_sits_on_the_later_ipus_tiles() -> None:
    # hand-made reads: tile 1 reads 4 elements of tile 0 on IPU 0; the same on IPU 2, later ids
    from profiler.compiler.exchange_planning import RemoteReads, plan_compute_set_receives

    target = ipu_model(tiles_per_ipu=TPI, num_ipus=3)

    def reads(ipu: int, first_id: int) -> list[RemoteReads]:
        start, length = np.array([first_id]), np.array([4])
        src, dst = np.array([ipu * TPI]), np.array([ipu * TPI + 1])
        return [RemoteReads(start, length, src, dst, 2, (start, length, src))]

    reuse = ExchangeReuse(TPI)
    k0, k2 = reuse.key(reads(0, 10), [], None), reuse.key(reads(2, 5000), [], None)
    assert k0 is not None and k2 is not None and k0[0] == k2[0] and (k0[1], k2[1]) == (0, 2 * TPI)
    reuse.put(k0, plan_compute_set_receives(reads(0, 10), [], 10_000, target))
    found = reuse.get(k2, target.num_tiles)
    assert found is not None
    local, cross = found
    assert cross is None
    want = np.zeros(3 * TPI, np.int64)
    want[2 * TPI + 1] = 8  # 4 half elements received on IPU 2's tile 1
    np.testing.assert_array_equal(local.bytes_in, want)
    np.testing.assert_array_equal(np.flatnonzero(local.bytes_out), [2 * TPI])
    # one more element read: another digest
    other = reads(2, 5000)
    other[0] = other[0]._replace(length=np.array([5]))
    k_other = reuse.key(other, [], None)
    assert k_other is not None and k_other[0] != k0[0]


def test_tiles_whose_lifetimes_compare_alike_share_one_layout(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = memory._first_fit

    def counting(sizes, firsts, lasts):
        calls.append(sizes.size)
        return real(sizes, firsts, lasts)

    monkeypatch.setattr(memory, "_first_fit", counting)
    # tile 0: three allocations over steps 0..9; tile 1: the same sizes 100 steps later, the last one
    # living longer (past every other step, as a stage's output copied on: the same comparisons);
    # tile 2: the same sizes, but the second one outlives the third's first step (another order)
    tile = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2])
    var = np.arange(9)
    size = np.array([64, 32, 64] * 3)
    first = np.array([0, 2, 5, 100, 102, 105, 0, 2, 5])
    last = np.array([3, 4, 9, 103, 104, 150, 3, 6, 9])
    got = memory._allocate_shared(tile, var, size, first, last)
    assert len(calls) == 2  # tiles 0 and 1 share a layout; tile 2 is placed on its own
    for t in range(3):
        m = tile == t
        np.testing.assert_array_equal(got[m], real(size[m], first[m], last[m]))
    # by hand: 0 and 1 overlap (0 at 0, 1 at 64); 2 starts after both died: back to 0
    np.testing.assert_array_equal(got[:3], [0, 64, 0])
    # tile 2: allocation 1 (64..96) is still live at step 5, so allocation 2 takes 0 (0 died at 3)
    np.testing.assert_array_equal(got[6:], [0, 64, 0])
