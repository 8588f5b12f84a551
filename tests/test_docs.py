"""The documentation stays true.

Every shell command in README.md and docs/*.md runs as a new user would type it: in bash, in a
fresh shell (a plain system PATH, no virtual environment active, nothing of this process's
environment) in a directory laid out like the checkout after ``make demo`` (``.venv``, ``examples/``,
``sample_reports/demo``). The venv's ``bin`` is on PATH only for commands that follow the page's own
``. .venv/bin/activate`` (docs/README.md's applies to every page of docs/). A command fails the
test on ``command not found``, on a traceback, or on a non-zero exit its line does not announce
(``# exits 1 ...`` in its comment). ``NOT_RUN`` lists the commands left out, each with the reason;
``STAND_INS`` the files the docs only stand for, which the test makes. Commands written inline in
the prose (minutes-long benchmarks among them) are not run, but must name a verb, options, script
or module that exists. Figures the docs quote that a quick command can check are checked here
(others name the command that measured them and the date). Every Python example runs, every
engine option is documented with its default, and every screenshot shown exists.

The doc commands import this checkout's code (PYTHONPATH is set to it, the one thing the shell is
given beyond a user's), whichever checkout the venv was installed from.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [ROOT / "README.md", *DOCS]
FENCE = re.compile(r"```(\w+)\n(.*?)```", re.S)
ACTIVATE = ". .venv/bin/activate"
#: A fresh login's PATH on Debian/Ubuntu: no venv, no user tool directories.
FRESH_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

#: Commands (by how they start) that are not run, and why.
NOT_RUN = {
    "make demo": "installs tilescope into .venv and serves; the test stands for it: the venv it runs in "
    "(a .venv link to it) and the demo reports made in-process",
    "make test": "installs the test extras and Chromium and runs the whole suite, this test included",
    "tilescope serve": "serves until interrupted; tests/cli/test_help_examples.py checks its reports open "
    "and tests/app start the server",
}

#: Files and directories the docs only stand for ("your model"), made in each page's directory.
STAND_INS = {
    "model.onnx": "an ONNX model: examples.mlp() (784-256-128-10, symbolic batch)",
    "in.npz": "inputs for model.onnx at batch 1",
    "bert.onnx": "identical transformer layers for --outline: examples.bert_layer(seq=16, hidden=64, heads=2, "
    "ff=128, layers=2)",
    "my_program.py": "the README's program, the Python block it writes before running it",
    "report": "a report (the demo's mlp), for pages that analyse ./report before making one",
    "baseline": "a report to compare with (the demo's mlp_batch64)",
}


def blocks(lang: str, pages: list[Path] = DOCS) -> list[tuple[str, str]]:
    return [(p.name, body) for p in pages for kind, body in FENCE.findall(p.read_text()) if kind == lang]


def page_commands(page: Path) -> list[tuple[str, bool]]:
    """The page's shell commands in order (continuation lines joined), each with whether the venv
    is active for it (after the page's own activation; docs/ pages: docs/README.md's)."""
    active = page.parent.name == "docs" and ACTIVATE in (ROOT / "docs" / "README.md").read_text()
    out = []
    for kind, body in FENCE.findall(page.read_text()):
        if kind != "sh":
            continue
        for line in body.replace("\\\n", " ").splitlines():
            if not line.strip():
                continue
            out.append((line.strip(), active))
            active = active or line.strip() == ACTIVATE
    return out


def commands() -> list[tuple[str, str, bool]]:
    return [(page.name, cmd, active) for page in PAGES for cmd, active in page_commands(page)]


def not_run(command: str) -> str | None:
    return next((why for start, why in NOT_RUN.items() if command.startswith(start)), None)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo reports the docs use, made once."""
    from tilescope.samples import SAMPLES, make_sample

    out = tmp_path_factory.mktemp("demo") / "sample_reports" / "demo"
    for sample in SAMPLES:
        if sample.name in ("mlp", "mlp_batch64", "mlp_oom"):
            make_sample(sample, out)
    return out


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The files of STAND_INS that are not reports, made once."""
    import numpy as np
    import onnx

    from profiler.frontends.onnx import examples

    d = tmp_path_factory.mktemp("stand_ins")
    onnx.save(examples.mlp(), d / "model.onnx")
    np.savez(d / "in.npz", input=np.random.default_rng(0).standard_normal((1, 784)).astype(np.float32))
    onnx.save(examples.bert_layer(seq=16, hidden=64, heads=2, ff=128, layers=2), d / "bert.onnx")
    (d / "my_program.py").write_text(blocks("python", [ROOT / "README.md"])[0][1])  # the README's first
    return d


def venv_bin() -> Path:
    """The bin directory of the virtualenv running the tests, standing for the checkout's .venv."""
    here = Path(sys.executable).parent
    if sys.prefix == sys.base_prefix or not (here / "activate").is_file() or not (here / "tilescope").exists():
        pytest.skip("the doc commands need tilescope installed in a virtualenv, as `make demo` installs it")
    return here


