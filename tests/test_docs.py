"""The documentation stays true: every command and Python example in docs/*.md runs on the demo
reports (``sample_reports/demo`` is made in a temporary directory), every engine option the
profiler accepts is documented with its default, and every screenshot the docs and the README
show exists."""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs").glob("*.md"))
FENCE = re.compile(r"```(\w+)\n(.*?)```", re.S)
#: Commands that start something long-lived or need inputs the docs only stand for.
NOT_RUN = ("tilescope serve", "tilescope run model.onnx", "tilescope demo")


def blocks(lang: str) -> list[tuple[str, str]]:
    return [(doc.name, body) for doc in DOCS for kind, body in FENCE.findall(doc.read_text()) if kind == lang]


def commands() -> list[tuple[str, str]]:
    out = []
    for name, body in blocks("sh"):
        for line in body.splitlines():
            cmd = line.split("  #")[0].strip()
            if cmd and not cmd.startswith(NOT_RUN):
                out.append((name, cmd))
    return out


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    from tilescope.samples import SAMPLES, make_sample

    root = tmp_path_factory.mktemp("docs")
    out = root / "sample_reports" / "demo"
    for sample in SAMPLES:
        if sample.name in ("mlp", "mlp_batch64", "mlp_oom"):
            make_sample(sample, out)
    return root


def run_in(root: Path, argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        argv,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )


# Each command and example is a fresh Python process (~0.8 s each, ~17 s in all at load 4): `make test` runs them.
@pytest.mark.slow
@pytest.mark.parametrize("doc,command", commands(), ids=[c for _, c in commands()])
def test_command_runs(demo: Path, doc: str, command: str) -> None:
    env = {}
    words = shlex.split(command)
    while words and re.match(r"^[A-Z_]+=", words[0]):  # VAR=value before the command
        k, v = words.pop(0).split("=", 1)
        env[k] = v
    if words[0] == "tilescope":
        argv = [sys.executable, "-m", "tilescope", *words[1:]]
    elif words[0] == "python":
        argv = [sys.executable, *(str(ROOT / w) if w.startswith("examples/") else w for w in words[1:])]
    else:
        pytest.fail(f"{doc}: a command the docs test does not know how to run: {command}")
    into = None
    if ">" in argv:  # `... > file`: the output is meant to be kept
        into = argv[argv.index(">") + 1]
        argv = argv[: argv.index(">")]
    done = run_in(demo, argv, env)
    assert done.returncode == 0, f"{doc}: {command}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    if into:
        assert done.stdout.strip(), f"{doc}: {command} printed nothing"
        (demo / into).write_text(done.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("doc,code", blocks("python"), ids=[f"{d}#{i}" for i, (d, _) in enumerate(blocks("python"))])
def test_python_example_runs(demo: Path, doc: str, code: str) -> None:
    if "import duckdb" in code and importlib.util.find_spec("duckdb") is None:
        pytest.skip("duckdb is not installed (the example says: pip install duckdb)")
    done = run_in(demo, [sys.executable, "-c", code])
    assert done.returncode == 0, f"{doc}:\n{code}\n{done.stderr[-3000:]}"


def test_every_engine_option_is_documented_with_its_default() -> None:
    from profiler.capture import options

    text = (ROOT / "docs" / "capturing.md").read_text()
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `([\w.]+)` \| `([^`]*)` \|", text, re.M)}
    assert sorted(rows) == sorted(options.OPTION_NAMES)
    assert {n: options._SPECS[n].default for n in options.OPTION_NAMES} == rows


def test_every_screenshot_shown_exists() -> None:
    shown = []
    for doc in [*DOCS, ROOT / "README.md"]:
        for target in re.findall(r"\]\(((?:docs/)?screenshots/[\w.]+\.png)\)", doc.read_text()):
            base = ROOT if target.startswith("docs/") else ROOT / "docs"
            shown.append(base / target)
    assert shown and [p for p in shown if not p.exists()] == []
