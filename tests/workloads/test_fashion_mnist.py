"""The PopTorch basics classifier's training step against an independent reference: a numpy forward
pass in float64, differentiated by central differences (no backward formulas shared with the device)."""

import numpy as np
import pytest

from profiler.workloads import fashion_mnist


def _conv(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Valid, stride-1 convolution plus bias."""
    k = w.shape[2]
    ho, wo = x.shape[2] - k + 1, x.shape[3] - k + 1
    out = np.zeros((x.shape[0], w.shape[0], ho, wo))
    for i in range(k):
        for j in range(k):
            out += np.einsum("bchw,oc->bohw", x[:, :, i : i + ho, j : j + wo], w[:, :, i, j])
    return out + b[None, :, None, None]


def _loss(p: dict[str, np.ndarray], x: np.ndarray, y: np.ndarray) -> float:
    """The tutorial's model: conv-relu-pool, conv-relu-groupnorm(3), fc-relu, fc, mean NLL of log-softmax."""
    a1 = np.maximum(_conv(x, p["conv1.weight"], p["conv1.bias"]), 0)
    b, c, h, w = a1.shape
    p1 = a1.reshape(b, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))
    a2 = np.maximum(_conv(p1, p["conv2.weight"], p["conv2.bias"]), 0)
    g = a2.reshape(b, 3, -1)
    m = g.mean(-1, keepdims=True)
    xhat = ((g - m) / np.sqrt(((g - m) ** 2).mean(-1, keepdims=True) + 1e-5)).reshape(a2.shape)
    n = xhat * p["norm.weight"][None, :, None, None] + p["norm.bias"][None, :, None, None]
    hid = np.maximum(n.reshape(b, -1) @ p["fc1.weight"] + p["fc1.bias"], 0)
    z = hid @ p["fc2.weight"] + p["fc2.bias"]
    logp = z - z.max(1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(1, keepdims=True))
    return float(-logp[np.arange(b), y].mean())


def _central_differences(p: dict[str, np.ndarray], x: np.ndarray, y: np.ndarray, per_param: int, seed: int):
    """(name, index, d loss / d p[name][index]) for ``per_param`` random entries of every parameter,
    by central differences of the numpy loss (float64, step 1e-6)."""
    rng = np.random.default_rng(seed)
    eps = 1e-6
    for name, value in p.items():
        for flat in rng.choice(value.size, size=min(per_param, value.size), replace=False):
            idx = np.unravel_index(flat, value.shape)
            up, down = ({**p, name: value.copy()} for _ in range(2))
            up[name][idx] += eps
            down[name][idx] -= eps
            yield name, idx, (_loss(up, x, y) - _loss(down, x, y)) / (2 * eps)


@pytest.fixture(scope="module")
def one_step():
    w = fashion_mnist.build(batch=4, tiles=16)
    e = w.run(steps=1)
    e.run(2)  # WeightsToHost: the weights and their accumulators into w.info["weights_out"]
    e.close()
    return w


def test_the_loss_is_the_numpy_forward_pass(one_step):
    w = one_step
    p = {k: v.astype(np.float64) for k, v in w.info["initial"].items()}
    x, y = w.info["batch"]["x"].astype(np.float64), w.info["batch"]["y"]
    assert w.losses[0] == pytest.approx(_loss(p, x, y), rel=1e-5)


def test_gradients_match_central_differences_and_sgd_applies_them(one_step):
    """After one step from zero momentum each accumulator holds its weight's gradient (v = 0.9 v + g) and
    the weight moved by -lr g. Five entries of every parameter are checked against the numpy loss's
    central differences."""
    w = one_step
    p = {k: v.astype(np.float64) for k, v in w.info["initial"].items()}
    x, y = w.info["batch"]["x"].astype(np.float64), w.info["batch"]["y"]
    out = w.info["weights_out"]
    for name, idx, expected in _central_differences(p, x, y, per_param=5, seed=1):
        assert out[f"Accl1_{name}"][idx] == pytest.approx(expected, rel=2e-3, abs=2e-6), (name, idx)
    for name, value in p.items():
        np.testing.assert_allclose(out[name], value - 0.001 * out[f"Accl1_{name}"], rtol=1e-6, atol=1e-7)


@pytest.mark.slow  # ~2.6 s at load 4
def test_the_loss_falls_over_training():
    w = fashion_mnist.build(batch=16, lr=0.02)  # on a GC200, as the tutorial runs
    w.run(steps=12).close()
    assert np.mean(w.losses[-3:]) < 0.8 * np.mean(w.losses[:3])


def test_programs_are_poparts():
    """WeightsFromHost and WeightsToHost stream every weight and its accumulator; the step between them."""
    w = fashion_mnist.build(batch=2, tiles=16)
    names = [p.name for p in w.programs]
    assert names == ["WeightsFromHost", "train step", "WeightsToHost"]
    n = len(fashion_mnist.SHAPES)
    assert len(w.programs[0].programs) == len(w.programs[2].programs) == 2 * n


def test_the_second_step_carries_momentum():
    """Step 2 from step 1's weights: each accumulator becomes 0.9 x its step-1 value + the new gradient
    (central differences of the numpy loss at step 1's weights on step 2's batch), and the weight moves
    by -lr x that accumulator."""
    w = fashion_mnist.build(batch=4, tiles=16)
    e = w.engine()
    out, batch = w.info["weights_out"], w.info["batch"]
    e.run(0)
    snapshots = []
    for _ in range(2):
        e.run(1)
        e.run(2)
        snapshots.append(({k: v.astype(np.float64) for k, v in out.items()}, batch["x"].astype(np.float64), batch["y"]))
    e.close()
    (s1, _, _), (s2, x2, y2) = snapshots
    p1 = {n: s1[n] for n in fashion_mnist.SHAPES}
    for name, idx, g2 in _central_differences(p1, x2, y2, per_param=3, seed=2):
        v1, v2 = s1[f"Accl1_{name}"][idx], s2[f"Accl1_{name}"][idx]
        assert v2 == pytest.approx(0.9 * v1 + g2, rel=2e-3, abs=2e-6), (name, idx)
    for name, value in p1.items():
        np.testing.assert_allclose(s2[name], value - 0.001 * s2[f"Accl1_{name}"], rtol=1e-6, atol=1e-7)
