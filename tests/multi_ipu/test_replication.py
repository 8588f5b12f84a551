"""Replication: R copies of one graph on disjoint IPUs, inputs split across them, ring all-reduce."""

import numpy as np
import pytest

from profiler import Engine, Graph, Sequence, ipu_model
from profiler.chip.ipu_links import ring_all_reduce_bytes
from profiler.engine.engine import EngineError
from profiler.frontends.onnx import Session, examples, import_model, random_inputs
from profiler.multi_ipu.replication import AllReduce
from profiler.poplar.graph import GraphError
from profiler.workloads import mlp
from report_format.reader import open_report


def _replicated(replicas: int, options: dict | None = None) -> Engine:
    t = ipu_model(tiles_per_ipu=4, num_ipus=replicas, num_replicas=replicas, ipu_link_bytes_per_cycle=8.0)
    g = Graph(t)
    assert g.target.num_ipus == 1 and g.replication_factor == replicas  # one replica's graph
    x = g.add_variable("float", [8], "x")
    g.map_linearly(x)  # 2 floats = 8 bytes per tile
    g.create_host_write("x", x)
    g.create_host_read("x", x)
    e = Engine(g, [Sequence(AllReduce(x, "add"))], options)
    e.load()
    return e


def test_ring_all_reduce_bytes_are_2_r_minus_1_over_r_of_the_gradients():
    assert ring_all_reduce_bytes(1000, 1) == 0
    assert ring_all_reduce_bytes(1000, 2) == 1000  # 2 x 1 / 2
    assert ring_all_reduce_bytes(1000, 4) == 1500  # 2 x 3 / 4
    assert ring_all_reduce_bytes(1000, 8) == 1750  # 2 x 7 / 8


def test_all_reduce_sums_over_replicas_with_hand_worked_bytes_and_cycles():
    e = _replicated(4)
    e.write_tensor("x", np.arange(32, dtype=np.float32))  # 4 x 8 values: replica r gets 8r..8r+7
    e.run(0)
    want = np.arange(32, dtype=np.float32).reshape(4, 8).sum(axis=0)
    for r in range(4):
        np.testing.assert_array_equal(e.read_tensor("x", replica=r), want)
    sync, ring = e.compiled.steps
    # 4 IPUs in the system: external sync ceil(15 ns x 1.33 GHz x (1 + 4 // 4) x 2) = ceil(79.8) = 80
    assert sync.type == "Sync" and sync.cost.tile_cycles.tolist() == [80] * 4
    # each tile holds 8 bytes and sends 2 x 3 / 4 of them: 12 bytes
    assert ring.type == "GlobalExchange" and ring.cost.bytes_out.tolist() == [12] * 4
    assert int(ring.cost.bytes_out.sum()) == ring_all_reduce_bytes(32, 4)  # 2 x 3 / 4 x 32 = 48
    # 2 x (4 - 1) = 6 ring steps, each 32 / 4 = 8 bytes: ceil(8 / 8) + 64 fixed + 80 sync = 145 -> 870
    assert ring.cost.tile_cycles.tolist() == [870] * 4
    # the ring's receive buffer: ceil(2 floats per tile / 4 replicas) = 1 float on each of 4 tiles,
    # 16 bytes live at the all-reduce step only (x itself is host-visible: always live)
    assert e.memory.liveness_steps.reshape(2, -1)[:, 0].tolist() == [0, 16]


def test_replica_to_profile_is_checked_and_recorded(tmp_path):
    with pytest.raises(EngineError, match="replicaToProfile is 2; the graph has 2 replica"):
        _replicated(2, {"profiler.replicaToProfile": "2"})
    e = _replicated(2, {"profiler.replicaToProfile": "1", "autoReport.all": "true",
                        "autoReport.directory": str(tmp_path / "r")})  # fmt: skip
    e.write_tensor("x", np.ones(16, np.float32))
    e.run(0)
    r = open_report(e.write_report())
    t = r.target_info
    assert (t.num_ipus, t.num_replicas, t.ipus_per_replica) == (1, 2, 1)
    assert r.replicas().to_dict("list") == {"replica": [0, 1], "first_ipu": [0, 1], "profiled": [False, True]}
    steps = r.df("execution_steps")
    assert steps["data_out_bytes"].tolist()[-1] == 32  # the replica's 32 bytes x 2 x 1 / 2


def test_replication_factor_must_divide_the_ipus():
    with pytest.raises(GraphError, match="replication factor 3"):
        Graph(ipu_model(num_ipus=4), replication_factor=3)


def test_data_parallel_training_equals_one_replica_on_the_whole_batch():
    """Two replicas on 16 samples each, gradients averaged, follow the losses of one on 32."""
    one = mlp.build(batch=32, tiles=8)
    one.run(3)
    two = mlp.build(batch=32, tiles=8, replicas=2)
    e = two.run(3)
    pairs = np.array(two.losses).reshape(3, 2)  # each replica streams its loss out
    np.testing.assert_allclose(pairs.mean(axis=1), one.losses, rtol=1e-5)
    rings = [s for s in e.compiled.steps if s.name.startswith("all-reduce")]
    assert [s.name for s in rings] == [f"all-reduce {n} grad" for n in ("w1", "b1", "w2", "b2")]
    # w1's gradient is 784 x 64 floats = 200,704 bytes; 2 replicas send 2 x 1 / 2 of it
    assert int(rings[0].cost.bytes_out.sum()) == 784 * 64 * 4


def test_replicated_onnx_inference_splits_the_inputs_and_equals_one_ipu():
    model = examples.gpt2_block(seq=8, hidden=32, heads=2, batch=2)
    single = Session(import_model(model, ipu_model(tiles_per_ipu=8, bytes_per_tile=1 << 20)))
    rep = Session(import_model(model, ipu_model(tiles_per_ipu=8, bytes_per_tile=1 << 20, num_ipus=2, num_replicas=2)))
    x = random_inputs(rep.model, rows=2)
    assert x["input"].shape == (4, 8, 32)  # 2 replicas x batch 2
    got = rep.run(x)["output"]
    want = np.concatenate([single.run({"input": part})["output"] for part in np.split(x["input"], 2)])
    np.testing.assert_array_equal(got, want)
    assert rep.cycles == single.cycles[:1]  # replicas run in lockstep; no cross-replica step in inference
