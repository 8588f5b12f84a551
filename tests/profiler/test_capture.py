"""Capture: reports written as the engine options ask, consistent with SPEC.md, deterministic."""

import json

import numpy as np
import pytest

from profiler import Engine, Execute, Graph, OptionError, OutOfMemoryError, Repeat, Sequence, ipu_model
from report_format import open_report

ALL = {"autoReport.all": "true"}


def _graph(target=None, n=64):
    g = Graph(target or ipu_model(tiles_per_ipu=4))
    x = g.add_variable("float", [n], "x")
    t = g.add_variable("float", [n], "tmp")
    y = g.add_variable("float", [n], "y")
    for v in (x, t, y):
        g.map_linearly(v)
    per = n // g.target.num_tiles
    tiles = np.arange(g.target.num_tiles)
    sq, sh = g.add_compute_set("square"), g.add_compute_set("shift")
    g.add_vertices(
        sq, "popops::Mul", {"in1": x.reshape(-1, per), "in2": x.reshape(-1, per), "out": t.reshape(-1, per)}, tiles
    )
    # each tile reads its right neighbour's first element: an exchange
    nxt = x.reshape(-1, per)[:, :1]
    rolled = np.roll(np.arange(g.target.num_tiles), -1)
    g.add_vertices(
        sh,
        "popops::Add",
        {"in1": t.reshape(-1, per)[:, :1], "in2": nxt[rolled], "out": y.reshape(-1, per)[:, :1]},
        tiles,
    )
    g.create_host_write("x", x)
    g.create_host_read("y", y)
    return g, Sequence(Repeat(2, Sequence(Execute(sq), Execute(sh))))


def _run(tmp_path, name="", options=None, runs=1, env=None, monkeypatch=None):
    g, prog = _graph()
    opts = {**ALL, "autoReport.directory": str(tmp_path / "rep"), **(options or {})}
    e = Engine(g, [prog], options=opts, name=name)
    e.load()
    e.write_tensor("x", np.linspace(-1, 1, 64, dtype=np.float32))
    for _ in range(runs):
        e.run(0)
    return e, e.write_report()


def test_report_opens_and_tables_follow_the_spec(tmp_path):
    e, path = _run(tmp_path)
    r = open_report(path)
    r.verify()
    assert r.profiles == {"graph": True, "execution": True, "debug_info": True}
    tgt = r.target_info
    assert (tgt.num_tiles, tgt.bytes_per_tile) == (4, 65536)
    # per tile, category rows sum to total excluding gaps
    tm, bc = r.tile_memory(), r.tile_memory_by_category()
    assert (bc.groupby("tile")["bytes"].sum().values == tm["total_bytes_excluding_gaps"].values).all()
    assert (tm["always_live_bytes"] + tm["not_always_live_bytes"] == tm["total_bytes_excluding_gaps"]).all()
    # program steps: the leaves in pre-order, numbered 0..n-1; executed steps repeat the body
    progs = r.programs()
    leaves = progs[progs["step"] >= 0]
    assert leaves["step"].tolist() == list(range(len(leaves)))
    assert leaves["program_id"].is_monotonic_increasing
    assert set(leaves["type"]) == {"OnTileExecute", "DoExchange", "Sync"}
    steps = r.execution_steps(0)
    assert len(steps) == 2 * len(leaves)
    assert steps["program_id"].tolist() == 2 * leaves["program_id"].tolist()
    assert (steps["cycles_from"].values[1:] == steps["cycles_to"].values[:-1]).all()
    runs = r.runs()
    assert runs["cycles"].tolist() == [int(steps["cycles_to"].max())] and runs["steps"].tolist() == [len(steps)]
    # tile cycles: max over tiles = step length
    tc = r.tile_cycles_range(0, 0, len(steps), ipu=0)
    assert (tc.max(axis=1) == (steps["cycles_to"] - steps["cycles_from"]).values).all()
    # liveness intervals refer to program steps; tmp lives from the square step to the add step
    li = r.liveness_intervals()
    names = r.variables().set_index("variable_id")["name"]
    tmp = li[li["variable_id"].map(names) == "tmp"]
    body = leaves[leaves["type"] == "OnTileExecute"]["step"].tolist()
    assert tmp[["first_step", "last_step"]].values.tolist() == [[body[0], body[-1]]]
    ex = r.exchanges()
    assert (ex["bytes_in"].sum(), ex["bytes_out"].sum()) == (16, 16)  # 4 tiles x one float each
    flops = r.vertices()["flops"].sum()
    assert runs["flops"].tolist() == [2 * flops]  # the body ran twice
    assert r.engine_options().set_index("name").loc["autoReport.all", "source"] == "code"


