"""The ONNX importer (PopART's role): load a model, build it with the operations library, run it.

from profiler.frontends.onnx import load_model, import_model, Session
m = import_model(load_model("model.onnx"), get_target("GC200"), batch_size=4)
with Session(m) as s:               # compiles, uploads the weights (program 0)
    outputs = s.run({"input": x})   # program 1; reports follow POPLAR_ENGINE_OPTIONS
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from profiler.engine import Engine

from . import examples
from .builder import ImportedModel, IOSpec, import_model
from .model import FrontendError, UnsupportedError, load_model, opset_version
from .operators import SUPPORTED


class Session:
    """An Engine for an imported model: ``compile()``, then ``run(inputs)`` any number of times
    (the weights are uploaded once, before the first run)."""

    def __init__(self, model: ImportedModel, options: Mapping[str, Any] | None = None, name: str = "") -> None:
        self.model = model
        self.engine = Engine(model.graph, list(model.programs), options, name=name)
        self._inputs = {s.name: np.zeros(s.shape, dtype=s.device_dtype) for s in model.inputs}
        self._outputs = {s.name: np.zeros(s.shape, dtype=s.device_dtype) for s in model.outputs
                         if s.name not in model.host_outputs}  # fmt: skip
        self._weights_loaded = False
        self.cycles: list[int] = []  # simulated cycles of each inference run

    def compile(self, progress: Callable[[int, int], None] | None = None) -> None:
        """Compile (``progress(done, total)`` over compute sets) and connect the streams."""
        e = self.engine
        e.compile(progress)
        e.load()
        for name, value in self.model.weights.items():
            e.connect_stream(name, value)
        empty = {s.name for s in self.model.inputs if 0 in s.shape}  # host values: no stream
        for name, buf in (self._inputs | self._outputs).items():
            if name not in empty:
                e.connect_stream(name, buf)

    def upload_weights(self) -> None:
        """Run the weights-to-device program (once)."""
        if self.engine.compiled is None:
            self.compile()
        if not self._weights_loaded:
            self.engine.run(0, name="WeightsFromHost")
            self._weights_loaded = True

    def check_inputs(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Inputs converted to the device types; FrontendError (one line) for missing, extra or misshapen ones."""
        specs = {s.name: s for s in self.model.inputs}
        missing = [n for n in specs if n not in inputs]
        extra = [n for n in inputs if n not in specs]
        if missing or extra:
            raise FrontendError(
                f"inputs: missing {missing or 'none'}, unexpected {extra or 'none'}; the model takes {list(specs)}"
            )
        out = {}
        for name, spec in specs.items():
            arr = np.asarray(inputs[name])
            if arr.shape != spec.shape:
                raise FrontendError(f"input {name!r}: shape {arr.shape}, the model takes {spec.shape}")
            # strings, objects, complex numbers, dates: no meaningful (or lossless) device value
            if arr.dtype.kind not in "biuf":
                raise FrontendError(
                    f"input {name!r}: values of type {arr.dtype} are not numbers; the model takes {np.dtype(spec.device_dtype)}"
                )
            out[name] = arr.astype(spec.device_dtype)
        return out

    def run(self, inputs: Mapping[str, np.ndarray], name: str = "") -> dict[str, np.ndarray]:
        """One inference: outputs keyed by ONNX output name, in the model's declared types."""
        e = self.engine
        if e.compiled is None:
            self.compile()
        feeds = self.check_inputs(inputs)
        self.upload_weights()
        for k, v in feeds.items():
            self._inputs[k][...] = v
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


def random_inputs(model: ImportedModel, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded inputs for every model input: standard normal floats, small non-negative integers, booleans."""
    rng = np.random.default_rng(seed)
    out = {}
    for s in model.inputs:
        if s.host_dtype.kind == "f":
            out[s.name] = rng.standard_normal(s.shape).astype(s.host_dtype)
        elif s.host_dtype.kind == "b":
            out[s.name] = rng.random(s.shape) < 0.5
        else:
            out[s.name] = rng.integers(0, 2, s.shape).astype(s.host_dtype)
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
