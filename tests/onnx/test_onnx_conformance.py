"""ONNX backend conformance cases through tilescope (see conformance.py; ``python -m
tests.onnx.conformance`` prints the counts by operator). Cases using operators without a handler
are not collected; cases using unsupported attributes, element types or empty tensors are skipped
with the reason."""

from __future__ import annotations

import warnings

import pytest

from profiler.frontends.onnx import SUPPORTED
from tests.onnx.conformance import (
    PASS,
    SKIP,
    all_cases,
    case_by_id,
    case_id,
    case_index,
    op_types,
    run_case,
    unsupported_reason,
)

pytestmark = pytest.mark.conformance


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """The case ids come from an index kept in pytest's cache (see ``case_index``): collecting
    them does not make onnx's cases, the first case run does (once per session)."""
    if "cid" in metafunc.fixturenames:
        supported = set(SUPPORTED)
        ids = [cid for cid, ops in case_index(getattr(metafunc.config, "cache", None)) if supported.issuperset(ops)]
        metafunc.parametrize("cid", ids, ids=ids)


@pytest.fixture(autouse=True)
def _no_env_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POPLAR_ENGINE_OPTIONS", raising=False)


def test_backend_case(cid: str) -> None:
    try:
        case = case_by_id(cid)
    except KeyError:
        pytest.fail(f"{cid} is not one of onnx's cases: the case index is stale (run pytest with --cache-clear)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        status, reason = run_case(case)
    if status == SKIP:
        pytest.skip(reason)
    assert status == PASS, reason


def test_the_case_index_is_every_case(request: pytest.FixtureRequest) -> None:
    """The index the cases were collected from (pytest's cache) lists exactly onnx's cases."""
    cases = all_cases()
    assert case_index(getattr(request.config, "cache", None)) == [(case_id(c), op_types(c)) for c in cases]


def test_every_listed_operator_has_passing_cases() -> None:
    """Each operator issues 5 and 14 list is exercised by at least one passing backend case."""
    listed = [
        "Conv",
        "BatchNormalization",
        "Relu",
        "LeakyRelu",
        "Sigmoid",
        "Tanh",
        "Gelu",
        "Erf",
        "Softmax",
        "LogSoftmax",
        "MatMul",
        "Gemm",
        "Add",
        "Sub",
        "Mul",
        "Div",
        "Pow",
        "Sqrt",
        "Exp",
        "Log",
        "Neg",
        "Abs",
        "Reciprocal",
        "Clip",
        "MaxPool",
        "AveragePool",
        "GlobalAveragePool",
        "GlobalMaxPool",
        "LRN",
        "Flatten",
        "Reshape",
        "Transpose",
        "Concat",
        "Split",
        "Slice",
        "Gather",
        "Squeeze",
        "Unsqueeze",
        "ReduceMean",
        "ReduceSum",
        "ReduceMax",
        "LayerNormalization",
        "Dropout",
        "Identity",
        "Constant",
        "ConstantOfShape",
        "Shape",
        "Cast",
        "Pad",
        "Where",
        "Expand",
        "Equal",
        "Less",
        "Greater",
        "Sum",
        "Max",
        "Min",
        # issue 14
        "PRelu",
        "HardSigmoid",
        "HardSwish",
        "Selu",
        "Elu",
        "Softplus",
        "Floor",
        "Ceil",
        "Round",
        "Mod",
        "And",
        "Or",
        "Xor",
        "Tile",
        "ArgMax",
        "ArgMin",
        "CumSum",
        "Trilu",
        "Einsum",
        "Resize",
        "Upsample",
        "ConvTranspose",
        "InstanceNormalization",
        "TopK",
        "ScatterND",
        "GatherND",
        "OneHot",
    ]
    passing: set[str] = set()
    for c in (c for c in all_cases() if not unsupported_reason(c)):
        ops = set(op_types(c))
        # single-operator cases (plus a Constant) are enough, except for ops that only ever run on the
        # host (their single-op cases feed nothing to the device); stop trying an op once one passes
        wanted = ops & (set(listed) - passing)
        small = len(ops) <= 2 or bool(wanted & {"ConstantOfShape", "Shape", "Constant"})
        if wanted and small and run_case(c)[0] == PASS:
            passing |= ops
    assert sorted(set(listed) - passing) == []
