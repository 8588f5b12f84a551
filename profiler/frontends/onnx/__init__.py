"""The ONNX importer (PopART's role): load a model, build it with the operations library, run it.

from profiler.frontends.onnx import load_model, import_model, Session
m = import_model(load_model("model.onnx"), get_target("GC200"), batch_size=4)
with Session(m) as s:               # compiles, uploads the weights (program 0)
    outputs = s.run({"input": x})   # program 1; reports follow POPLAR_ENGINE_OPTIONS
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from profiler.compiler.compile import Progress
from profiler.engine.engine import Engine
from profiler.multi_ipu.pipeline import Pipeline

from . import examples
from .builder import ImportedModel, IOSpec
from .errors import FrontendError, UnsupportedError
from .importer import import_model
from .model import load_model, opset_version
from .operators import SUPPORTED


class Session:
    """An Engine for an imported model: ``compile()``, then ``run(inputs)`` any number of times
    (the weights are uploaded once, before the first run).

    A replicated model (imported for a target with num_replicas R) takes R x its batch per run, split
    across the replicas; ``micro_batches`` M > 1 pipelines the run (profiler.multi_ipu.pipeline): it takes M
    x that, streamed one micro-batch after another. Outputs come back in the inputs' order."""

    def __init__(
        self, model: ImportedModel, options: Mapping[str, Any] | None = None, name: str = "", micro_batches: int = 1
    ) -> None:
        self.model = model
        self.micro_batches = int(micro_batches)
        programs = list(model.programs)
        if self.micro_batches > 1:
            programs[1] = Pipeline(programs[1], self.micro_batches, name="Pipeline")
        if model.graph.io_tiles:  # the graph's I/O tiles, as its engine option (PopART's numIOTiles)
            options = {"tilescope.numIOTiles": str(model.graph.io_tiles), **(options or {})}
        self.engine = Engine(model.graph, programs, options, name=name)
        self.replicas = model.graph.replication_factor
        rows = self.replicas * self.micro_batches  # host rows per device row of an input or output
        # a compile-only engine never moves a value (its streams are not read), so it gets no host buffers:
        # a prefill's logits alone would be S x vocab x micro-batches elements (issue 38)
        values = not self.engine.compile_only
        self._inputs = {s.name: np.zeros(_scaled(s.shape, rows), dtype=s.device_dtype)
                        for s in model.inputs if values}  # fmt: skip
        self._outputs = {s.name: np.zeros(_scaled(s.shape, rows), dtype=s.device_dtype) for s in model.outputs
                         if values and s.name not in model.host_outputs}  # fmt: skip
        self._weights_loaded = False
        self.cycles: list[int] = []  # simulated cycles of each inference run

    def compile(self, progress: Progress | None = None) -> None:
        """Compile (``progress(done, total, work)`` over compute sets: ``compile.Progress``) and connect the streams."""
        e = self.engine
        e.compile(progress)
        e.load()
        for name, value in self.model.weights.items():
            e.connect_stream(name, value)
        empty = {s.name for s in self.model.inputs if 0 in s.shape}  # host values: no stream
        for name, buf in (self._inputs | self._outputs).items():
            if name in empty:
                continue
            if self.micro_batches > 1:  # one micro-batch (all replicas' rows) per transfer, in order
                to_device = name in self._inputs  # an input transfer is split over the replicas by the engine;
                parts = self.micro_batches * (1 if to_device else self.replicas)  # outputs arrive per replica
                e.connect_stream(name, _MicroBatches(buf, parts, to_device))
            else:
                e.connect_stream(name, buf)

    def upload_weights(self) -> None:
        """Run the weights-to-device program (once)."""
        if self.engine.compiled is None:
            self.compile()
        if not self._weights_loaded:
            self.engine.run(0, name="WeightsFromHost")
            self._weights_loaded = True

    def check_input_types(self, types: Mapping[str, tuple[tuple[int, ...], np.dtype]]) -> None:
        """FrontendError (one line) for missing, extra or misshapen inputs, given each one's shape and
        dtype only (so a file's inputs are checked from their headers, before their data is read)."""
        specs = {s.name: s for s in self.model.inputs}
        rows = self.replicas * self.micro_batches
        missing = [n for n in specs if n not in types]
        extra = [n for n in types if n not in specs]
        if missing or extra:
            raise FrontendError(
                f"inputs: missing {missing or 'none'}, unexpected {extra or 'none'}; the model takes {list(specs)}"
            )
        for name, spec in specs.items():
            shape, dtype = types[name]
            if tuple(shape) != _scaled(spec.shape, rows):
                raise FrontendError(
                    f"input {name!r}: shape {tuple(shape)}, the model takes {_scaled(spec.shape, rows)}"
                )
            # strings, objects, complex numbers, dates: no meaningful (or lossless) device value
            if dtype.kind not in "biuf":
                raise FrontendError(
                    f"input {name!r}: values of type {dtype} are not numbers; the model takes {np.dtype(spec.device_dtype)}"
                )

    def check_inputs(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Inputs converted to the device types; FrontendError (one line) for missing, extra or misshapen ones."""
        arrays = {name: np.asarray(v) for name, v in inputs.items()}
        self.check_input_types({name: (a.shape, a.dtype) for name, a in arrays.items()})
        return {s.name: arrays[s.name].astype(s.device_dtype) for s in self.model.inputs}

    def run(self, inputs: Mapping[str, np.ndarray], name: str = "") -> dict[str, np.ndarray]:
        """One inference: outputs keyed by ONNX output name, in the model's declared types (none, and
        ``inputs`` unread, when the engine is compile-only: tilescope.compileOnly)."""
        e = self.engine
        if e.compiled is None:
            self.compile()
        if e.compile_only:  # no values: the run is timed from the cost model alone and has no outputs
            self.upload_weights()
            e.run(1, name=name or f"inference {len(self.cycles)}")
            self.cycles.append(e.last_run_cycles)
            return {}
        feeds = self.check_inputs(inputs)
        self.upload_weights()
        for k, v in feeds.items():
            self._inputs[k][...] = v
        for stream in self.engine._streams.values():
            if isinstance(stream, _MicroBatches):
                stream.rewind()
        e.run(1, name=name or f"inference {len(self.cycles)}")
        self.cycles.append(e.last_run_cycles)
        result = {}
        for spec in self.model.outputs:
            value = self.model.host_outputs.get(spec.name)
            result[spec.name] = (self._outputs[spec.name] if value is None else value).astype(spec.host_dtype)
        return result

    def close(self) -> None:
        self.engine.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _scaled(shape: tuple[int, ...], rows: int) -> tuple[int, ...]:
    """``shape`` with ``rows`` x its first dimension (what the host sees of replicas x micro-batches)."""
    return (shape[0] * rows, *shape[1:]) if rows > 1 and shape else shape


class _MicroBatches:
    """A host buffer fed to (or filled from) a stream one micro-batch at a time, in order."""

    def __init__(self, buf: np.ndarray, micro_batches: int, to_device: bool) -> None:
        self.parts = np.split(buf.reshape(-1), micro_batches)
        self.to_device = to_device
        self.next = 0

    def rewind(self) -> None:
        self.next = 0

    def __call__(self, values: np.ndarray | None = None) -> np.ndarray | None:
        part = self.parts[self.next % len(self.parts)]
        self.next += 1
        if self.to_device:
            return part
        part[:] = np.asarray(values).reshape(-1)
        return None


def random_inputs(model: ImportedModel, seed: int = 0, rows: int = 1) -> dict[str, np.ndarray]:
    """Seeded inputs for every model input: standard normal floats, small non-negative integers,
    booleans; ``rows`` x the first dimension (replicas x micro-batches of a Session)."""
    rng = np.random.default_rng(seed)
    out = {}
    for s in model.inputs:
        shape = _scaled(s.shape, rows)
        if s.host_dtype.kind == "f":
            out[s.name] = rng.standard_normal(shape).astype(s.host_dtype)
        elif s.host_dtype.kind == "b":
            out[s.name] = rng.random(shape) < 0.5
        else:
            out[s.name] = rng.integers(0, 2, shape).astype(s.host_dtype)
    return out


__all__ = [
    "SUPPORTED",
    "FrontendError",
    "IOSpec",
    "ImportedModel",
    "Session",
    "UnsupportedError",
    "examples",
    "import_model",
    "load_model",
    "opset_version",
    "random_inputs",
]