_checkouts: dict[str, Path] = {}


@pytest.fixture
def checkout(demo: Path, stand_ins: Path, tmp_path_factory: pytest.TempPathFactory, request) -> Path:
    """A directory laid out as the checkout after ``make demo``, one per page (its commands run in
    order in it, so one may use what an earlier one wrote)."""
    page = request.node.callspec.params["page"]
    if page not in _checkouts:
        d = tmp_path_factory.mktemp(page.replace(".", "_"))
        (d / ".venv").symlink_to(venv_bin().parent)
        (d / "examples").symlink_to(ROOT / "examples")
        (d / "sample_reports").mkdir()
        (d / "sample_reports" / "demo").symlink_to(demo)
        for f in stand_ins.iterdir():
            shutil.copy(f, d / f.name)
        shutil.copytree(demo / "mlp", d / "report")
        shutil.copytree(demo / "mlp_batch64", d / "baseline")
        _checkouts[page] = d
    return _checkouts[page]


def fresh_shell(cwd: Path, command: str, active: bool) -> subprocess.CompletedProcess:
    env = {
        "PATH": FRESH_PATH,
        "HOME": os.environ.get("HOME", str(cwd)),
        "LANG": "C.UTF-8",
        "PYTHONPATH": str(ROOT),  # this checkout's code (see the module docstring)
    }
    script = f"{ACTIVATE}\n{command}" if active else command
    return subprocess.run(
        ["/bin/bash", "--noprofile", "--norc", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


# Each command and example is a fresh shell and Python process (~1 s each): `make test` runs them,
# `make check` leaves them out.
@pytest.mark.slow
@pytest.mark.parametrize("page,command,active", commands(), ids=[f"{p}: {c}" for p, c, _ in commands()])
def test_command_runs_in_a_fresh_shell(checkout: Path, page: str, command: str, active: bool) -> None:
    why = not_run(command)
    if why:
        pytest.skip(f"not run: {why}")
    done = fresh_shell(checkout, command, active)
    said = f"{page}: {command}\n--- stdout\n{done.stdout[-2000:]}\n--- stderr\n{done.stderr[-3000:]}"
    assert done.returncode != 127 and "command not found" not in done.stderr, f"command not found: {said}"
    assert "Traceback (most recent call last)" not in done.stdout + done.stderr, f"traceback: {said}"
    comment = command.split("  #", 1)[1] if "  #" in command else ""
    announced = {0, *(int(n) for n in re.findall(r"\bexits? (\d+)", comment))}
    assert done.returncode in announced, f"exit {done.returncode}, not announced: {said}"
    words = shlex.split(command, comments=True)
    if ">" in words:  # `... > file`: the output is meant to be kept
        into = checkout / words[words.index(">") + 1]
        assert into.is_file() and into.stat().st_size > 0, f"{said}\nwrote nothing into {into.name}"


def test_every_page_that_uses_tilescope_activates_the_venv_first() -> None:
    """A new shell has neither tilescope nor the venv's python on PATH (issue 39)."""
    for page in PAGES:
        for command, active in page_commands(page):
            words = command.split()
            uses = words[0] in ("tilescope", "python") or any(w in ("tilescope", "python") for w in words[1:2])
            if uses and not not_run(command):
                assert active, f"{page.name}: `{command}` runs before the page activates the venv ({ACTIVATE})"


@pytest.mark.slow
def test_the_fresh_shell_has_no_tilescope_until_the_venv_is_activated(tmp_path: Path) -> None:
    bin_dir = venv_bin()
    (tmp_path / ".venv").symlink_to(bin_dir.parent)
    assert fresh_shell(tmp_path, "tilescope --version", active=False).returncode == 127
    assert fresh_shell(tmp_path, "tilescope --version", active=True).returncode == 0
    assert fresh_shell(tmp_path, ".venv/bin/tilescope --version", active=False).returncode == 0


INLINE = re.compile(r"(?<!`)`([^`]+)`(?!`)")


def inline_commands() -> list[tuple[str, str]]:
    """Commands written inline in the prose: `tilescope ...`, `python ...`."""
    out = []
    for page in PAGES:
        text = FENCE.sub("", page.read_text())
        for span in INLINE.findall(text):
            span = " ".join(span.split())
            if re.match(r"(tilescope|python3?) ", span) and "error:" not in span:  # not a quoted message
                out.append((page.name, span))
    return out


@pytest.mark.parametrize("page,command", inline_commands(), ids=[f"{p}: {c}" for p, c in inline_commands()])
def test_inline_command_names_what_exists(page: str, command: str) -> None:
    """Not run (some are minutes-long benchmarks), but the verb exists and has every option named,
    a whole command line parses, and the script or module exists."""
    import argparse

    from tilescope.cli import build_parser

    words = shlex.split(command.replace("[", "").replace("]", ""))  # [--optional] parts included
    if words[0] == "tilescope":
        parser = build_parser()
        verbs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
        assert words[1] in verbs, f"{page}: `{command}`: tilescope has no verb {words[1]}"
        options = {o for a in verbs[words[1]]._actions for o in a.option_strings}
        named = [w.split("=")[0] for w in words[2:] if w.startswith("--")]
        assert set(named) <= options, f"{page}: `{command}`: {words[1]} has no {sorted(set(named) - options)}"
        if len(words) > 2 and not words[2].startswith("-"):  # a whole command line, not a mention
            try:
                parser.parse_args(words[1:])
            except SystemExit as exc:
                pytest.fail(f"{page}: `{command}` does not parse (exit {exc.code})")
        return
    if words[1] == "-m":
        assert importlib.util.find_spec(words[2]) is not None, f"{page}: `{command}`: no module {words[2]}"
    else:
        assert (ROOT / words[1]).is_file() or words[1] == "my_program.py", f"{page}: `{command}`: no {words[1]}"


@pytest.mark.slow
@pytest.mark.parametrize("doc,code", blocks("python"), ids=[f"{d}#{i}" for i, (d, _) in enumerate(blocks("python"))])
def test_python_example_runs(demo: Path, doc: str, code: str) -> None:
    if "import duckdb" in code and importlib.util.find_spec("duckdb") is None:
        pytest.skip("duckdb is not installed (the example says: pip install duckdb)")
    root = demo.parents[1]
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, f"{doc}:\n{code}\n{done.stderr[-3000:]}"


def test_every_engine_option_is_documented_with_its_default() -> None:
    from profiler.capture import options

    text = (ROOT / "docs" / "capturing.md").read_text()
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `([\w.]+)` \| `([^`]*)` \|", text, re.M)}
    assert sorted(rows) == sorted(options.OPTION_NAMES)
    assert {n: options._SPECS[n].default for n in options.OPTION_NAMES} == rows


def test_every_screenshot_shown_exists() -> None:
    shown = []
    for doc in PAGES:
        for target in re.findall(r"\]\(((?:docs/)?screenshots/[\w.]+\.png)\)", doc.read_text()):
            base = ROOT if target.startswith("docs/") else ROOT / "docs"
            shown.append(base / target)
    assert shown and [p for p in shown if not p.exists()] == []


def flat(page: Path) -> str:
    return " ".join(page.read_text().split())


def number(text: str) -> int:
    return int(text.replace(",", ""))


def test_end_to_end_figures_are_the_record() -> None:
    """ResNet-50's C600 cycles and img/s wherever the README and docs/fidelity.md quote them are
    bench/end_to_end.json's, which tests/profiler/test_fidelity.py keeps current."""
    record = json.loads((ROOT / "bench" / "end_to_end.json").read_text())["resnet50"]
    b32, b4 = record["32"], record["4"]
    readme = flat(ROOT / "README.md")
    said = re.search(r"([\d,]+) cycles a batch, ([\d,]+) img/s", readme)
    assert said, "the README no longer quotes ResNet-50's cycles and img/s"
    assert [number(g) for g in said.groups()] == [b32["cycles"], round(b32["img_per_s"])]
    said = re.search(
        r"It gives ([\d,]+) img/s at batch 32 against the published [\d,]+ \([\d.]+\) and ([\d,]+) at batch 4", readme
    )
    assert said and [number(g) for g in said.groups()] == [round(b32["img_per_s"]), round(b4["img_per_s"])]
    fidelity = (ROOT / "docs" / "fidelity.md").read_text()
    for batch, rec in (("32", b32), ("4", b4)):
        row = re.search(
            rf"^\| {batch} \| half \([^|]*current record[^|]*\) \| ([\d,]+) \| [\d,]+ \| ([\d,]+) \|", fidelity, re.M
        )
        assert row, f"docs/fidelity.md: no current-record row for batch {batch}"
        assert [number(g) for g in row.groups()] == [rec["cycles"], round(rec["img_per_s"])]


def test_exchange_code_share_rows_are_the_record() -> None:
    """docs/fidelity.md's exchange-code rows taken from bench/end_to_end.json: exchange code, its
    share of the total and its ratio to vertex code."""
    record = json.loads((ROOT / "bench" / "end_to_end.json").read_text())["resnet50"]
    fidelity = (ROOT / "docs" / "fidelity.md").read_text()
    mib = 1 << 20
    for batch, rec in record.items():
        row = re.search(
            rf"^\| ResNet-50[^|]*, batch {batch}, half partials \(`bench/end_to_end.json`\) \| ([\d.]+) MiB[^|]* \| "
            r"([\d.]+) % of (\d+) MiB[^|]* \| ([\d.]+)",
            fidelity,
            re.M,
        )
        assert row, f"docs/fidelity.md: no exchange-code row for batch {batch}"
        code, total = rec["categories"]["internalExchangeCode"], rec["total_bytes"]
        assert row.groups() == (
            f"{code / mib:.1f}",
            f"{100 * code / total:.1f}",
            f"{total / mib:.0f}",
            f"{code / rec['categories']['vertexCode']:.1f}",
        ), batch


def test_ipu_caps_are_the_targets() -> None:
    """docs/robustness.md's cap on --ipus per target family is profiler.chip.targets.MAX_IPUS."""
    from profiler.chip.targets import MAX_IPUS

    text = flat(ROOT / "docs" / "robustness.md")
    said = re.search(r"`--ipus` is capped by target family, at the largest system of the family: (.*?)\(`", text)
    assert said
    caps = {name: int(n) for name, n in re.findall(r"\b([A-Z]\w+) (\d+)\b", said.group(1))}
    assert caps == MAX_IPUS


