"""Engine options, named exactly as Poplar names them, merged as Poplar merges them.

Precedence: defaults < options given in code < ``POPLAR_ENGINE_OPTIONS`` (the environment wins, as
in Poplar; reference/popvision.md §3.1). The environment variable holds a JSON object whose values
are strings or booleans (``{"autoReport.all": "true", "autoReport.directory": "./report"}``);
integers may also be given as JSON numbers. Meanings and defaults: reference/popvision.md §3.2.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from profiler.chip.targets import AUTO_SUPERVISOR_STACK_BYTES, AUTO_WORKER_STACK_BYTES

ENV_VAR = "POPLAR_ENGINE_OPTIONS"

DEFAULT = "default"
CODE = "code"
ENVIRONMENT = "environment"


class OptionError(ValueError):
    """A bad engine option; ``str(e)`` is one line naming the option or the JSON problem."""


@dataclass(frozen=True)
class _Spec:
    kind: str  # "bool" | "int" | "str" | "enum" | "size" (auto or bytes)
    default: str
    choices: tuple[str, ...] = ()


_BOOL = ("true", "false")
# The profiles autoReport.all switches on (popvision.md §3.2: "writes all default reports"; the
# serialized graph is not part of `all`).
_ALL_OUTPUTS = ("autoReport.outputGraphProfile", "autoReport.outputExecutionProfile", "autoReport.outputDebugInfo")

_SPECS: dict[str, _Spec] = {
    "autoReport.all": _Spec("bool", "false"),
    # Poplar writes into the current working directory by default; a tilescope report is a directory
    # of its own (manifest + one Arrow file per table), so it gets its own directory rather than
    # scattering tables into the cwd.
    "autoReport.directory": _Spec("str", "./report"),
    "autoReport.outputGraphProfile": _Spec("bool", "false"),
    "autoReport.outputExecutionProfile": _Spec("bool", "false"),
    "autoReport.outputDebugInfo": _Spec("bool", "false"),
    "autoReport.executionProfileProgramRunCount": _Spec("int", "2"),  # popvision.md §3.2: default 2
    # Accepted because user scripts commonly set them (popvision.md §3.2); tilescope writes none of
    # these artefacts, so they have no effect.
    "autoReport.outputSerializedGraph": _Spec("bool", "false"),
    "autoReport.outputLoweredVars": _Spec("bool", "false"),
    "autoReport.outputArchive": _Spec("bool", "false"),
    "autoReport.streamAtEachRun": _Spec("bool", "true"),
    # debug.instrument: when not set, follows autoReport.outputExecutionProfile (Poplar instruments
    # when an execution profile is requested; popvision.md §3.2 autoReport.all "enables instrumentation").
    "debug.instrument": _Spec("bool", "false"),
    # Accepted for compatibility like the autoReport ones above: tilescope's instrumentation is
    # governed by debug.instrument alone, so these finer switches have no effect.
    "debug.instrumentCompute": _Spec("bool", "false"),
    "debug.instrumentControlFlow": _Spec("bool", "false"),
    "debug.instrumentExternalExchange": _Spec("bool", "false"),
    # popvision.md §3.2: values tile, ipu, device, and vertex (GA); Poplar's default is not found
    # [NF]: tile, the finest level that does not serialise vertices.
    "debug.computeInstrumentationLevel": _Spec("enum", "tile", ("tile", "ipu", "device", "vertex")),
    "debug.allowOutOfMemory": _Spec("bool", "true"),  # popvision.md §3.2: default true since SDK 2.1
    "debug.retainDebugInformation": _Spec("bool", "true"),  # accepted, no effect (debug info is always kept)
    # Defaults not found [NF]: on, because the simulator's estimates are what its profile is made of.
    "profiler.includeFlopEstimates": _Spec("bool", "true"),
    "profiler.includeCycleEstimates": _Spec("bool", "true"),
    # popvision.md §3.2: "Profile one replica only" (integer); the engine captures that replica's
    # execution (all replicas run the same program, on their own data). Default 0 [NF].
    "profiler.replicaToProfile": _Spec("int", "0"),
    # Stack sizes per tile (Poplar engine options): "auto" sizes them as Poplar does since SDK 1.2,
    # from what the codelets use (targets.AUTO_*_STACK_BYTES); a number (decimal or 0x hex, as
    # TensorFlow's "0x200") fixes that context's stack on every tile.
    "target.workerStackSizeInBytes": _Spec("size", "auto"),
    "target.supervisorStackSizeInBytes": _Spec("size", "auto"),
    # tilescope's own: run every vertex's codelet instead of the compute sets' kernels (coarse
    # whole-tensor vertices computing the same, see profiler.poplar.graph.ComputeSet.kernel). Slower; the
    # results are the same up to float rounding, and the report (cycles, memory, exchange) identical.
    "tilescope.executeVertices": _Spec("bool", "false"),
    # tilescope's own: compile, place memory and estimate every run's trace from the cost model without
    # holding or computing any tensor value (docs/capturing.md "Compile-only profiles"). Poplar's
    # nearest is compiling for an offline device and writing only the graph profile, whose
    # compile-time cycle estimates PopVision then shows (reference/popvision.md §4 "Estimates").
    "tilescope.compileOnly": _Spec("bool", "false"),
    # tilescope's own, after PopART's SessionOptions.numIOTiles and PopRT's num_io_tiles: tiles of the IPU
    # set aside for host streams. The graph is built on the others (Graph.compute_tiles, import_model's
    # io_tiles), so this says what the graph was built with; 0: none, streams land on the compute tiles.
    "tilescope.numIOTiles": _Spec("int", "0"),
    # tilescope's own, after PopART's DataFlow batches_per_step and PopRT's batches_per_step: batches one
    # step of the device runs. With I/O tiles their host copies overlap the compute (PopART's
    # OverlapInnerLoop, cost_model.overlapped_io_step_cycles); without, they run in series.
    "tilescope.batchesPerStep": _Spec("int", "1"),
}
OPTION_NAMES: tuple[str, ...] = tuple(sorted(_SPECS))


@dataclass(frozen=True)
class EngineOptions:
    """Every known option's value in force (canonical strings) and where it came from."""

    values: dict[str, str]
    sources: dict[str, str]  # "default" | "code" | "environment"

    def _bool(self, name: str) -> bool:
        return self.values[name] == "true"

    @property
    def auto_report_all(self) -> bool:
        return self._bool("autoReport.all")

    @property
    def auto_report_directory(self) -> str:
        return self.values["autoReport.directory"]

    @property
    def output_graph_profile(self) -> bool:
        return self._bool("autoReport.outputGraphProfile")

    @property
    def output_execution_profile(self) -> bool:
        return self._bool("autoReport.outputExecutionProfile")

    @property
    def output_debug_info(self) -> bool:
        return self._bool("autoReport.outputDebugInfo")

    @property
    def execution_profile_program_run_count(self) -> int:
        return int(self.values["autoReport.executionProfileProgramRunCount"])

    @property
    def instrument(self) -> bool:
        return self._bool("debug.instrument")

    @property
    def compute_instrumentation_level(self) -> str:
        return self.values["debug.computeInstrumentationLevel"]

    @property
    def allow_out_of_memory(self) -> bool:
        return self._bool("debug.allowOutOfMemory")

    @property
    def execute_vertices(self) -> bool:
        return self._bool("tilescope.executeVertices")

    @property
    def compile_only(self) -> bool:
        """No tensor values: runs are estimated from the cost model (tilescope.compileOnly)."""
        return self._bool("tilescope.compileOnly")

    @property
    def num_io_tiles(self) -> int:
        """I/O tiles per IPU the graph was built with (tilescope.numIOTiles)."""
        return int(self.values["tilescope.numIOTiles"])

    @property
    def batches_per_step(self) -> int:
        """Batches a step runs (tilescope.batchesPerStep, at least 1)."""
        return max(1, int(self.values["tilescope.batchesPerStep"]))

    @property
    def include_flop_estimates(self) -> bool:
        return self._bool("profiler.includeFlopEstimates")

    @property
    def include_cycle_estimates(self) -> bool:
        return self._bool("profiler.includeCycleEstimates")

    @property
    def replica_to_profile(self) -> int:
        return int(self.values["profiler.replicaToProfile"])

    @property
    def worker_stack_bytes(self) -> int:
        """Each worker context's stack on every tile."""
        value = self.values["target.workerStackSizeInBytes"]
        return AUTO_WORKER_STACK_BYTES if value == "auto" else int(value)

    @property
    def supervisor_stack_bytes(self) -> int:
        """The supervisor's stack on every tile."""
        value = self.values["target.supervisorStackSizeInBytes"]
        return AUTO_SUPERVISOR_STACK_BYTES if value == "auto" else int(value)

    @property
    def capture_enabled(self) -> bool:
        """Whether any report output is on."""
        return self.output_graph_profile or self.output_execution_profile or self.output_debug_info

    def rows(self) -> dict[str, list[str]]:
        """The report's ``engine_options`` table, sorted by name."""
        names = sorted(self.values)
        return {
            "name": names,
            "value": [self.values[n] for n in names],
            "source": [self.sources[n] for n in names],
        }


