"""Hand-worked figures on a 4-tile IPU-Model target (64 KiB tiles, interleaved from 32 KiB).

Constants used below and where they come from:
  stack: 6 workers x 48 B + supervisor 96 B = 384 B per tile (targets.AUTO_WORKER_STACK_BYTES and
    AUTO_SUPERVISOR_STACK_BYTES, Poplar's automatic sizes as calibrated); with the engine options
    target.workerStackSizeInBytes 0x200 and target.supervisorStackSizeInBytes 0x80 (the sizes
    PopLibs' benchmark tools set), 6 x 512 + 128 = 3200 B
  popops::Add code 256 B (codelets.SIMPLE_CODE_BYTES); vertex state 4 + 8 per field
  control code 8 B per program step + 8 B per control node (memory.CONTROL_CODE_*)
  exchange code 4 B x (6 + regions sent + regions received) per tile taking part, a region sent
    once however many tiles receive it (cost_model.exchange_code_bytes; docs/fidelity.md)
  allocations 8-byte aligned
  BinaryOp1D<ADD,float> over n: 6 x (29 + ceil(ceil(n/6)/2) x (1 + 2)) + 11 (ref §3.1)
  compute-set supervisor 30 cycles per active tile; exchange ceil(16 b / 64) + 64 per tile;
  internal sync 126 cycles.
"""

import numpy as np
import pytest

from profiler import Call, Copy, Engine, Execute, Graph, Repeat, Sequence, WriteUndef, ipu_model
from profiler.poplar.tensor import concat


def _tile0(engine, column):
    return int(engine.memory.tile_memory[column][0])


def _on_tile0(g, name, codelet, fields, **params):
    """A compute set of one vertex on tile 0, executed."""
    c = g.add_compute_set(name)
    g.add_vertex(c, codelet, fields, tile=0, **params)
    return Execute(c)


def _categories(engine, tile):
    bc = engine.memory.by_category
    sel = bc["tile"] == tile
    out = {}
    for cat, al, b in zip(bc["category"][sel], bc["always_live"][sel], bc["bytes"][sel], strict=True):
        out[(cat, bool(al))] = out.get((cat, bool(al)), 0) + int(b)
    return out


def _add_graph():
    g = Graph(ipu_model(tiles_per_ipu=4))
    x = g.add_variable("float", [8], "x")
    y = g.add_variable("float", [8], "y")
    g.map_linearly(x)  # 2 elements per tile
    g.map_linearly(y)
    cs = g.add_compute_set("add")
    g.add_vertices(
        cs, "popops::Add", {"in1": x.reshape(4, 2), "in2": x.reshape(4, 2), "out": y.reshape(4, 2)}, tiles=range(4)
    )
    g.create_host_write("x", x)
    g.create_host_read("y", y)
    return g, Sequence(Execute(cs))


@pytest.mark.parametrize(
    ("options", "stack"),
    [
        ({}, 384),  # automatic: 6 x 48 + 96
        ({"target.workerStackSizeInBytes": "0x200", "target.supervisorStackSizeInBytes": 128}, 3200),  # 6 x 512 + 128
        ({"target.workerStackSizeInBytes": "64"}, 480),  # 6 x 64 + the automatic supervisor's 96
    ],
)
def test_bytes_per_tile_per_category_and_gaps(options: dict, stack: int):
    g, prog = _add_graph()
    e = Engine(g, [prog], options={"debug.instrument": "false", **options})
    e.compile()
    # layout on each tile: vertexCode 256 @0, controlCode 8 + 8*2 = 24 @256, vertexInstanceState
    # 16 @280 (BinaryOp1D: in1, in2 ONE_PTR 4 B each, out SPAN 8 B; ends 296), the stack @296,
    # x 8 @296 + stack, y 8 after it. Total 256 + 24 + 16 + stack + 16 (384: 696; 3200: 3512; 480: 792),
    # no gap (296 and every stack here are 8-aligned).
    assert _categories(e, 0) == {
        ("vertexCode", True): 256,
        ("controlCode", True): 24,
        ("vertexInstanceState", True): 16,
        ("stack", True): stack,
        ("variable", True): 16,
    }
    total = 256 + 24 + 16 + stack + 16
    for t in range(4):
        assert e.memory.tile_memory["total_bytes_excluding_gaps"][t] == total
        assert e.memory.tile_memory["total_bytes_including_gaps"][t] == total
        assert e.memory.tile_memory["non_interleaved_bytes_including_gaps"][t] == total
        assert e.memory.tile_memory["interleaved_bytes_including_gaps"][t] == 0
    pl = e.memory.placements
    assert pl["offset"][(pl["variable_id"] == 0) & (pl["tile"] == 2)].tolist() == [296 + stack]