def test_targets_table_is_the_targets() -> None:
    """docs/targets.md's table of targets: tiles, memory per tile, clock, AMP peak and host link of each."""
    from profiler import get_target

    rows = re.findall(
        r"^\| `(\w+)`[^|]* \| ([\d,]+) \| (\d+) KiB \| ([\d.]+) GHz \| (\d+) FLOPs(?: \((\d+) at fp8\))? \| "
        r"[^|]*: ([\d.]+) GB/s \|$",
        (ROOT / "docs" / "targets.md").read_text(),
        re.M,
    )
    assert [r[0] for r in rows] == ["GC2", "GC200", "Bow", "C600"]
    for name, tiles, kib, ghz, fp16, fp8, host in rows:
        t = get_target(name)
        digits = len(host.partition(".")[2])  # the rate as the table rounds it (29.2, 6.25)
        assert float(host) == round(t.host_bytes_per_cycle * t.clock_hz / 1e9, digits), name
        t = get_target(name)
        assert (number(tiles), int(kib) * 1024, round(float(ghz) * 1e9), float(fp16)) == (
            t.tiles_per_ipu,
            t.bytes_per_tile,
            round(t.clock_hz),
            t.fp16_flops_per_cycle,
        ), name
        assert float(fp8 or 0) == t.fp8_flops_per_cycle, name


