"""Profile an ONNX model (or run a workload script) on the simulated IPU.

For MODEL.onnx: import it (PopART's role), compile, upload the weights, run inference --runs times
and print a summary: cycles per run, simulated samples/s at the target's clock, peak tile memory,
out-of-memory tiles and the host wall times of compile / run / report writing. A report is written
when POPLAR_ENGINE_OPTIONS asks for one; --report-dir DIR is shorthand for
'{"autoReport.all":"true","autoReport.directory":"DIR"}' merged into it.

For SCRIPT.py: run the script in this process with POPLAR_ENGINE_OPTIONS set the same way
(tilescope's options go before the script path; what follows it goes to the script).

Several IPUs: --ipus N shards the model over N IPUs (nodes cut into contiguous groups of about equal
memory; of about equal simulated cycles with --split compute; or as their __ipu_number attributes
say); --pipeline makes those IPUs pipeline stages over --micro-batches micro-batches;
--replicas R runs R data-parallel copies, each on its own N IPUs and --batch inputs. Samples per run
are batch x replicas x micro-batches.

With --compile-only nothing holds a value (engine option tilescope.compileOnly): the weights are
not read, no input is made, and each run's cycles are estimated from the same cost model, so the
report and the summary say "estimated"; --check, --inputs and --save-outputs need values.

With --check the same inputs also go through onnxruntime (or onnx.reference) and the largest
absolute and relative difference per output is printed (and carried by --json under "check").

Exit status: 0 done; 1 the graph does not fit in tile memory (nothing runs; the summary and the
report show the memory), or --check found an output beyond --check-tolerance; 2 bad input (one line saying what and where), including a simulation
that would need more host memory than is available. Host memory grows with the model's graph
(vertices, regions, tiles), not with its tensors' elements: a ResNet-50 in float16 on a C600
{resnet50_host_memory} (measured: tilescope/measured.py).

examples:
  tilescope run model.onnx --batch 8 --report-dir ./report
  tilescope run model.onnx --target C600 --dtype float16 --runs 3 --json
  tilescope run model.onnx --inputs in.npz --save-outputs out.npz
  tilescope run model.onnx --batch 4 --check --check-tolerance 1e-4
  tilescope run model.onnx --ipus 2 --check              # sharded over 2 IPUs (split by memory)
  tilescope run model.onnx --ipus 4 --pipeline --micro-batches 8 --json
  tilescope run model.onnx --ipus 4 --pipeline --split compute   # stages of about equal simulated cycles
  tilescope run model.onnx --ipus 2 --replicas 2         # 2 replicas x 2 IPUs, inputs split
  tilescope run --report-dir ./report profiler/workloads/transformer.py --seq 64
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from tilescope.errors import CommandError
from tilescope.measured import resnet50_host_memory
from tilescope.outputs import FORCE_HELP
from tilescope.progress import Counter

HELP = "profile an ONNX model or a workload script on the simulated IPU"
#: ``run --help``'s description: the docstring with its measured figure filled in from tilescope.measured.
DESCRIPTION = (__doc__ or "").replace("{resnet50_host_memory}", resnet50_host_memory())

#: What each automatic split (profiler.multi_ipu.sharding.SPLITS) balances over the IPUs, as
#: sharding.node_bytes and frontends.onnx.split.node_cycles measure it; tests/cli/test_help_docs.py
#: holds this, the README and docs/targets.md to the same words.
SPLIT_BALANCES = {
    "memory": "memory (the bytes of the weights each node is first to use and of its outputs)",
    "compute": "simulated cycles (the memory split is compiled, each node's compute and exchange cycles summed, "
    "the inputs' upload charged to the first node, and the nodes cut again: even pipeline stages, for a second "
    "import and a compile)",
}

# --runs beyond this is a typo (99999999999999999999 ran for minutes, a stderr line a run): even
# the smallest model's run takes ~1 ms of host time, so this many is already minutes of work.
MAX_RUNS = 100_000


def add_arguments(p: argparse.ArgumentParser) -> None:
    # optional to argparse only so that a missing one is our one line, not "required: model, rest"
    p.add_argument("model", nargs="?", help="an ONNX model (.onnx) or a Python workload script (.py)")
    _add_options(p)
    # everything after the model: more options for a model, the script's own arguments for a script
    p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)


def _add_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", default="GC200", help="target name: GC2, GC200, Bow, C600, IPUModel (default GC200)")
    p.add_argument(
        "--ipus",
        type=int,
        default=1,
        help="IPUs per replica (default 1); more than 1 shards the model, balanced by memory",
    )
    p.add_argument(
        "--split",
        choices=tuple(SPLIT_BALANCES),
        default="memory",
        help="the automatic split over --ipus: "
        + "; ".join(f"{k} balances {v}" for k, v in SPLIT_BALANCES.items())
        + " (default memory)",
    )
    p.add_argument(
        "--replicas",
        type=int,
        default=1,
        help="data-parallel replicas, each on its own --ipus IPUs and its own --batch of inputs",
    )
    p.add_argument(
        "--pipeline",
        action="store_true",
        help="pipeline the sharded model: its IPUs are stages working on different micro-batches",
    )
    p.add_argument(
        "--micro-batches", type=int, default=None, help="micro-batches per run with --pipeline (default 2 x --ipus)"
    )
    p.add_argument(
        "--batch", type=int, default=None, help="batch size, for models whose batch dimension is 1 or symbolic"
    )
    p.add_argument(
        "--dtype", choices=("float32", "float16", "float8", "float8_e5m2"), default="float32",
        help="compute type of float tensors; float8 (C600 only): matmuls and convolutions take their operands in "
        "Graphcore's FP8 e4m3 (weights cast on the host, activations on the device, as PopRT converts a model), "
        "accumulate in --partials and return float16, the rest runs in float16; float8_e5m2 the same in e5m2",
    )  # fmt: skip
    p.add_argument(
        "--fp8-scale", type=int, default=0, metavar="N",
        help="with --dtype float8: activations are cast to FP8 as x * 2^N and each product scaled back by 2^-N "
        "(PopXL's power-of-two scaled casts and matmuls); default 0, no scaling. A negative N keeps "
        "activations past the format's range (240 for e4m3) from becoming NaN",
    )  # fmt: skip
    p.add_argument(
        "--partials", choices=("float32", "float16"), default="float32",
        help="type matmuls and convolutions accumulate partial sums in (PopLibs' partialsType): float32, the "
        "PopLibs and PopART default, or float16, as ByteMLPerf's IPU backend compiles with PopRT (twice the AMP "
        "rate on Mk2 for float16 data)",
    )  # fmt: skip
    p.add_argument(
        "--available-memory-proportion", type=_proportion, default=None, metavar="P",
        help="share of each tile's memory matmul and convolution plans may use for temporaries (PopLibs' and "
        "PopART's availableMemoryProportion, default 0.6); lower it when the model does not fit in tile memory "
        "(ByteMLPerf's BERT runs at 0.4 on C600)",
    )  # fmt: skip
    p.add_argument(
        "--outline", action="store_true",
        help="build the longest run of identical blocks of nodes (a transformer's layers) once, as a function "
        "each block calls with copies in and out (PopART's outlining): their code, vertex state and temporaries "
        "are held once; one IPU only. Off by default: PopART outlines smaller pieces, weighing the copies' cost",
    )  # fmt: skip
    p.add_argument(
        "--io-tiles", type=int, default=0, metavar="N",
        help="set N tiles of the IPU aside for the host streams (PopRT's num_io_tiles, PopART's numIOTiles): the "
        "model is mapped on the others, each input and output has a batch buffer on these, and their host copies "
        "overlap the compute in a step of --batches-per-step batches; one IPU per replica (default 0: none)",
    )  # fmt: skip
    p.add_argument(
        "--batches-per-step", type=int, default=1, metavar="K",
        help="batches a step runs (PopRT's batches_per_step); the summary gives the step's cycles and samples/s: "
        "with --io-tiles the host copies overlap the compute (first load and last store alone), without they "
        "run in series (default 1)",
    )  # fmt: skip
    src = p.add_mutually_exclusive_group()
    src.add_argument("--inputs", metavar="FILE.npz", help="model inputs keyed by input name")
    src.add_argument("--random-inputs", action="store_true", help="seeded random inputs (the default)")
    p.add_argument("--save-outputs", metavar="FILE.npz", help="write the last run's outputs keyed by output name")
    p.add_argument("--force", action="store_true", help=FORCE_HELP)
    p.add_argument("--runs", type=int, default=1, help="inference runs (default 1)")
    p.add_argument("--report-dir", metavar="DIR", help="write a report to DIR (autoReport.all + autoReport.directory)")
    p.add_argument(
        "--compile-only", action="store_true",
        help="profile without values (engine option tilescope.compileOnly): the weights are not read (an ONNX "
        "model's external data may be absent) and no input is made; the report has memory, liveness, the program "
        "tree, operations and an execution trace estimated from the same cost model, marked estimated",
    )  # fmt: skip
    p.add_argument("--weights-as-constants", action="store_true", help="weights as graph constants, not uploaded")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument(
        "--check",
        action="store_true",
        help="also run the model on onnxruntime (or onnx.reference) with the same inputs and print the largest "
        "absolute and relative difference per output; exit 1 when beyond --check-tolerance",
    )
    p.add_argument(
        "--check-tolerance",
        type=float,
        default=None,
        metavar="TOL",
        help="relative tolerance of --check, with an absolute floor of TOL x the output's largest magnitude "
        "(default 1e-3 for float32, 1e-2 for float16)",
    )
    # test-only: make one ONNX operator's kernel deliberately wrong (proves --check catches it)
    p.add_argument("--test-wrong-kernel", metavar="OP", default=None, help=argparse.SUPPRESS)


def _proportion(text: str) -> float:
    """An availableMemoryProportion: a number in (0, 1]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {text}")
    return value


