"""ONNX backend conformance cases run through the importer on a tiny IPU-Model target.

Cases: onnx.backend.test.case.node.collect_testcases() and the on-disk model cases under
onnx/backend/test/data/{pytorch-converted,pytorch-operator,simple}. Outputs are compared with the
backend test runner's own check (Runner.assert_similar_outputs) at each case's rtol/atol (float16
outputs at a relative 2.5e-3 at least, see FLOAT16_RTOL).

    python -m tests.onnx.conformance            # pass / fail / skip counts by operator
"""

from __future__ import annotations

import collections
import glob
import os
import sys
import warnings
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from profiler.chip.targets import ipu_model
from profiler.frontends.onnx import (
    SUPPORTED,
    FrontendError,
    Session,
    UnsupportedError,
    import_model,
    load_model,
    opset_version,
)
from profiler.frontends.onnx.model import MIN_OPSET

DISK_KINDS = ("pytorch-converted", "pytorch-operator", "simple")
# A tiny target keeps the suite fast; 16 MiB tiles so the cases never run out of memory.
TARGET = ipu_model(tiles_per_ipu=4, bytes_per_tile=16 << 20)
PASS, FAIL, SKIP = "pass", "fail", "skip"


@dataclass
class Case:
    name: str
    source: str  # "node" or a DISK_KINDS entry
    rtol: float
    atol: float
    model: onnx.ModelProto | None = None
    data_sets: list | None = None
    model_dir: str | None = None

    def load(self) -> tuple[onnx.ModelProto, list[tuple[list[np.ndarray], list[np.ndarray]]]]:
        if self.model is not None:
            return self.model, [([_array(x) for x in i], [_array(x) for x in o]) for i, o in self.data_sets or []]
        model = onnx.load(os.path.join(self.model_dir, "model.onnx"))  # type: ignore[arg-type]
        sets = []
        for d in sorted(glob.glob(os.path.join(self.model_dir, "test_data_set_*"))):  # type: ignore[arg-type]
            ins = [_read_pb(p) for p in sorted(glob.glob(os.path.join(d, "input_*.pb")), key=_pb_index)]
            outs = [_read_pb(p) for p in sorted(glob.glob(os.path.join(d, "output_*.pb")), key=_pb_index)]
            sets.append((ins, outs))
        return model, sets


def _array(x: object) -> object:
    """Case data as numpy arrays (scalars and TensorProtos converted; sequences left as they are)."""
    if isinstance(x, np.generic):
        return np.asarray(x)
    if isinstance(x, onnx.TensorProto):
        return numpy_helper.to_array(x)
    return x


def _pb_index(path: str) -> int:
    return int(os.path.basename(path).split("_")[1].split(".")[0])


def _read_pb(path: str) -> np.ndarray:
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


@cache
def all_cases() -> tuple[Case, ...]:
    from onnx.backend.test.case.node import collect_testcases
    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        node = collect_testcases(None)
    out = [Case(c.name, "node", c.rtol, c.atol, model=c.model, data_sets=c.data_sets) for c in node]
    for kind in DISK_KINDS:
        out += [Case(c.name, kind, c.rtol, c.atol, model_dir=c.model_dir) for c in load_model_tests(kind=kind)]
    return tuple(out)


