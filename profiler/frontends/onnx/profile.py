"""Profile an ONNX model end to end: import, compile, upload the weights, run, write the report.

With ``compile_only`` no tensor value is read, made or computed: the weights stay unread (shapes
suffice, frontends.onnx.shapes), no inputs are made, and each run is estimated from the cost model
(profiler.engine.engine, ``tilescope.compileOnly``): host time and memory follow the graph.

``profile_model(path, ProfileOptions(...)) -> RunResult`` is what ``tilescope run MODEL.onnx`` (and
anything else that runs a model: a sweep, a what-if) calls; the command line only parses its
options into a ``ProfileOptions``, calls this and renders the ``RunResult``. Every failure the user
can cause is a ``ProfileError`` with one line saying what and where; a graph that does not fit is
not an error but a result (``RunResult.out_of_memory``), whose report shows the memory.
"""

from __future__ import annotations

import gc
import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from profiler.capture.options import OptionError, resolve_options
from profiler.chip import targets
from profiler.chip.targets import Target
from profiler.compiler.errors import CompileError
from profiler.engine.engine import EngineError
from profiler.frontends.onnx import Session
from profiler.frontends.onnx.builder import ImportedModel
from profiler.frontends.onnx.errors import FrontendError
from profiler.frontends.onnx.importer import import_model
from profiler.frontends.onnx.model import drop_unread_data, load_model
from profiler.frontends.onnx.operators import wrong_kernel
from profiler.host.allocator import give_back_freed_memory
from profiler.host.host_memory import HostMemoryError
from profiler.ops.matmul import DEFAULT_AVAILABLE_MEMORY_PROPORTION
from report_format.origin import Origin, make_origin

Report = Callable[[str], None]  # a line of progress for the user
Count = Callable[..., None]  # (done, total) of a long stage, and for a compile the work done (compile.Progress)
#: A long stage's counter, made for the stage (``what`` it counts) and closed when it ends.
Stage = Callable[[str], AbstractContextManager[Count]]


def _quiet(what: str) -> AbstractContextManager[Count]:
    return nullcontext(lambda done, total, work=None: None)


class ProfileError(ValueError):
    """The model cannot be profiled as asked (one line: what and where)."""


@dataclass(frozen=True)
class ProfileOptions:
    """How to run a model: the options of ``tilescope run`` that shape the simulation."""

    target: str = "GC200"
    ipus: int = 1  # per replica
    replicas: int = 1
    batch: int | None = None  # None: the model's own
    dtype: str = "float32"
    weights: str = "variables"  # or "constants"
    split: str = "memory"  # how --ipus splits the model: "memory" or "compute"
    partials: str = "float32"  # matmul and convolution partials (PopLibs and PopART default)
    available_memory_proportion: float = DEFAULT_AVAILABLE_MEMORY_PROPORTION
    outline: bool = False
    fp8_log2_scale: int = 0  # with an FP8 dtype: activations cast to FP8 as x * 2^this
    pipeline: bool = False  # the IPUs as pipeline stages
    micro_batches: int = 1  # per run (pipelined)
    runs: int = 1
    compile_only: bool = False  # no values: weights unread, runs estimated (tilescope.compileOnly)
    io_tiles: int = 0  # I/O tiles per IPU for the host streams (tilescope.numIOTiles; PopRT's num_io_tiles)
    batches_per_step: int = 1  # batches a step runs (tilescope.batchesPerStep; PopRT's batches_per_step)
    wrong_kernel: str | None = None  # test only: a deliberately wrong handler (--check must catch it)


@dataclass(frozen=True)
class Timing:
    """Host wall seconds of each stage."""

    import_s: float = 0.0
    compile_s: float = 0.0
    weights_s: float = 0.0
    run_s: float = 0.0  # mean over the runs
    report_write_s: float = 0.0