def _progress(msg: str) -> None:
    print(f"tilescope run: {msg}", file=sys.stderr, flush=True)


def _engine_options(report_dir: str | None, script: bool = False, compile_only: bool = False) -> None:
    """Merge --report-dir (and --compile-only) into POPLAR_ENGINE_OPTIONS and check the result
    (one-line errors), including that the report could be written there, before anything is
    imported or run."""
    from profiler.capture.options import ENV_VAR, OptionError, resolve_options
    from report_format.writer import check_destination, check_writable

    try:
        opts = resolve_options()  # a malformed variable is reported as such, before we merge into it
        merged = {"autoReport.all": "true", "autoReport.directory": report_dir} if report_dir else {}
        if compile_only:  # a script's engines too (the environment reaches every engine)
            merged["tilescope.compileOnly"] = "true"
        if merged:
            current = json.loads(os.environ.get(ENV_VAR, "") or "{}")
            current |= merged
            os.environ[ENV_VAR] = json.dumps(current)
            opts = resolve_options()
    except OptionError as exc:
        raise CommandError(str(exc)) from None
    if opts.capture_enabled:
        # A model's session is unnamed, so its report is the directory itself; a script's engines
        # may be named (sub-directories), so only "can a directory be made there" is known now.
        (check_writable if script else check_destination)(opts.auto_report_directory)


