"""Exchange planning works on intervals (regions of variables cut at tile-mapping intervals); this
checks its per-tile figures against a reference written per element with plain Python: every element
a vertex reads from another tile, once per receiving tile; bytes in; bytes out once per element
however many tiles receive it (multicast); the distinct tile pairs; regions received (runs of
elements consecutive in one sender's memory, per receiving tile) and sent (runs of distinct elements
consecutive in the sending tile's memory), which the exchange code follows. An
element's address is its global id, but for a clone of a view over several variables (ops.add_like,
as Poplar's Graph::clone lays out its tiles as the source's): its rank among the clone's elements on
its tile. Graphs with random mappings, so runs are cut everywhere."""

import numpy as np
import pytest

from profiler import Graph, Sequence, ipu_model, ops
from profiler.chip import cost_model
from profiler.compiler import compute_sets
from profiler.compiler import exchange as exchange_mod
from profiler.compiler.compile import compile_programs
from profiler.compiler.exchange import TILES_PER_SUPERTILE
from profiler.compiler.exchange_planning import RemoteReads
from profiler.poplar.tensor import concat


def _addresses(graph: Graph, base: np.ndarray) -> dict[int, list[int]]:
    """Per variable, each element's tile-memory address, element by element."""
    out = {}
    for v in graph.variables:
        tiles = v.mapping.dense().tolist()
        if not v.clone_layout:  # each tile-mapping interval its own region of memory: global ids
            out[v.id] = [int(base[v.id]) + i for i in range(v.numel)]
            continue
        seen: dict[int, int] = {}
        addr = []
        for t in tiles:
            addr.append(int(base[v.id]) + seen.get(t, 0))
            seen[t] = seen.get(t, 0) + 1
        out[v.id] = addr
    return out


def _reference(graph: Graph, cs) -> tuple[np.ndarray, ...]:  # type: ignore[no-untyped-def]
    n = graph.target.num_tiles
    base = np.cumsum([0] + [v.numel for v in graph.variables])
    var_of = np.repeat(np.arange(len(graph.variables)), [v.numel for v in graph.variables])
    addresses = _addresses(graph, base)

    def address(g_: int) -> int:
        v_ = int(var_of[g_])
        return addresses[v_][g_ - int(base[v_])]

    gids, srcs, dsts, sizes = [], [], [], []
    for b in cs.batches:
        for f in b.codelet.reads:
            t = b.fields[f]
            var, idx = t.elements()
            per = t.numel() // t.shape[0]
            src = np.array([graph.variables[v].mapping.dense()[i] for v, i in zip(var, idx, strict=True)])
            dst = np.repeat(b.tiles, per)
            remote = src != dst
            gids.append(base[var][remote] + idx[remote])
            srcs.append(src[remote])
            dsts.append(dst[remote])
            sizes.append(np.full(int(remote.sum()), t.dtype.itemsize))
    gid, src, dst, size = (np.concatenate(x) if x else np.zeros(0, np.int64) for x in (gids, srcs, dsts, sizes))
    seen = {}
    for g_, s_, d_, z_ in zip(gid.tolist(), src.tolist(), dst.tolist(), size.tolist(), strict=True):
        seen[(g_, d_)] = (s_, z_)
    b_in, b_out = np.zeros(n, np.int64), np.zeros(n, np.int64)
    pairs = set()
    shared = np.zeros(n)
    sent: dict[int, set[int]] = {}  # sender -> distinct elements it sends
    received: dict[int, list[tuple[int, int]]] = {}  # receiver -> (element, sender)
    for (g_, d_), (s_, z_) in seen.items():
        b_in[d_] += z_
        if g_ not in sent.setdefault(s_, set()):
            sent[s_].add(g_)
            b_out[s_] += z_  # multicast: once, however many tiles receive it
        received.setdefault(d_, []).append((g_, s_))
        pairs.add((s_, d_))
        partner = d_ ^ 1 if TILES_PER_SUPERTILE == 2 else -1
        if (g_, partner) in seen:
            shared[d_] += z_ / 2
    messages = np.zeros(n, np.int64)
    for s_, d_ in pairs:
        messages[s_] += 1
        messages[d_] += 1
    regions_in, regions_out = np.zeros(n, np.int64), np.zeros(n, np.int64)
    for d_, got in received.items():
        by = sorted((s_, address(g_)) for g_, s_ in got)
        regions_in[d_] = sum(1 for i, (s_, a_) in enumerate(by) if i == 0 or by[i - 1] != (s_, a_ - 1))
    for s_, gs in sent.items():
        al = sorted(address(g_) for g_ in gs)
        regions_out[s_] = sum(1 for i, a_ in enumerate(al) if i == 0 or al[i - 1] != a_ - 1)
    return b_in, b_out, messages, b_in - np.floor(shared).astype(np.int64), regions_in, regions_out


