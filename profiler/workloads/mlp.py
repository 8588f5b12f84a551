"""An MLP trained with SGD + momentum on MNIST-shaped synthetic data (784 inputs, 10 classes).

Each step streams a batch in, runs forward (matmul + bias + relu, matmul + bias, softmax
cross-entropy), backward (the activations of the forward pass are stashed until their gradient is
computed, so liveness shows them) and the weight updates, and streams the loss out.

    POPLAR_ENGINE_OPTIONS='{"autoReport.all":"true","autoReport.directory":"./report"}' \
        python -m profiler.workloads.mlp --steps 5
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from profiler import ops
from profiler.chip.targets import Target
from profiler.multi_ipu.replication import AllReduce, replica_batch
from profiler.poplar.graph import Graph
from profiler.poplar.programs import Copy, Sequence
from profiler.workloads.common import Workload, host_parameter, main, workload_target
from report_format.vocabulary import Layer

DEFAULTS = {"batch": 32, "inputs": 784, "hidden": 64, "classes": 10, "tiles": 16}


def separable_data(batch: int, inputs: int, classes: int, seed: int = 0):  # type: ignore[no-untyped-def]
    """An endless stream of batches: class centroids far apart plus unit noise (linearly separable)."""
    rng = np.random.default_rng(seed)
    centroids = rng.standard_normal((classes, inputs)).astype(np.float32) * 0.5

    def batches():  # type: ignore[no-untyped-def]
        while True:
            y = rng.integers(0, classes, batch).astype(np.int32)
            x = centroids[y] + rng.standard_normal((batch, inputs)).astype(np.float32) * 0.5
            yield x, y

    return batches()


def dense(graph: Graph, x, w, b, prog, name: str):  # type: ignore[no-untyped-def]
    """x @ w + b in one debug context."""
    with graph.debug_context(name, op_type="Dense", layer=Layer.USER):
        return ops.add(graph, ops.matmul(graph, x, w, prog), b, prog)


def dense_grad(graph: Graph, x, w, dy, prog, name: str, need_dx: bool = True):  # type: ignore[no-untyped-def]
    """(dx, dw, db) of ``dense``."""
    with graph.debug_context(name, op_type="DenseGrad", layer=Layer.USER):
        dw = ops.matmul(graph, x.T, dy, prog, debug_name="weight grad")
        db = ops.reduce_sum(graph, dy, 0, prog, debug_name="bias grad")
        dx = ops.matmul(graph, dy, w.T, prog, debug_name="input grad") if need_dx else None
    return dx, dw, db


def build(
    batch: int = 32,
    inputs: int = 784,
    hidden: int = 64,
    classes: int = 10,
    tiles: int = 16,
    lr: float = 0.05,
    momentum: float = 0.9,
    dtype: str = "float32",
    target: Target | None = None,
    seed: int = 0,
    replicas: int = 1,
) -> Workload:
    """``replicas`` > 1: data-parallel training, each replica takes batch / replicas of every batch
    and the gradients are averaged across replicas (ring all-reduce) before the updates."""
    t = workload_target(target, tiles)
    if replicas > 1 and target is None:  # one small IPU per replica
        t = replace(t, num_ipus=replicas, num_replicas=replicas)
    g = Graph(t, replication_factor=replicas)
    batch = replica_batch(batch, replicas)
    rng = np.random.default_rng(seed)
    shapes = {"w1": (inputs, hidden), "b1": (hidden,), "w2": (hidden, classes), "b2": (classes,)}
    # weights laid out for the forward matmuls that use them (createMatMulInputRHS), biases linearly
    params = {n: ops.parameter(g, dtype, s, n) for n, s in shapes.items() if n.startswith("b")}
    params["w1"] = host_parameter(g, ops.create_matmul_rhs(g, dtype, (batch, inputs), shapes["w1"], "w1"), "w1")
    params["w2"] = host_parameter(g, ops.create_matmul_rhs(g, dtype, (batch, hidden), shapes["w2"], "w2"), "w2")
    params = {n: params[n] for n in shapes}
    velocity = {n: ops.state_like(g, p, f"{n} velocity") for n, p in params.items()}
    x = ops.add_mapped(g, dtype, (batch, inputs), "x")
    labels = ops.add_mapped(g, "int32", (batch,), "labels")
    loss_out = g.add_device_to_host_fifo("loss", dtype, [1])
    init = Sequence(name="init")
    ops.init_state(g, list(velocity.values()), init)

    step = Sequence(name="train step")
    step.add(Copy(g.add_host_to_device_fifo("x", dtype, [batch, inputs]), x, name="x"))
    step.add(Copy(g.add_host_to_device_fifo("labels", "int32", [batch]), labels, name="labels"))
    with g.debug_context("forward", layer=Layer.USER):
        h = ops.relu(g, dense(g, x, params["w1"], params["b1"], step, "fc1"), step)
        logits = dense(g, h, params["w2"], params["b2"], step, "fc2")
        loss, probs, onehot = ops.cross_entropy(g, logits, labels, step)
    with g.debug_context("backward", layer=Layer.USER):
        dlogits = ops.cross_entropy_grad(g, probs, onehot, step)
        dh, dw2, db2 = dense_grad(g, h, params["w2"], dlogits, step, "fc2 grad")
        dz1 = ops.nonlinearity_grad(g, "relu", h, dh, step)
        _, dw1, db1 = dense_grad(g, x, params["w1"], dz1, step, "fc1 grad", need_dx=False)
    grads = {"w1": dw1, "b1": db1, "w2": dw2, "b2": db2}
    if replicas > 1:
        with g.debug_context("gradient all-reduce", op_type="AllReduce", layer=Layer.USER):
            for n, grad in grads.items():
                step.add(AllReduce(grad, "mean", name=f"all-reduce {n} grad"))
    with g.debug_context("update", layer=Layer.USER):
        for n, grad in grads.items():
            ops.sgd(g, params[n], grad, lr, step, momentum=momentum, velocity=velocity[n], debug_name=f"sgd {n}")
    step.add(Copy(loss.reshape(1), loss_out, name="loss"))

    np_dt = np.dtype(dtype)
    initial = {
        "w1": (rng.standard_normal(shapes["w1"]) * np.sqrt(2.0 / inputs)).astype(np_dt),
        "b1": np.zeros(hidden, np_dt),
        "w2": (rng.standard_normal(shapes["w2"]) * np.sqrt(1.0 / hidden)).astype(np_dt),
        "b2": np.zeros(classes, np_dt),
    }
    data = separable_data(batch * replicas, inputs, classes, seed + 1)  # global batches, split per replica
    current: dict[str, np.ndarray] = {}

    def next_x() -> np.ndarray:
        current["x"], current["y"] = next(data)
        return current["x"].astype(np_dt)

    w = Workload("mlp", g, [init, step], initial, {"x": next_x, "labels": lambda: current["y"]})
    w.streams["loss"] = lambda v: w.losses.append(float(np.asarray(v).reshape(-1)[0]))
    w.info = {"flops_per_step": 6 * batch * (inputs * hidden + hidden * classes), "replicas": replicas}
    return w


if __name__ == "__main__":
    main(build, DEFAULTS, "Train an MLP on synthetic MNIST-shaped data", steps=5)
