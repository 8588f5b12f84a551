"""The PopTorch basics tutorial's FashionMNIST classifier, trained with SGD and momentum, as PopART
lays out its executable: a program streaming the weights and optimizer state in from the host, the
training step, and one streaming them back out.

The model is the tutorial's ``ClassificationModel`` (graphcore/tutorials
tutorials/pytorch/basics/walkthrough.py, SDK 3.1): conv 1->5 3x3, ReLU, max-pool 2; conv 5->12 5x5,
ReLU, GroupNorm(3, 12); linear 972->100, ReLU; linear 100->10; log-softmax and NLL loss; batch 16,
``poptorch.optim.SGD(lr=0.001, momentum=0.9)``, float32. PopVision profiles of this very training
run are published (bench/calibrate.py, rows ``poptorch_basics_*``). The programs are PopART's
(willow popx/popprograms.hpp: WeightsFromHost, the main program, WeightsToHost); each weight has its
momentum accumulator (PopART names it ``Accl1_<weight>``), streamed with it.

    POPLAR_ENGINE_OPTIONS='{"autoReport.all":"true","autoReport.directory":"./report"}' \\
        python -m profiler.workloads.fashion_mnist --steps 3
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from profiler import ops
from profiler.chip.targets import Target
from profiler.poplar.graph import Graph
from profiler.poplar.programs import Copy, Sequence
from profiler.poplar.tensor import Tensor
from profiler.workloads.common import Workload, main, workload_target
from profiler.workloads.mlp import dense, dense_grad
from report_format.vocabulary import Layer

DEFAULTS = {"batch": 16, "tiles": 0}
CLASSES = 10
SIZE = 28
# name -> shape, in the order of the tutorial's parameters
SHAPES: dict[str, tuple[int, ...]] = {
    "conv1.weight": (5, 1, 3, 3), "conv1.bias": (5,), "conv2.weight": (12, 5, 5, 5), "conv2.bias": (12,),
    "norm.weight": (12,), "norm.bias": (12,), "fc1.weight": (972, 100), "fc1.bias": (100,),
    "fc2.weight": (100, 10), "fc2.bias": (10,),
}  # fmt: skip
GROUPS = 3  # GroupNorm(3, 12)


def _weights(g: Graph, dtype: str, batch: int) -> dict[str, Tensor]:
    """The parameters, each laid out for the op that uses it (PopART creates conv weights with
    createWeights and matmul weights with createMatMulInputRHS; the others linearly). The linear
    weights are [in, out] here (PyTorch holds them [out, in] and PopART transposes them on the device)."""
    laid = {
        "conv1.weight": ops.create_conv_weights(g, dtype, (batch, 1, SIZE, SIZE), SHAPES["conv1.weight"], "conv1.weight"),
        "conv2.weight": ops.create_conv_weights(g, dtype, (batch, 5, 13, 13), SHAPES["conv2.weight"], "conv2.weight"),
        "fc1.weight": ops.create_matmul_rhs(g, dtype, (batch, 972), SHAPES["fc1.weight"], "fc1.weight"),
        "fc2.weight": ops.create_matmul_rhs(g, dtype, (batch, 100), SHAPES["fc2.weight"], "fc2.weight"),
    }  # fmt: skip
    return {n: laid[n] if n in laid else ops.add_mapped(g, dtype, s, n) for n, s in SHAPES.items()}


def build(
    batch: int = 16,
    tiles: int = 0,
    lr: float = 0.001,
    momentum: float = 0.9,
    dtype: str = "float32",
    target: Target | None = None,
    seed: int = 0,
) -> Workload:
    """Program 0 streams the weights and accumulators in, program 1 is one training step, program 2
    streams them out (to the host buffers ``info["weights_out"]``, by name)."""
    g = Graph(workload_target(target, tiles))
    rng = np.random.default_rng(seed)
    params = _weights(g, dtype, batch)
    accl = {n: ops.state_like(g, p, f"Accl1_{n}") for n, p in params.items()}
    state = {**params, **{f"Accl1_{n}": a for n, a in accl.items()}}
    weights_in, weights_out = Sequence(name="WeightsFromHost"), Sequence(name="WeightsToHost")
    for n, t in state.items():
        weights_in.add(Copy(g.add_host_to_device_fifo(n, dtype, list(t.shape)), t, name=n))
        weights_out.add(Copy(t, g.add_device_to_host_fifo(f"{n} out", dtype, list(t.shape)), name=n))

    x = ops.add_mapped(g, dtype, (batch, 1, SIZE, SIZE), "images")
    labels = ops.add_mapped(g, "int32", (batch,), "labels")
    step = Sequence(name="train step")
    step.add(Copy(g.add_host_to_device_fifo("images", dtype, [batch, 1, SIZE, SIZE]), x, name="images"))
    step.add(Copy(g.add_host_to_device_fifo("labels", "int32", [batch]), labels, name="labels"))
    p = params

    def conv(name: str, inp: Tensor) -> Tensor:
        """A convolution plus its bias added in place (PopART's ConvOpx: poplin::addBias)."""
        y = ops.conv2d(g, inp, p[f"{name}.weight"], step, debug_name=name)
        ops.binary_in_place(g, "add", y, p[f"{name}.bias"].reshape(1, -1, 1, 1), step)
        return y

    with g.debug_context("forward", layer=Layer.USER):
        a1 = ops.relu(g, conv("conv1", x), step)
        p1 = ops.max_pool2d(g, a1, 2, step, debug_name="pool")
        a2 = ops.relu(g, conv("conv2", p1), step)
        n2, xhat, invstd = ops.group_norm(g, a2, GROUPS, p["norm.weight"], p["norm.bias"], step)
        flat = n2.reshape(batch, 972)
        h = ops.relu(g, dense(g, flat, p["fc1.weight"], p["fc1.bias"], step, "fc1"), step)
        logp = ops.log_softmax(g, dense(g, h, p["fc2.weight"], p["fc2.bias"], step, "fc2"), step)
        loss, onehot = ops.nll_loss(g, logp, labels, step)
    with g.debug_context("backward", layer=Layer.USER):
        # log-softmax and NLL's gradient in one (PopART's NlllWithSoftmaxGradDirect): (p - onehot) / B
        dlogits = ops.cross_entropy_grad(g, ops.unary(g, "exp", logp, step), onehot, step)
        dh, dw2, db2 = dense_grad(g, h, p["fc2.weight"], dlogits, step, "fc2 grad")
        dflat, dw1, db1 = dense_grad(g, flat, p["fc1.weight"], ops.nonlinearity_grad(g, "relu", h, dh, step), step,
                                     "fc1 grad")  # fmt: skip
        da2, dgamma, dbeta = ops.group_norm_grad(g, xhat, invstd, dflat.reshape(n2.shape), GROUPS, p["norm.weight"],
                                                 step)  # fmt: skip
        dz2 = ops.nonlinearity_grad(g, "relu", a2, da2, step)
        dp1, dc2 = ops.conv2d_grad(g, p1, p["conv2.weight"], dz2, step, debug_name="conv2 grad")
        da1 = ops.max_pool2d_grad(g, a1, p1, dp1, 2, step, debug_name="pool grad")
        dz1 = ops.nonlinearity_grad(g, "relu", a1, da1, step)
        _, dc1 = ops.conv2d_grad(g, x, p["conv1.weight"], dz1, step, need_dx=False, debug_name="conv1 grad")
        grads = {
            "conv1.weight": dc1, "conv1.bias": ops.reduce_sum(g, dz1, [0, 2, 3], step, debug_name="conv1 bias grad"),
            "conv2.weight": dc2, "conv2.bias": ops.reduce_sum(g, dz2, [0, 2, 3], step, debug_name="conv2 bias grad"),
            "norm.weight": dgamma, "norm.bias": dbeta, "fc1.weight": dw1, "fc1.bias": db1, "fc2.weight": dw2,
            "fc2.bias": db2,
        }  # fmt: skip
    with g.debug_context("update", layer=Layer.USER):
        for n, grad in grads.items():
            ops.sgd(g, p[n], grad, lr, step, momentum=momentum, velocity=accl[n], debug_name=f"sgd {n}")
    # PopTorch returns the model's output and its loss (the tutorial's forward returns both)
    step.add(Copy(logp, g.add_device_to_host_fifo("output", dtype, [batch, CLASSES]), name="output"))
    step.add(Copy(loss.reshape(1), g.add_device_to_host_fifo("loss", dtype, [1]), name="loss"))

    np_dt = np.dtype(dtype)
    # PyTorch's default initialisation bound for conv and linear layers: U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    fan_in = {"conv1": 9, "conv2": 125, "fc1": 972, "fc2": 100}
    initial: dict[str, np.ndarray] = {}
    for n, s in SHAPES.items():
        layer, kind = n.split(".")
        if layer == "norm":
            initial[n] = (np.ones(s) if kind == "weight" else np.zeros(s)).astype(np_dt)
        else:
            bound = 1.0 / np.sqrt(fan_in[layer])
            initial[n] = rng.uniform(-bound, bound, s).astype(np_dt)
    streams: dict[str, Callable[..., Any] | np.ndarray] = dict(initial)
    streams |= {f"Accl1_{n}": np.zeros(s, np_dt) for n, s in SHAPES.items()}
    out = {n: np.zeros(t.shape, np_dt) for n, t in state.items()}
    streams |= {f"{n} out": buf for n, buf in out.items()}
    # synthetic images: each class a fixed random pattern plus noise (no downloads)
    patterns = rng.standard_normal((CLASSES, 1, SIZE, SIZE)).astype(np.float32)
    current: dict[str, np.ndarray] = {}

    def next_images() -> np.ndarray:
        current["y"] = rng.integers(0, CLASSES, batch).astype(np.int32)
        noise = rng.standard_normal((batch, 1, SIZE, SIZE)).astype(np.float32) * 0.5
        current["x"] = (patterns[current["y"]] + noise).astype(np_dt)
        return current["x"]

    streams |= {"images": next_images, "labels": lambda: current["y"], "output": np.zeros((batch, CLASSES), np_dt)}
    w = Workload("fashion_mnist", g, [weights_in, step, weights_out], {}, streams)
    w.streams["loss"] = lambda v: w.losses.append(float(np.asarray(v).reshape(-1)[0]))
    w.info = {"initial": initial, "weights_out": out, "batch": current}
    return w


if __name__ == "__main__":
    main(build, DEFAULTS, "Train the PopTorch basics tutorial's FashionMNIST classifier on synthetic images", steps=3)