@dataclass
class RunResult:
    """What profiling a model gave: the imported model, its session (engine, memory), the inputs it
    ran on, the outputs and cycles of every run, host timings and the report's path."""

    path: Path
    options: ProfileOptions
    target: Target
    model: ImportedModel
    session: Session
    inputs: dict[str, np.ndarray]
    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    cycles: list[int] = field(default_factory=list)
    timing: Timing = Timing()
    report_path: Path | None = None

    @property
    def out_of_memory(self) -> str:
        """Why the graph was not run ("" when it fits)."""
        return self.session.engine.out_of_memory

    @property
    def overflowed(self) -> list[str]:
        """Tensors with finite values float16 could not hold (saturated to +-65,504 at import)."""
        return list(self.model.info.get("overflowed", []))

    @property
    def samples_per_run(self) -> int:
        """Every replica's batch of every micro-batch."""
        return self.model.batch_size * self.options.replicas * self.options.micro_batches

    @property
    def mean_cycles(self) -> float:
        return sum(self.cycles) / len(self.cycles) if self.cycles else 0.0

    @property
    def samples_per_second(self) -> float:
        return self.samples_per_run * self.target.clock_hz / self.mean_cycles if self.mean_cycles else 0.0

    @property
    def ipu_utilisation(self) -> list[float]:
        """Per IPU of the profiled replica: cycles in compute steps over the last run's cycles."""
        last = self.cycles[-1] if self.cycles else 0
        return [float(c) / last for c in self.session.engine.compute_cycles.tolist()] if last else []

    def step(self) -> dict[str, Any]:
        """A step of ``batches_per_step`` batches, each as the last run (Engine.step_cycles): with I/O tiles
        the host copies overlap the compute, without they run in series."""
        e, o = self.session.engine, self.options
        k = max(1, o.batches_per_step)
        step = e.step_cycles() if self.cycles and not self.out_of_memory else 0
        return {
            "io_tiles": o.io_tiles,
            "batches_per_step": k,
            "host_cycles_in_out": list(e.last_run_host_cycles),
            "step_cycles": step,
            "samples_per_second": k * self.samples_per_run * self.target.clock_hz / step if step else 0.0,
        }

    def summary(self) -> dict[str, Any]:
        """The figures ``tilescope run --json`` prints (stable keys)."""
        e, t, o = self.session.engine, self.target, self.options
        assert e.memory is not None  # compiled
        mem = e.memory.tile_memory["total_bytes_including_gaps"]
        return {
            "model": str(self.path),
            "target": {
                "name": t.name,
                "num_ipus": t.num_ipus,
                "clock_hz": t.clock_hz,
                "num_replicas": o.replicas,
                "ipus_per_replica": o.ipus,
                "host_link": t.host_link,
                "host_bytes_per_s": t.host_bytes_per_cycle * t.clock_hz,  # per IPU, per direction
            },  # fmt: skip
            "pipeline": {
                "enabled": o.pipeline,
                "stages": o.ipus if o.pipeline else 1,
                "micro_batches": o.micro_batches,
            },  # fmt: skip
            "batch_size": self.model.batch_size,
            "dtype": o.dtype,
            "partials": o.partials,
            "available_memory_proportion": o.available_memory_proportion,
            "outline": o.outline,
            "saturated": self.overflowed,
            "execution": {
                "executed": not self.out_of_memory,
                # cycles estimated from the cost model without values (a compile-only profile), not simulated
                "estimated": o.compile_only,
                "not_executed_because": self.out_of_memory or None,
                "runs": len(self.cycles),
                "cycles_per_run": self.cycles,
                "total_cycles": int(sum(self.cycles)),
                "seconds_per_run": self.mean_cycles / t.clock_hz,
                "samples_per_run": self.samples_per_run,
                "samples_per_second": self.samples_per_second,
                "ipu_utilisation": self.ipu_utilisation,
                "step": self.step(),
            },
            "memory": {
                "max_tile_bytes": int(mem.max()),
                "max_tile": int(mem.argmax()),
                "bytes_per_tile": t.bytes_per_tile,
                "tiles": int(mem.size),
                "tiles_per_ipu": t.tiles_per_ipu,
                "total_bytes": int(mem.sum()),
                "out_of_memory_tiles": int(e.memory.out_of_memory_tiles().size),
            },
            "timing": vars(self.timing).copy(),
            "report": str(self.report_path) if self.report_path else None,
            "outputs": {k: list(v.shape) for k, v in self.outputs.items()},
        }


def profile_target(options: ProfileOptions) -> Target:
    """The target the options name, with every IPU of every replica (one line if they cannot be)."""
    if options.replicas < 1:
        raise ProfileError(f"--replicas must be >= 1, got {options.replicas}")
    if options.outline and options.ipus > 1:
        raise ProfileError(f"--outline builds on one IPU; the model is split over --ipus {options.ipus}")
    try:
        return replace(
            targets.get_target(options.target, options.ipus * options.replicas), num_replicas=options.replicas
        )
    except ValueError as exc:
        raise ProfileError(str(exc)) from None