def _one_line(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _canonical(name: str, value: object, origin: str) -> str:
    """The canonical string for ``value`` of option ``name``, or OptionError."""
    spec = _SPECS[name]
    where = f" (from {origin})"
    if spec.kind == "bool":
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, str) and value.strip().lower() in _BOOL:
            return value.strip().lower()
        raise OptionError(f"engine option {name}: bad value {_one_line(value)}{where}; allowed: true or false")
    if spec.kind == "int":
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        elif isinstance(value, str) and value.strip().lstrip("+").isdigit():
            number = int(value)
        else:
            raise OptionError(
                f"engine option {name}: bad value {_one_line(value)}{where}; allowed: a non-negative integer"
            )
        if number < 0:
            raise OptionError(f"engine option {name}: bad value {number}{where}; allowed: a non-negative integer")
        return str(number)
    if spec.kind == "size":
        text = str(value).strip().lower() if isinstance(value, (str, int)) and not isinstance(value, bool) else ""
        if text == "auto":
            return text
        # plain ASCII decimal or 0x hex only (int() alone would take "1_000" and other scripts' digits)
        if re.fullmatch(r"0x[0-9a-f]+", text):
            number = int(text, 16)
        else:
            number = int(text) if re.fullmatch(r"[0-9]+", text) else -1
        if not 0 <= number < 2**32:  # a 32-bit size, as a tile address is [INF]
            raise OptionError(
                f"engine option {name}: bad value {_one_line(value)}{where}; allowed: auto or a number of bytes "
                "from 0 to 4294967295 (decimal or 0x hex)"
            )
        return str(number)
    if spec.kind == "enum":
        if isinstance(value, str) and value.strip().lower() in spec.choices:
            return value.strip().lower()
        raise OptionError(
            f"engine option {name}: bad value {_one_line(value)}{where}; allowed: {', '.join(spec.choices)}"
        )
    if isinstance(value, str) and value.strip():
        return value
    raise OptionError(f"engine option {name}: bad value {_one_line(value)}{where}; allowed: a non-empty string")