def op_types(case: Case) -> list[str]:
    model = case.model if case.model is not None else onnx.load(os.path.join(case.model_dir, "model.onnx"))  # type: ignore[arg-type]
    return sorted({n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}" for n in model.graph.node})


def case_id(case: Case) -> str:
    return f"{case.source}/{case.name}"


@cache
def case_by_id(cid: str) -> Case:
    return {case_id(c): c for c in all_cases()}[cid]


#: pytest cache key of the case index: the cases are onnx's, so they change with its version
INDEX_KEY = f"tilescope/onnx-conformance-index/v1/onnx-{onnx.__version__}"


def case_index(cache: Any = None) -> list[tuple[str, list[str]]]:
    """(case id, operator types) of every case, without making the cases: onnx makes its node cases
    by running its reference implementation on every one (~10 s, pooling mostly), which collecting
    the tests must not wait for. ``cache``: pytest's ``config.cache``, where the index is kept per
    onnx version (made once, on the first collection)."""
    index = cache.get(INDEX_KEY, None) if cache is not None else None
    if index is None:
        index = [(case_id(c), op_types(c)) for c in all_cases()]
        if cache is not None:
            cache.set(INDEX_KEY, index)
    return [(cid, list(ops)) for cid, ops in index]


def unsupported_reason(case: Case) -> str:
    """Why the case is skipped up front ("" if every operator it uses has a handler)."""
    missing = [t for t in op_types(case) if t not in SUPPORTED]
    return f"unsupported operator(s): {', '.join(missing)}" if missing else ""


def with_input_shapes(model: onnx.ModelProto, inputs: list[np.ndarray]) -> onnx.ModelProto:
    """A copy whose symbolic input dimensions are those of the case's data (the runner's inputs)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    init = {t.name for t in m.graph.initializer}
    graph_inputs = [vi for vi in m.graph.input if vi.name not in init]
    for vi, x in zip(graph_inputs, inputs, strict=False):
        if not vi.type.HasField("tensor_type"):
            continue
        dims = vi.type.tensor_type.shape.dim
        if len(dims) == x.ndim:
            for d, n in zip(dims, x.shape, strict=True):
                if not d.HasField("dim_value"):
                    d.Clear()
                    d.dim_value = n
    return m


def _beyond_float32(x: np.ndarray) -> bool:
    if x.dtype != np.float64:
        return False
    finite = x[np.isfinite(x)]
    return bool(finite.size and np.abs(finite).max() > np.finfo(np.float32).max)


def run_case(case: Case) -> tuple[str, str]:
    """(status, reason) of one case."""
    reason = unsupported_reason(case)
    if reason:
        return SKIP, reason
    model, sets = case.load()
    if opset_version(model) < MIN_OPSET:
        return SKIP, f"opset {opset_version(model)} is older than {MIN_OPSET}"
    if any(not isinstance(x, np.ndarray) for ins, outs in sets for x in ins + outs):
        return SKIP, "sequence/optional inputs or outputs"
    if any(x.dtype == object for ins, outs in sets for x in ins + outs):
        return SKIP, "string tensors"
    if any(_beyond_float32(x) for ins, outs in sets for x in ins + outs):
        return SKIP, "float64 data outside the float32 range (the device computes doubles as float)"
    if sets:
        model = with_input_shapes(model, sets[0][0])
    status, reason = _import_and_run(case, model, sets)
    if status == SKIP and (MUST_BE_CONSTANT in reason or "empty tensors" in reason) and len(sets) == 1:
        # The importer (like PopART) needs shape-like inputs (axes, shapes, pads, bounds) at import;
        # node tests feed them as graph inputs, so bind the integer and 0-d ones as constants.
        bound, bound_sets = bind_constant_inputs(model, sets[0])
        if not bound_sets[0][0]:
            return SKIP, "every input is shape-like: the case would be folded on the host entirely"
        status, reason = _import_and_run(case, bound, bound_sets)
        reason = reason or "shape-like inputs bound as constants"
    return status, reason


MUST_BE_CONSTANT = "computed on the device (must be constant)"


def bind_constant_inputs(model: onnx.ModelProto, data: tuple[list, list]) -> tuple[onnx.ModelProto, list]:
    """A copy of ``model`` whose int64 and 0-d graph inputs are initializers holding the case's values
    (except int64 data: tensors of rank 2 or more that some node takes as its first input)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    init = {t.name for t in m.graph.initializer}
    graph_inputs = [vi for vi in m.graph.input if vi.name not in init]
    # a node's first input is its data (ConstantOfShape's is a shape); 1-D inputs elsewhere are
    # scales, roi, zero points, OneHot values or Compress conditions: real models hold them as initializers
    first_inputs = {n.input[0] for n in m.graph.node if n.input and n.op_type != "ConstantOfShape"}
    keep, fed = [], []
    for vi, x in zip(graph_inputs, data[0], strict=True):
        data_like = x.ndim >= 1 and vi.name in first_inputs
        shape_like = x.dtype == np.int64 or x.ndim == 0 or x.ndim == 1
        if shape_like and not data_like:
            m.graph.initializer.append(numpy_helper.from_array(x, vi.name))
        else:
            keep.append(vi.name)
            fed.append(x)
    return m, [(fed, data[1])]


# float16 outputs of multi-step ops (Attention: matmul, softmax, matmul) may differ by two float16
# ulps: onnx.reference rounds every numpy step to float16, the device rounds once per op
FLOAT16_RTOL = 2.5e-3


def _rtol(case: Case, expected: list) -> float:
    if any(getattr(x, "dtype", None) == np.float16 for x in expected):
        return max(case.rtol, FLOAT16_RTOL)
    return case.rtol


def _import_and_run(case: Case, model: onnx.ModelProto, sets: list) -> tuple[str, str]:
    from onnx.backend.test.runner import Runner

    try:
        m = load_model(model)
        init = {t.name for t in m.graph.initializer}
        names = [i.name for i in m.graph.input if i.name not in init]
        imported = import_model(m, TARGET)
    except UnsupportedError as exc:
        return SKIP, str(exc)
    except FrontendError as exc:
        return FAIL, str(exc)
    with Session(imported) as s:
        for ins, expected in sets:
            try:
                got = s.run(dict(zip(names, ins, strict=True)))
            except FrontendError as exc:
                return FAIL, str(exc)
            outs = [got[o.name] for o in m.graph.output]
            try:
                with np.errstate(all="ignore"):
                    Runner.assert_similar_outputs(expected, outs, _rtol(case, expected), case.atol)
            except AssertionError as exc:
                return FAIL, " ".join(str(exc).split())[:300]
    return PASS, ""


def main() -> int:
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    failures = []
    case_counts: collections.Counter = collections.Counter()
    only = sys.argv[1:]
    for case in all_cases():
        if only and not any(o in case.name for o in only):
            continue
        try:
            status, reason = run_case(case)
        except Exception as exc:  # report, keep going
            status, reason = FAIL, f"{type(exc).__name__}: {exc}"
        if status == SKIP and reason.startswith("unsupported operator(s)"):
            continue
        case_counts[f"{case.source} {status}"] += 1
        for t in op_types(case):
            counts[t][status] += 1
        if status == FAIL:
            failures.append(f"{case.source}/{case.name}: {reason}")
        if status == SKIP and only:
            print(f"skip {case.name}: {reason}")
    print(f"cases: {sum(case_counts.values())} run through tilescope: {dict(sorted(case_counts.items()))}")
    print(f"{'operator':24} pass fail skip")
    for t in sorted(counts):
        c = counts[t]
        print(f"{t:24} {c[PASS]:4} {c[FAIL]:4} {c[SKIP]:4}")
    print("\n".join(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
