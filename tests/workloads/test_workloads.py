import json
import math

import numpy as np
import pytest

from profiler.workloads import cnn, mlp, resnet, transformer


def test_mlp_loss_falls_on_separable_data():
    w = mlp.build()
    w.run(steps=10).close()
    assert len(w.losses) == 10 and all(np.isfinite(w.losses))
    assert np.mean(w.losses[-3:]) < 0.25 * np.mean(w.losses[:3])


def test_mlp_stashes_activations_for_backward():
    """The hidden activation is written in the forward pass and read by the backward pass, so it is
    live across the steps between them (what the liveness view shows)."""
    w = mlp.build()
    e = w.engine()
    h_ctx = {c.id for c in w.graph.debug_contexts if c.op_type == "Relu"}
    h_var = next(v.id for v in w.graph.variables if v.debug_context_id in h_ctx or v.name == "relu")
    live = e.liveness
    assert live is not None
    steps = [i for i, lf in enumerate(e.compiled.steps) if h_var in (lf.reads or set()) | (lf.writes or set())]
    assert steps[-1] - steps[0] > 10  # written early (forward), last read late (backward)


def test_cnn_loss_falls_over_a_few_steps():
    w = cnn.build()
    w.run(steps=16).close()
    assert len(w.losses) == 16 and all(math.isfinite(x) for x in w.losses)
    assert np.mean(w.losses[-4:]) < 0.8 * np.mean(w.losses[:4])


def _np_layer_norm(x, g, b):
    m = x.mean(-1, keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + 1e-5) * g + b


def _np_gelu(x):
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1 + erf(x / np.sqrt(2)))


def test_transformer_layer_matches_numpy():
    w = transformer.build()
    w.run(steps=1).close()
    p = {k: v.astype(np.float64) for k, v in w.initial.items()}
    x = w.info["tokens"].astype(np.float64)
    s, d = x.shape
    heads, dh = 4, d // 4
    h = _np_layer_norm(x, p["ln1_g"], p["ln1_b"])
    q, k, v = np.split(h @ p["wqkv"], 3, axis=1)
    q, k, v = (t.reshape(s, heads, dh).transpose(1, 0, 2) for t in (q, k, v))
    sc = q @ k.transpose(0, 2, 1) / np.sqrt(dh)
    a = np.exp(sc - sc.max(-1, keepdims=True))
    a /= a.sum(-1, keepdims=True)
    ctx = (a @ v).transpose(1, 0, 2).reshape(s, d)
    x1 = x + ctx @ p["wo"]
    h2 = _np_layer_norm(x1, p["ln2_g"], p["ln2_b"])
    ref = x1 + _np_gelu(h2 @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]
    np.testing.assert_allclose(w.info["result"]["out"], ref, rtol=1e-4, atol=1e-4)