def test_compute_step_cycles_flops_and_total():
    g, prog = _add_graph()
    e = Engine(g, [prog], options={"autoReport.outputExecutionProfile": "true", "autoReport.directory": "/nonexistent"})
    e.compile()
    e.load()
    e.write_tensor("x", np.arange(8, dtype=np.float32))
    e.run(0)
    assert np.array_equal(e.read_tensor("y"), 2 * np.arange(8, dtype=np.float32))
    leaf = e.compiled.steps[0]
    assert leaf.type == "OnTileExecute"
    # n = 2: 6 x (29 + 1 x 3) + 11 = 203, + 30 supervisor = 233 on each tile
    assert leaf.cost.tile_cycles.tolist() == [233] * 4
    assert leaf.cost.flops.tolist() == [2] * 4  # one FLOP per element added
    assert e.runs[0].cycles == 233
    e._report_written = True  # nothing to write in this test


def test_exchange_bytes_cycles_code_and_sync():
    g = Graph(ipu_model(tiles_per_ipu=4))
    c = g.add_constant("float", [4], [1, 2, 3, 4], "c")
    out = g.add_variable("float", [4], "out")
    g.set_tile_mapping(c, 0)
    g.set_tile_mapping(out, 1)
    cs = g.add_compute_set("neg")
    g.add_vertex(cs, "popops::Neg", {"in": c, "out": out}, tile=1)
    g.create_host_read("out", out)
    e = Engine(g, [Sequence(Execute(cs))])
    e.run(0)
    assert e.read_tensor("out").tolist() == [-1, -2, -3, -4]
    sync, exch, compute = e.compiled.steps
    assert (sync.type, exch.type, compute.type) == ("Sync", "DoExchange", "OnTileExecute")
    assert sync.cost.tile_cycles.tolist() == [126] * 4
    assert exch.cost.bytes_in.tolist() == [0, 16, 0, 0]
    assert exch.cost.bytes_out.tolist() == [16, 0, 0, 0]
    assert exch.cost.tile_cycles.tolist() == [68, 68, 0, 0]  # ceil(16*16/64) + 64
    # tile 0 sends c[0:4] as one region, tile 1 receives it as one: 4 x (6 + 1) = 28 B each
    assert exch.cost.code_bytes.tolist() == [28, 28, 0, 0]
    # UnaryOp1D<NEGATE,float> n=4, unrolled loop (c=2, u=2): 6 x (17 + ceil(ceil(4/6)/2) x 2) + 20 = 134, + 30
    assert compute.cost.tile_cycles.tolist() == [0, 164, 0, 0]
    assert e.runs == [] and e.total_runs == 1
    # BSP: 126 + 68 + 278
    assert int(e._clock.max()) == 126 + 68 + 164


def _temporaries(overlap: bool):
    g = Graph(ipu_model(tiles_per_ipu=4))
    t1 = g.add_variable("float", [4], "t1")  # 16 B
    t2 = g.add_variable("float", [8], "t2")  # 32 B
    r1 = g.add_variable("float", [1], "r1")
    r2 = g.add_variable("float", [1], "r2")
    for v in (t1, t2, r1, r2):
        g.set_tile_mapping(v, 0)
    g.create_host_read("r1", r1)
    g.create_host_read("r2", r2)

    def cs(name, codelet, fields, **params):
        return _on_tile0(g, name, codelet, fields, **params)

    fill1 = cs("fill1", "popops::Fill", {"out": t1}, value=1.0)
    fill2 = cs("fill2", "popops::Fill", {"out": t2}, value=2.0)
    red1 = cs("red1", "popops::ReduceAdd", {"in": t1, "out": r1})
    red2 = cs("red2", "popops::ReduceAdd", {"in": t2, "out": r2})
    prog = Sequence(fill1, fill2, red1, red2) if overlap else Sequence(fill1, red1, fill2, red2)
    e = Engine(g, [prog])
    e.run(0)
    assert e.read_tensor("r1").tolist() == [4.0] and e.read_tensor("r2").tolist() == [16.0]
    return e


