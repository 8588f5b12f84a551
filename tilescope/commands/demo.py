"""Make the sample reports (real workloads on the simulated IPU) and open the viewer on them.

Runs an MLP (two batch sizes, for Compare mode), a CNN, a transformer layer and a ResNet-style
stack on a simulated GC200, plus one model that does not fit in memory, each with
autoReport.all. Then serves the MLP report; the batch-64 one is a baseline to pick in the navbar's
compare picker (``--compare`` opens in Compare mode on it).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HELP = "make the sample reports and open the viewer on them"


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
        "float16, IPUs filled as in real use (about a minute and ~3 GiB of host memory)",
    )
    p.add_argument("--no-serve", action="store_true", help="only make the reports")
    p.add_argument("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8050, help="port (default 8050)")
    p.add_argument("--no-browser", action="store_true", help="do not open a web browser")
    p.add_argument(
        "--compare", action="store_true", help="open in Compare mode with mlp_batch64 as the baseline (default: off)"
    )


def run(args: argparse.Namespace) -> int:
    from tilescope.samples import REAL_SIZE_SAMPLES, SAMPLES, make_samples

    out = args.out or default_out()
    print(f"making sample reports in {out}/", file=sys.stderr)
    samples = SAMPLES + (REAL_SIZE_SAMPLES if args.real_size else ())
    paths = make_samples(out, progress=lambda line: print(line, file=sys.stderr), samples=samples)
    print(f"done: {len(paths)} reports. Try: tilescope summary {paths[0]}", file=sys.stderr)
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
    parser = argparse.ArgumentParser(prog="tilescope serve")
    serve.add_arguments(parser)
    return serve.run(parser.parse_args(argv + (["--no-browser"] if args.no_browser else [])))