def test_targets_small_vgg_split_figures() -> None:
    """docs/targets.md's small VGG over 2 pipelined IPUs, split by memory and by compute."""
    import tempfile

    from profiler import ipu_model
    from profiler.frontends.onnx import Session, examples, import_model, random_inputs
    from report_format.reader import open_report

    text = flat(ROOT / "docs" / "targets.md")
    said = re.search(
        r"stage compute ([\d,]+) / ([\d,]+) cycles by memory, ([\d,]+) / ([\d,]+) by compute; ([\d,]+) -> ([\d,]+)",
        text,
    )
    assert said and "examples.vgg(image=16, widths=(8, 16), convs=(2, 2), fc=(128, 128), classes=10, batch=2)" in text
    quoted = [int(g.replace(",", "")) for g in said.groups()]
    model = examples.vgg(image=16, widths=(8, 16), convs=(2, 2), fc=(128, 128), classes=10, batch=2)
    target = ipu_model(tiles_per_ipu=16, bytes_per_tile=1 << 16, num_ipus=2)
    stages, cycles = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for split in ("memory", "compute"):
            im = import_model(model, target, split=split)
            opts = {"autoReport.all": "true", "autoReport.directory": f"{tmp}/{split}"}
            with Session(im, opts, micro_batches=4) as s:
                s.run(random_inputs(im, rows=4))
                cycles.append(int(s.cycles[0]))
            stages += [int(c) for c in open_report(f"{tmp}/{split}").pipeline_stages()["compute_cycles"]]
    assert quoted == [*stages, *cycles]