def test_temporaries_with_disjoint_lifetimes_share_memory():
    e = _temporaries(overlap=False)
    assert e.liveness.intervals == [(0, 0, 1), (1, 2, 3)]
    assert _tile0(e, "not_always_live_bytes") == max(16, 32)
    assert _categories(e, 0)[("variable", False)] == 32


def test_temporaries_with_overlapping_lifetimes_add_up():
    e = _temporaries(overlap=True)
    assert e.liveness.intervals == [(0, 0, 2), (1, 1, 3)]
    assert _tile0(e, "not_always_live_bytes") == 16 + 32
    # liveness per step: t1 alone, both, both, t2 alone
    assert e.memory.liveness_steps[:, 0].tolist() == [16, 48, 48, 32]


def test_a_functions_temporaries_share_memory_within_each_call():
    # body: fill t1 (4 floats), reduce it into r, fill t2 (8 floats), reduce it into r; then its
    # values end (WriteUndef). Called twice, t1 and t2 are each live in two intervals whose hulls
    # overlap (steps 0-1 and 4-5, 2-3 and 6-7), but never at the same step: they share one 32 B
    # block on tile 0, as Poplar gives a variable one address for every call. A value made
    # between the calls (u, 16 B, steps 8-9 of the program) sits beside that block only while
    # the block is live.
    g = Graph(ipu_model(tiles_per_ipu=4))
    t1, t2 = g.add_variable("float", [4], "t1"), g.add_variable("float", [8], "t2")
    r, u, out = (
        g.add_variable("float", [1], "r"),
        g.add_variable("float", [4], "u"),
        g.add_variable("float", [4], "out"),
    )
    for v in (t1, t2, r, u, out):
        g.set_tile_mapping(v, 0)
    g.create_host_read("r", r)
    g.create_host_read("out", out)

    def cs(name, codelet, fields, **params):
        return _on_tile0(g, name, codelet, fields, **params)

    body = Sequence(
        cs("fill1", "popops::Fill", {"out": t1}, value=1.0), cs("red1", "popops::ReduceAdd", {"in": t1, "out": r}),
        cs("fill2", "popops::Fill", {"out": t2}, value=2.0), cs("red2", "popops::ReduceAdd", {"in": t2, "out": r}),
    )  # fmt: skip
    f = g.add_function(body, "f")
    after = Sequence(
        cs("fillu", "popops::Fill", {"out": u}, value=3.0), cs("negu", "popops::Neg", {"in": u, "out": out})
    )
    e = Engine(g, [Sequence(Call(f), WriteUndef((t1, t2)), Call(f), WriteUndef((t1, t2)), after)])
    e.run(0)
    assert e.read_tensor("r").tolist() == [16.0] and e.read_tensor("out").tolist() == [-3.0] * 4
    # steps: call 1 = 0-3, undef 4, call 2 = 5-8, undef 9, fillu 10, negu 11
    assert sorted(e.liveness.intervals) == [(0, 0, 1), (0, 5, 6), (1, 2, 3), (1, 7, 8), (3, 10, 11)]
    assert e.liveness.in_calls == {0: (0, 0, 1), 1: (0, 2, 3)}
    assert e.compiled.call_ranges == [(0, 0, 3), (0, 5, 8)]
    pl = e.memory.placements
    off = {int(v): int(o) for v, o in zip(pl["variable_id"], pl["offset"], strict=True)}
    assert off[t1.single_variable()] == off[t2.single_variable()]
    # by the hulls alone t1 and t2 would overlap (16 + 32 B); shared they take 32 B, and u 16 B after
    # the calls can take the same bytes again
    assert _tile0(e, "not_always_live_bytes") == 32
    assert e.memory.liveness_steps[:, 0].tolist() == [16, 16, 32, 32, 0, 16, 16, 32, 32, 0, 16, 16]