def test_two_runs_of_the_same_program_give_identical_tables(tmp_path):
    _, path = _run(tmp_path, name="main")
    first = json.loads((path / "manifest.json").read_text())["tables"]
    _, again = _run(tmp_path, name="main")  # same program, options and engine name: replaces the report
    second = json.loads((again / "manifest.json").read_text())["tables"]
    assert again == path and first == second  # every table byte-identical (sha256), timestamps aside


def test_runs_beyond_the_count_are_recorded_as_truncation(tmp_path):
    e, path = _run(tmp_path, runs=3)
    r = open_report(path)
    assert r.runs()["run"].tolist() == [0, 1]
    tr = r.truncations()
    assert tr[["kind", "captured", "total"]].values.tolist() == [["runs", 2, 3]]
    assert "autoReport.executionProfileProgramRunCount" in tr["reason"][0]


def test_named_engines_get_sub_directories(tmp_path):
    _, p1 = _run(tmp_path, name="train")
    _, p2 = _run(tmp_path, name="infer")
    assert (p1.name, p2.name) == ("train", "infer") and p1.parent == p2.parent
    assert open_report(p1).manifest.engine == "train"


def test_environment_options_win_and_select_profiles(tmp_path, monkeypatch):
    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", json.dumps({"autoReport.outputExecutionProfile": "false"}))
    _, path = _run(tmp_path)
    r = open_report(path)
    assert r.profiles["execution"] is False and r.num_rows("execution_steps") == 0
    assert r.engine_options().set_index("name").loc["autoReport.outputExecutionProfile", "source"] == "environment"


