"""Make the sample reports (real workloads on the simulated IPU) and open the viewer on them.

Runs each sample below with autoReport.all, then serves the MLP report; the batch-64 one is a
baseline to pick in the navbar's compare picker (--compare opens in Compare mode on it).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from tilescope.measured import DEMO_REAL_SIZE, demo_real_size_cost
from tilescope.samples import REAL_SIZE_SAMPLES, SAMPLES

HELP = "make the sample reports and open the viewer on them"

#: ``tilescope demo --help``'s description: the docstring and the samples it makes, from their
#: definitions in tilescope.samples (so the list cannot leave one out).
DESCRIPTION = (
    (__doc__ or "")
    + "\nsamples:\n"
    + "".join(f"  {s.name:<14} {s.what}\n" for s in SAMPLES)
    + "with --real-size also:\n"
    + "".join(f"  {s.name:<14} {s.what}\n" for s in REAL_SIZE_SAMPLES)
    + "\nProgress: one line per sample; on a terminal the real-size models' import and compile also\n"
    "count up in place (a log, when stderr is redirected, gets the per-sample lines only).\n"
)


def default_out() -> Path:
    """Where the samples go from the current directory (also the path ``tilescope --help`` shows):
    inside a checkout beside the golden reports (git-ignored), elsewhere ./tilescope-demo."""
    return Path("sample_reports/demo") if Path("sample_reports").is_dir() else Path("tilescope-demo")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="where to write the reports (default sample_reports/demo in a checkout, else ./tilescope-demo)",
    )
    p.add_argument(
        "--real-size",
        action="store_true",
        help="also make ResNet-50 (batch 32) and BERT-base (seq 384, batch 1) inference reports on a C600 in "
        "float16, and BERT-base as ByteMLPerf ran it (packed, batch 40, compile-only), IPUs filled as in real use "
        f"({demo_real_size_cost()} for all {len(SAMPLES) + len(REAL_SIZE_SAMPLES)} "
        f"samples, most of it the packed BERT's, measured {DEMO_REAL_SIZE.date} on a shared 2-core machine: "
        "tilescope/measured.py)",
    )
    p.add_argument("--no-serve", action="store_true", help="only make the reports")
    p.add_argument("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8050, help="port (default 8050)")
    p.add_argument("--no-browser", action="store_true", help="do not open a web browser")
    p.add_argument(
        "--compare", action="store_true", help="open in Compare mode with mlp_batch64 as the baseline (default: off)"
    )


def _shown(path: Path) -> str:
    """``path`` as a user would type it here: relative when it is under the current directory."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def tilescope_command() -> tuple[str, str | None]:
    """How to call this tilescope from the user's shell, and a hint when its environment is not
    active: ``tilescope`` when that name on PATH is this installation; else the script beside this
    Python (``.venv/bin/tilescope`` after ``make demo``, in a shell that has not activated the venv),
    with the venv's ``activate`` named; else ``python -m tilescope`` by this Python's path."""
    bin_dir = Path(sys.executable).parent  # not resolved: a venv's python is a symlink out of it
    ours, found = bin_dir / "tilescope", shutil.which("tilescope")
    if found and (not ours.exists() or os.path.samefile(found, ours)):
        return "tilescope", None
    if not ours.exists():
        return f"{_shown(Path(sys.executable))} -m tilescope", None
    activate = bin_dir / "activate"
    hint = None
    if activate.exists():
        hint = (
            f"tilescope is installed in {_shown(bin_dir.parent)}, which this shell has not activated: "
            f"run `. {_shown(activate)}` to put tilescope and its python on PATH"
        )
    return _shown(ours), hint


def run(args: argparse.Namespace) -> int:
    from tilescope.samples import make_samples

    out = args.out or default_out()
    print(f"making sample reports in {out}/", file=sys.stderr)
    samples = SAMPLES + (REAL_SIZE_SAMPLES if args.real_size else ())
    paths = make_samples(out, progress=lambda line: print(line, file=sys.stderr), samples=samples)
    command, hint = tilescope_command()
    print(f"done: {len(paths)} reports. Try: {command} summary {paths[0]}", file=sys.stderr)
    if hint:
        print(hint, file=sys.stderr)
    if args.no_serve:
        return 0
    from tilescope.commands import serve

    argv = [
        str(out / "mlp"),
        *(["--compare", str(out / "mlp_batch64")] if args.compare else []),
        "--host",
        args.host,
        "--port",
        str(args.port),
    ]
    parser = argparse.ArgumentParser(prog="tilescope serve", allow_abbrev=False)
    serve.add_arguments(parser)
    return serve.run(parser.parse_args(argv + (["--no-browser"] if args.no_browser else [])))