class _Parser(argparse.ArgumentParser):
    """A parser whose errors are CommandError (one line, exit 2), never argparse's exit."""

    def error(self, message: str) -> Any:  # argparse's signature returns NoReturn
        raise CommandError(message)


def parse_options(argv: list[str]) -> argparse.Namespace:
    """``tilescope run``'s model options (everything but the model path) parsed from ``argv`` and
    checked as ``run`` checks them: the one definition ``tilescope sweep`` builds each point with."""
    parser = _Parser(prog="tilescope run", add_help=False)
    _add_options(parser)
    args = parser.parse_args(argv)
    check_options(args)
    _micro_batches(args)  # run checks it when it builds the model's options
    return args


def check_options(args: argparse.Namespace) -> None:
    """CommandError (one line) for option values argparse alone cannot refuse."""
    if args.batch is not None and args.batch < 1:  # before any work: a sweep's point too
        raise CommandError(f"batch size must be >= 1, got {args.batch}")
    if not 1 <= args.runs <= MAX_RUNS:
        raise CommandError(f"--runs must be between 1 and {MAX_RUNS:,}, got {args.runs}")
    if args.fp8_scale and not args.dtype.startswith("float8"):
        raise CommandError(f"--fp8-scale applies to --dtype float8 or float8_e5m2, not {args.dtype}")
    if args.io_tiles < 0 or args.batches_per_step < 1:
        raise CommandError(f"--io-tiles must be >= 0 and --batches-per-step >= 1, got {args.io_tiles} and "
                           f"{args.batches_per_step}")  # fmt: skip
    if args.check_tolerance is not None and not args.check_tolerance > 0:
        raise CommandError(f"--check-tolerance must be > 0, got {args.check_tolerance}")


