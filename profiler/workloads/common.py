"""What the workloads share: a built workload (graph + programs + how to feed it) and a script runner.

A workload builds its graph and programs, then ``run`` compiles an Engine (options from code merged
with POPLAR_ENGINE_OPTIONS, as Poplar does), loads the initial values, connects the host streams
to synthetic data and runs. Data is synthetic and seeded: no downloads.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from profiler.chip.targets import Target, get_target, ipu_model
from profiler.engine.engine import Engine
from profiler.poplar.graph import Graph
from profiler.poplar.programs import Program
from profiler.poplar.tensor import Tensor

#: Tile memory of the small IPU-Model target the workloads default to (tiles=0 selects a whole GC200).
TILE_BYTES = 262144


def host_parameter(graph: Graph, t: Tensor, name: str) -> Tensor:
    """Host access to a parameter created laid out for the op that uses it (ops.create_matmul_rhs,
    ops.create_conv_weights; as TensorFlow and PopART create weights), as ops.parameter gives a linear one."""
    graph.create_host_write(name, t)
    graph.create_host_read(name, t)
    return t


def workload_target(target: Target | None, tiles: int) -> Target:
    """The given target, else a small IPU-Model of ``tiles`` tiles, or a whole GC200 when ``tiles`` is 0."""
    if target is not None:
        return target
    return ipu_model(tiles_per_ipu=tiles, bytes_per_tile=TILE_BYTES) if tiles else get_target("GC200")


@dataclass
class Workload:
    name: str
    graph: Graph
    programs: list[Program]  # programs[0] initialises device state, the others are run steps
    initial: dict[str, np.ndarray]  # host-writable tensor handle -> initial value
    streams: dict[str, Callable[..., Any] | np.ndarray]  # stream name -> host source/sink
    losses: list[float] = field(default_factory=list)  # filled by a loss stream, if any
    info: dict[str, Any] = field(default_factory=dict)

    def engine(self, options: dict[str, Any] | None = None) -> Engine:
        e = Engine(self.graph, self.programs, options, name=self.name)
        e.compile()
        e.load()
        for handle, value in self.initial.items():
            e.write_tensor(handle, value)
        for name, src in self.streams.items():
            e.connect_stream(name, src)
        return e

    def run(
        self, steps: int = 1, options: dict[str, Any] | None = None, progress: Callable[[str], None] | None = None
    ) -> Engine:
        """Compile, initialise (program 0), then run program 1 ``steps`` times; ``progress`` is told
        each stage as it starts."""
        say = progress or (lambda _: None)
        say(f"compiling {sum(cs.num_vertices for cs in self.graph.compute_sets):,} vertices")
        e = self.engine(options)
        say("initialising")
        e.run(0, name="init")
        for i in range(steps):
            say(f"running step {i + 1}/{steps}")
            e.run(1, name=f"step {i}")
        return e


# What each size option means, for --help (a workload's DEFAULTS names the ones it takes).
_HELP = {
    "batch": "samples per step",
    "tiles": "tiles of the small IPU-Model target the workload runs on; 0: a whole GC200",
    "size": "image height and width",
    "channels": "channels of the first convolution",
    "classes": "output classes",
    "inputs": "input features",
    "hidden": "hidden units",
    "width": "hidden units of each stage",
    "stages": "pipeline stages (one IPU each)",
    "micro_batches": "micro-batches per step",
    "blocks": "bottleneck blocks",
    "seq": "sequence length",
    "model": "model width",
    "heads": "attention heads",
    "ff": "feed-forward width",
}


def _size(name: str, minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is below {minimum}")
        return value

    parse.__name__ = name  # argparse names the type in its message
    return parse


def _progress_line(prog: str) -> Callable[[str], None]:
    """Stage lines on a terminal, each overwriting the last (silent when stderr is not a terminal,
    so logs and pipes get only the result); an empty stage clears the line."""
    if not sys.stderr.isatty():
        return lambda _: None

    def say(stage: str) -> None:
        sys.stderr.write(f"\r\033[K{prog}: {stage}..." if stage else "\r\033[K")
        sys.stderr.flush()

    return say


def main(build: Callable[..., Workload], defaults: dict[str, int], description: str, steps: int = 1) -> None:
    """Script entry point: sizes as --name value options; reports per POPLAR_ENGINE_OPTIONS. Bad
    sizes, a graph that cannot be built and a model that does not fit end in one line, not a traceback."""
    from profiler.engine.engine import EngineError, OutOfMemoryError
    from profiler.host.host_memory import HostMemoryError
    from report_format.errors import ReportError

    parser = argparse.ArgumentParser(
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,  # keeps the epilog's JSON on one line
        epilog='Reports: POPLAR_ENGINE_OPTIONS=\'{"autoReport.all":"true","autoReport.directory":"./report"}\'',
    )
    for k, v in defaults.items():
        minimum = 0 if k == "tiles" else 1
        parser.add_argument(f"--{k.replace('_', '-')}", type=_size(k, minimum), default=v, metavar="N",
                            help=f"{_HELP.get(k, k.replace('_', ' '))} (default: {v})")  # fmt: skip
    parser.add_argument("--steps", type=_size("steps", 1), default=steps, metavar="N",
                        help=f"training or inference steps to run (default: {steps})")  # fmt: skip
    args = vars(parser.parse_args())
    n = args.pop("steps")
    start = time.perf_counter()
    say = _progress_line(parser.prog)
    try:
        say("building the graph")
        try:
            w = build(**args)
            e = w.run(n, progress=say)
        finally:
            say("")  # the result or the error line starts on a clean line
    except OutOfMemoryError as exc:
        parser.exit(1, f"{parser.prog}: {exc}\n")
    # the builds refuse sizes that do not fit together with a ValueError (as do tilescope's OpError,
    # GraphError, CompileError and OptionError, its subclasses); a report directory that cannot take
    # the report (a user's files there) is refused when compiling starts, before any step runs
    except (ValueError, EngineError, HostMemoryError, ReportError) as exc:
        parser.exit(2, f"{parser.prog}: error: {exc}\n")
    except Exception as exc:  # a fault of tilescope's, not of the sizes given: still one line, said so
        first = next((line for line in str(exc).splitlines() if line.strip()), "")
        parser.exit(1, f"{parser.prog}: internal error (please report it): {type(exc).__name__}: {first}\n")
    print(f"{w.name}: {n} step(s); host {time.perf_counter() - start:.2f} s; simulated cycles of the last step "
          f"{e.last_run_cycles:,}")  # fmt: skip
    if w.losses:
        print("losses:", " ".join(f"{x:.4f}" for x in w.losses))
    e.close()
    if e.report_path:  # a named engine writes into <autoReport.directory>/<name>: say where
        print(f"report: {e.report_path}")
