"""A small CNN (conv-relu-maxpool x2, dense) trained a few steps with SGD on synthetic 28x28 images.

    POPLAR_ENGINE_OPTIONS='{"autoReport.all":"true","autoReport.directory":"./report"}' \
        python -m profiler.workloads.cnn --steps 3
"""

from __future__ import annotations

import numpy as np

from profiler import ops
from profiler.graph import Graph
from profiler.programs import Copy, Sequence
from profiler.targets import Target, get_target, ipu_model
from profiler.workloads.common import Workload, main
from profiler.workloads.mlp import dense, dense_grad

DEFAULTS = {"batch": 4, "size": 28, "channels": 8, "classes": 10, "tiles": 16}
TILE_BYTES = 262144  # a small IPU-Model target (tiles=0 selects a whole GC200)


def build(
    batch: int = 4,
    size: int = 28,
    channels: int = 8,
    classes: int = 10,
    tiles: int = 16,
    lr: float = 0.01,
    dtype: str = "float32",
    target: Target | None = None,
    seed: int = 0,
) -> Workload:
    t = target or (ipu_model(tiles_per_ipu=tiles, bytes_per_tile=TILE_BYTES) if tiles else get_target("GC200"))
    g = Graph(t)
    rng = np.random.default_rng(seed)
    c1, c2 = channels, 2 * channels
    flat = c2 * (size // 4) * (size // 4)
    shapes = {"conv1": (c1, 1, 3, 3), "conv2": (c2, c1, 3, 3), "fc_w": (flat, classes), "fc_b": (classes,)}
    params = {n: ops.parameter(g, dtype, s, n) for n, s in shapes.items()}
    x = ops.add_mapped(g, dtype, (batch, 1, size, size), "images")
    labels = ops.add_mapped(g, "int32", (batch,), "labels")
    step = Sequence(name="train step")
    step.add(Copy(g.add_host_to_device_fifo("images", dtype, [batch, 1, size, size]), x, name="images"))
    step.add(Copy(g.add_host_to_device_fifo("labels", "int32", [batch]), labels, name="labels"))
    with g.debug_context("forward", layer="model"):
        a1 = ops.relu(g, ops.conv2d(g, x, params["conv1"], step, padding=1, debug_name="conv1"), step)
        p1 = ops.max_pool2d(g, a1, 2, step, debug_name="pool1")
        a2 = ops.relu(g, ops.conv2d(g, p1, params["conv2"], step, padding=1, debug_name="conv2"), step)
        p2 = ops.max_pool2d(g, a2, 2, step, debug_name="pool2")
        logits = dense(g, p2.reshape(batch, flat), params["fc_w"], params["fc_b"], step, "fc")
        loss, probs, onehot = ops.cross_entropy(g, logits, labels, step)
    with g.debug_context("backward", layer="model"):
        dlogits = ops.cross_entropy_grad(g, probs, onehot, step)
        dp2, dfw, dfb = dense_grad(g, p2.reshape(batch, flat), params["fc_w"], dlogits, step, "fc grad")
        da2 = ops.max_pool2d_grad(g, a2, p2, dp2.reshape(p2.shape), 2, step, debug_name="pool2 grad")
        dz2 = ops.nonlinearity_grad(g, "relu", a2, da2, step)
        dp1, dc2 = ops.conv2d_grad(g, p1, params["conv2"], dz2, step, padding=1, debug_name="conv2 grad")
        da1 = ops.max_pool2d_grad(g, a1, p1, dp1, 2, step, debug_name="pool1 grad")
        dz1 = ops.nonlinearity_grad(g, "relu", a1, da1, step)
        _, dc1 = ops.conv2d_grad(g, x, params["conv1"], dz1, step, padding=1, need_dx=False, debug_name="conv1 grad")
    with g.debug_context("update", layer="model"):
        for n, grad in {"conv1": dc1, "conv2": dc2, "fc_w": dfw, "fc_b": dfb}.items():
            ops.sgd(g, params[n], grad, lr, step, debug_name=f"sgd {n}")
    step.add(Copy(loss.reshape(1), g.add_device_to_host_fifo("loss", dtype, [1]), name="loss"))

    np_dt = np.dtype(dtype)
    initial = {n: (rng.standard_normal(s) * np.sqrt(2.0 / np.prod(s[1:]))).astype(np_dt) for n, s in shapes.items()}
    initial["fc_w"] = (rng.standard_normal(shapes["fc_w"]) * 0.1 / np.sqrt(flat)).astype(np_dt)
    initial["fc_b"] = np.zeros(classes, np_dt)
    # synthetic images: each class is a fixed random pattern plus noise
    patterns = rng.standard_normal((classes, 1, size, size)).astype(np.float32)
    current: dict[str, np.ndarray] = {}

    def next_images() -> np.ndarray:
        current["y"] = rng.integers(0, classes, batch).astype(np.int32)
        noise = rng.standard_normal((batch, 1, size, size)).astype(np.float32) * 0.5
        return (patterns[current["y"]] + noise).astype(np_dt)

    w = Workload("cnn", g, [Sequence(name="init"), step], initial,
                 {"images": next_images, "labels": lambda: current["y"]})  # fmt: skip
    w.streams["loss"] = lambda v: w.losses.append(float(np.asarray(v).reshape(-1)[0]))
    return w


if __name__ == "__main__":
    main(build, DEFAULTS, "Train a small CNN a few steps on synthetic images", steps=3)
