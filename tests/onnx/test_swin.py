"""The Swin Transformer builder (profiler.frontends.onnx.swin): its constants by hand, one shifted-window
block against a separately written numpy reference (global attention with a neighbourhood mask, no roll
and no window partition), a tiny Swin against onnxruntime through ``tilescope run --check``, and
Swin-L's published size."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from profiler.chip.targets import get_target
from profiler.frontends.onnx import Session, import_model, load_model, swin
from tilescope.cli import main

ort = pytest.importorskip("onnxruntime")
M = swin.MASKED


def test_relative_position_index_by_hand() -> None:
    """Window 2, tokens (0,0) (0,1) (1,0) (1,1): row (dy + 1) x 3 + dx + 1 of the 3 x 3 table."""
    want = [[4, 3, 1, 0], [5, 4, 2, 1], [7, 6, 4, 3], [8, 7, 5, 4]]
    np.testing.assert_array_equal(swin.relative_position_index(2), want)


def test_shifted_window_mask_by_hand() -> None:
    """4 x 4 grid rolled by -1, window 2: regions [0, 2), [2, 3), [3, 4) per axis. Window 0 (rows and
    columns 0-1) is one region; window 1 (columns 2, 3) splits by column, window 2 by row, window 3 both."""
    z = [[0, 0, 0, 0]] * 4
    by_col = [[0, M, 0, M], [M, 0, M, 0], [0, M, 0, M], [M, 0, M, 0]]
    by_row = [[0, 0, M, M], [0, 0, M, M], [M, M, 0, 0], [M, M, 0, 0]]
    every = [[0 if i == j else M for j in range(4)] for i in range(4)]
    np.testing.assert_array_equal(swin.shifted_window_mask(4, 4, 2, 1), [z, by_col, by_row, every])


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf)(x)


def _reference_block(x: np.ndarray, w: dict[str, np.ndarray], r: int, ws: int, shift: int, heads: int) -> np.ndarray:
    """One Swin block written another way: attention over all r x r tokens in the original grid, where
    token p sees token q only if both fall in one window of the grid shifted by ``shift`` and they are
    fewer than ``ws`` apart on each axis (the roll never brought them together from opposite edges);
    the bias of a pair is the table's row for their offset (dy, dx)."""

    def ln(t: np.ndarray, p: str) -> np.ndarray:
        mu, var = t.mean(-1, keepdims=True), t.var(-1, keepdims=True)
        return (t - mu) / np.sqrt(var + 1e-5) * w[f"b_{p}_gamma"] + w[f"b_{p}_beta"]

    def dense(t: np.ndarray, p: str) -> np.ndarray:
        return t @ w[f"b_{p}_w"] + w[f"b_{p}_b"]

    bsz, n, c = x.shape
    dh = c // heads
    pos = np.stack(np.divmod(np.arange(n), r), axis=-1)  # (row, column) of each token
    window = ((pos - shift) % r) // ws
    d = pos[:, None, :] - pos[None, :, :]  # [n, n, 2] offsets
    sees = (window[:, None] == window[None, :]).all(-1) & (np.abs(d) < ws).all(-1)
    rows = np.clip(d[..., 0] + ws - 1, 0, 2 * ws - 2) * (2 * ws - 1) + np.clip(d[..., 1] + ws - 1, 0, 2 * ws - 2)
    bias = w["b_bias_table"][rows].transpose(2, 0, 1)  # [heads, n, n]
    y = ln(x, "ln1")
    q, k, v = (dense(y, p).reshape(bsz, n, heads, dh).transpose(0, 2, 1, 3) for p in ("q", "k", "v"))
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(dh) + bias
    scores = np.where(sees, scores, -np.inf)
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    x = x + dense((probs @ v).transpose(0, 2, 1, 3).reshape(bsz, n, c), "proj")
    h = dense(ln(x, "ln2"), "fc1")
    return x + dense(h * 0.5 * (1 + _erf(h / np.sqrt(2))), "fc2")