def test_a_parameter_written_just_before_each_call_is_placed_with_the_functions_temporaries():
    # p is copied in before each call (as an outlined block's input is) and read by the body; its
    # value ends after each call. Steps: copy 0, call 1 (reduce), undef 2, copy 3, call 4, undef 5:
    # p is live (0, 1) and (3, 4), i.e. from one step before each call's start to its first step.
    g = Graph(ipu_model(tiles_per_ipu=4))
    s1, s2, p, r = (g.add_variable("float", [n], name) for n, name in ((4, "s1"), (4, "s2"), (4, "p"), (1, "r")))
    for v in (s1, s2, p, r):
        g.set_tile_mapping(v, 0)
    for v, name in ((s1, "s1"), (s2, "s2")):
        g.create_host_write(name, v)
    g.create_host_read("r", r)
    f = g.add_function(_on_tile0(g, "red", "popops::ReduceAdd", {"in": p, "out": r}), "f")
    prog = Sequence(Copy(s1, p), Call(f), WriteUndef(p), Copy(s2, p), Call(f), WriteUndef(p))
    e = Engine(g, [prog])
    e.load()
    e.write_tensor("s1", [1, 1, 1, 1])
    e.write_tensor("s2", [2, 2, 2, 2])
    e.run(0)
    assert e.read_tensor("r").tolist() == [8.0]
    assert sorted(e.liveness.intervals) == [(2, 0, 1), (2, 3, 4)]
    assert e.liveness.in_calls == {p.single_variable(): (0, -1, 0)}


def test_value_carried_around_a_repeat_is_live_across_the_body():
    g = Graph(ipu_model(tiles_per_ipu=4))
    acc = g.add_variable("float", [4], "acc")
    one = g.add_constant("float", [4], 1.0, "one")
    out = g.add_variable("float", [4], "out")
    for v in (acc, one, out):
        g.set_tile_mapping(v, 0)
    g.create_host_read("out", out)
    zero, step = g.add_compute_set("zero"), g.add_compute_set("step")
    g.add_vertex(zero, "popops::Fill", {"out": acc}, tile=0, value=0.0)
    g.add_vertex(step, "popops::ScaledAdd", {"data": acc, "deltas": one}, tile=0, scale=0.5)
    other = g.add_compute_set("other")
    g.add_vertex(other, "popops::Neg", {"in": one, "out": out}, tile=0)
    # steps: 0 zero, 1 other, 2 step (in the body), 3 copy acc -> out
    prog = Sequence(Execute(zero), Repeat(3, Sequence(Execute(other), Execute(step))), Copy(acc, out))
    e = Engine(g, [prog])
    e.run(0)
    assert e.read_tensor("out").tolist() == [1.5] * 4
    assert e.liveness.intervals == [(0, 0, 3)]
    assert e.compiled.repeat_ranges == [(1, 2)]


def test_interleaved_variable_sits_in_the_interleaved_region():
    g = Graph(ipu_model(tiles_per_ipu=4))
    v = g.add_variable("float", [4], "v", interleaved=True)
    g.set_tile_mapping(v, 3)
    g.create_host_read("v", v)
    e = Engine(g, [Sequence()])
    e.compile()
    pl = e.memory.placements
    assert pl["offset"].tolist() == [32768] and pl["region"].tolist() == ["interleaved"]
    tm = e.memory.tile_memory
    assert tm["interleaved_bytes_excluding_gaps"].tolist() == [0, 0, 0, 16]
    assert tm["interleaved_bytes_including_gaps"][3] == 16