def profile_options(args: argparse.Namespace) -> Any:
    """The simulator's ``ProfileOptions`` for parsed run options (imports the simulator)."""
    from profiler.frontends.onnx.profile import ProfileOptions

    options = ProfileOptions(
        target=args.target, ipus=args.ipus, replicas=args.replicas, batch=args.batch, dtype=args.dtype,
        weights="constants" if args.weights_as_constants else "variables", split=args.split,
        partials=args.partials, outline=args.outline, fp8_log2_scale=args.fp8_scale,
        pipeline=args.pipeline, micro_batches=_micro_batches(args), runs=args.runs,
        compile_only=getattr(args, "compile_only", False), wrong_kernel=args.test_wrong_kernel,
        io_tiles=args.io_tiles, batches_per_step=args.batches_per_step,
    )  # fmt: skip
    if args.available_memory_proportion is not None:  # else PopLibs' default (ProfileOptions')
        options = replace(options, available_memory_proportion=args.available_memory_proportion)
    return options


def run(args: argparse.Namespace) -> int:
    if args.model is None:
        raise CommandError("no model given: name an ONNX model (.onnx) or a workload script (.py); see --help")
    path = Path(args.model)
    rest = list(args.rest)
    if path.suffix == ".py":
        script_args = rest[1:] if rest[:1] == ["--"] else rest
    else:  # options given after the model path
        again = argparse.ArgumentParser(prog="tilescope run", add_help=False, allow_abbrev=False)
        _add_options(again)
        extra, unknown = again.parse_known_args(rest, namespace=argparse.Namespace())
        if unknown:
            raise CommandError(f"unrecognized arguments: {' '.join(unknown)}")
        for key, value in vars(extra).items():
            if value != again.get_default(key):
                setattr(args, key, value)
        script_args = []
    check_options(args)
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "is not a regular file" if path.exists() else "no such file"
        raise CommandError(f"{path}: {what}")
    if args.save_outputs:
        from tilescope.outputs import check_output_file

        check_output_file(
            args.save_outputs,
            "--save-outputs",
            inputs=[path, *([args.inputs] if args.inputs else [])],
            follow_symlinks=args.force,
        )  # before running
    if args.compile_only:
        given = [o for o, on in (("--check", args.check), ("--inputs", args.inputs),
                                 ("--save-outputs", args.save_outputs)) if on]  # fmt: skip
        if given:
            raise CommandError(f"{given[0]} needs values; --compile-only computes none")
    _engine_options(args.report_dir, script=path.suffix == ".py", compile_only=args.compile_only)
    if path.suffix == ".py":
        return _run_script(path, script_args)
    return _run_model(path, args)