def test_resnet_blocks_match_numpy_on_gc200():
    w = resnet.build(blocks=1, size=6, channels=32)
    e = w.run(steps=1)
    assert w.graph.target.name == "GC200"
    x = w.info["images"].astype(np.float64)
    p = {k: v.astype(np.float64) for k, v in w.initial.items()}
    y = x
    for i in range(3):
        wt = p[f"b0.conv{i}"]
        k = wt.shape[2]
        xp = np.pad(y, ((0, 0), (0, 0), (k // 2, k // 2), (k // 2, k // 2)))
        out = np.zeros((y.shape[0], wt.shape[0]) + y.shape[2:])
        for a in range(k):
            for b in range(k):
                out += np.einsum("bchw,oc->bohw", xp[:, :, a : a + y.shape[2], b : b + y.shape[3]], wt[:, :, a, b])
        y = out * p[f"b0.scale{i}"][None, :, None, None] + p[f"b0.shift{i}"][None, :, None, None]
        if i < 2:
            y = np.maximum(y, 0)
    ref = np.maximum(x + y, 0)
    np.testing.assert_allclose(w.info["result"]["out"], ref, rtol=3e-2, atol=6e-2)
    convs = [json.loads(c.attributes) for c in w.graph.debug_contexts if c.op_type == "MatMul"]
    assert len(convs) == 3 and all(c["tiles"] > 1 for c in convs)
    e.close()


def test_mlp_trains_in_half_precision_too():
    w = mlp.build(dtype="float16")
    w.run(steps=8).close()
    assert np.mean(w.losses[-2:]) < 0.25 * np.mean(w.losses[:2])


def test_mlp_report_groups_steps_by_op(tmp_path):
    from report_format import open_report

    w = mlp.build()
    e = w.run(steps=1, options={"autoReport.all": "true", "autoReport.directory": str(tmp_path)})
    path = e.write_report()
    r = open_report(path)
    r.verify()
    dc = r.debug_contexts().set_index("debug_context_id")
    assert set(dc["layer"]) <= {"poplibs", "onnx", "user"}
    ops_ctx = dc[dc["layer"] == "poplibs"]
    assert {"MatMul", "Relu", "CrossEntropy", "SGD", "Reduce"} <= set(ops_ctx["op_type"])
    # every compute set belongs to an op; the model's ops nest under its contexts (fc1, backward, ...)
    cs = r.compute_sets()
    assert (cs["debug_context_id"] >= 0).all()
    mm = ops_ctx[ops_ctx["op_type"] == "MatMul"]
    assert (mm["parent_id"] >= 0).all() and set(dc.loc[mm["parent_id"], "layer"]) == {"user"}
    assert all(json.loads(a)["method"] in ("AMP", "HMAC") for a in mm["attributes"])
    assert all(f.endswith(".py") and f != "" for f in mm["file"])


def _script(monkeypatch, capsys, module, *argv: str, options: str = "") -> tuple[int, str]:
    """Run a workload's script entry point with ``argv`` (and POPLAR_ENGINE_OPTIONS ``options``);
    (exit status, stderr)."""
    from profiler.workloads.common import main

    monkeypatch.setattr("sys.argv", [f"{module.__name__.rsplit('.', 1)[-1]}.py", *argv])
    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", options)
    try:
        main(module.build, module.DEFAULTS, "test")
        status = 0
    except SystemExit as exc:
        status = int(exc.code or 0)
    return status, capsys.readouterr().err


def test_workload_scripts_refuse_bad_sizes_in_one_line(monkeypatch, capsys):
    status, err = _script(monkeypatch, capsys, cnn, "--batch", "0")
    assert status == 2 and "argument --batch: 0 is below 1" in err and "Traceback" not in err
    status, err = _script(monkeypatch, capsys, mlp, "--tiles", "x")
    assert status == 2 and "'x' is not a whole number" in err


@pytest.mark.slow  # ~3 s at load 4
def test_workload_scripts_report_a_model_that_does_not_fit_in_one_line(monkeypatch, capsys):
    status, err = _script(monkeypatch, capsys, mlp, "--hidden", "20000", "--tiles", "4")
    assert status == 1 and "out of memory on 4 tile(s)" in err
    assert len(err.strip().splitlines()) == 1


def test_workload_scripts_name_a_bad_engine_option(monkeypatch, capsys):
    status, err = _script(monkeypatch, capsys, mlp, options='{"target.workerStackSizeInBytes": "big"}')
    assert status == 2
    assert err.startswith("mlp.py: error: engine option target.workerStackSizeInBytes: bad value 'big'")


def test_workload_scripts_say_a_fault_of_their_own_is_one(monkeypatch, capsys):
    """Not a ValueError of the sizes but a bug (here a KeyError): one line that says so, exit 1."""
    from types import SimpleNamespace

    def broken(**_):
        raise KeyError("conv1")

    status, err = _script(monkeypatch, capsys, SimpleNamespace(__name__="broken", build=broken, DEFAULTS={"batch": 1}))
    assert status == 1 and err.strip() == "broken.py: internal error (please report it): KeyError: 'conv1'"
    status, err = _script(monkeypatch, capsys, cnn, "--size", "6")
    assert status == 2 and "cnn: image size 6 must be a multiple of 4" in err


def test_workload_scripts_say_where_the_report_went(monkeypatch, capsys, tmp_path):
    """A workload's engine is named, so its report is a sub-directory of autoReport.directory: the
    script prints it, and a reader given the parent names it."""
    from profiler.workloads.common import main
    from report_format import open_report
    from report_format.errors import ReportError

    monkeypatch.setattr("sys.argv", ["mlp.py", "--batch", "4", "--hidden", "8", "--tiles", "4"])
    monkeypatch.setenv(
        "POPLAR_ENGINE_OPTIONS",
        json.dumps({"autoReport.all": "true", "autoReport.directory": str(tmp_path / "report")}),
    )
    main(mlp.build, mlp.DEFAULTS, "test")
    assert capsys.readouterr().out.splitlines()[-1] == f"report: {tmp_path / 'report' / 'mlp'}"
    with pytest.raises(ReportError, match=r"holds 1: .*report/mlp \(a named engine"):
        open_report(tmp_path / "report")


def test_workload_scripts_refuse_a_user_directory_as_their_report_before_running(monkeypatch, capsys, tmp_path):
    mine = tmp_path / "report" / "mlp"
    mine.mkdir(parents=True)
    (mine / "notes.txt").write_text("mine")
    options = json.dumps({"autoReport.all": "true", "autoReport.directory": str(tmp_path / "report")})
    status, err = _script(monkeypatch, capsys, mlp, "--batch", "4", "--hidden", "8", "--tiles", "4", options=options)
    assert status == 2 and err.startswith(f"mlp.py: error: {mine}: refusing to overwrite")
    assert "step 1" not in err and (mine / "notes.txt").read_text() == "mine"