def test_on_tile_copies_cost_a_memcpy_and_one_descriptor_per_region():
    g = Graph(ipu_model(tiles_per_ipu=4))
    a = g.add_variable("float", [2, 4], "a")
    b = g.add_variable("float", [4], "b")
    c = g.add_variable("float", [4], "c")
    for v in (a, b, c):
        g.set_tile_mapping(v, 0)
    for v, name in ((a, "a"), (b, "b"), (c, "c")):
        g.create_host_read(name, v)
    g.create_host_write("a", a)
    e = Engine(g, [Sequence(Copy(a[0], b), Copy(a[:, :2].transpose().reshape(4), c))])
    e.load()
    e.write_tensor("a", np.arange(8))
    e.run(0)
    assert e.read_tensor("b").tolist() == [0, 1, 2, 3] and e.read_tensor("c").tolist() == [0, 4, 1, 5]
    first, second = e.compiled.steps  # no remote bytes: no sync, no exchange, only the memcpy
    assert first.cost.tile_cycles.tolist() == [288 + 2, 0, 0, 0]  # 288 + ceil(16 / 8) (ref §3.4 [3P])
    # a[0] -> b is one contiguous region; the transposed view is 4 regions of one element
    assert first.cost.descriptor_bytes.tolist() == [8, 0, 0, 0]
    assert second.cost.descriptor_bytes.tolist() == [32, 0, 0, 0]
    assert _categories(e, 0)[("copyDescriptor", True)] == 40


def test_a_variable_copied_into_its_clone_costs_what_an_element_by_element_copy_does():
    # a: 12 floats, [0:4] and [8:12] on tile 0, [4:8] on tile 1; its clone is mapped the same. The
    # whole-variable copy is planned from the 3 mapping intervals, the same copy seen as two
    # slices (concatenated) element by element: both are 2 regions (16 B of descriptors) and
    # 288 + 32 / 8 cycles on tile 0, 1 region and 288 + 16 / 8 on tile 1 (ref §3.4 [3P]).
    g = Graph(ipu_model(tiles_per_ipu=4))
    a = g.add_variable("float", [12], "a")
    g.set_tile_mapping(a, np.repeat([0, 1, 0], 4))
    twin, other = g.clone(a, "twin"), g.clone(a, "other")
    g.create_host_write("a", a)
    g.create_host_read("twin", twin)
    g.create_host_read("other", other)
    e = Engine(g, [Sequence(Copy(a, twin), Copy(concat([a[:6], a[6:]]), concat([other[:6], other[6:]])))])
    e.load()
    e.write_tensor("a", np.arange(12))
    e.run(0)
    assert e.read_tensor("twin").tolist() == e.read_tensor("other").tolist() == list(range(12))
    whole, by_element = e.compiled.steps
    assert whole.cost.descriptor_bytes.tolist() == by_element.cost.descriptor_bytes.tolist() == [16, 8, 0, 0]
    assert whole.cost.tile_cycles.tolist() == by_element.cost.tile_cycles.tolist() == [288 + 4, 288 + 2, 0, 0]


@pytest.mark.parametrize("ipus", [1, 2])
def test_a_whole_variable_copy_is_planned_by_pieces_as_element_by_element(ipus):
    # a: [0:4] tile 0, [4:8] tile 1, [8:12] tile 0; b: [0:6] on tile 0, [6:12] on tile 2 (or, on 2
    # IPUs, on the second IPU's tiles 4 and 6: a global exchange). All of a into all of b is planned
    # from the 4 pieces the two mappings cut; the same copy through concatenated slices element by
    # element: every figure of every step is the same.
    g = Graph(ipu_model(tiles_per_ipu=4, num_ipus=ipus))
    a = g.add_variable("float", [12], "a")
    g.set_tile_mapping(a, np.repeat([0, 1, 0], 4))
    b, c = g.add_variable("float", [12], "b"), g.add_variable("float", [12], "c")
    far = 4 * (ipus - 1)
    for v in (b, c):
        g.set_tile_mapping(v, np.repeat([far, far + 2], 6))
    g.create_host_write("a", a)
    g.create_host_read("b", b)
    g.create_host_read("c", c)
    halves = (concat([a[:6], a[6:]]), concat([c[:6], c[6:]]))
    e = Engine(g, [Sequence(Copy(a, b)), Sequence(Copy(*halves))])
    e.load()
    e.write_tensor("a", np.arange(12))
    e.run(0)
    e.run(1)
    assert e.read_tensor("b").tolist() == e.read_tensor("c").tolist() == list(range(12))
    (f0, l0), (f1, l1) = e.compiled.program_ranges
    by_pieces, by_element = e.compiled.steps[f0 : l0 + 1], e.compiled.steps[f1 : l1 + 1]
    assert [st.type for st in by_pieces] == [st.type for st in by_element]
    for x, y in zip(by_pieces, by_element, strict=True):
        for field in ("tile_cycles", "bytes_in", "bytes_out", "code_bytes", "descriptor_bytes"):
            vx, vy = getattr(x.cost, field), getattr(y.cost, field)
            assert (vx is None) == (vy is None) and (vx is None or vx.tolist() == vy.tolist()), field
    assert any(st.type == ("GlobalExchange" if ipus == 2 else "DoExchange") for st in by_pieces)


