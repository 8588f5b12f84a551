"""The examples compute what a separate numpy computation computes, and write readable reports."""

import importlib.util
from pathlib import Path

import numpy as np

from report_format import open_report

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _load(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _opts(tmp_path):
    return {"autoReport.all": "true", "autoReport.directory": str(tmp_path / "report")}


def test_tutorial1(tmp_path):
    out = _load("tutorial1_variables").run(options=_opts(tmp_path), verbose=False)
    v1 = np.array([1.0, 1.5, 2.0, 2.5])
    v2 = v1 + np.array([4.0, 3.0, 2.0, 1.0])
    expected = np.zeros((4, 4))
    expected[0], expected[1] = v2, v1
    expected[2] = expected[0:2, 0:2].T.reshape(4)
    assert np.array_equal(out["v3"], expected)
    assert out["v4"].tolist() == list(range(10))
    r = open_report(tmp_path / "report")
    assert r.num_rows("execution_steps") > 0 and r.has_execution_profile


def test_matvec(tmp_path):
    out = _load("matvec").run(options=_opts(tmp_path), verbose=False)
    ref = out["A"].astype(np.float64) @ out["x"].astype(np.float64)
    np.testing.assert_allclose(out["y"], ref, rtol=1e-5, atol=1e-5)
    r = open_report(tmp_path / "report")
    flops = r.runs()["flops"][0]
    assert flops == 2 * 64 * 96 + (4 - 1) * 64  # MACs of the blocks + adds of the partials


def test_logistic_regression(tmp_path):
    out = _load("logistic_regression").run(options=_opts(tmp_path), verbose=False)
    x, y = out["images"].astype(np.float64), out["labels"].astype(np.float64)
    w = np.zeros(x.shape[1])
    for _ in range(out["steps"]):
        p = 1.0 / (1.0 + np.exp(-(x @ w)))
        w -= out["lr"] / len(x) * (x.T @ (p - y))
    np.testing.assert_allclose(out["weights"], w, rtol=1e-4, atol=1e-6)
    assert out["accuracy"] > 0.9
    r = open_report(tmp_path / "report")
    assert (r.programs()["type"] == "Repeat").sum() == 1
    assert r.num_rows("execution_steps") == 6 + 20 * 10  # two stream copies, then 20 x the body