def _run_script(path: Path, script_args: list[str]) -> int:
    import runpy

    from profiler.capture.autoreport import set_process_origin
    from report_format.origin import make_origin

    engine_options = json.loads(os.environ.get("POPLAR_ENGINE_OPTIONS", "") or "{}")  # checked valid already
    # every report the script's engines write records the script, its hash and its arguments
    set_process_origin(make_origin("script", path, {}, engine_options, script_args))
    _progress(f"running {path} (POPLAR_ENGINE_OPTIONS={os.environ.get('POPLAR_ENGINE_OPTIONS', '')})")
    sys.argv = [str(path), *script_args]
    sys.path.insert(0, str(path.resolve().parent))
    try:
        runpy.run_path(str(path), run_name="__main__")
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    from profiler.engine.engine import _LIVE, REPORTS_WRITTEN

    for e in list(_LIVE):  # write pending reports now, so progress shows before we return
        if not e._report_written:
            _progress(f"writing report of engine {e.name or '(unnamed)'}")
            e.close()
    for report in REPORTS_WRITTEN:  # also those the script wrote itself: a named engine's is a sub-directory
        _progress(f"report: {report}")
    return 0


def _load_inputs(session: Any, file: str | None, seed: int = 0) -> dict[str, Any]:
    import numpy as np

    from profiler.frontends.onnx import FrontendError, random_inputs

    if file is None:
        return random_inputs(session.model, seed, rows=session.replicas * session.micro_batches)
    import zipfile

    if Path(file).is_file() and not zipfile.is_zipfile(file):  # np.load would guess a pickle and say so
        raise CommandError(f"--inputs {file}: not a .npz file (write one with numpy.savez)")
    try:  # names, shapes and types from the headers first: a header declaring 1e12 rows is never read
        session.check_input_types(_npz_types(file))
        with np.load(file, allow_pickle=False) as data:
            given = {k: data[k] for k in data.files}
    except FrontendError as exc:
        raise CommandError(f"--inputs {file}: {exc}") from None
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise CommandError(f"--inputs {file}: not a readable .npz file ({why})") from None
    return given


def _npz_types(file: str) -> dict[str, tuple[tuple[int, ...], Any]]:
    """Each array's shape and dtype in a .npz, read from its .npy header only (numpy caps a header at
    10,000 bytes); ValueError when a member's stored size cannot hold the data its header declares."""
    import zipfile

    import numpy as np

    types = {}
    with zipfile.ZipFile(file) as z:
        for info in z.infolist():
            with z.open(info) as f:
                version = np.lib.format.read_magic(f)
                read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
                shape, _, dtype = read(f)
            data = int(np.prod(shape, dtype=object)) * dtype.itemsize
            if data > info.file_size and not dtype.hasobject:  # a header that lies (objects are pickled: refused later)
                raise ValueError(
                    f"{info.filename}: its header declares {data:,} bytes of data in a member of {info.file_size:,}"
                )
            types[info.filename.removesuffix(".npy")] = (tuple(shape), dtype)
    return types


def _run_model(path: Path, args: argparse.Namespace) -> int:
    import numpy as np

    from profiler.frontends.onnx.profile import ProfileError, profile_model

    options = profile_options(args)

    def save_outputs(outputs: Any) -> None:
        if args.save_outputs:
            from tilescope.outputs import write_atomically

            write_atomically(
                args.save_outputs,
                "--save-outputs",
                lambda f: np.savez(f, **outputs),
                inputs=[path, *([args.inputs] if args.inputs else [])],
                follow_symlinks=args.force,
            )

    # the model's batch per replica and micro-batch: the reference runs each of them
    reference = _Reference(options.replicas * options.micro_batches) if args.check else None
    try:
        result = profile_model(path, options, lambda session: _load_inputs(session, args.inputs), progress=_progress,
                               stage=Counter, before_report=save_outputs, reference=reference)  # fmt: skip
    except ProfileError as exc:
        raise CommandError(str(exc)) from None
    doc = result.summary()
    check = _check(result, args, reference) if reference is not None else None
    if check is not None:
        doc["check"] = check
    if result.out_of_memory and not args.outline and args.ipus == 1:  # would sharing the layers' code help?
        doc["execution"]["identical_blocks"] = _identical_blocks(result.model.onnx_model)
    print(json.dumps(_json_safe(doc), indent=2, allow_nan=False) if args.json else _render(doc))
    if result.out_of_memory:
        where = f"; the report shows the memory: {result.report_path}" if result.report_path else ""
        print(f"tilescope run: not executed: {result.out_of_memory}{where}", file=sys.stderr)
        return 1
    if check is not None and not check["passed"]:
        bad = [k for k, v in check["outputs"].items() if not v["within"]]
        print(f"tilescope run: check failed: output(s) {', '.join(bad)} differ from {check['runtime']} beyond "
              f"tolerance {check['tolerance']:g}", file=sys.stderr)  # fmt: skip
        return 1
    return 0


