import numpy as np
import pytest

from profiler import ops
from tests.ops.helpers import fd_grad, np_erf, rng, run, tol

ACTIVATIONS = {
    "relu": (ops.relu, lambda x: np.maximum(x, 0), True),
    "sigmoid": (ops.sigmoid, lambda x: 1 / (1 + np.exp(-x)), True),
    "tanh": (ops.tanh, np.tanh, True),
    "gelu": (ops.gelu, lambda x: 0.5 * x * (1 + np_erf(x / np.sqrt(2))), False),  # grad takes the input
}


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("shape", [(1,), (6, 5), (3, 1, 7)])
@pytest.mark.parametrize("kind", sorted(ACTIVATIONS))
def test_activation_and_gradient(kind, shape, dtype):
    fwd, ref, grad_from_output = ACTIVATIONS[kind]
    r = rng(40)
    x = r.standard_normal(shape).astype(dtype)
    x[np.abs(x) < 1e-2] = 0.5  # keep relu's kink away from finite differences
    dy = r.standard_normal(shape).astype(dtype)

    def build(g, t, p):
        y = fwd(g, t["x"], p)
        return {"y": y, "dx": ops.nonlinearity_grad(g, kind, y if grad_from_output else t["x"], t["dy"], p)}

    out, _, _ = run({"x": x, "dy": dy}, build, tiles=3)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(out["y"], ref(x64), rtol=tol(dtype), atol=tol(dtype))
    fd = fd_grad(ref, x64, dy.astype(np.float64))
    np.testing.assert_allclose(out["dx"], fd, rtol=tol(dtype) * 10, atol=tol(dtype) * 10)


def np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("shape,axis", [((4, 7), -1), ((3, 5, 2), 1), ((1, 9), -1)])
def test_softmax_is_stable_and_its_gradient_is_right(shape, axis, dtype):
    r = rng(41)
    x = (r.standard_normal(shape) * 3 + 50).astype(dtype)  # large logits: a naive exp would overflow half
    dy = r.standard_normal(shape).astype(dtype)

    def build(g, t, p):
        y = ops.softmax(g, t["x"], p, axis=axis)
        return {
            "y": y,
            "ls": ops.log_softmax(g, t["x"], p, axis=axis),
            "dx": ops.softmax_grad(g, y, t["dy"], p, axis=axis),
        }

    out, _, _ = run({"x": x, "dy": dy}, build, tiles=4)
    x64 = x.astype(np.float64)
    assert np.isfinite(out["y"]).all()
    np.testing.assert_allclose(out["y"], np_softmax(x64, axis), rtol=tol(dtype), atol=tol(dtype))
    np.testing.assert_allclose(out["ls"], np.log(np_softmax(x64, axis)), rtol=tol(dtype), atol=tol(dtype) * 5)
    fd = fd_grad(lambda v: np_softmax(v, axis), x64, dy.astype(np.float64))
    np.testing.assert_allclose(out["dx"], fd, rtol=tol(dtype) * 5, atol=tol(dtype) * 5)


def test_softmax_makes_one_tensor_of_its_inputs_size_as_popnn_does():
    """popnn's softmaxImpl subtracts the row max into a new tensor, then takes the exponential and scales
    by the inverse sum in place (popops::expInPlace, mulInPlace): one x-sized tensor, not three."""
    x = rng(44).standard_normal((6, 10)).astype(np.float32)
    made: list[tuple[int, ...]] = []

    def build(g, t, p):
        before = len(g.variables)
        y = ops.softmax(g, t["x"], p)
        made.extend(v.shape for v in g.variables[before:])
        return {"y": y}

    out, _, _ = run({"x": x}, build, tiles=2)
    assert [s for s in made if np.prod(s) >= x.size] == [(6, 10)]  # the shifted x (the rest: per-row values)
    np.testing.assert_allclose(out["y"], np_softmax(x.astype(np.float64)), rtol=1e-6, atol=1e-7)


