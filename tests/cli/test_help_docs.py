"""`--help` and the docs say the same thing, from the same definitions (issue 39): what `--split`
balances, the measured host cost of `demo --real-size` and of ResNet-50 (tilescope.measured), the
samples the demo makes, and what progress a log gets."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from tilescope.cli import main

ROOT = Path(__file__).resolve().parents[2]


def flat(text: str) -> str:
    return " ".join(text.split())


def help_of(verb: str, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit):
        main([verb, "--help"])
    return flat(capsys.readouterr().out)


def test_the_split_criteria_are_what_the_code_balances(capsys: pytest.CaptureFixture[str]) -> None:
    from profiler.frontends.onnx import importer, split
    from profiler.multi_ipu import sharding
    from tilescope.commands.run import SPLIT_BALANCES

    assert tuple(SPLIT_BALANCES) == sharding.SPLITS
    # the code: memory by node_bytes, compute by the simulated cycles of node_cycles
    assert importer.node_cycles is split.node_cycles and "Simulated cycles" in (split.node_cycles.__doc__ or "")
    assert SPLIT_BALANCES["memory"].startswith("memory") and SPLIT_BALANCES["compute"].startswith("simulated cycles")
    text = help_of("run", capsys)
    assert "compute balances simulated cycles" in text and "FLOP" not in text
    # wherever the docs name --split compute, what follows says simulated cycles, and no FLOPs near
    for page in (ROOT / "README.md", ROOT / "docs" / "targets.md"):
        doc = flat(page.read_text())
        at = [m.start() for m in re.finditer("--split compute", doc)]
        assert at, page.name
        for i in at:
            assert "simulated cycles" in doc[i : i + 250] and "FLOP" not in doc[i - 150 : i + 250], (
                f"{page.name}: {doc[i - 150 : i + 250]}"
            )


def test_measured_figures_are_quoted_from_one_place(capsys: pytest.CaptureFixture[str]) -> None:
    from tilescope.measured import DEMO_REAL_SIZE, demo_real_size_cost, resnet50_host_memory

    readme = flat((ROOT / "README.md").read_text())
    assert demo_real_size_cost() in help_of("demo", capsys)
    assert resnet50_host_memory() in help_of("run", capsys)
    assert demo_real_size_cost() in readme, f"the README should say: {demo_real_size_cost()}"
    assert resnet50_host_memory() in readme, f"the README should say: {resnet50_host_memory()}"
    assert f"measured {DEMO_REAL_SIZE.date}" in readme
    for old in ("about a minute", "~3 GiB", "about 40 s", "~2.7 GiB", "1.0 GiB at batch 1", "1.6 GiB at batch 32"):
        assert old not in readme


def test_demo_help_and_readme_name_every_sample(capsys: pytest.CaptureFixture[str]) -> None:
    from tilescope.samples import REAL_SIZE_SAMPLES, SAMPLES

    text = help_of("demo", capsys)
    for sample in (*SAMPLES, *REAL_SIZE_SAMPLES):
        assert f"{sample.name} {flat(sample.what)}" in text
    numbers = {7: "seven", 8: "eight", 9: "nine", 10: "ten"}
    readme = flat((ROOT / "README.md").read_text())
    assert f"for all {numbers[len(SAMPLES) + len(REAL_SIZE_SAMPLES)]} samples" in readme
    assert "FashionMNIST" in readme and "fashion_mnist" in text


def test_progress_counters_are_for_a_terminal_only() -> None:
    """What the README and demo --help say: a terminal gets done/total counters, a log does not."""
    from tilescope.progress import Counter

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    log, tty = io.StringIO(), Tty()
    for stream in (log, tty):
        with Counter("nodes imported", stream=stream) as count:
            count(3, 3)
    assert log.getvalue() == "" and "3/3 nodes imported" in tty.getvalue()
    readme = flat((ROOT / "README.md").read_text())
    assert "on a terminal" in readme and "redirected to a file or a pipe gets only the per-sample lines" in readme
