"""The ``tilescope`` command: one verb per module in ``tilescope.commands``.

Verb modules define ``HELP`` (one line), ``add_arguments(parser)`` and ``run(args) -> int`` (and
``DESCRIPTION`` when ``VERB --help`` says more than the module docstring) and keep heavy imports
(Dash, the simulator) inside ``run`` so ``tilescope --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from report_format.errors import ReportError
from report_format.text import printable
from tilescope.errors import CommandError

__all__ = ["CommandError", "build_parser", "main"]

#: Verb name -> module under tilescope.commands, in the order --help lists them.
VERBS: dict[str, str] = {
    "demo": "demo",
    "run": "run",
    "sweep": "sweep",
    "model": "model",
    "serve": "serve",
    "summary": "summary",
    "diff": "diff",
    "dump": "dump",
    "export": "export",
    "whatif": "whatif",
}

#: ``{demo}``: where ``tilescope demo`` writes from the current directory, so each example runs as
#: shown once the demo has (tests/cli/test_help_examples.py runs them).
EPILOG = """\
examples:
  tilescope demo
      make the sample reports (in {demo}/) and open the viewer
  tilescope summary {demo}/mlp
      headline figures of a report (add --json for CI)
  tilescope diff {demo}/mlp_batch64 {demo}/mlp --fail-if "execution.total_cycles>+5%"
      compare a report with a baseline; exit 1 if it got more than 5% slower
  tilescope export {demo}/mlp --html mlp.html
      one offline page of the report, to attach to a bug report
  tilescope dump {demo}/mlp tile_memory
      a raw table as CSV
  tilescope serve {demo}/mlp --compare {demo}/mlp_batch64
      the viewer, with a "Compare with mlp_batch64" tab on every page
  tilescope whatif {demo}/mlp
      the report's what-if proposals; --apply N re-simulates one (reports made by
      tilescope run or demo --real-size record the model to re-run)

Exit codes: 0 success, 1 a check failed (diff --fail-if) or the model does not fit (run),
2 bad input (with a one-line reason). See docs/robustness.md for what each bad input gets.
"""


def build_parser() -> argparse.ArgumentParser:
    from tilescope.commands.demo import default_out

    parser = argparse.ArgumentParser(
        prog="tilescope",
        # no abbreviated options: `run --out DIR` (tilescope model's --out) was taken as --outline,
        # and the error named only DIR
        allow_abbrev=False,
        description="An open, PopVision-style profiler for a simulated Graphcore IPU.",
        epilog=EPILOG.replace("{demo}", str(default_out())),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from importlib.metadata import PackageNotFoundError, version

    try:
        ver = version("tilescope")
    except PackageNotFoundError:
        ver = "0+checkout"
    parser.add_argument("--version", action="version", version=f"tilescope {ver}")
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    for verb, module_name in VERBS.items():
        try:
            module = importlib.import_module(f"tilescope.commands.{module_name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"tilescope.commands.{module_name}":
                continue  # verb not built yet
            raise
        p = sub.add_parser(
            verb,
            allow_abbrev=False,
            help=module.HELP,
            description=getattr(module, "DESCRIPTION", module.__doc__),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except (ReportError, CommandError) as exc:
        # one line, whatever names it quotes: ANSI escapes and newlines from paths or models escaped
        print(f"tilescope {args.verb}: error: {printable(exc, limit=4000)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"tilescope {args.verb}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `tilescope dump ... | head`
        return 0


if __name__ == "__main__":
    sys.exit(main())