def test_bad_options_are_one_line_errors(monkeypatch):
    g, prog = _graph()
    with pytest.raises(OptionError, match="autoReport.bogus"):
        Engine(g, [prog], options={"autoReport.bogus": "true"})
    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", "{not json")
    with pytest.raises(OptionError, match="POPLAR_ENGINE_OPTIONS") as exc:
        Engine(g, [prog])
    assert "\n" not in str(exc.value)


def _oom_graph():
    # 8 KiB tiles: stack is 6 x 48 + 96 = 384 B, so a 7.75 KiB variable (1984 floats) on tile 1 does not
    # fit (384 + 7936 = 8320 B plus control code > 8192)
    g = Graph(ipu_model(tiles_per_ipu=4, bytes_per_tile=8192))
    v = g.add_variable("float", [1984], "big")
    g.set_tile_mapping(v, 1)
    g.create_host_read("big", v)
    return g


def test_out_of_memory_allowed_writes_the_graph_report_and_refuses_to_run(tmp_path):
    g = _oom_graph()
    e = Engine(g, [Sequence()], options={**ALL, "autoReport.directory": str(tmp_path / "rep")})
    e.compile()  # debug.allowOutOfMemory defaults to true
    with pytest.raises(OutOfMemoryError, match=r"out of memory on 1 tile\(s\).*tile 1 needs 8,\d{3} bytes"):
        e.run(0)
    r = open_report(e.write_report())
    assert r.profiles["graph"] and not r.profiles["execution"]
    tm = r.tile_memory()
    assert tm["overflowed_bytes"].tolist()[1] > 0 and tm["overflowed_bytes"].tolist()[0] == 0
    assert any("out of memory" in n for n in r.notes)


def test_out_of_memory_not_allowed_fails_compilation_without_execution_profile(tmp_path):
    g = _oom_graph()
    opts = {**ALL, "autoReport.directory": str(tmp_path / "rep"), "debug.allowOutOfMemory": "false"}
    e = Engine(g, [Sequence()], options=opts)
    with pytest.raises(OutOfMemoryError, match="tile 1 needs .*debug.allowOutOfMemory is false"):
        e.compile()
    r = open_report(tmp_path / "rep")
    assert not r.profiles["execution"] and r.num_rows("runs") == 0


def test_inter_ipu_reads_are_global_exchanges(tmp_path):
    t = ipu_model(tiles_per_ipu=2, num_ipus=2)
    g = Graph(t)
    a = g.add_variable("float", [4], "a")
    b = g.add_variable("float", [4], "b")
    g.set_tile_mapping(a, 0)  # IPU 0
    g.set_tile_mapping(b, 3)  # IPU 1
    cs = g.add_compute_set("neg")
    g.add_vertex(cs, "popops::Neg", {"in": a, "out": b}, tile=3)
    g.create_host_write("a", a)
    g.create_host_read("b", b)
    e = Engine(g, [Sequence(Execute(cs))], options={**ALL, "autoReport.directory": str(tmp_path / "rep")})
    e.load()
    e.write_tensor("a", [1, 2, 3, 4])
    e.run(0)
    assert e.read_tensor("b").tolist() == [-1, -2, -3, -4]
    r = open_report(e.write_report())
    types = r.programs().query("step >= 0")["type"].tolist()
    assert types == ["Sync", "GlobalExchange", "OnTileExecute"]
    steps = r.execution_steps(0)
    assert sorted(steps["ipu"].unique()) == [0, 1]
    ge = steps[steps["step"] == 1].set_index("ipu")
    assert ge.loc[0, "data_out_bytes"] == 16 and ge.loc[1, "data_in_bytes"] == 16
    assert r.tile_cycles(0, 2).shape == (2, 2)


def test_steps_beyond_the_bound_are_recorded_as_truncation(tmp_path, monkeypatch):
    import profiler.engine.engine

    monkeypatch.setattr(profiler.engine.engine, "MAX_CAPTURED_STEPS_PER_RUN", 5)
    e, path = _run(tmp_path)
    r = open_report(path)
    assert r.runs()["steps"].tolist() == [5] and r.num_rows("tile_cycles") == 5
    tr = r.truncations()
    assert tr[["kind", "captured", "total"]].values.tolist() == [["steps", 5, len(e.compiled.steps) * 2]]


def test_a_second_unnamed_engine_does_not_overwrite_the_first(tmp_path):
    _, p1 = _run(tmp_path)
    _, p2 = _run(tmp_path)
    assert p2 == p1.with_name(p1.name + "-engine1")
    assert open_report(p1).num_rows("runs") == 1 and open_report(p2).num_rows("runs") == 1


def test_program_variables_record_the_data_flow(tmp_path):
    """square: t = x * x (reads x, writes t); shift: y = t + x[next] (reads t and x, writes y)."""
    _, path = _run(tmp_path)
    r = open_report(path)
    names = r.variables().set_index("variable_id")["name"]
    progs = r.programs().set_index("program_id")
    pv = r.program_variables()
    pv["variable"] = pv["variable_id"].map(names)
    pv["step_name"] = pv["program_id"].map(progs["name"])
    pv["type"] = pv["program_id"].map(progs["type"])
    ote = pv[pv["type"] == "OnTileExecute"]
    square = dict(
        zip(ote.loc[ote.step_name == "square", "variable"], ote.loc[ote.step_name == "square", "access"], strict=True)
    )
    shift = dict(
        zip(ote.loc[ote.step_name == "shift", "variable"], ote.loc[ote.step_name == "shift", "access"], strict=True)
    )
    assert square == {"x": "read", "tmp": "write"}
    # "shift" also reads what the exchange brought it: x's neighbouring element lands in its receive buffer
    assert shift == {"tmp": "read", "x": "read", "y": "write", "shift/received": "read"}
    # the exchange before "shift" moves x's first elements between tiles: it reads x, writes the buffer
    xch = pv[pv["type"] == "DoExchange"]
    access = dict(zip(xch["variable"], xch["access"], strict=True))
    assert access["x"] == "read" and access["shift/received"] == "write"


def test_a_compute_set_reading_remote_data_holds_it_in_a_receive_buffer(tmp_path):
    """Each of the 4 tiles receives one float of x for "shift" (its right neighbour's first element):
    a 16-byte not-always-live variable, 4 B on every tile, live from the exchange to "shift" only
    (twice: the Repeat runs the body twice, one compiled body)."""
    e, path = _run(tmp_path)
    r = open_report(path)
    v = r.variables().set_index("name").loc["shift/received"]
    assert (v["bytes"], v["tiles"], bool(v["always_live"]), v["dtype"]) == (16, 4, False, "uint8")
    pl = r.variable_placements()
    assert pl.loc[pl["variable_id"] == v["variable_id"], "bytes"].tolist() == [4, 4, 4, 4]
    steps = r.programs().set_index("step")
    iv = r.liveness_intervals()
    iv = iv[iv["variable_id"] == v["variable_id"]]
    assert [
        (steps.loc[a, "type"], steps.loc[b, "name"]) for a, b in zip(iv["first_step"], iv["last_step"], strict=True)
    ] == [("DoExchange", "shift")]
    # steps: square, sync, exchange, shift. tmp (64 floats, 256 B) is live from square to shift (x and y
    # are host-visible: always live); the buffer's 16 B join it at the exchange
    at = r.liveness()["not_always_live_bytes"].tolist()
    assert at == [256, 256, 256 + 16, 256 + 16]


def test_vertex_state_is_the_instance_state_and_the_field_data(tmp_path):
    """SPEC: vertices.state_bytes is a vertex's state as PopLibs' own tests count it, its struct and
    its out-of-line field data; the memory tables split the two into vertexInstanceState and
    vertexFieldData. A split matmul has both (ConvPartial1x1Out's pointer arrays, ReduceAdd's)."""
    from profiler import ops

    g = Graph(ipu_model(tiles_per_ipu=8))
    x = ops.create_matmul_lhs(g, "float32", (8, 64), (64, 16), "x")
    w = ops.create_matmul_rhs(g, "float32", (8, 64), (64, 16), "w")
    prog = Sequence()
    ops.matmul(g, x, w, prog)
    e = Engine(g, [prog], options={**ALL, "autoReport.directory": str(tmp_path / "rep")})
    e.load()
    e.run(0)
    r = open_report(e.write_report())
    bc = r.tile_memory_by_category()
    field = bc[bc["category"] == "vertexFieldData"].groupby("tile")["bytes"].sum()
    state = bc[bc["category"].isin(["vertexInstanceState", "vertexFieldData"])].groupby("tile")["bytes"].sum()
    assert field.sum() > 0
    assert r.vertices().groupby("tile")["state_bytes"].sum().reindex(state.index).tolist() == state.tolist()


@pytest.mark.parametrize("name", ["red\x1b[31m", "two\nlines", "a/b", ".."])
def test_an_engine_name_that_is_not_a_plain_name_is_refused(name: str) -> None:
    from profiler import Engine, EngineError, Graph, Sequence, ipu_model

    with pytest.raises(EngineError, match="use printable characters and no path separators"):
        Engine(Graph(ipu_model()), [Sequence()], name=name)