def model_origin(path: Path, options: ProfileOptions) -> Origin:
    """The manifest ``origin`` of a report of ``path`` run with ``options``: the file's hash and every
    option (by ``ProfileOptions`` name) and the POPLAR_ENGINE_OPTIONS in force, so it can be re-run."""
    from profiler.capture.options import ENV_VAR

    # options at their defaults that older reports did not carry are left out (a report made before them
    # names the same run)
    unset = {"wrong_kernel": None, "io_tiles": 0, "batches_per_step": 1}
    opts = {k: v for k, v in asdict(options).items() if not (k in unset and v == unset[k])}
    try:
        engine = json.loads(os.environ.get(ENV_VAR, "") or "{}")
    except json.JSONDecodeError:  # resolved (and refused in one line) by the engine, not here
        engine = {}
    try:
        return make_origin("model", path, opts, engine if isinstance(engine, dict) else {})
    except OSError as exc:
        raise ProfileError(f"{path}: cannot read: {exc.strerror or exc}") from None


def _hashed_beside(path: Path, options: ProfileOptions) -> Callable[[], Origin]:
    """Start ``model_origin(path, options)`` on a thread and return the call that waits for it: sha256
    reads in 1 MiB chunks and releases the GIL on each, so the hash runs on the other core while the
    import reads the file (ResNet-50's 98 MB: 0.3 s off the command). The wait refuses, in one line, a
    file whose size or modification time moved meanwhile: the hash might not be of what was imported."""

    def stamp() -> tuple[int, int] | None:
        try:
            st = path.stat()
        except OSError:
            return None
        return st.st_size, st.st_mtime_ns

    before = stamp()
    got: dict[str, Any] = {}

    def work() -> None:
        try:
            got["origin"] = model_origin(path, options)
        except ProfileError as exc:
            got["error"] = exc

    thread = threading.Thread(target=work, name="tilescope-origin", daemon=True)
    thread.start()

    def wait() -> Origin:
        thread.join()
        if "error" in got:
            raise got["error"]
        if stamp() != before:
            raise ProfileError(f"{path}: the file changed while it was being imported; run again")
        return got["origin"]

    return wait


