"""Checking a simulated run against an independent ONNX runtime (``tilescope run --check``).

The reference is onnxruntime when it is installed (fast, the runtime users deploy with), else
onnx.reference (pure Python, always there). Both run the model as the importer saw it: with the
batch override and its rewritten shape constants applied (``ImportedModel.onnx_model``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import onnx

from .errors import FrontendError, first_line

DEFAULT_TOLERANCE = 1e-3
# --check's default tolerance by the type the model is built in (ImportedModel's dtype option). float16:
# 1e-2, about ten float16 steps (2^-10) of accumulated rounding. FP8 runs its matmuls and convolutions on
# inputs rounded to the format, whose relative step is 2^-mantissa bits: 2^-3 for e4m3, 2^-2 for e5m2.
# Rounding moves an input by up to half a step and a product of two rounded inputs by up to about one
# step; the check's floor (tolerance x the output's largest magnitude) absorbs the sums' cancellation,
# so one step of the format is the tolerance (a deep model compounds it: --check-tolerance overrides).
TOLERANCES = {"float32": DEFAULT_TOLERANCE, "float16": 1e-2, "float8": 2.0**-3, "float8_e5m2": 2.0**-2}


def default_tolerance(dtype: str) -> float:
    """The ``--check`` tolerance for a model built in ``dtype`` (see TOLERANCES)."""
    return TOLERANCES.get(dtype, 1e-2)


@dataclass
class OutputCheck:
    """How far one output of the simulated run is from the reference run."""

    name: str
    max_abs_diff: float
    max_rel_diff: float  # max |got - want| / max(|want|, tiny): relative to each reference element
    within: bool  # allclose(got, want, rtol=tolerance, atol=tolerance * max|want|)
    # elements NaN or inf in the simulated run where the reference's are finite (a float16 run whose
    # activations went past its range); the differences above are over the other elements
    nonfinite: int = 0
    size: int = 0


def reference_run(
    model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], parts: int = 1
) -> tuple[dict[str, np.ndarray], str]:
    """(outputs by name, runtime name) of ``model`` on ``feeds``; FrontendError (one line) if the
    reference runtime cannot run it. ``parts`` > 1: the feeds are ``parts`` batches of the model's
    (a pipeline's micro-batches, replicas), each run on its own and the outputs concatenated in
    order; one session runs them all (a session holds a copy of the weights: BERT-large's 1.3 GB
    took ~40 s to set up)."""
    names = [o.name for o in model.graph.output]
    batches = [{k: np.split(np.asarray(v), parts)[i] for k, v in feeds.items()} for i in range(parts)]
    try:
        import onnxruntime as ort
    except ImportError:
        ort = None
    if ort is not None:
        try:
            opts = ort.SessionOptions()
            opts.log_severity_level = 3  # no warnings about initializers listed as inputs
            light, weights = _without_weights(model)
            if weights:  # used in place by the session (OrtValues over the arrays: no copy)
                opts.add_external_initializers(
                    list(weights), [ort.OrtValue.ortvalue_from_numpy(w) for w in weights.values()]
                )
            sess = ort.InferenceSession(light.SerializeToString(), opts, providers=["CPUExecutionProvider"])
            del light
            runs = [sess.run(names, batch) for batch in batches]
            return _joined(names, runs), f"onnxruntime {ort.__version__}"
        except Exception as exc:  # e.g. an IR version newer than the installed onnxruntime reads
            fallback = first_line(exc)
    else:
        fallback = ""
    from onnx.reference import ReferenceEvaluator

    try:
        with np.errstate(all="ignore"):
            evaluator = ReferenceEvaluator(model)
            runs = [evaluator.run(names, batch) for batch in batches]
    except Exception as exc:
        why = f"; onnxruntime: {fallback}" if fallback else ""
        raise FrontendError(f"--check: the reference runtime cannot run the model: {first_line(exc)}{why}") from None
    # said with the runtime's name: onnx.reference is pure Python and can take minutes on a big model
    why = f" (onnxruntime could not run it: {fallback})" if fallback else ""
    return _joined(names, runs), f"onnx.reference {onnx.__version__}{why}"


#: Initializers at least this large go to onnxruntime as arrays rather than inside the serialized model.
WEIGHTS_APART_BYTES = 1 << 16


def _without_weights(model: onnx.ModelProto) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """``model`` with its large raw-data initializers marked external, and their values as arrays by name.

    onnxruntime copies every initializer of a model it is given as bytes, so a serialized model held the
    weights three times at once (the proto, its bytes, the session's copy: 3.9 GB for BERT-large in
    float32). Given as external initializers (``SessionOptions.add_external_initializers``) the session
    uses the arrays in place, and the model it parses holds only the graph."""
    light = onnx.ModelProto()
    for field, value in model.ListFields():
        if field.name != "graph":
            _copy_field(light, field, value)
    weights: dict[str, np.ndarray] = {}
    for field, value in model.graph.ListFields():
        if field.name != "initializer":
            _copy_field(light.graph, field, value)
            continue
        for t in value:
            dtype = _plain_dtype(t)
            if dtype is None or len(t.raw_data) < WEIGHTS_APART_BYTES:
                light.graph.initializer.append(t)
                continue
            weights[t.name] = np.frombuffer(t.raw_data, dtype).reshape(tuple(t.dims))
            stub = light.graph.initializer.add(name=t.name, data_type=t.data_type, dims=t.dims)
            stub.data_location = onnx.TensorProto.EXTERNAL
            stub.external_data.add(key="location", value=f"{len(weights)}.bin")  # never read: supplied above
    return light, weights


def _copy_field(into: object, field: object, value: object) -> None:
    """Sets ``field`` of the message ``into`` to ``value`` (a repeated field, a message or a scalar)."""
    name = field.name  # type: ignore[attr-defined]
    if hasattr(value, "extend"):  # a repeated field's container
        getattr(into, name).extend(value)
    elif hasattr(value, "CopyFrom"):
        getattr(into, name).CopyFrom(value)
    else:
        setattr(into, name, value)


def _plain_dtype(t: onnx.TensorProto) -> np.dtype | None:
    """numpy's dtype for a raw-data initializer numpy holds natively (not bfloat16, float8, int4, strings)."""
    if t.data_location == onnx.TensorProto.EXTERNAL or not t.HasField("raw_data"):
        return None
    try:
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t.data_type))
    except (KeyError, TypeError, ValueError):
        return None
    return dtype if dtype.kind in "fiub" and dtype.itemsize in (1, 2, 4, 8) and dtype.fields is None else None