def _check_name(name: object, origin: str) -> str:
    if not isinstance(name, str):
        raise OptionError(f"engine option names must be strings, got {_one_line(name)} (from {origin})")
    if name in _SPECS:
        return name
    by_case = {n.lower(): n for n in _SPECS}
    guess = by_case.get(name.lower()) or next(
        iter(difflib.get_close_matches(name, OPTION_NAMES, n=1, cutoff=0.6)), None
    )
    hint = f"; did you mean {guess!r}?" if guess else f"; known options: {', '.join(OPTION_NAMES)}"
    raise OptionError(f"unknown engine option {name!r} (from {origin}){hint}")


def _parse_environment(text: str) -> dict[str, object]:
    if not text.strip():
        return {}
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as e:
        raise OptionError(
            f"{ENV_VAR} is not valid JSON: {e.msg} at line {e.lineno} column {e.colno} (char {e.pos})"
        ) from None
    except RecursionError:  # Python's parser recurses per level: thousands of '[' exhaust it
        raise OptionError(f"{ENV_VAR} is nested too deeply to be engine options (a flat JSON object)") from None
    if not isinstance(parsed, dict):
        raise OptionError(
            f"{ENV_VAR} must be a JSON object of option names to values, got a JSON {type(parsed).__name__}"
        )
    return parsed


def resolve_options(
    code_options: Mapping[str, str | bool | int] | None = None, environ: Mapping[str, str] | None = None
) -> EngineOptions:
    """Merge defaults < ``code_options`` < ``POPLAR_ENGINE_OPTIONS`` from ``environ`` (os.environ if None)."""
    environ = os.environ if environ is None else environ
    values = {name: spec.default for name, spec in _SPECS.items()}
    sources = dict.fromkeys(_SPECS, DEFAULT)
    layers = (
        (CODE, "options given in code", code_options or {}),
        (ENVIRONMENT, ENV_VAR, _parse_environment(environ.get(ENV_VAR, ""))),
    )
    for source, origin, given in layers:
        for raw_name, raw_value in given.items():
            name = _check_name(raw_name, origin)
            values[name] = _canonical(name, raw_value, origin)
            sources[name] = source

    # autoReport.all switches on every default output not explicitly set (to false or true).
    if values["autoReport.all"] == "true":
        for name in _ALL_OUTPUTS:
            if sources[name] == DEFAULT:
                values[name] = "true"
                sources[name] = sources["autoReport.all"]
    # An execution profile needs instrumentation unless the user says otherwise.
    if sources["debug.instrument"] == DEFAULT and values["autoReport.outputExecutionProfile"] == "true":
        values["debug.instrument"] = "true"
        sources["debug.instrument"] = sources["autoReport.outputExecutionProfile"]
    return EngineOptions(values=values, sources=sources)