def _json_safe(value: Any) -> Any:
    """``value`` with every non-finite float as null: JSON has no Infinity or NaN (an fp16 --check
    whose outputs overflowed has an infinite difference; a strict parser rejects ``Infinity``)."""
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _micro_batches(args: argparse.Namespace) -> int:
    """Micro-batches per run: 1 without --pipeline; with it --micro-batches, else 2 x --ipus."""
    if not args.pipeline:
        if args.micro_batches is not None:
            raise CommandError("--micro-batches needs --pipeline")
        return 1
    if args.ipus < 2:
        raise CommandError("--pipeline needs --ipus 2 or more (each IPU is a pipeline stage)")
    if args.micro_batches is not None and args.micro_batches < 1:
        raise CommandError(f"--micro-batches must be >= 1, got {args.micro_batches}")
    return 2 * args.ipus if args.micro_batches is None else args.micro_batches


def _identical_blocks(onnx_model: Any) -> list[int] | None:
    """[count, nodes each] of the run of identical blocks ``--outline`` would build once, or None."""
    from profiler.frontends.onnx.builder import SMALL_CONSTANT
    from profiler.frontends.onnx.outline import find_repeat

    rep = find_repeat(onnx_model, SMALL_CONSTANT) if onnx_model is not None else None
    return [rep.count, rep.period] if rep is not None else None


class _Reference:
    """The reference runtime's outputs for --check, computed when profile_model calls it: after the
    inputs are made and before the simulation compiles, so the runtime's copy of the model is let
    go before the simulator's values are made (host memory holds one of them at a time)."""

    def __init__(self, rows: int) -> None:
        self.rows = rows
        self.want: dict[str, Any] = {}
        self.runtime = ""

    def __call__(self, model: Any, inputs: Any) -> None:
        import numpy as np

        from profiler.frontends.onnx import FrontendError
        from profiler.frontends.onnx.check import reference_run

        _progress("running the reference runtime on the same inputs (--check)")
        feeds = {s.name: np.asarray(inputs[s.name]).astype(s.host_dtype) for s in model.inputs}
        try:
            self.want, self.runtime = reference_run(model.onnx_model, feeds, parts=self.rows)
        except FrontendError as exc:
            raise CommandError(str(exc)) from None


def _check(result: Any, args: argparse.Namespace, reference: _Reference) -> dict[str, Any]:
    """The simulated outputs against the reference runtime's on the same inputs (the --check summary)."""
    from profiler.frontends.onnx.check import compare, default_tolerance

    tol = args.check_tolerance or default_tolerance(args.dtype)
    if not result.outputs or not reference.runtime:
        return {"runtime": None, "tolerance": tol, "passed": False, "outputs": {}, "skipped": "not executed"}
    _progress("checking the outputs against the reference runtime's")
    runtime, want = reference.runtime, reference.want
    checks = compare(result.outputs, want, tol)
    return {
        "runtime": runtime,
        "tolerance": tol,
        "passed": all(c.within for c in checks),
        "outputs": {
            c.name: {
                "max_abs_diff": c.max_abs_diff,
                "max_rel_diff": c.max_rel_diff,
                "within": c.within,
                "nonfinite": c.nonfinite,
                "size": c.size,
            }
            for c in checks
        },  # fmt: skip
    }


def _no_outputs(doc: dict[str, Any]) -> str:
    return "none (compile-only: no values)" if doc["execution"].get("estimated") else "none (not executed)"


