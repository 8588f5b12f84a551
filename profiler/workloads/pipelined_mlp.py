"""A stack of dense layers trained with SGD, one layer per IPU, pipelined over micro-batches
(profiler.multi_ipu.pipeline_training): PopART-style pipelined training with gradient accumulation.

Stage s (on IPU s) is ``relu(x @ w_s + b_s)``; the last stage gives the logits and the mean softmax
cross-entropy. Each run takes ``micro_batches`` micro-batches of ``batch`` samples, accumulates the
weight gradients and updates once with their mean, so a run is one SGD step over the whole
micro_batches x batch samples. ``pipelined=False`` builds the same model on one IPU taking the whole
batch at once (the unpipelined reference).

    POPLAR_ENGINE_OPTIONS='{"autoReport.all":"true","autoReport.directory":"./report"}' \\
        python -m profiler.workloads.pipelined_mlp --stages 4 --micro-batches 8
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from typing import Any

import numpy as np

from profiler import ops
from profiler.chip.targets import Target
from profiler.multi_ipu.pipeline_training import TrainingPipeline, TrainingStage
from profiler.poplar.graph import Graph
from profiler.poplar.programs import Copy, Sequence
from profiler.workloads.common import Workload, host_parameter, main, workload_target
from profiler.workloads.mlp import dense, dense_grad, separable_data
from report_format.vocabulary import Layer

DEFAULTS = {"stages": 4, "micro_batches": 8, "batch": 4, "inputs": 64, "width": 64, "classes": 10, "tiles": 16,
            "layers_per_stage": 1}  # fmt: skip


def build(
    stages: int = 4,
    micro_batches: int = 8,
    batch: int = 4,
    inputs: int = 64,
    width: int = 64,
    classes: int = 10,
    tiles: int = 16,
    lr: float = 0.05,
    pipelined: bool = True,
    dtype: str = "float32",
    target: Target | None = None,
    seed: int = 0,
    layers_per_stage: int = 1,
) -> Workload:
    """``stages`` x ``layers_per_stage`` dense layers, stage s on IPU s; ``batch`` samples per
    micro-batch (the unpipelined model takes micro_batches x batch at once, on one IPU)."""
    t = workload_target(target, tiles)
    if pipelined and target is None:
        t = replace(t, num_ipus=stages)
    g = Graph(t)
    rows = batch if pipelined else batch * micro_batches  # samples per pass through the stages
    n = stages * layers_per_stage
    dims = [inputs] + [width] * (n - 1) + [classes]
    rng = np.random.default_rng(seed)
    np_dt = np.dtype(dtype)
    initial = {}
    for i in range(n):
        initial[f"w{i}"] = (rng.standard_normal((dims[i], dims[i + 1])) * np.sqrt(2.0 / dims[i])).astype(np_dt)
        initial[f"b{i}"] = np.zeros(dims[i + 1], np_dt)
    on_ipu = (lambda s: g.virtual_graph(s)) if pipelined else (lambda s: contextlib.nullcontext())
    x_fifo = g.add_host_to_device_fifo("x", dtype, [rows, inputs])
    labels_fifo = g.add_host_to_device_fifo("labels", "int32", [rows])
    loss_fifo = g.add_device_to_host_fifo("loss", dtype, [1])
    built: list[dict[str, Any]] = []
    for s in range(stages):
        last = s == stages - 1
        layers = range(s * layers_per_stage, (s + 1) * layers_per_stage)
        fwd, bwd, upd = Sequence(name=f"stage {s} forward"), Sequence(name=f"stage {s} backward"), Sequence()
        st: dict[str, Any] = {"forward": fwd, "backward": bwd, "update": upd, "sums": []}
        with on_ipu(s), g.debug_context(f"stage {s}", layer=Layer.USER):
            x = ops.add_mapped(g, dtype, (rows, dims[layers[0]]), "x" if s == 0 else f"stage {s} input")
            if s == 0:
                fwd.add(Copy(x_fifo, x, name="x"))
            params, acts = [], [x]  # acts[j]: the input of the stage's layer j
            for i in layers:
                rhs = ops.create_matmul_rhs(g, dtype, (rows, dims[i]), (dims[i], dims[i + 1]), f"w{i}")
                w, b = host_parameter(g, rhs, f"w{i}"), ops.parameter(g, dtype, (dims[i + 1],), f"b{i}")
                sums = ops.state_like(g, w, f"w{i} gradient sum"), ops.state_like(g, b, f"b{i} gradient sum")
                params.append((w, b, *sums))
                st["sums"].extend(sums)
                z = dense(g, acts[-1], w, b, fwd, f"fc{i}")
                if i < n - 1:
                    acts.append(ops.relu(g, z, fwd))
            if last:  # the loss, then its gradient: the start of the backward pass
                labels = ops.add_mapped(g, "int32", (rows,), "labels")
                fwd.add(Copy(labels_fifo, labels, name="labels"))
                loss, probs, onehot = ops.cross_entropy(g, z, labels, fwd)
                fwd.add(Copy(loss.reshape(1), loss_fifo, name="loss"))
                dz = ops.cross_entropy_grad(g, probs, onehot, bwd)
            else:  # the gradient of this stage's output arrives from the next stage
                st["dh"] = ops.add_mapped(g, dtype, (rows, dims[layers[-1] + 1]), f"stage {s} output gradient")
                dz = ops.nonlinearity_grad(g, "relu", acts[-1], st["dh"], bwd)
            for j in reversed(range(len(layers))):
                i = layers[j]
                w, b, acc_w, acc_b = params[j]
                dx, dw, db = dense_grad(g, acts[j], w, dz, bwd, f"fc{i} grad", need_dx=i > 0)
                ops.binary_in_place(g, "add", acc_w, dw, bwd)
                ops.binary_in_place(g, "add", acc_b, db, bwd)
                if j > 0:
                    dz = ops.nonlinearity_grad(g, "relu", acts[j], dx, bwd)
                # one SGD step with the mean of the accumulated gradients, then the sums start again
                for p, acc in ((w, acc_w), (b, acc_b)):
                    ops.sgd(g, p, acc, lr / micro_batches if pipelined else lr, upd)
                    ops.fill(g, acc, 0.0, upd)
        # the stage's input and every activation its backward reads; the output goes to the next stage
        st |= {"x": x, "dx": dx, "stash": acts if not last else [], "h": acts[-1] if not last else None}
        built.append(st)
    init = Sequence(name="init")
    for st in built:
        for acc in st["sums"]:
            ops.fill(g, acc, 0.0, init)
    if pipelined:
        stages_ = [
            TrainingStage(
                st["forward"],
                st["backward"],
                stash=st["stash"],
                to_next=[(st["h"], built[s + 1]["x"])] if st["h"] is not None else [],
                to_previous=[(st["dx"], built[s - 1]["dh"])] if s > 0 else [],
                name=f"stage {s}",
            )
            for s, st in enumerate(built)
        ]
        step: Any = TrainingPipeline(g, stages_, micro_batches, Sequence([st["update"] for st in built]))
    else:
        step = Sequence(name="train step")
        for s, st in enumerate(built):
            step.add(st["forward"])
            if st["h"] is not None:
                step.add(Copy(st["h"], built[s + 1]["x"], name=f"stage {s} -> {s + 1}"))
        for s in reversed(range(stages)):
            step.add(built[s]["backward"])
            if s > 0:
                step.add(Copy(built[s]["dx"], built[s - 1]["dh"], name=f"stage {s} -> {s - 1} (gradient)"))
        for st in built:
            step.add(st["update"])

    data = separable_data(batch * micro_batches, inputs, classes, seed + 1)  # whole batches, fed per micro-batch
    batches: list[tuple[np.ndarray, np.ndarray]] = []  # every batch drawn, in order (x, labels)
    current = {"x": 0, "labels": 0}  # micro-batches streamed so far
    parts = micro_batches if pipelined else 1

    def next_rows(key: str) -> np.ndarray:
        """The next micro-batch of ``key`` (x or labels; the first to need a new batch draws it)."""
        i = current[key]
        current[key] = i + 1
        if i // parts == len(batches):
            batches.append(next(data))
        x, y = batches[i // parts]
        return np.split(x.astype(np_dt) if key == "x" else y, parts)[i % parts]

    w_ = Workload("pipelined_mlp" if pipelined else "mlp_stack", g, [init, step], initial,
                  {"x": lambda: next_rows("x"), "labels": lambda: next_rows("labels")})  # fmt: skip
    w_.streams["loss"] = lambda v: w_.losses.append(float(np.asarray(v).reshape(-1)[0]))
    w_.info = {"batches": batches, "dims": dims, "lr": lr, "micro_batches": micro_batches,
               "samples_per_step": batch * micro_batches}  # fmt: skip
    return w_


if __name__ == "__main__":
    main(build, DEFAULTS, "Pipelined training of a stack of dense layers, one per IPU", steps=2)
