"""Planning a compute set once for every compute set built the same way (``profiler.compiler.plan_reuse``):
the same layer on other IPUs, or again on the same tiles over other variables, takes the first
one's plan moved to its tiles and variables. Every figure must be what planning it anew gives, and
a compute set differing in anything the plan reads (a mapping, where its variables' ids lie) is
planned anew."""

import numpy as np
import pytest

from profiler import Engine, Graph, Sequence, ipu_model, ops
from profiler.compiler import compute_sets
from profiler.compiler.compile import compile_programs

TPI = 8  # tiles per IPU
EXCHANGE = ("bytes_in", "bytes_out", "messages", "code_bytes", "cycles", "regions_in", "regions_out")
VERTICES = ("v_tile", "v_codelet", "v_count", "v_state", "v_cycles", "v_flops", "v_constant", "v_field_data")
STEP = ("tile_cycles", "bytes_in", "bytes_out", "flops", "code_bytes")


def _layers(
    seed: int, ipus: int, per_ipu: int = 1, odd_one: int | None = None, gap_in: int | None = None,
    shared: bool = False,
) -> tuple[Graph, Sequence, list]:  # fmt: skip
    """``per_ipu`` copies of one layer on each IPU: variables made in the same order and mapped alike
    (randomly, so runs are cut everywhere and tiles read each other's elements). Layer ``odd_one``'s
    mapping is drawn afresh; layer ``gap_in`` has a variable made between its ``a`` and ``b`` (which
    its first compute set reads together); with ``shared``, every layer also adds to ``a`` one
    variable made before them all (on one IPU). Returns the graph, the program and each layer's
    variables and outputs."""
    g = Graph(ipu_model(tiles_per_ipu=TPI, num_ipus=ipus))
    prog = Sequence()
    rng = np.random.default_rng(seed)
    shapes = {"a": (12, 20), "b": (20, 12), "c": (6, 40)}
    mappings = {k: rng.integers(0, TPI, int(np.prod(s))) for k, s in shapes.items()}
    common = None
    if shared:
        common = g.add_variable("half", shapes["a"], "shared")
        g.set_tile_mapping(common, rng.integers(0, TPI, int(np.prod(shapes["a"]))))
        g.map_linearly(g.add_variable("float", [3], "spacer"))  # the first layer's ids do not abut it
    outs = []
    for layer in range(ipus * per_ipu):
        ipu = layer // per_ipu
        own = np.random.default_rng(seed + 100) if layer == odd_one else None
        vs = {}
        for k, s in shapes.items():
            vs[k] = g.add_variable("half" if k != "c" else "float", s, f"{k}{layer}")
            tiles = mappings[k] if own is None else own.integers(0, TPI, int(np.prod(s)))
            g.set_tile_mapping(vs[k], tiles + ipu * TPI)
            if layer == gap_in and k == "a":
                g.map_linearly(g.add_variable("float", [3], f"gap{layer}"))
        x = ops.add(g, vs["a"], vs["b"].T[::-1], prog)
        y = ops.add(g, vs["b"].T, vs["b"][::-1].T, prog)
        z = ops.mul(g, vs["c"], vs["c"].T.reshape(6, 40)[::-1], prog)
        outs.append((vs, x, y, z))
        if common is not None:
            ops.add(g, vs["a"], common, prog)
    return g, prog, outs


def _compiled(monkeypatch: pytest.MonkeyPatch, reuse: bool, **kw):  # type: ignore[no-untyped-def]
    """The compiled graph of ``_layers(**kw)`` and how many plans were reused."""
    counted: list[int] = []
    real_plan = compute_sets.ComputeSetPlanner.plan

    def counting(self: compute_sets.ComputeSetPlanner, cs):  # type: ignore[no-untyped-def]
        before = self.plans_reused
        out = real_plan(self, cs)
        counted.append(self.plans_reused - before)
        return out

    with monkeypatch.context() as m:
        m.setattr(compute_sets.ComputeSetPlanner, "plan", counting)
        if not reuse:
            m.setattr(compute_sets, "plan_key", lambda *a, **k: None)  # every compute set planned anew
        g, prog, _ = _layers(**kw)
        return compile_programs(g, [prog]), counted


def _assert_same(got, want) -> None:  # type: ignore[no-untyped-def]
    assert list(got.cs_plans) == list(want.cs_plans)
    for cs_id, gp in got.cs_plans.items():
        wp = want.cs_plans[cs_id]
        for part in ("exchange", "global_exchange"):
            ge, we = getattr(gp, part), getattr(wp, part)
            assert (ge is None) == (we is None)
            for name in EXCHANGE if ge is not None else ():
                np.testing.assert_array_equal(getattr(ge, name), getattr(we, name), err_msg=f"{cs_id} {part}.{name}")
        for name in VERTICES:
            np.testing.assert_array_equal(getattr(gp, name), getattr(wp, name), err_msg=f"{cs_id} {name}")
        assert (gp.reads, gp.writes, gp.fills) == (wp.reads, wp.writes, wp.fills)
    assert len(got.steps) == len(want.steps)
    for gs, ws in zip(got.steps, want.steps, strict=True):
        for name in STEP:
            a, b = getattr(gs.cost, name), getattr(ws.cost, name)
            assert (a is None) == (b is None), name
            if a is not None:
                np.testing.assert_array_equal(a, b, err_msg=f"{gs.name} {name}")