def _render(doc: dict[str, Any]) -> str:
    from app.units import format_bytes, format_count, plural
    from app.views.capacity import over_capacity

    ex, m, t = doc["execution"], doc["memory"], doc["timing"]
    tg = doc["target"]
    per_run = ", ".join(format_count(c) for c in ex["cycles_per_run"])
    if ex["executed"]:
        how = "estimated, compile-only" if ex.get("estimated") else "simulated"
        execution = [
            f"cycles/run    {per_run}  ({ex['seconds_per_run'] * 1e3:.4g} ms {how})",
            f"throughput    {ex['samples_per_second']:,.1f} samples/s ({how}, {plural(ex['samples_per_run'], 'sample')} per run)",
        ]
        st = ex["step"]
        if st["io_tiles"] or st["batches_per_step"] > 1:
            how_io = (f"host I/O on {st['io_tiles']} I/O tiles, overlapping the compute" if st["io_tiles"]
                      else "host I/O in series")  # fmt: skip
            execution.append(
                f"step          {st['batches_per_step']} batches: {format_count(st['step_cycles'])} cycles, "
                f"{st['samples_per_second']:,.1f} samples/s ({how_io})"
            )
        if len(ex["ipu_utilisation"]) > 1:  # compute share of the run on each IPU (pipeline balance)
            execution.append(
                "utilisation   " + ", ".join(f"IPU {i} {u:.0%}" for i, u in enumerate(ex["ipu_utilisation"]))
            )
    else:
        blocks = ex.get("identical_blocks")
        outline = f"--outline: {blocks[0]} identical blocks of {blocks[1]} nodes" if blocks else ""
        over = over_capacity(m["total_bytes"], m["bytes_per_tile"], m["tiles"], m["tiles_per_ipu"])
        execution = [
            "cycles/run    not executed: the graph does not fit in tile memory"
            + (
                f": {over}" + (f" (or try {outline})" if outline else "")
                if over
                else f" (try a lower --available-memory-proportion than {doc['available_memory_proportion']:g}"
                + (f", or {outline}" if outline else "")
                + ")"
            )
        ]
    lines = [
        f"model         {doc['model']}  (batch {doc['batch_size']}, {doc['dtype']}, partials {doc['partials']}"
        + (", outlined)" if doc.get("outline") else ")"),
        f"target        {tg['name']} x{tg['num_ipus']} at {tg['clock_hz'] / 1e9:.3g} GHz"
        + (f" ({tg['num_replicas']} replicas x {tg['ipus_per_replica']} IPUs)" if tg["num_replicas"] > 1 else "")
        + (f"; pipelined, {doc['pipeline']['micro_batches']} micro-batches" if doc["pipeline"]["enabled"] else ""),
        f"host link     {tg['host_link']}, {tg['host_bytes_per_s'] / 1e9:.3g} GB/s per IPU each way (effective)",
        *execution,
        f"memory        peak tile {format_bytes(m['max_tile_bytes'])} (tile {m['max_tile']}) of "
        f"{format_bytes(m['bytes_per_tile'])}; out of memory on {m['out_of_memory_tiles']} tiles",
        f"host time     import {t['import_s']:.2f} s, compile {t['compile_s']:.2f} s, run {t['run_s']:.2f} s/run, "
        f"report write {t['report_write_s']:.2f} s",
        f"report        {doc['report'] or 'off (use --report-dir or POPLAR_ENGINE_OPTIONS)'}",
        f"outputs       {', '.join(f'{k} {v}' for k, v in doc['outputs'].items()) or _no_outputs(doc)}",
    ]
    check = doc.get("check")
    if check and check["runtime"]:
        verdict = "ok" if check["passed"] else "FAILED"
        lines.append(f"check         {verdict} against {check['runtime']} (tolerance {check['tolerance']:g})")
        for name, c in check["outputs"].items():
            lost = (f", {c['nonfinite']:,} of {c['size']:,} values NaN or inf where the reference's are finite"
                    + (" (past float16's +-65,504: activations overflowed)" if doc["dtype"] == "float16" else "")
                    if c["nonfinite"] else "")  # fmt: skip
            lines.append(f"  {name:24} max abs diff {c['max_abs_diff']:.3g}, max rel diff {c['max_rel_diff']:.3g}"
                         f"{lost}{'' if c['within'] else '  BEYOND TOLERANCE'}")  # fmt: skip
    return "\n".join(lines)
