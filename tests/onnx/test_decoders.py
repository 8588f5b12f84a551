"""Decoder LLM builders (profiler.frontends.onnx.decoders) and `tilescope model`: tiny decoders
simulated against onnxruntime through `tilescope run --check`; a generation step against the last
position of a prefill of the same tokens; the pipeline stage of every node; the published sizes
built without their weights."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import onnx
import pytest

from profiler.chip.targets import get_target
from profiler.frontends.onnx import decoders
from profiler.multi_ipu.sharding import manual_ipus
from tilescope.cli import main

TINY = [decoders.TINY_GPT2, decoders.TINY_LLAMA]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", "")


def _run_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    assert main(["run", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("config", TINY, ids=lambda c: c.name)
@pytest.mark.parametrize("mode", ["prefill", "generate"])
def test_tiny_decoder_matches_onnxruntime(
    config: decoders.DecoderConfig, mode: decoders.Mode, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = decoders.save(decoders.decoder(config, mode, seq=6, past=5), tmp_path / "m.onnx")
    doc = _run_json([str(path), "--check"], capsys)
    check = doc["check"]
    assert check["runtime"].startswith("onnxruntime") and check["passed"]
    tokens, total = (6, 6) if mode == "prefill" else (1, 6)
    want = {"logits": [1, tokens, config.vocab]}
    want |= {f"present.{i}.{n}": [1, 4, total, 16] for i in range(2) for n in ("key", "value")}
    assert doc["outputs"] == want
    assert set(check["outputs"]) == set(want)


@pytest.mark.parametrize("config", TINY, ids=lambda c: c.name)
def test_generation_step_equals_the_last_position_of_a_prefill(
    config: decoders.DecoderConfig, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Simulated: prefill 7 tokens, feed its cache and the 8th token to a generation step; the step's
    logits are the 8-token prefill's last row and its cache the 8-token prefill's."""
    ids = np.random.default_rng(3).integers(0, config.vocab, (1, 8)).astype(np.int64)

    def run(model: onnx.ModelProto, name: str, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        path = decoders.save(model, tmp_path / f"{name}.onnx")
        np.savez(tmp_path / f"{name}_in.npz", **feeds)  # type: ignore[arg-type]
        _run_json([str(path), "--inputs", str(tmp_path / f"{name}_in.npz"),
                   "--save-outputs", str(tmp_path / f"{name}_out.npz")], capsys)  # fmt: skip
        return dict(np.load(tmp_path / f"{name}_out.npz"))

    short = run(decoders.decoder(config, "prefill", seq=7), "short", {"input_ids": ids[:, :7]})
    full = run(decoders.decoder(config, "prefill", seq=8), "full", {"input_ids": ids})
    feeds = {"input_ids": ids[:, 7:]}
    feeds |= {f"past_key_values.{i}.{n}": short[f"present.{i}.{n}"] for i in range(2) for n in ("key", "value")}
    step = run(decoders.decoder(config, "generate", past=7), "step", feeds)
    assert step["logits"].shape == (1, 1, config.vocab)
    np.testing.assert_allclose(step["logits"][:, 0], full["logits"][:, -1], rtol=1e-4, atol=1e-5)
    for i in range(2):
        for n in ("key", "value"):
            np.testing.assert_allclose(step[f"present.{i}.{n}"], full[f"present.{i}.{n}"], rtol=1e-4, atol=1e-5)
    # the step did not just repeat the prefill: another token gives other logits
    assert np.abs(full["logits"][:, -1] - full["logits"][:, -2]).max() > 1e-3


def test_layers_are_split_evenly_over_the_stages() -> None:
    assert decoders.stage_of_layer(32, 16).tolist() == [i // 2 for i in range(32)]  # Llama-2-7B on a POD16
    assert np.bincount(decoders.stage_of_layer(48, 4)).tolist() == [12, 12, 12, 12]  # GPT-2 XL on 4 IPUs
    # 24 over 5: the boundaries 4.8, 9.6, 14.4, 19.2 put layers 0-4, 5-9, 10-14, 15-19, 20-23
    assert decoders.stage_of_layer(24, 5).tolist() == [0] * 5 + [1] * 5 + [2] * 5 + [3] * 5 + [4] * 4
    with pytest.raises(ValueError, match="leaves an IPU with no layer"):
        decoders.stage_of_layer(2, 3)


def test_nodes_carry_their_layers_ipu() -> None:
    config = decoders.TINY_LLAMA
    model = decoders.decoder(config, "generate", past=4, ipus=2)
    ipus = manual_ipus(model)
    assert ipus is not None
    by_name = {n.name: ipu for n, ipu in zip(model.graph.node, ipus, strict=True)}
    for name, ipu in by_name.items():
        if name.startswith("token_embedding"):
            assert ipu == 0
        elif name.startswith("layer0_"):
            assert ipu == 0, name
        elif name.startswith("layer1_") or name.startswith(("final_norm", "lm_head")):
            assert ipu == 1, name
    assert sum(ipus) == sum(n.name.startswith(("layer1_", "final_norm", "lm_head")) for n in model.graph.node)


def test_pipelined_decoder_runs_each_layer_on_its_stage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = decoders.save(decoders.decoder(decoders.TINY_GPT2, "generate", past=6, ipus=2), tmp_path / "m.onnx")
    doc = _run_json([str(path), "--ipus", "2", "--pipeline", "--micro-batches", "3", "--check"], capsys)
    assert doc["check"]["passed"]
    assert doc["pipeline"] == {"enabled": True, "stages": 2, "micro_batches": 3}
    assert all(u > 0 for u in doc["execution"]["ipu_utilisation"])  # both stages compute


@pytest.mark.parametrize(
    ("config", "published"),
    # parameter counts of the published checkpoints (Hugging Face gpt2-xl, meta-llama/Llama-2-7b-hf)
    [(decoders.GPT2_XL, 1_557_611_200), (decoders.LLAMA2_7B, 6_738_415_616)],
    ids=["gpt2-xl", "llama2-7b"],
)
def test_published_sizes_are_built_without_their_weights(
    config: decoders.DecoderConfig, published: int, tmp_path: Path
) -> None:
    assert config.parameters == published
    model = decoders.decoder(config, "prefill", seq=64, ipus=4, weights="external", data_file="w.data")
    lengths = [int({e.key: e.value for e in t.external_data}["length"])
               for t in model.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]  # fmt: skip
    # every weight is a reference (the tied GPT-2 table has a copy on the last stage): 4 bytes each
    extra = config.vocab * config.hidden if config.tied_head else 0
    assert sum(lengths) == 4 * (published + extra)
    assert model.ByteSize() < 2**20  # the inline constants are masks, rotary tables and shapes
    path = decoders.save(model, tmp_path / "m.onnx")
    data = os.stat(tmp_path / "w.data")
    assert data.st_size == sum(lengths) and data.st_blocks * 512 < 2**20  # sized, never written
    onnx.checker.check_model(str(path))  # a valid model with its data file beside it
    stored = onnx.load(str(path), load_external_data=False)
    assert [n.name for n in stored.graph.input] == ["input_ids"]
    assert len(stored.graph.output) == 1 + 2 * config.layers


def test_model_verb_writes_a_runnable_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "tiny.onnx"
    assert main(["model", "tiny-llama", "--mode", "generate", "--past", "3", "--out", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out
    model = onnx.load(str(out))
    assert {i.name for i in model.graph.input} == {"input_ids"} | {
        f"past_key_values.{i}.{n}" for i in range(2) for n in ("key", "value")
    }
    assert main(["model", "tiny-llama", "--seq", "0", "--out", str(out)]) == 2
    assert "--seq must be >= 1" in capsys.readouterr().err
    assert main(["model", "tiny-gpt2", "--seq", "65", "--out", str(out)]) == 2  # past its 64 positions
    assert main(["model", "bert-base", "--ipus", "2", "--out", str(out)]) == 2


def test_pod16_is_sixteen_gc200s() -> None:
    pod = get_target("POD16", 16)
    assert (pod.name, pod.num_ipus) == ("GC200", 16)
    assert get_target("pod16", 4).num_ipus == 4
    with pytest.raises(ValueError, match="1 to 16 IPUs"):
        get_target("POD16", 17)