@pytest.mark.parametrize("shift", [2, 0])
def test_block_matches_the_global_masked_reference(shift: int) -> None:
    """An 8 x 8 grid, window 4, shift 2 (and unshifted), batch 2: the exported form (roll by Slice +
    Concat, window partition by Reshape + Transpose, constant mask, gathered bias) simulated, and in
    onnxruntime, equals the reference."""
    r, c, heads, ws = 8, 16, 2, 4
    m = swin.swin_block(r, c, heads, ws, shift, batch=2)
    w = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    w["b_bias_table"] = np.random.default_rng(1).standard_normal(w["b_bias_table"].shape).astype(np.float32)
    table = next(t for t in m.graph.initializer if t.name == "b_bias_table")
    table.CopyFrom(numpy_helper.from_array(w["b_bias_table"], "b_bias_table"))  # a bias large enough to matter
    x = np.random.default_rng(0).standard_normal((2, r * r, c)).astype(np.float32)
    want = _reference_block(x.astype(np.float64), w, r, ws, shift, heads)
    runtime = ort.InferenceSession(m.SerializeToString()).run(None, {"tokens": x})[0]
    np.testing.assert_allclose(runtime, want, rtol=1e-4, atol=1e-4)
    got = Session(import_model(load_model(m), get_target("C600", 1))).run({"tokens": x})["output"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    if shift:  # the shift matters: the unshifted block computes something else
        other = _reference_block(x.astype(np.float64), w, r, ws, 0, heads)
        assert np.abs(other - want).max() > 1e-2


def test_tiny_swin_matches_onnxruntime_with_check(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Two stages (8 x 8 tokens, dim 32, window 4, shifted; a patch merging; 4 x 4 tokens, one window,
    no shift), head of 10: ``tilescope run --check`` against onnxruntime at batch 2."""
    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", "")
    path = tmp_path / "tiny_swin.onnx"
    onnx.save(swin.swin(swin.TINY_SWIN), path)
    assert main(["run", str(path), "--batch", "2", "--check", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["check"]["runtime"].startswith("onnxruntime") and doc["check"]["passed"]
    assert doc["outputs"] == {"logits": [2, 10]}


def test_tiny_swin_graph_has_the_exported_patterns() -> None:
    """Rolls (Slice + Concat) only in shifted blocks (the first stage's second block, forward and back on
    two axes), a mask per shifted block, one Gather of a bias table per block, one patch merging."""
    m = swin.swin(swin.TINY_SWIN)
    ops = [n.op_type for n in m.graph.node]
    assert ops.count("Gather") == 4  # 2 + 2 blocks
    assert sum(n.op_type == "Concat" and "roll" in n.name for n in m.graph.node) == 4  # 2 axes x (shift, unshift)
    assert sum("masked" in n.name for n in m.graph.node) == 1
    assert sum("reduction" in n.name for n in m.graph.node) == 1
    assert swin.TINY_SWIN.window_of(1) == (4, 0)  # 4 x 4 tokens: one window, no shift (Hugging Face's rule)


def test_parameters_count_the_built_graph_and_swin_large_is_published_size() -> None:
    """The architecture's count is the tiny graph's weights; Swin-L 384 has 196.7 M (timm's
    swin_large_patch4_window12_384 model card; the paper's Table 1 rounds it to 197M)."""
    m = swin.swin(swin.TINY_SWIN)
    named = re.compile(r"s\d|patch_|final_|head_")  # weights are named by layer; constants by what they are
    weights = sum(int(np.prod(t.dims)) for t in m.graph.initializer if named.match(t.name))
    assert weights == swin.TINY_SWIN.parameters
    assert round(swin.SWIN_LARGE_384.parameters / 1e6, 1) == 196.7
    assert [swin.SWIN_LARGE_384.window_of(s) for s in range(4)] == [(12, 6), (12, 6), (12, 6), (12, 0)]


def test_external_weights_build_the_same_graph_without_values() -> None:
    """The bench's compile-only rows build Swin with ``weights="external"``: the same nodes and the same
    initializers by name, type and shape, the weights' data never made."""
    random, external = swin.swin(swin.TINY_SWIN), swin.swin(swin.TINY_SWIN, weights="external")
    assert [(n.op_type, list(n.input)) for n in random.graph.node] == [
        (n.op_type, list(n.input)) for n in external.graph.node
    ]
    assert [(t.name, t.data_type, list(t.dims)) for t in random.graph.initializer] == [
        (t.name, t.data_type, list(t.dims)) for t in external.graph.initializer
    ]
    held = [t.name for t in external.graph.initializer if t.data_location != onnx.TensorProto.EXTERNAL]
    assert held and all(not t.startswith(("s0b", "patch_w", "head_w")) for t in held)  # constants only


def test_swin_large_does_the_papers_work() -> None:
    """Swin-L at 384 x 384: the multiply-adds of its MatMuls, Gemm and Conv (shapes by ONNX shape
    inference, batch 1) are the paper's 103.9G "FLOPs" (Liu et al. 2021, Table 1, which counts
    multiply-adds), so the windows, heads and merges are the published ones."""
    m = swin.swin(weights="external", batch=1)
    inferred = onnx.shape_inference.infer_shapes(m)
    values = [*inferred.graph.value_info, *inferred.graph.output]
    shape = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in values}
    shape |= {t.name: list(t.dims) for t in m.graph.initializer}
    macs = 0
    for n in m.graph.node:
        if n.op_type in ("MatMul", "Gemm"):  # output elements x the contracted length
            macs += int(np.prod(shape[n.output[0]])) * shape[n.input[0]][-1]
        elif n.op_type == "Conv":
            macs += int(np.prod(shape[n.output[0]])) * int(np.prod(shape[n.input[1]][1:]))
    assert round(macs / 1e9, 1) == 103.9