def _joined(names: list[str], runs: list[list[np.ndarray]]) -> dict[str, np.ndarray]:
    """Each output's values of every run, concatenated along the batch (one run: as it came)."""
    if len(runs) == 1:
        return dict(zip(names, (np.asarray(o) for o in runs[0]), strict=True))
    return {name: np.concatenate([np.asarray(r[i]) for r in runs]) for i, name in enumerate(names)}


def compare(got: Mapping[str, np.ndarray], want: Mapping[str, np.ndarray], tolerance: float) -> list[OutputCheck]:
    """Per output: maximum absolute and relative difference, and whether it is within ``tolerance``
    (relative, with an absolute floor of ``tolerance`` times the output's largest magnitude, so
    elements near zero do not dominate)."""
    out = []
    for name, w in want.items():
        g = np.asarray(got[name])
        w = np.asarray(w)
        if g.shape != w.shape:
            out.append(OutputCheck(name, float("inf"), float("inf"), False))
            continue
        if w.dtype.kind == "b" or g.dtype.kind == "b":
            g, w = g.astype(np.int8), w.astype(np.int8)
        gf, wf = g.astype(np.float64), w.astype(np.float64)
        if gf.size == 0:
            out.append(OutputCheck(name, 0.0, 0.0, True))
            continue
        both_nan = np.isnan(gf) & np.isnan(wf)
        same_inf = np.isinf(wf) & (gf == wf)
        lost = ~np.isfinite(gf) & np.isfinite(wf)  # said as a count: a difference of inf says nothing
        with np.errstate(invalid="ignore"):  # inf - inf: NaN, masked just below
            diff = np.where(both_nan | same_inf | lost, 0.0, np.abs(gf - wf))
        diff = np.where(np.isnan(diff), np.inf, diff)
        scale = np.abs(np.where(np.isfinite(wf), wf, 0.0))
        rel = diff / np.maximum(scale, np.finfo(np.float32).tiny)
        floor = tolerance * float(scale.max())
        within = bool(np.all(diff <= tolerance * scale + floor)) if w.dtype.kind == "f" else bool(np.all(diff == 0))
        n_lost = int(lost.sum())
        out.append(OutputCheck(name, float(diff.max()), float(rel.max()), within and not n_lost, n_lost, int(gf.size)))
    return out
