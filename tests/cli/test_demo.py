"""`tilescope demo --no-serve` makes every sample report, and each one reads back."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.views.summary import summary
from report_format.reader import open_report
from tilescope.cli import main
from tilescope.samples import SAMPLES


@pytest.mark.slow
def test_demo_makes_every_sample(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--no-serve", "--out", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert f"[{len(SAMPLES)}/{len(SAMPLES)}]" in err
    for sample in SAMPLES:
        s = summary(open_report(tmp_path / sample.name))
        if sample.name == "mlp_oom":
            assert s["memory"]["out_of_memory_tiles"] > 0 and not s["execution"]["captured"]
            assert any("out of memory" in n for n in s["notes"])
        else:
            assert s["memory"]["out_of_memory_tiles"] == 0 and s["execution"]["total_cycles"] > 0
    # the batch-64 MLP moves more data and does more work than the batch-32 one
    small, big = (summary(open_report(tmp_path / n))["execution"] for n in ("mlp", "mlp_batch64"))
    assert big["total_flops"] > small["total_flops"] and big["total_cycles"] > small["total_cycles"]


@pytest.mark.slow  # ~6.5 s at load 4
def test_a_model_sample_runs_a_built_in_onnx_model(tmp_path: Path) -> None:
    # the real-size samples' path at a small size: a ResNet-50 at 32 px, batch 2, on a C600
    from tilescope.samples import REAL_SIZE_SAMPLES, ModelSample, make_sample

    sample = ModelSample("resnet_small", "resnet50", "ResNet-50 at 32 px", batch=2, image=32)
    outcome = make_sample(sample, tmp_path)
    report = open_report(tmp_path / "resnet_small")
    s = summary(report)
    assert s["memory"]["out_of_memory_tiles"] == 0 and s["execution"]["total_cycles"] > 0
    # the runs counted as `tilescope summary` counts them: the weight upload and the inference, the
    # cycles of the inference (the run the viewer opens on)
    assert s["execution"]["runs"] == 2 and s["execution"]["opening_run"] == 1
    inference = int(report.runs()["cycles"].iloc[-1])
    assert outcome == f"2 runs captured; run 1, the longest that computes: {inference:,} cycles"
    # the defaults are the published C600 benchmarks' settings (seed 000; ByteMLPerf's IPU backend
    # compiles with half partials): float16, 224 px, seq 384
    assert {(m.model, m.dtype, m.partials, m.target) for m in REAL_SIZE_SAMPLES} == {
        ("resnet50", "float16", "float16", "C600"),
        ("bert_base", "float16", "float16", "C600"),
    }
    assert all(m.image == 224 and m.seq == 384 and m.layers == 12 for m in REAL_SIZE_SAMPLES)
    # BERT-base as ByteMLPerf's row ran it (bench.bytemlperf's bert row): packed, batch 40, amp 0.4,
    # uninstrumented and compile-only, the quick BERT-base sample as it was
    packed = {m.name: m for m in REAL_SIZE_SAMPLES if m.packed}
    assert list(packed) == ["bert_base_packed_b40"]
    p = packed["bert_base_packed_b40"]
    assert (p.batch, p.available_memory_proportion, p.instrument, p.compile_only) == (40, 0.4, False, True)
    assert "compile-only" in p.what and "uninstrumented" in p.what
    b1 = next(m for m in REAL_SIZE_SAMPLES if m.name == "bert_base_b1")
    assert (b1.batch, b1.packed, b1.compile_only, b1.instrument) == (1, False, False, True)
    # it records its origin: the model, saved inside the report's own directory, and the options of
    # `tilescope run` that import it the same way, so `tilescope whatif` can re-run it
    from report_format.origin import file_sha256
    from tilescope.samples import MODEL_FILE

    o = report.manifest.origin
    model = (tmp_path / "resnet_small" / MODEL_FILE).absolute()
    assert o is not None and o.kind == "model" and Path(o.path) == model and o.sha256 == file_sha256(model)
    assert o.source_problem() == ""
    assert {k: o.options[k] for k in ("target", "batch", "dtype", "partials")} == {
        "target": "C600",
        "batch": 2,
        "dtype": "float16",
        "partials": "float16",
    }
    # made again, the report is replaced and the model file (the demo's own: the origin names it) too
    make_sample(sample, tmp_path)
    assert open_report(tmp_path / "resnet_small").manifest.origin == o and file_sha256(model) == o.sha256


@pytest.mark.slow  # ~15 s: BERT's full embeddings (30,522 words) even at 1 layer
def test_a_packed_compile_only_sample_is_estimated_and_uninstrumented(tmp_path: Path) -> None:
    # the packed batch-40 BERT sample's path at a small size: 1 layer, seq 64, batch 2
    from tilescope.samples import ModelSample, make_sample

    sample = ModelSample("bert_small", "bert_base", "packed BERT", 2, seq=64, layers=1, packed=True,
                         available_memory_proportion=0.4, instrument=False, compile_only=True)  # fmt: skip
    make_sample(sample, tmp_path)
    report = open_report(tmp_path / "bert_small")
    s = summary(report)
    # compile-only: the runs are estimated by the cost model (the Summary says so), nothing ran on values
    assert s["execution"]["captured"] and s["execution"]["estimated"] and s["execution"]["total_cycles"] > 0
    # the packed model's inputs: ids, per-token sequence numbers, token types, restarting positions
    inputs = {str(n) for n in report.streams()["name"]}
    assert any("position_ids" in n for n in inputs) and any("attention_mask" in n for n in inputs)
    o = report.manifest.origin
    assert o is not None
    assert (o.options["compile_only"], o.options["available_memory_proportion"], o.options["batch"]) == (True, 0.4, 2)
    # uninstrumented: the option goes into the report's engine options and with its origin (whatif re-runs alike)
    assert o.engine_options == {"debug.instrument": "false"}


def test_a_users_file_where_a_model_sample_saves_its_model_stops_the_demo(tmp_path: Path) -> None:
    from report_format.errors import ReportError
    from tests.app.small_report import write_small_report
    from tilescope.samples import MODEL_FILE, ModelSample, make_samples

    # an earlier tilescope report (which the demo may replace) holding a file the demo did not write
    sample = ModelSample("resnet_small", "resnet50", "ResNet-50 at 32 px", batch=2, image=32)
    write_small_report(tmp_path / "resnet_small")
    (tmp_path / "resnet_small" / MODEL_FILE).write_bytes(b"mine")
    with pytest.raises(ReportError, match="refusing to overwrite: tilescope did not write this file"):
        make_samples(tmp_path, progress=lambda line: None, samples=(sample,))
    assert (tmp_path / "resnet_small" / MODEL_FILE).read_bytes() == b"mine"


def test_demo_help_offers_the_real_size_samples(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    assert "--real-size" in capsys.readouterr().out


def test_demo_says_how_to_call_tilescope_from_the_users_shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After `make demo` in a shell that has not activated .venv, `tilescope` is not on PATH: the
    demo's last lines name `.venv/bin/tilescope` and the activate script (issue 39)."""
    import sys

    from tilescope.commands.demo import tilescope_command

    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("python", "tilescope", "activate"):
        (bin_dir / name).write_text("")
        (bin_dir / name).chmod(0o755)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "executable", str(bin_dir / "python"))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    command, hint = tilescope_command()
    assert command == ".venv/bin/tilescope" and hint and "`. .venv/bin/activate`" in hint
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")  # the venv active
    assert tilescope_command() == ("tilescope", None)
    (bin_dir / "tilescope").unlink()  # run as `python -m tilescope` from a checkout, not installed
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert tilescope_command() == (".venv/bin/python -m tilescope", None)