@pytest.mark.parametrize("seed", [0, 1])
def test_a_layer_on_later_ipus_takes_the_first_plans_and_they_equal_plans_made_anew(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:  # fmt: skip
    got, reused = _compiled(monkeypatch, True, seed=seed, ipus=3)
    want, none = _compiled(monkeypatch, False, seed=seed, ipus=3)
    # three compute sets a layer: IPU 0's planned, IPUs 1's and 2's taken from them
    assert reused == [0, 0, 0, 1, 1, 1, 1, 1, 1] and not any(none)
    _assert_same(got, want)
    # the moved plans sit on their own IPU's tiles
    for p in list(got.cs_plans.values())[6:]:
        assert p.v_tile.min() >= 2 * TPI and p.exchange.bytes_in[: 2 * TPI].sum() == 0


def test_layers_again_on_the_same_tiles_take_the_first_plans(monkeypatch: pytest.MonkeyPatch) -> None:
    got, reused = _compiled(monkeypatch, True, seed=2, ipus=1, per_ipu=3)
    want, _ = _compiled(monkeypatch, False, seed=2, ipus=1, per_ipu=3)
    assert reused == [0, 0, 0] + [1] * 6
    _assert_same(got, want)


def test_a_layer_mapped_otherwise_is_planned_anew(monkeypatch: pytest.MonkeyPatch) -> None:
    got, reused = _compiled(monkeypatch, True, seed=3, ipus=3, odd_one=1)
    want, _ = _compiled(monkeypatch, False, seed=3, ipus=3, odd_one=1)
    assert reused == [0, 0, 0] + [0, 0, 0] + [1, 1, 1]  # layer 2 takes layer 0's plans
    _assert_same(got, want)


def test_a_layer_whose_ids_abut_otherwise_is_planned_anew(monkeypatch: pytest.MonkeyPatch) -> None:
    # layer 1's `a` and `b` do not abut: its first compute set, reading both, is planned anew; the
    # second reads `b` alone and takes layer 0's plan
    got, reused = _compiled(monkeypatch, True, seed=3, ipus=3, gap_in=1)
    want, _ = _compiled(monkeypatch, False, seed=3, ipus=3, gap_in=1)
    assert reused == [0, 0, 0] + [0, 1, 1] + [1, 1, 1]
    _assert_same(got, want)


def test_layers_reading_a_variable_they_share_take_the_first_plans(monkeypatch: pytest.MonkeyPatch) -> None:
    # each later layer's ids lie further from the shared variable's: the same comparisons, one plan
    got, reused = _compiled(monkeypatch, True, seed=6, ipus=1, per_ipu=3, shared=True)
    want, _ = _compiled(monkeypatch, False, seed=6, ipus=1, per_ipu=3, shared=True)
    assert reused == [0, 0, 0, 0] + [1, 1, 1, 1] * 2
    _assert_same(got, want)


def test_reused_plans_run_each_layer_on_its_own_values() -> None:
    g, prog, outs = _layers(seed=4, ipus=2, per_ipu=2)
    rng = np.random.default_rng(5)
    inputs = []
    for i, (vs, x, y, z) in enumerate(outs):
        for k, v in vs.items():
            g.create_host_write(f"{k}{i}", v)
        for name, t in (("x", x), ("y", y), ("z", z)):
            g.create_host_read(f"{name}{i}", t)
    e = Engine(g, [prog])
    e.load()
    for i, (vs, *_) in enumerate(outs):
        data = {k: rng.standard_normal(v.shape).astype(v.dtype) for k, v in vs.items()}
        inputs.append(data)
        for k, a in data.items():
            e.write_tensor(f"{k}{i}", a)
    e.run(0)
    assert e.compiled.cs_plans and sum(1 for _ in e.compiled.cs_plans) == 12
    for i, data in enumerate(inputs):
        a, b, c = data["a"], data["b"], data["c"]
        np.testing.assert_array_equal(e.read_tensor(f"x{i}"), a + b.T[::-1])
        np.testing.assert_array_equal(e.read_tensor(f"y{i}"), b.T + b[::-1].T)
        np.testing.assert_array_equal(e.read_tensor(f"z{i}"), c * c.T.reshape(6, 40)[::-1])
