"""Sequence packing in the BERT builder (``examples.bert(packed=True)``, Graphcore's packed BERT, arXiv
2107.02027): several sequences share a row, each attending only to itself, positions restarting at each;
a packed row computes what each of its sequences computes alone."""

from __future__ import annotations

import numpy as np
import pytest

from profiler.chip.targets import get_target
from profiler.frontends.onnx import Session, examples, import_model, load_model

ort = pytest.importorskip("onnxruntime")

SMALL = {"layers": 2, "hidden": 32, "heads": 4, "ff": 64, "vocab": 100, "seq": 16, "max_positions": 16}


def test_a_packed_row_computes_each_of_its_sequences_as_alone_and_tilescope_agrees() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 100, 6), rng.integers(0, 100, 7)  # two sequences, 3 tokens of padding
    ids = np.zeros((1, 16), np.int64)
    ids[0, :6], ids[0, 6:13] = a, b
    seqno = np.array([[1] * 6 + [2] * 7 + [0] * 3])
    pos = np.array([list(range(6)) + list(range(7)) + [0] * 3])
    types = np.zeros((1, 16), np.int64)
    packed = examples.bert(packed=True, batch=1, **SMALL)
    assert [i.name for i in packed.graph.input] == ["input_ids", "attention_mask", "token_type_ids", "position_ids"]
    feeds = {"input_ids": ids, "attention_mask": seqno, "token_type_ids": types, "position_ids": pos}
    got = ort.InferenceSession(packed.SerializeToString()).run(None, feeds)[0]
    # the reference: the unpacked model (same weights: same seed and sizes) on each sequence alone, padded
    plain = ort.InferenceSession(examples.bert(batch=1, **SMALL).SerializeToString())
    for seq, at in ((a, 0), (b, 6)):
        one = np.zeros((1, 16), np.int64)
        one[0, : seq.size] = seq
        mask = (np.arange(16) < seq.size).astype(np.int64)[None]
        alone = plain.run(None, {"input_ids": one, "attention_mask": mask, "token_type_ids": types})[0]
        np.testing.assert_allclose(got[0, at : at + seq.size], alone[0, : seq.size], rtol=1e-5, atol=1e-5)
    session = Session(import_model(load_model(packed), get_target("C600", 1)))
    np.testing.assert_allclose(session.run(feeds)["output"], got, rtol=1e-4, atol=1e-4)
