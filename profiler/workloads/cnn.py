"""A small CNN (conv-batchnorm-relu-maxpool x2, dense) trained a few steps with SGD on synthetic 28x28
images.

    POPLAR_ENGINE_OPTIONS='{"autoReport.all":"true","autoReport.directory":"./report"}' \
        python -m profiler.workloads.cnn --steps 3
"""

from __future__ import annotations

import numpy as np

from profiler import ops
from profiler.chip.targets import Target
from profiler.poplar.graph import Graph
from profiler.poplar.programs import Copy, Sequence
from profiler.workloads.common import Workload, host_parameter, main, workload_target
from profiler.workloads.mlp import dense, dense_grad
from report_format.vocabulary import Layer

DEFAULTS = {"batch": 4, "size": 28, "channels": 8, "classes": 10, "tiles": 16}


def build(
    batch: int = 4,
    size: int = 28,
    channels: int = 8,
    classes: int = 10,
    tiles: int = 16,
    lr: float = 0.005,
    dtype: str = "float32",
    target: Target | None = None,
    seed: int = 0,
) -> Workload:
    if size < 4 or size % 4:
        raise ValueError(f"cnn: image size {size} must be a multiple of 4 (two 2x2 max-pools)")
    t = workload_target(target, tiles)
    g = Graph(t)
    rng = np.random.default_rng(seed)
    c1, c2 = channels, 2 * channels
    flat = c2 * (size // 4) * (size // 4)
    shapes = {
        "conv1": (c1, 1, 3, 3), "bn1_g": (c1,), "bn1_b": (c1,), "conv2": (c2, c1, 3, 3), "bn2_g": (c2,),
        "bn2_b": (c2,), "fc_w": (flat, classes), "fc_b": (classes,),
    }  # fmt: skip
    # weights laid out for the forward conv / matmul that uses them (createWeights / createMatMulInputRHS)
    laid = {
        "conv1": ops.create_conv_weights(g, dtype, (batch, 1, size, size), shapes["conv1"], "conv1", padding=1),
        "conv2": ops.create_conv_weights(g, dtype, (batch, c1, size // 2, size // 2), shapes["conv2"], "conv2",
                                         padding=1),
        "fc_w": ops.create_matmul_rhs(g, dtype, (batch, flat), shapes["fc_w"], "fc_w"),
    }  # fmt: skip
    params = {
        n: host_parameter(g, laid[n], n) if n in laid else ops.parameter(g, dtype, s, n) for n, s in shapes.items()
    }
    x = ops.add_mapped(g, dtype, (batch, 1, size, size), "images")
    labels = ops.add_mapped(g, "int32", (batch,), "labels")
    step = Sequence(name="train step")
    step.add(Copy(g.add_host_to_device_fifo("images", dtype, [batch, 1, size, size]), x, name="images"))
    step.add(Copy(g.add_host_to_device_fifo("labels", "int32", [batch]), labels, name="labels"))
    with g.debug_context("forward", layer=Layer.USER):
        z1 = ops.conv2d(g, x, params["conv1"], step, padding=1, debug_name="conv1")
        n1, xhat1, inv1 = ops.batch_norm(g, z1, params["bn1_g"], params["bn1_b"], step, debug_name="bn1")
        a1 = ops.relu(g, n1, step)
        p1 = ops.max_pool2d(g, a1, 2, step, debug_name="pool1")
        z2 = ops.conv2d(g, p1, params["conv2"], step, padding=1, debug_name="conv2")
        n2, xhat2, inv2 = ops.batch_norm(g, z2, params["bn2_g"], params["bn2_b"], step, debug_name="bn2")
        a2 = ops.relu(g, n2, step)
        p2 = ops.max_pool2d(g, a2, 2, step, debug_name="pool2")
        logits = dense(g, p2.reshape(batch, flat), params["fc_w"], params["fc_b"], step, "fc")
        loss, probs, onehot = ops.cross_entropy(g, logits, labels, step)
    with g.debug_context("backward", layer=Layer.USER):
        dlogits = ops.cross_entropy_grad(g, probs, onehot, step)
        dp2, dfw, dfb = dense_grad(g, p2.reshape(batch, flat), params["fc_w"], dlogits, step, "fc grad")
        da2 = ops.max_pool2d_grad(g, a2, p2, dp2.reshape(p2.shape), 2, step, debug_name="pool2 grad")
        dn2 = ops.nonlinearity_grad(g, "relu", a2, da2, step)
        dz2, dg2, db2 = ops.batch_norm_grad(g, xhat2, inv2, dn2, params["bn2_g"], step, debug_name="bn2 grad")
        dp1, dc2 = ops.conv2d_grad(g, p1, params["conv2"], dz2, step, padding=1, debug_name="conv2 grad")
        da1 = ops.max_pool2d_grad(g, a1, p1, dp1, 2, step, debug_name="pool1 grad")
        dn1 = ops.nonlinearity_grad(g, "relu", a1, da1, step)
        dz1, dg1, db1 = ops.batch_norm_grad(g, xhat1, inv1, dn1, params["bn1_g"], step, debug_name="bn1 grad")
        _, dc1 = ops.conv2d_grad(g, x, params["conv1"], dz1, step, padding=1, need_dx=False, debug_name="conv1 grad")
    grads = {"conv1": dc1, "bn1_g": dg1, "bn1_b": db1, "conv2": dc2, "bn2_g": dg2, "bn2_b": db2, "fc_w": dfw,
             "fc_b": dfb}  # fmt: skip
    with g.debug_context("update", layer=Layer.USER):
        for n, grad in grads.items():
            ops.sgd(g, params[n], grad, lr, step, debug_name=f"sgd {n}")
    step.add(Copy(loss.reshape(1), g.add_device_to_host_fifo("loss", dtype, [1]), name="loss"))

    np_dt = np.dtype(dtype)
    initial = {n: (rng.standard_normal(s) * np.sqrt(2.0 / np.prod(s[1:]))).astype(np_dt) for n, s in shapes.items()
               if len(s) > 1}  # fmt: skip
    initial |= {n: (np.ones(s) if n.endswith("_g") else np.zeros(s)).astype(np_dt) for n, s in shapes.items()
                if len(s) == 1}  # fmt: skip
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
