"""The ByteMLPerf bench's builders follow the published configurations, compute what onnxruntime
computes at small sizes, and docs/fidelity.md's table is the recorded one (bench/bytemlperf.py)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from bench import bytemlperf
from profiler.chip.targets import get_target
from profiler.frontends.onnx import Session, examples, import_model, load_model

ort = pytest.importorskip("onnxruntime")

POOLER = 768 * 768 + 768  # Hugging Face's pooler (a 768 x 768 dense), which the SQuAD models do not use
QA_HEAD = 768 * 2 + 2  # start/end logits


def _parameters(m: onnx.ModelProto) -> int:
    """Trainable float tensors: the mask and rotary tables are constants, not parameters."""
    skip = ("causal_mask", "rope_", "position_ids", "split_shape", "merge_shape", "mask_axes")
    return sum(int(np.prod(t.dims)) for t in m.graph.initializer if t.dims and not t.name.startswith(skip))


@pytest.mark.parametrize(
    ("kwargs", "published"),
    [
        # Hugging Face's parameter counts of the published checkpoints, pooler included
        ({}, 109_482_240 - POOLER + QA_HEAD),  # bert-base-uncased
        ({"embedding": 128, "shared_layers": True, "vocab": 30_000}, 11_683_584 - POOLER + QA_HEAD),  # albert-base-v2
        ({"vocab": 50_265, "max_positions": 514, "token_types": 1}, 124_645_632 - POOLER + QA_HEAD),  # roberta-base
        # CLIPTextModel of openai/clip-vit-large-patch14 (Stable Diffusion 1.x's text encoder)
        ({"vocab": 49_408, "seq": 77, "max_positions": 77, "token_types": 0, "causal": True, "pre_norm": True,
          "quick_gelu": True, "head": 0}, 123_060_480),
    ],
)  # fmt: skip
def test_builders_have_the_published_parameter_counts(kwargs: dict, published: int) -> None:
    m = examples.bert(batch=40, **kwargs)
    assert _parameters(m) == published
    seq = kwargs.get("seq", 384)
    assert [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim] == [40, seq]
    out = [d.dim_value for d in m.graph.output[0].type.tensor_type.shape.dim]
    assert out == [40, seq, kwargs.get("head", 2) or 768]


def test_albert_layers_share_one_layers_weights() -> None:
    m = examples.bert(layers=3, hidden=32, heads=4, ff=64, vocab=50, seq=8, embedding=16, shared_layers=True)
    used = [i for n in m.graph.node if n.op_type == "MatMul" for i in n.input if i.startswith("query_w")]
    assert len(used) == 3 and len(set(used)) == 1


def test_rotary_rotation_turns_each_pair_a_quarter() -> None:
    m = examples.bert(layers=1, hidden=32, heads=4, ff=64, vocab=50, seq=8, rotary=True)
    (rot,) = [numpy_helper.to_array(t) for t in m.graph.initializer if t.name.startswith("rope_rotation")]
    x = np.arange(1.0, 9.0)
    np.testing.assert_array_equal(x @ rot, [-2, 1, -4, 3, -6, 5, -8, 7])  # (x0, x1) -> (-x1, x0)


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"embedding": 16, "shared_layers": True}, {"rotary": True},
     {"causal": True, "pre_norm": True, "quick_gelu": True, "token_types": 0, "head": 0}],
)  # fmt: skip
def test_small_variants_match_onnxruntime_and_the_shares_add_up(kwargs: dict) -> None:
    m = examples.bert(layers=2, hidden=32, heads=4, ff=64, vocab=100, seq=8, max_positions=16, batch=2, **kwargs)
    rng = np.random.default_rng(0)
    names = [i.name for i in m.graph.input]
    feeds = {"input_ids": rng.integers(0, 100, (2, 8))}
    if "attention_mask" in names:  # the second sequence padded: the mask arithmetic matters
        feeds["attention_mask"] = np.array([[1] * 8, [1] * 5 + [0] * 3])
    if "token_type_ids" in names:
        feeds["token_type_ids"] = rng.integers(0, 2, (2, 8))
    want = ort.InferenceSession(m.SerializeToString()).run(None, feeds)[0]
    session = Session(import_model(load_model(m), get_target("C600", 1)))
    got = session.run(feeds)["output"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    # one IPU, no control flow: the inference program's steps add up to the run's cycles
    assert session.engine.compiled is not None
    first, last = session.engine.compiled.program_ranges[1]
    steps = session.engine.step_durations(np.arange(first, last + 1)).max(axis=1)
    assert int(steps.sum()) == session.cycles[-1]
    parts = bytemlperf.shares(session.engine)
    assert all(v > 0 for v in parts.values()) and sum(parts.values()) <= 1.0 + 1e-12


def test_fidelity_doc_table_is_the_recorded_one() -> None:
    record = bytemlperf.load()
    doc = bytemlperf._doc_table(bytemlperf.DOC.read_text())
    assert doc == bytemlperf.render_table(record)
    assert [r["key"] for r in record["rows"]] == [r.key for r in bytemlperf.ROWS]  # one row per seed row
    for r in record["rows"]:
        if "ratio" in r:  # a row that ran: within the band, or KNOWN OFF with its component
            assert r["ratio"] == pytest.approx(r["qps"] / r["seed_qps"])
            rows_per_s = r["run_batch"] * r["clock_hz"] / r["cycles"]
            assert r["qps"] == pytest.approx(rows_per_s * r.get("seqs_per_row", 1.0))  # packed rows count sequences
            within = bytemlperf.LOW <= r["ratio"] <= bytemlperf.HIGH
            assert ("KNOWN OFF: " in r["status"]) == (not within)
            assert r["status"].endswith("within") == within
            assert r["status"].startswith("REDUCED") == (r["run_batch"] != r["batch"])