def test_both_tiles_of_a_supertile_receiving_the_same_data_receive_it_twice_as_fast():
    g = Graph(ipu_model(tiles_per_ipu=4))
    c = g.add_constant("float", [16], 1.0, "c")  # 64 B on tile 0
    out = g.add_variable("float", [3, 16], "out")
    g.set_tile_mapping(c, 0)
    for i, tile in enumerate((1, 2, 3)):
        g.set_tile_mapping(out[i], tile)
    g.create_host_read("out", out)
    cs = g.add_compute_set("bcast")
    g.add_vertices(cs, "popops::Neg", {"in": c.expand(0).broadcast(3, 0), "out": out}, tiles=[1, 2, 3])
    e = Engine(g, [Execute(cs)])
    e.compile()
    exch = e.compiled.steps[1]
    # multicast: tile 0 sends its 64 B once, all three tiles listen (docs/fidelity.md "Exchange model")
    assert exch.cost.bytes_in.tolist() == [0, 64, 64, 64] and exch.cost.bytes_out.tolist() == [64, 0, 0, 0]
    # tile 1 (supertile 0, alone) receives 64 B: ceil(16*64/64) + 64 = 80; tiles 2 and 3 (supertile 1)
    # both receive the same 64 B at twice the rate: as 32 B, 72 cycles; tile 0 sends 64 B once: 80
    assert exch.cost.tile_cycles.tolist() == [80, 80, 72, 72]
    # one region sent (once) by tile 0, one received by each of the others: 4 x (6 + 1) = 28 B each
    assert exch.cost.code_bytes.tolist() == [28, 28, 28, 28]


def test_general_data_past_the_interleaved_start_skips_the_interleaved_arena():
    g = Graph(ipu_model(tiles_per_ipu=4))
    big = g.add_variable("float", [10000], "big")  # 40,000 B
    il = g.add_variable("float", [4], "il", interleaved=True)  # 16 B
    g.set_tile_mapping(big, 0)
    g.set_tile_mapping(il, 0)
    g.create_host_read("big", big)
    g.create_host_read("il", il)
    e = Engine(g, [Sequence()])
    e.compile()
    tm = {k: int(v[0]) for k, v in e.memory.tile_memory.items()}
    # stack 384 (control code 8 per control node x 2 = 16 @0 first, so stack @16, big @400)
    # big: [400, 32768) non-interleaved = 32,368 B; the rest 40,000 - 32,368 = 7,632 B after il's 16 B at 32768
    assert tm["non_interleaved_bytes_excluding_gaps"] == 32768
    assert tm["interleaved_bytes_excluding_gaps"] == 7632 + 16
    assert tm["interleaved_bytes_including_gaps"] == 7632 + 16
    assert tm["total_bytes_excluding_gaps"] == 16 + 384 + 40000 + 16
    pl = e.memory.placements
    assert dict(zip(pl["variable_id"].tolist(), pl["offset"].tolist(), strict=True)) == {0: 400, 1: 32768}
