"""Weight updates as device programs: SGD (with momentum) and Adam.

Each is a handful of in-place elementwise compute sets on the tiles holding the weights, so the
optimizer state (velocity, moments) is always-live device memory like the weights.
"""

from __future__ import annotations

import numpy as np

from profiler.chip import cost_model
from profiler.ops import elementwise as ew
from profiler.ops.core import OpError, add_like, op, set_attributes
from profiler.ops.poplibs_codelets import map_codelet
from profiler.poplar.graph import Graph
from profiler.poplar.programs import Sequence as Prog
from profiler.poplar.tensor import Tensor


def _momentum(v: np.ndarray, g: np.ndarray, momentum: float) -> np.ndarray:
    return momentum * v + g


def _ema(m: np.ndarray, g: np.ndarray, beta: float) -> np.ndarray:
    return beta * m + (1.0 - beta) * g


def _ema_sq(v: np.ndarray, g: np.ndarray, beta: float) -> np.ndarray:
    return beta * v + (1.0 - beta) * g * g


def _times(x: np.ndarray, factor: float) -> np.ndarray:
    return x * factor


def _adam_lr(b1t: np.ndarray, b2t: np.ndarray, lr: float) -> np.ndarray:
    return lr * np.sqrt(1.0 - b2t) / (1.0 - b1t)


def _adam_step(w: np.ndarray, m: np.ndarray, v: np.ndarray, lrt: np.ndarray, eps: float) -> np.ndarray:
    return w - lrt * m / (np.sqrt(v) + eps)


def state_like(graph: Graph, w: Tensor, name: str) -> Tensor:
    """Optimizer state (e.g. SGD velocity) mapped like ``w``; zero it with ``init_state``."""
    return add_like(graph, w, name)


def init_state(graph: Graph, states: list[Tensor], prog: Prog) -> None:
    """Zero optimizer state (run once, e.g. as the engine's init program)."""
    for s in states:
        ew.fill(graph, s, 0.0, prog)


@op("SGD")
def sgd(
    graph: Graph, w: Tensor, grad: Tensor, lr: float, prog: Prog, momentum: float = 0.0, velocity: Tensor | None = None
) -> Tensor:
    """w -= lr * g, or with momentum v = momentum * v + g; w -= lr * v (PyTorch's convention)."""
    if w.shape != grad.shape:
        raise OpError(f"sgd: weight {w.shape} and gradient {grad.shape} differ")
    set_attributes(graph, {"lr": lr, "momentum": momentum})
    if momentum:
        if velocity is None:
            raise OpError("sgd: momentum needs a velocity tensor (optim.state_like)")
        cl = map_codelet(
            "popops::ScaledAddMomentum", _momentum, 2, (cost_model.binary("multiply"), cost_model.binary("add")), True
        )
        ew.apply_map(graph, cl, [velocity, grad], prog, "velocity", momentum=float(momentum))
        return ew.scaled_add(graph, w, velocity, -lr, prog)
    return ew.scaled_add(graph, w, grad, -lr, prog)


class AdamState:
    """First and second moments mapped like the weight, and the running beta powers (scalars)."""

    def __init__(self, graph: Graph, w: Tensor, name: str) -> None:
        self.m = add_like(graph, w, f"{name} adam m")
        self.v = add_like(graph, w, f"{name} adam v")
        self.beta_powers = graph.add_variable(np.float32, [2], f"{name} adam beta powers")
        graph.set_tile_mapping(self.beta_powers, int(graph.tile_of(w.reshape(-1)[:1])[0]))

    def init(self, graph: Graph, prog: Prog) -> None:
        ew.fill(graph, self.m, 0.0, prog)
        ew.fill(graph, self.v, 0.0, prog)
        ew.fill(graph, self.beta_powers, 1.0, prog)


@op("Adam")
def adam(
    graph: Graph,
    w: Tensor,
    grad: Tensor,
    state: AdamState,
    lr: float,
    prog: Prog,
    beta1: float = 0.9,
    beta2: float = 0.999,
    eps: float = 1e-8,
) -> Tensor:
    """One Adam step with bias correction, all on the device."""
    set_attributes(graph, {"lr": lr, "beta1": beta1, "beta2": beta2, "eps": eps})
    axpby = (
        cost_model.binary("multiply"),
        cost_model.binary("multiply"),
        cost_model.binary("add"),
    )  # [INF] axpby as 3 simple ops
    ew.apply_map(graph, map_codelet("popops::AdamMoment1", _ema, 2, axpby, True), [state.m, grad], prog,
                 "first moment", beta=float(beta1))  # fmt: skip
    ew.apply_map(graph, map_codelet("popops::AdamMoment2", _ema_sq, 2, axpby + (cost_model.binary("multiply"),), True),
                 [state.v, grad], prog, "second moment", beta=float(beta2))  # fmt: skip
    bp = state.beta_powers
    times = map_codelet("popops::MultiplyScalar", _times, 1, (cost_model.binary("multiply"),), True)
    ew.apply_map(graph, times, [bp[0:1]], prog, "beta1 power", factor=float(beta1))
    ew.apply_map(graph, times, [bp[1:2]], prog, "beta2 power", factor=float(beta2))
    lr_cost = (
        cost_model.binary("subtract"),
        cost_model.unary("sqrt"),
        cost_model.binary("divide"),
        cost_model.binary("multiply"),
    )
    lrt = ew.apply_map(graph, map_codelet("popops::AdamLearningRate", _adam_lr, 2, lr_cost), [bp[0:1], bp[1:2]],
                       prog, "bias-corrected lr", lr=float(lr))  # fmt: skip
    step_cost = (
        cost_model.unary("sqrt"),
        cost_model.binary("add"),
        cost_model.binary("divide"),
        cost_model.binary("multiply"),
        cost_model.binary("subtract"),
    )
    ew.apply_map(graph, map_codelet("popops::AdamUpdate", _adam_step, 4, step_cost, True),
                 [w, state.m, state.v, lrt], prog, "update", eps=float(eps))  # fmt: skip
    return w
