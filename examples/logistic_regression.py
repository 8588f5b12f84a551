"""Logistic regression trained on synthetic MNIST-shaped data (in the style of Poplar tutorial 5).

Images are 28 x 28 = 784 features, made up (seeded) so that the label "digit < 5" is learnable;
nothing is downloaded. Samples are split over tiles; each training step
  z = X w (per tile, a matmul reading w from every tile), p = sigmoid(z), err = p - label,
  partial gradients X_tile^T err_tile on each tile, a reduction of the partials over tiles,
  w -= lr / N * grad
repeats for ``steps`` iterations inside one Repeat program.

Run with a report:
    POPLAR_ENGINE_OPTIONS='{"autoReport.all":"true","autoReport.directory":"./r"}' python examples/logistic_regression.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from profiler import Copy, Engine, Execute, Graph, Repeat, Sequence, ipu_model  # noqa: E402

FEATURES = 28 * 28


def synthetic_mnist(samples: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Images with pixel values in [0, 1] whose mean brightness pattern depends on the digit."""
    rng = np.random.default_rng(seed)
    digits = rng.integers(0, 10, samples)
    prototypes = rng.random((10, FEATURES)) ** 3
    images = np.clip(prototypes[digits] + 0.3 * rng.standard_normal((samples, FEATURES)), 0, 1)
    return images.astype(np.float32), (digits < 5).astype(np.float32)


def run(samples: int = 256, tiles: int = 32, steps: int = 20, lr: float = 0.5, seed: int = 0, options=None,
        verbose: bool = True):  # fmt: skip
    target = ipu_model(tiles_per_ipu=tiles)
    per = samples // tiles
    g = Graph(target)
    with g.debug_context("logistic_regression", op_type="LogisticRegression"):
        x = g.add_variable("float", [samples, FEATURES], "images")
        labels = g.add_variable("float", [samples], "labels")
        w = g.add_variable("float", [FEATURES], "weights")
        z = g.add_variable("float", [samples], "logits")
        p = g.add_variable("float", [samples], "probabilities")
        err = g.add_variable("float", [samples], "error")
        partial = g.add_variable("float", [tiles, FEATURES], "grad_partials")
        grad = g.add_variable("float", [FEATURES], "grad")
        for v in (x, labels, z, p, err, partial):
            g.map_linearly(v, grain_size=v.numel() // tiles)
        g.map_linearly(w, grain_size=FEATURES // tiles + 1)
        g.map_linearly(grad, grain_size=FEATURES // tiles + 1)
        t = np.arange(tiles)

        fwd = g.add_compute_set("forward/matmul")
        g.add_vertices(fwd, "poplin::MatMul", {
            "a": x.reshape(tiles, per, FEATURES),
            "b": w.reshape(1, FEATURES, 1).broadcast(tiles, 0),
            "out": z.reshape(tiles, per, 1),
        }, tiles=t)  # fmt: skip
        act = g.add_compute_set("forward/sigmoid")
        g.add_vertices(act, "popops::Sigmoid", {"in": z.reshape(tiles, per), "out": p.reshape(tiles, per)}, tiles=t)
        loss = g.add_compute_set("loss/error")
        g.add_vertices(loss, "popops::Sub", {
            "in1": p.reshape(tiles, per), "in2": labels.reshape(tiles, per), "out": err.reshape(tiles, per),
        }, tiles=t)  # fmt: skip
        bwd = g.add_compute_set("backward/partials")
        g.add_vertices(bwd, "poplin::MatMul", {
            "a": x.reshape(tiles, per, FEATURES).transpose(0, 2, 1),
            "b": err.reshape(tiles, per, 1),
            "out": partial.reshape(tiles, FEATURES, 1),
        }, tiles=t)  # fmt: skip
        # reduce the partials over tiles: grad element f sums partial[:, f], on the tile holding grad[f]
        owner = g.tile_of(grad)
        red = g.add_compute_set("backward/reduce")
        g.add_vertices(red, "popops::ReduceAdd", {
            "in": partial.transpose().reshape(FEATURES, 1, tiles), "out": grad.reshape(FEATURES, 1),
        }, tiles=owner)  # fmt: skip
        upd = g.add_compute_set("update/sgd")
        g.add_vertices(upd, "popops::ScaledAdd", {"data": w.reshape(FEATURES, 1), "deltas": grad.reshape(FEATURES, 1)},
                       tiles=owner, scale=-lr / samples)  # fmt: skip

    x_in = g.add_host_to_device_fifo("images", "float", [samples, FEATURES])
    y_in = g.add_host_to_device_fifo("labels", "float", [samples])
    g.create_host_write("weights", w)
    g.create_host_read("weights", w)
    train = Sequence(
        Copy(x_in, x), Copy(y_in, labels),
        Repeat(steps, Sequence(Execute(fwd), Execute(act), Execute(loss), Execute(bwd), Execute(red), Execute(upd))),
    )  # fmt: skip

    images, targets = synthetic_mnist(samples, seed)
    engine = Engine(g, [train], options=options)
    engine.load()
    engine.write_tensor("weights", np.zeros(FEATURES, dtype=np.float32))
    engine.connect_stream("images", images)
    engine.connect_stream("labels", targets)
    engine.run(0)
    weights = engine.read_tensor("weights")
    engine.close()
    accuracy = float((((images @ weights) > 0) == (targets > 0.5)).mean())
    if verbose:
        print(f"trained {steps} steps on {samples} samples over {tiles} tiles: accuracy {accuracy:.3f}")
    return {"images": images, "labels": targets, "weights": weights, "accuracy": accuracy, "steps": steps, "lr": lr}


if __name__ == "__main__":
    run()