def test_cross_entropy_nll_and_gradients():
    r = rng(42)
    logits = r.standard_normal((6, 5)).astype(np.float32)
    labels = np.array([0, 4, 2, 2, 1, 3], np.int32)
    logp = r.standard_normal((6, 5)).astype(np.float32)

    def ce(v):
        return -np.log(np_softmax(v))[np.arange(6), labels].mean()

    def build(g, t, p):
        loss, probs, oh = ops.cross_entropy(g, t["logits"], t["labels"], p)
        nll, oh2 = ops.nll_loss(g, t["logp"], t["labels"], p)
        return {"loss": loss, "dlogits": ops.cross_entropy_grad(g, probs, oh, p), "nll": nll,
                "dlogp": ops.nll_loss_grad(g, oh2, p), "oh": oh}  # fmt: skip

    out, _, _ = run({"logits": logits, "labels": labels, "logp": logp}, build, tiles=4)
    np.testing.assert_allclose(out["loss"], ce(logits.astype(np.float64)), rtol=1e-5)
    np.testing.assert_array_equal(out["oh"], np.eye(5, dtype=np.float32)[labels])
    g_fd = fd_grad(lambda v: np.array(ce(v)), logits, np.array(1.0))
    np.testing.assert_allclose(out["dlogits"], g_fd, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(out["nll"], -logp[np.arange(6), labels].mean(), rtol=1e-5)
    nll_fd = fd_grad(lambda v: np.array(-v[np.arange(6), labels].mean()), logp, np.array(1.0))
    np.testing.assert_allclose(out["dlogp"], nll_fd, rtol=1e-5, atol=1e-7)


def test_mse_loss_and_gradient():
    r = rng(43)
    pred, target = r.standard_normal((5, 3)).astype(np.float32), r.standard_normal((5, 3)).astype(np.float32)

    def build(g, t, p):
        loss, diff = ops.mse_loss(g, t["pred"], t["target"], p)
        return {"loss": loss, "d": ops.mse_loss_grad(g, diff, p)}

    out, _, _ = run({"pred": pred, "target": target}, build)
    np.testing.assert_allclose(out["loss"], ((pred - target) ** 2).mean(), rtol=1e-5)
    fd = fd_grad(lambda v: np.array(((v - target) ** 2).mean()), pred, np.array(1.0))
    np.testing.assert_allclose(out["d"], fd, rtol=1e-4, atol=1e-7)


def np_norm(x, axes, eps=1e-5):
    m = x.mean(axes, keepdims=True)
    v = ((x - m) ** 2).mean(axes, keepdims=True)
    return (x - m) / np.sqrt(v + eps)


@pytest.mark.parametrize("kind", ["layer", "batch", "group"])
def test_normalisation_forward_and_gradients(kind):
    r = rng(44)
    shape = (3, 4, 2, 5) if kind != "layer" else (4, 6)
    x = r.standard_normal(shape).astype(np.float32)
    dy = r.standard_normal(shape).astype(np.float32)
    c = shape[1] if kind != "layer" else shape[-1]
    gamma, beta = r.standard_normal(c).astype(np.float32), r.standard_normal(c).astype(np.float32)
    pshape = (1, c, 1, 1) if kind != "layer" else (c,)

    def ref(v, gm=gamma):
        if kind == "layer":
            xh = np_norm(v, -1)
        elif kind == "batch":
            xh = np_norm(v, (0, 2, 3))
        else:
            xh = np_norm(v.reshape(3, 2, -1), 2).reshape(shape)
        return xh * gm.reshape(pshape) + beta.reshape(pshape)

    def build(g, t, p):
        if kind == "layer":
            y, xh, inv = ops.layer_norm(g, t["x"], t["g"], t["b"], p)
            dx, dg, db = ops.layer_norm_grad(g, xh, inv, t["dy"], t["g"], p)
        elif kind == "batch":
            y, xh, inv = ops.batch_norm(g, t["x"], t["g"], t["b"], p)
            dx, dg, db = ops.batch_norm_grad(g, xh, inv, t["dy"], t["g"], p)
        else:
            y, xh, inv = ops.group_norm(g, t["x"], 2, t["g"], t["b"], p)
            dx, dg, db = ops.group_norm_grad(g, xh, inv, t["dy"], 2, t["g"], p)
        return {"y": y, "dx": dx, "dg": dg, "db": db}

    out, _, _ = run({"x": x, "g": gamma, "b": beta, "dy": dy}, build, tiles=5)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(out["y"], ref(x64), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out["dx"], fd_grad(ref, x64, dy), rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(out["dg"], fd_grad(lambda gm: ref(x64, gm), gamma, dy), rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(out["db"], dy.sum(axis=tuple(i for i in range(dy.ndim) if i != (1 if kind != "layer" else dy.ndim - 1))), rtol=1e-4, atol=1e-5)  # fmt: skip