def _random_mapping(g: Graph, t, rng) -> None:  # type: ignore[no-untyped-def]
    n = t.numel()
    cuts = np.sort(rng.choice(np.arange(1, n), size=min(n - 1, max(1, n // 3)), replace=False))
    tiles = rng.integers(0, g.target.num_tiles, cuts.size + 1)
    g.set_tile_mapping(t, np.repeat(tiles, np.diff(np.concatenate(([0], cuts, [n])))))


@pytest.mark.parametrize("way", ["intervals", "intervals in chunks", "elements"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_interval_exchange_matches_a_per_element_reference(
    seed: int, way: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # both ways the compiler plans a field's receives: as intervals, or per element when runs are short
    monkeypatch.setattr(compute_sets, "SHORT_PIECE_ELEMENTS", 10**9 if way == "elements" else 0)
    if way == "intervals in chunks":  # receiving tiles planned a few pieces at a time
        monkeypatch.setattr(exchange_mod, "PIECE_CHUNK", 8)
    rng = np.random.default_rng(seed)
    g = Graph(ipu_model(tiles_per_ipu=16))
    prog = Sequence()
    x = g.add_variable("float", (2, 3, 9, 8), "x")
    w = g.add_variable("float", (4, 3, 3, 3), "w")
    a = g.add_variable("half", (12, 20), "a")
    b = g.add_variable("half", (20, 6), "b")
    c = g.add_variable("float", (6, 40), "c")
    for t in (x, w, a, b, c):
        _random_mapping(g, t, rng)
    ops.conv2d(g, x, w, prog, padding=1)  # a convolution window, padding and all
    ops.conv2d(g, x, w, prog, stride=2)
    ops.matmul(g, a, b, prog)  # per-vertex blocks
    ops.add(g, c, c.T.reshape(6, 40)[::-1], prog)  # explicit and reversed views
    ops.relu(g, c.T, prog)
    # a clone of a concatenation (mapped element by element like it), read reversed: packed addresses
    cat = ops.relu(g, concat([c.reshape(-1), x.reshape(-1)]), prog)
    ops.add(g, cat, cat[::-1], prog)
    compiled = compile_programs(g, [prog])
    checked = 0
    for plan in compiled.cs_plans.values():
        want_in, want_out, want_msg, want_eff, want_rin, want_rout = _reference(g, plan.compute_set)
        e = plan.exchange
        np.testing.assert_array_equal(e.bytes_in, want_in)
        np.testing.assert_array_equal(e.bytes_out, want_out)
        np.testing.assert_array_equal(e.messages, want_msg)
        np.testing.assert_array_equal(e.regions_in, want_rin)
        np.testing.assert_array_equal(e.regions_out, want_rout)
        want_cycles = np.asarray(cost_model.exchange_cycles(want_eff, want_out, g.target), dtype=np.int64)
        np.testing.assert_array_equal(e.cycles, want_cycles)
        # 4 B x (6 + regions sent + regions received) on tiles taking part
        want_code = np.where(want_rin + want_rout > 0, 4 * (6 + want_rin + want_rout), 0)
        np.testing.assert_array_equal(e.code_bytes, want_code)
        checked += int(want_in.sum() > 0)
    assert checked >= 4  # the graphs above do exchange


@pytest.mark.parametrize("seed", [0, 1])
def test_a_compute_set_within_one_ipu_of_several_matches_the_per_element_reference(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a pipeline stage's compute set: every element it reads and writes on IPU 1 of 2, so no
    # inter-IPU part, and what each tile sends is found from the distinct pieces (as on one IPU)
    monkeypatch.setattr(compute_sets, "SHORT_PIECE_ELEMENTS", 0)  # planned as intervals
    rng = np.random.default_rng(seed)
    g = Graph(ipu_model(tiles_per_ipu=8, num_ipus=2))
    prog = Sequence()
    a = g.add_variable("half", (12, 20), "a")
    b = g.add_variable("half", (20, 6), "b")
    c = g.add_variable("float", (6, 40), "c")
    for t in (a, b, c):
        n = t.numel()
        cuts = np.sort(rng.choice(np.arange(1, n), size=n // 3, replace=False))
        tiles = rng.integers(8, 16, cuts.size + 1)  # IPU 1's tiles
        g.set_tile_mapping(t, np.repeat(tiles, np.diff(np.concatenate(([0], cuts, [n])))))
    ops.add(g, a, a[::-1], prog)
    ops.add(g, b.T, b[::-1].T, prog)
    ops.add(g, c, c.T.reshape(6, 40)[::-1], prog)
    compiled = compile_programs(g, [prog])
    checked = 0
    for plan in compiled.cs_plans.values():
        assert plan.global_exchange is None
        want_in, want_out, want_msg, _, want_rin, want_rout = _reference(g, plan.compute_set)
        e = plan.exchange
        np.testing.assert_array_equal(e.bytes_in, want_in)
        np.testing.assert_array_equal(e.bytes_out, want_out)
        np.testing.assert_array_equal(e.messages, want_msg)
        np.testing.assert_array_equal(e.regions_in, want_rin)
        np.testing.assert_array_equal(e.regions_out, want_rout)
        checked += int(want_in.sum() > 0)
    assert checked >= 2


def test_piece_receives_on_graphs_past_int32_element_ids() -> None:
    # a BERT-base at batch 8 has over 2^31 elements: tile ids (int32) times the id span must not wrap
    from profiler.compiler.exchange import piece_receives

    start = np.array([2**31 + 5, 2**31 + 6], dtype=np.int64)
    local, _ = piece_receives(start, np.array([3, 3]), np.array([0, 0], np.int32), np.array([3, 3], np.int32),
                              np.array([2, 2]), 4, 4)  # fmt: skip
    assert local is not None and local.bytes_in.tolist() == [0, 0, 0, 8] and local.bytes_out.tolist() == [8, 0, 0, 0]


def test_sent_pieces_hold_what_each_tile_sends_once() -> None:
    # distinct block pieces given to rows, then padding pieces: what goes out is every element some
    # other tile reads, per holding tile, each distinct piece once however many rows read it
    from profiler.compiler.exchange_planning import sent_pieces

    rng = np.random.default_rng(7)
    s, n, t = rng.integers(0, 50, 12), rng.integers(1, 5, 12), rng.integers(0, 4, 12)
    idx = rng.integers(0, 12, 30)  # the distinct piece each row's piece is
    pad = (rng.integers(100, 120, 5), np.ones(5, np.int64), rng.integers(0, 4, 5))
    start, length, src = (np.concatenate([a[idx], p]) for a, p in zip((s, n, t), pad, strict=True))
    remote = rng.random(start.size) < 0.5
    got = sent_pieces(start, length, src, remote, (s, n, t, idx))

    def held(a, b, c):  # type: ignore[no-untyped-def]
        return {(int(z), e) for x, y, z in zip(a, b, c, strict=True) for e in range(int(x), int(x + y))}

    assert held(*got) == held(start[remote], length[remote], src[remote])
    assert got[0].size <= np.unique(idx[remote[: idx.size]]).size + int(remote[idx.size :].sum())


def test_chunks_of_pieces_start_at_supertiles(monkeypatch: pytest.MonkeyPatch) -> None:
    from profiler.compiler.exchange import _chunk_bounds

    monkeypatch.setattr(exchange_mod, "PIECE_CHUNK", 20)
    rng = np.random.default_rng(4)
    n, span = 16, 1000
    key = np.sort(rng.integers(0, n, 200) * span + rng.integers(0, span, 200))
    bounds = _chunk_bounds(rng.permutation(key // span), n)  # the receiving tiles, in any order
    assert bounds[0] == 0 and bounds[-1] == key.size and bounds == sorted(set(bounds))
    supertile = key // span // TILES_PER_SUPERTILE
    for c in bounds[1:-1]:  # a cut between supertiles, never inside one
        assert supertile[c] != supertile[c - 1]
    assert len(bounds) > 3  # the chunk size was taken into account


def _rearranging_reads(fields: int, per_field: int, tiles: int) -> list[RemoteReads]:
    """Remote reads like an attention's rearranging copy: pieces of 16 elements, each field's pieces
    read row by row from consecutive tiles (a row-major source) by one tile per 1,024 pieces."""
    reads = []
    for f in range(fields):
        i = np.arange(per_field, dtype=np.int64)
        start = (f * per_field + i) * 16
        length = np.full(per_field, 16, np.int64)
        src = (i * 7) % tiles
        dst = (i // 1024 + 1 + src) % tiles
        reads.append(RemoteReads(start, length, src, dst, 2, (start, length, src)))
    return reads


def test_planning_many_pieces_holds_them_once_and_a_chunk_of_temporaries() -> None:
    """Issue 38: the exchange of a compute set of ~10^6 short pieces (an attention's scores rearranged
    for the next matmul) is planned with the pieces held once and its sorted temporaries a chunk of
    tiles at a time, not several copies of every piece (the old planner held the fields' arrays
    beside their concatenation, the sent pieces as a second copy, and sorted copies of all)."""
    import tracemalloc

    from profiler.chip.targets import get_target
    from profiler.compiler.exchange_planning import plan_compute_set_receives

    target = get_target("GC200", 1)
    fields, per_field = 2, 1 << 20
    reads = _rearranging_reads(fields, per_field, target.num_tiles)
    held = sum(a.nbytes for r in reads for a in (r.start, r.length, r.src, r.dst))  # 32 B a piece
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        plan_compute_set_receives(reads, [], fields * per_field * 16, target)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert not reads  # taken over: the caller's list no longer holds the fields' arrays
    # the pieces once (the fields' arrays let go as they are concatenated), their sort order (8 B a
    # piece) and a chunk's temporaries (2^18 pieces): 113 MiB measured; 330 MiB before (issue 38)
    order = 8 * fields * per_field
    assert peak < held + order + (48 << 20), f"{peak / 2**20:.0f} MiB planning {held / 2**20:.0f} MiB of pieces"


def test_planning_pieces_in_chunks_gives_the_same_figures(monkeypatch: pytest.MonkeyPatch) -> None:
    """The chunks of receiving and of sending tiles change no figure (on-IPU and inter-IPU)."""
    from profiler.chip.targets import get_target
    from profiler.compiler.exchange_planning import plan_compute_set_receives

    target = get_target("GC200", 2)
    whole = plan_compute_set_receives(_rearranging_reads(2, 5000, target.num_tiles), [], 160_000, target)
    monkeypatch.setattr(exchange_mod, "PIECE_CHUNK", 64)
    chunked = plan_compute_set_receives(_rearranging_reads(2, 5000, target.num_tiles), [], 160_000, target)
    for a, b in zip(whole, chunked, strict=True):
        assert a is not None and b is not None
        for name in ("bytes_in", "bytes_out", "messages", "code_bytes", "cycles", "regions_in", "regions_out"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