def profile_model(
    path: Path,
    options: ProfileOptions,
    inputs: Callable[[Session], dict[str, np.ndarray]],
    *,
    progress: Report = lambda line: None,
    stage: Stage = _quiet,
    before_report: Callable[[Mapping[str, np.ndarray]], None] | None = None,
    reference: Callable[[ImportedModel, Mapping[str, np.ndarray]], None] | None = None,
) -> RunResult:
    """Import ``path`` for ``options``, compile it, and when it fits upload the weights, run it
    ``options.runs`` times on ``inputs(session)`` and write the report its engine options ask for.
    ``progress`` gets a line per stage and ``stage(what)`` counts the long ones (nodes imported,
    compute sets planned). ``before_report(outputs)`` is called before the report is written (so a report that fails to
    write never costs the outputs). ``reference(model, inputs)`` (a run with values only) is called
    once the inputs are made and before compiling, so a reference runtime's copy of the model (``tilescope
    run --check``) is made and let go before the simulation holds its values, not on top of them.

    Once imported (and the reference run), the ONNX model's weight data is dropped from
    ``RunResult.model.onnx_model`` (its structure, names, shapes and small constants stay): the graph
    uploads its own copy, and the file's float32 one would otherwise be held through the run."""
    target = profile_target(options)
    # POPLAR_ENGINE_OPTIONS may ask for a compile-only profile too (and, as in Poplar, wins)
    try:
        asked = "true" if options.compile_only else "false"
        options = replace(options, compile_only=resolve_options({"tilescope.compileOnly": asked}).compile_only)
    except OptionError as exc:
        raise ProfileError(str(exc)) from None
    origin_of_model = _hashed_beside(path, options)  # the report names what was imported
    layout = f"{options.replicas} replicas x {options.ipus} IPUs" if options.replicas > 1 else f"x{target.num_ipus}"
    progress(f"importing {path} (target {target.name} {layout}, {options.dtype})")
    t0 = time.perf_counter()
    try:
        with wrong_kernel(options.wrong_kernel), stage("nodes") as count:
            # the loaded model is not kept: the import makes its own (batch-overridden) copy
            model = import_model(load_model(path, values=not options.compile_only), target, options.batch, options.dtype, options.weights, progress=count, split=options.split, partials=options.partials,
                                 available_memory_proportion=options.available_memory_proportion,
                                 outline=options.outline, fp8_log2_scale=options.fp8_log2_scale,
                                 values=not options.compile_only, io_tiles=options.io_tiles)  # fmt: skip
    except (FrontendError, HostMemoryError) as exc:
        raise ProfileError(str(exc)) from None
    except Exception as exc:  # a bug outside any node: still one line, never a traceback
        first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
        raise ProfileError(f"{path}: import failed: {type(exc).__name__}: {first}") from None
    import_s = time.perf_counter() - t0
    origin = origin_of_model()
    empty = [s.name for s in model.inputs if s.shape[:1] == (0,)]
    if empty:  # a model that declares batch 0 would run and report "0 samples"
        raise ProfileError(
            f"{path}: input {empty[0]!r} has batch dimension 0, so there is nothing to run; give --batch N"
        )
    over = list(model.info.get("overflowed", []))
    if over:  # values a float32 model holds that float16 cannot: said once, by tensor
        names = ", ".join(repr(n) for n in over[:5]) + (f" and {len(over) - 5} more" if len(over) > 5 else "")
        progress(
            f"note: values beyond {options.dtype}'s range saturated to its largest finite value "
            f"in {len(over)} tensor(s): {names}"
        )
    try:  # unnamed: the report goes into the directory itself
        engine_options: dict[str, str] = {"tilescope.compileOnly": "true"} if options.compile_only else {}
        if options.batches_per_step != 1:
            engine_options["tilescope.batchesPerStep"] = str(options.batches_per_step)
        session = Session(model, engine_options, micro_batches=options.micro_batches)
    except EngineError as exc:  # an engine option the graph cannot meet (e.g. profiler.replicaToProfile)
        raise ProfileError(str(exc)) from None
    # the batch it ran at: the same model with --batch of it imports the same (a fixed batch is kept)
    session.engine.origin = replace(origin, options={**origin.options, "batch": model.batch_size})
    result = RunResult(path, options, target, model, session, {} if options.compile_only else inputs(session))
    if reference is not None and not options.compile_only:
        give_back_freed_memory()  # the import's freed temporaries, kept by the heap: not under the runtime's copy
        reference(model, result.inputs)
    if model.onnx_model is not None:
        drop_unread_data(model.onnx_model)
    gc.collect()  # a reference runtime's session and buffers go before the simulation's values come
    give_back_freed_memory()  # and what the import (or the runtime) freed but the heap kept goes back
    progress(f"compiling {model.nodes} nodes ({model.folded_nodes} folded at import)")
    t0 = time.perf_counter()
    try:
        with stage("compute sets planned") as count:
            session.compile(progress=count)
    except (EngineError, CompileError, HostMemoryError) as exc:
        raise ProfileError(str(exc)) from None
    compile_s = time.perf_counter() - t0
    e = session.engine
    result.report_path = e.report_path
    weights_s = write_s = 0.0
    run_s: list[float] = []
    if not e.out_of_memory:  # a graph that does not fit cannot run; its report (written at compile) shows why
        t0 = time.perf_counter()
        session.upload_weights()
        weights_s = time.perf_counter() - t0
        for i in range(options.runs):
            doing = "estimating (compile-only)" if options.compile_only else "running"
            progress(f"{doing} inference {i + 1}/{options.runs}")
            t0 = time.perf_counter()
            result.outputs = session.run(result.inputs)
            run_s.append(time.perf_counter() - t0)
        if before_report is not None:
            before_report(result.outputs)
        if e.options.capture_enabled:
            progress(f"writing report to {e.options.auto_report_directory}")
            t0 = time.perf_counter()
            result.report_path = e.write_report()
            write_s = time.perf_counter() - t0
    result.cycles = list(session.cycles)
    result.timing = Timing(import_s, compile_s, weights_s, sum(run_s) / len(run_s) if run_s else 0.0, write_s)
    return result
