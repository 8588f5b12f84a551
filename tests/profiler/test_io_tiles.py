"""Host I/O on I/O tiles (issue 40, "Host I/O as PopRT runs it"): the model on the compute tiles, the
streams' buffers on the I/O tiles, and a step of several batches whose host copies overlap the compute
(PopART's OverlapInnerLoop), hand-computed on a small graph."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from profiler.chip import cost_model
from profiler.chip.targets import ipu_model
from profiler.engine.engine import Engine, EngineError
from profiler.frontends.onnx import Session, import_model, load_model
from profiler.poplar.graph import Graph, GraphError
from profiler.poplar.programs import Sequence
from report_format.vocabulary import StepType


def test_a_step_of_one_batch_is_the_run_in_series() -> None:
    assert cost_model.overlapped_io_step_cycles(100, 30, 20, 1) == 150


def test_a_compute_bound_step_hides_every_copy_but_the_first_load_and_the_last_store() -> None:
    # load 0 (30); batch 0 computes (100) beside load 1 (30); batch 1 beside load 2 and store 0 (50);
    # batch 2 beside store 1 (20); store 2 (20)
    assert cost_model.overlapped_io_step_cycles(100, 30, 20, 3) == 30 + 100 + 100 + 100 + 20
    assert cost_model.overlapped_io_step_cycles(100, 30, 20, 2) == 30 + 100 + 100 + 20


def test_an_io_bound_step_runs_at_the_host_links_pace() -> None:
    # compute 10 a batch: each middle batch waits for a load and a store (30 + 20), the first for a load,
    # the last for a store
    assert cost_model.overlapped_io_step_cycles(10, 30, 20, 4) == 30 + 30 + 50 + 50 + 20 + 20


def test_bad_step_figures_are_refused() -> None:
    with pytest.raises(ValueError, match="batches per step"):
        cost_model.overlapped_io_step_cycles(1, 1, 1, 0)
    with pytest.raises(ValueError, match="host_in"):
        cost_model.overlapped_io_step_cycles(1, -1, 1, 2)


def test_compute_tiles_hide_the_io_tiles_from_the_ops() -> None:
    g = Graph(ipu_model(8))
    with g.compute_tiles(2) as t:
        assert t.tiles_per_ipu == 6 and g.target.num_tiles == 6
        x = g.add_variable("float32", [4])
        with pytest.raises(GraphError, match="tile 6 does not exist"):
            g.set_tile_mapping(x, 6)
    assert g.target.num_tiles == 8 and g.io_tiles == 2
    with pytest.raises(GraphError, match="1 to tiles - 1"), Graph(ipu_model(8)).compute_tiles(8):
        pass


def _matmul_model() -> tuple[onnx.ModelProto, np.ndarray]:
    w = (np.arange(16 * 8, dtype=np.float32).reshape(16, 8) - 60) / 100
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "mm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])],
        [numpy_helper.from_array(w, "w")],
    )
    return load_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])), w


def _session(io_tiles: int, batches: int) -> tuple[Session, np.ndarray, np.ndarray]:
    model, w = _matmul_model()
    s = Session(
        import_model(model, ipu_model(8), io_tiles=io_tiles),
        {"debug.instrument": "false", "tilescope.batchesPerStep": str(batches)},
    )
    s.compile()
    s.upload_weights()
    x = np.linspace(-1, 1, 64, dtype=np.float32).reshape(4, 16)
    out = s.run({"x": x})
    return s, x @ w, out["y"] if isinstance(out, dict) else out[0]


def test_the_streams_buffers_sit_on_the_io_tiles_and_nothing_else_does() -> None:
    s, want, got = _session(io_tiles=2, batches=1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    e = s.engine
    assert e.options.num_io_tiles == 2 and e.options.sources["tilescope.numIOTiles"] == "code"
    assert e.memory is not None
    p = e.memory.placements
    assert e.compiled is not None
    names = np.array([e.compiled.variables[v].name for v in p["variable_id"]])
    on_io = p["tile"] >= 6
    # x: 4 x 16 float32 = 256 B over the 2 I/O tiles, 128 B each; y: 4 x 8 float32 = 128 B, 64 B each
    got_io = sorted(zip(names[on_io].tolist(), p["tile"][on_io].tolist(), p["bytes"][on_io].tolist(), strict=True))
    assert got_io == [("x/io", 6, 128), ("x/io", 7, 128), ("y/io", 6, 64), ("y/io", 7, 64)]


def test_the_io_tile_copies_are_internal_exchanges_and_the_host_copies_reach_only_the_io_tiles() -> None:
    s, _, _ = _session(io_tiles=2, batches=1)
    c = s.engine.compiled
    assert c is not None
    first, last = c.program_ranges[1]
    steps = c.steps[first : last + 1]
    mids = [st for st in steps if st.type == StepType.STREAM_COPY_MID]
    for st in mids:
        assert np.flatnonzero(st.cost.tile_cycles).tolist() == [6, 7]
    copy_in = next(st for st in steps if st.name == "x/IoTileCopy")
    assert copy_in.type == StepType.DO_EXCHANGE
    sent, received = np.asarray(copy_in.cost.bytes_out), np.asarray(copy_in.cost.bytes_in)
    assert sent.tolist() == [0] * 6 + [128, 128] and int(received[:6].sum()) == 256
    copy_out = next(st for st in steps if st.name == "y/IoTileCopy")
    assert int(np.asarray(copy_out.cost.bytes_in)[6:].sum()) == 128


def test_a_step_of_batches_overlaps_the_host_copies_with_the_compute() -> None:
    s, _, _ = _session(io_tiles=2, batches=4)
    e = s.engine
    t = e.graph.target
    ext = cost_model.sync_cycles("external", t)
    h_in, h_out = e.last_run_host_cycles
    # each copy: its Begin (an external sync) and its Mid (the bytes over the host link plus the latency)
    assert h_in == ext + cost_model.stream_copy_cycles(256, t)
    assert h_out == ext + cost_model.stream_copy_cycles(128, t)
    c = e.last_run_cycles - h_in - h_out
    assert e.step_cycles() == h_in + max(c, h_in) + 2 * max(c, h_in + h_out) + max(c, h_out) + h_out
    assert e.step_cycles() < 4 * e.last_run_cycles
    assert "4 batch(es) per step: 2 I/O tiles" in e.step_note()


def test_without_io_tiles_a_step_is_its_runs_in_series() -> None:
    s, _, _ = _session(io_tiles=0, batches=3)
    assert s.engine.step_cycles() == 3 * s.engine.last_run_cycles


def test_the_engine_option_must_say_what_the_graph_was_built_with() -> None:
    g = Graph(ipu_model(8))
    with g.compute_tiles(2):
        pass
    with pytest.raises(EngineError, match="built with 2 I/O tiles"):
        Engine(g, Sequence())
    with pytest.raises(EngineError, match="batchesPerStep must be at least 1"):
        Engine(Graph(ipu_model(8)), Sequence(), {"tilescope.batchesPerStep": "0"})


def test_the_report_notes_how_the_step_was_timed_and_the_cli_prints_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from report_format.reader import open_report
    from tilescope.cli import main

    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", "")  # --report-dir merges into it: put back after the test

    model, _ = _matmul_model()
    path = tmp_path / "mm.onnx"
    onnx.save(model, path)
    out = tmp_path / "rep"
    args = ["run", str(path), "--target", "IPUModel", "--io-tiles", "64", "--batches-per-step", "128"]
    assert main([*args, "--report-dir", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    step = doc["execution"]["step"]
    h_in, h_out = step["host_cycles_in_out"]
    run = doc["execution"]["cycles_per_run"][-1]
    assert step["io_tiles"] == 64 and step["batches_per_step"] == 128
    assert step["step_cycles"] == cost_model.overlapped_io_step_cycles(run - h_in - h_out, h_in, h_out, 128)
    notes = open_report(out).notes
    assert any(n.startswith("128 batch(es) per step: 64 I/O tiles") for n in notes), notes
    assert main(args) == 0
    assert "step          128 batches:" in capsys.readouterr().out


def test_io_tiles_are_refused_on_a_split_model_or_beyond_the_ipu() -> None:
    from profiler.frontends.onnx.errors import FrontendError

    model, _ = _matmul_model()
    with pytest.raises(FrontendError, match="one IPU per replica; it would be split over 2"):
        import_model(model, ipu_model(8, num_ipus=2), io_tiles=2)
    with pytest.raises(FrontendError, match="8 of the IPU's 8 tiles"):
        import_model(model, ipu_model(8), io_tiles=8)
