"""Neural-network ops (popnn): activations, softmax, normalisation, losses, and their gradients.

Composite ops (softmax, norms, losses) are built from elementwise ops and reductions; each runs in
its own debug context with its parts as children. Gradients are explicit ops: ``*_grad`` takes
what the forward pass stashed (its inputs or outputs) and the incoming gradient.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from profiler.chip import cost_model
from profiler.ops import elementwise as ew
from profiler.ops.core import OpError, add_mapped, op
from profiler.ops.elementwise import apply_map
from profiler.ops.poplibs_codelets import INVERSE_STD_DEVIATION, map_codelet
from profiler.ops.reduce import reduce, reduce_many, reduce_max, reduce_mean, reduce_sum
from profiler.poplar.graph import Graph
from profiler.poplar.programs import Sequence as Prog
from profiler.poplar.tensor import Tensor


# -- activations ---------------------------------------------------------------------------------
@op("Relu")
def relu(graph: Graph, x: Tensor, prog: Prog) -> Tensor:
    return ew.unary(graph, "relu", x, prog)


@op("Sigmoid")
def sigmoid(graph: Graph, x: Tensor, prog: Prog) -> Tensor:
    return ew.unary(graph, "sigmoid", x, prog)


@op("Tanh")
def tanh(graph: Graph, x: Tensor, prog: Prog) -> Tensor:
    return ew.unary(graph, "tanh", x, prog)


@op("Gelu")
def gelu(graph: Graph, x: Tensor, prog: Prog) -> Tensor:
    return ew.unary(graph, "gelu", x, prog)


def _relu_grad(y: np.ndarray, dy: np.ndarray) -> np.ndarray:
    return dy * (y > 0)


def _sigmoid_grad(y: np.ndarray, dy: np.ndarray) -> np.ndarray:
    return dy * y * (1 - y)


def _tanh_grad(y: np.ndarray, dy: np.ndarray) -> np.ndarray:
    return dy * (1 - y * y)


def _gelu_grad(x: np.ndarray, dy: np.ndarray) -> np.ndarray:
    cdf = 0.5 * (1.0 + ew.erf(x / np.sqrt(2.0)))
    pdf = np.exp(-0.5 * x * x) / np.sqrt(2.0 * np.pi)
    return dy * (cdf + x * pdf)


# popnn NonLinearityGrad has no figure in the reference: costed [INF] as the simple ops it performs.
_GRADS = {
    "relu": (_relu_grad, (cost_model.binary("greater_than"), cost_model.binary("multiply"))),
    "sigmoid": (
        _sigmoid_grad,
        (cost_model.binary("subtract"), cost_model.binary("multiply"), cost_model.binary("multiply")),
    ),
    "tanh": (_tanh_grad, (cost_model.binary("multiply"), cost_model.binary("subtract"), cost_model.binary("multiply"))),
    "gelu": (
        _gelu_grad,
        (
            cost_model.unary("erf"),
            cost_model.unary("exponent"),
            cost_model.binary("multiply"),
            cost_model.binary("add"),
        ),
    ),
}


@op("NonLinearityGrad")
def nonlinearity_grad(graph: Graph, kind: str, saved: Tensor, dy: Tensor, prog: Prog) -> Tensor:
    """dx for ``kind`` (relu/sigmoid/tanh take the forward output, gelu the forward input)."""
    if kind not in _GRADS:
        raise OpError(f"nonlinearity_grad: unknown non-linearity {kind!r}; known: {', '.join(_GRADS)}")
    fn, cost = _GRADS[kind]
    cl = map_codelet(f"popnn::NonLinearityGrad<{kind}>", fn, 2, cost)
    return ew.apply_map(graph, cl, [saved, dy], prog, f"{kind} grad")


# -- softmax -------------------------------------------------------------------------------------
@op("Softmax")
def softmax(graph: Graph, x: Tensor, prog: Prog, axis: int = -1) -> Tensor:
    """Numerically stable softmax: exp(x - max) / sum(exp(x - max)) along ``axis``.

    As popnn's softmaxImpl (lib/popnn/NonLinearity.cpp) does it: "as the divide is broadcast we
    compute 1/x first as there are a lot fewer elements", then multiply every element by its row's
    inverse sum - a multiply costs PopLibs ~0.75 cycles an element where a half divide costs ~5.
    As there, only the subtract makes a new tensor: the exponential and the scaling by the inverse sum
    are done in place on it (popops::expInPlace, popops::mulInPlace), so the op holds one tensor of
    ``x``'s size beside ``x``, not three."""
    m = reduce_max(graph, x, axis, prog, keepdims=True)
    e = ew.unary_in_place(graph, "exp", ew.sub(graph, x, m, prog), prog)
    s = reduce_sum(graph, e, axis, prog, keepdims=True)
    return ew.binary_in_place(graph, "mul", e, ew.unary(graph, "inv", s, prog), prog)


@op("LogSoftmax")
def log_softmax(graph: Graph, x: Tensor, prog: Prog, axis: int = -1) -> Tensor:
    """x - max - log(sum(exp(x - max))) along ``axis``."""
    m = reduce_max(graph, x, axis, prog, keepdims=True)
    shifted = ew.sub(graph, x, m, prog)
    s = reduce_sum(graph, ew.unary(graph, "exp", shifted, prog), axis, prog, keepdims=True)
    return ew.sub(graph, shifted, ew.unary(graph, "log", s, prog), prog)


@op("SoftmaxGrad")
def softmax_grad(graph: Graph, y: Tensor, dy: Tensor, prog: Prog, axis: int = -1) -> Tensor:
    """dx = y * (dy - sum(dy * y, axis)) given the softmax output ``y``."""
    s = reduce_sum(graph, ew.mul(graph, dy, y, prog), axis, prog, keepdims=True)
    return ew.mul(graph, y, ew.sub(graph, dy, s, prog), prog)


# -- losses --------------------------------------------------------------------------------------
def _equal_float(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a == b).astype(np.float32)


@op("OneHot")
def one_hot(graph: Graph, labels: Tensor, classes: int, dtype: object, prog: Prog) -> Tensor:
    """[B] integer labels -> [B, classes] one-hot of ``dtype`` (popops::encodeOneHot)."""
    if labels.rank != 1 or labels.dtype.kind not in "iu":
        raise OpError(f"one_hot: labels must be a 1-D integer tensor, got {labels!r}")
    iota = graph.add_constant(labels.dtype, [1, classes], np.arange(classes), name="class ids")
    graph.set_tile_mapping(iota, 0)
    cl = map_codelet("popops::EncodeOneHot", _equal_float, 2, (cost_model.binary("equal"),))
    return ew.apply_map(graph, cl, [labels.reshape(-1, 1), iota], prog, "one hot", out_dtype=dtype)


@op("NllLoss")
def nll_loss(graph: Graph, log_probs: Tensor, labels: Tensor, prog: Prog) -> tuple[Tensor, Tensor]:
    """Mean negative log-likelihood of ``labels`` under ``log_probs[B, C]``; returns (loss[], one-hot)."""
    b, c = log_probs.shape
    oh = one_hot(graph, labels, c, log_probs.dtype, prog)
    picked = ew.mul(graph, oh, log_probs, prog)
    return reduce(graph, picked, None, prog, op_name="add", scale=-1.0 / b), oh


@op("NllLossGrad")
def nll_loss_grad(graph: Graph, one_hot_labels: Tensor, prog: Prog) -> Tensor:
    """d(mean NLL)/d(log_probs) = -one_hot / B."""
    return ew.scale(graph, one_hot_labels, -1.0 / one_hot_labels.shape[0], prog)


@op("CrossEntropy")
def cross_entropy(graph: Graph, logits: Tensor, labels: Tensor, prog: Prog) -> tuple[Tensor, Tensor, Tensor]:
    """Mean softmax cross-entropy; returns (loss[], probabilities, one-hot) - the last two are what
    the backward pass needs (stashed)."""
    logp = log_softmax(graph, logits, prog)
    loss, oh = nll_loss(graph, logp, labels, prog)
    probs = ew.unary(graph, "exp", logp, prog)
    return loss, probs, oh


@op("CrossEntropyGrad")
def cross_entropy_grad(graph: Graph, probs: Tensor, one_hot_labels: Tensor, prog: Prog) -> Tensor:
    """d(mean CE)/d(logits) = (softmax - one_hot) / B."""
    return ew.scale(graph, ew.sub(graph, probs, one_hot_labels, prog), 1.0 / probs.shape[0], prog)


@op("MseLoss")
def mse_loss(graph: Graph, pred: Tensor, target: Tensor, prog: Prog) -> tuple[Tensor, Tensor]:
    """Mean squared error; returns (loss[], pred - target) (the difference is stashed for backward)."""
    diff = ew.sub(graph, pred, target, prog)
    return reduce_mean(graph, ew.unary(graph, "square", diff, prog), None, prog), diff


@op("MseLossGrad")
def mse_loss_grad(graph: Graph, diff: Tensor, prog: Prog) -> Tensor:
    return ew.scale(graph, diff, 2.0 / diff.numel(), prog)


# -- normalisation -------------------------------------------------------------------------------
def _norm_core(graph: Graph, x: Tensor, axes: Sequence[int], eps: float, prog: Prog) -> tuple[Tensor, Tensor, Tensor]:
    """(xhat, mean, invstd) over ``axes`` (kept as size-1 dims)."""
    mean = reduce_mean(graph, x, axes, prog, keepdims=True)
    xc = ew.sub(graph, x, mean, prog)
    var = reduce_mean(graph, ew.unary(graph, "square", xc, prog), axes, prog, keepdims=True)
    invstd = ew.unary(graph, "rsqrt", ew.add_scalar(graph, var, eps, prog), prog)
    return ew.mul(graph, xc, invstd, prog), mean, invstd


def _affine(graph: Graph, xhat: Tensor, gamma: Tensor | None, beta: Tensor | None, prog: Prog) -> Tensor:
    y = xhat if gamma is None else ew.mul(graph, xhat, gamma, prog)
    return y if beta is None else ew.add(graph, y, beta, prog)


def _norm_grad(
    graph: Graph, xhat: Tensor, invstd: Tensor, dy: Tensor, gamma: Tensor | None, axes: Sequence[int],
    param_axes: Sequence[int], prog: Prog,
) -> tuple[Tensor, Tensor | None, Tensor | None]:  # fmt: skip
    """dx = invstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma; dgamma, dbeta summed
    over ``param_axes`` (the axes gamma is broadcast along)."""
    g = dy if gamma is None else ew.mul(graph, dy, gamma, prog)
    mg = reduce_mean(graph, g, axes, prog, keepdims=True)
    mgx = reduce_mean(graph, ew.mul(graph, g, xhat, prog), axes, prog, keepdims=True)
    inner = ew.sub(graph, ew.sub(graph, g, mg, prog), ew.mul(graph, xhat, mgx, prog), prog)
    dx = ew.mul(graph, inner, invstd, prog)
    if gamma is None:
        return dx, None, None
    dgamma = reduce_sum(graph, ew.mul(graph, dy, xhat, prog), param_axes, prog).reshape(gamma.shape)
    dbeta = reduce_sum(graph, dy, param_axes, prog).reshape(gamma.shape)
    return dx, dgamma, dbeta


@op("LayerNorm")
def layer_norm(
    graph: Graph, x: Tensor, gamma: Tensor | None, beta: Tensor | None, prog: Prog, eps: float = 1e-5
) -> tuple[Tensor, Tensor, Tensor]:
    """Normalise over the last axis; returns (y, xhat, invstd) - xhat and invstd are for backward.

    Built as popnn builds it (popnn::ln over poplin's norms, lib/poplin/Norms.cpp, the non-stable
    statistics PopART uses by default): ``normStatisticsImpl`` takes the mean and the mean square in
    one ``popops::reduceMany`` (ADD and SQUARE_ADD, each stage one compute set; the mean in x's type,
    the square in float, the layer-norm statistics' default partials type), ``computeInvStdDev`` one
    compute set of poplin::InverseStdDeviation; ``normWhiten`` subtracts the mean then multiplies by
    the inverse deviation in place; ``normalise`` multiplies by gamma and adds beta in place."""
    mean, invstd = _layer_norm_statistics(graph, x, eps, prog)
    xhat = ew.sub(graph, x, mean, prog, debug_name="Whiten/mean")
    ew.binary_in_place(graph, "mul", xhat, invstd, prog, debug_name="Whiten/istdDev")
    y = xhat if gamma is None else ew.mul(graph, xhat, gamma, prog, debug_name="Norm/normalise/gamma")
    if beta is not None:
        if y is xhat:  # keep xhat (the backward pass's) apart from the result
            y = ew.add(graph, y, beta, prog, debug_name="Norm/normalise/beta")
        else:
            ew.binary_in_place(graph, "add", y, beta, prog, debug_name="Norm/normalise/beta")
    return y, xhat, invstd


def _layer_norm_statistics(graph: Graph, x: Tensor, eps: float, prog: Prog) -> tuple[Tensor, Tensor]:
    """(mean, invstd) over the last axis, kept as a size-1 dim: one reduction of both moments, then
    the inverse deviation where they lie (poplin ``normStatisticsImpl`` + ``computeInvStdDev``)."""
    count = x.shape[-1]
    # the statistics mapped where their rows lie (Norms.cpp: createBroadcastOperand of the acts)
    mean, power = reduce_many(graph, x, [x.rank - 1], prog,
                              [("add", 1.0 / count, None), ("square_add", 1.0 / count, "float32")],
                              by_use=True, debug_name="Norm/statistics/reduceMany")  # fmt: skip
    invstd = apply_map(graph, INVERSE_STD_DEVIATION, [mean, power], prog, "iStdDev", out_dtype=x.dtype,
                       eps=float(eps), scale_var=1.0)  # fmt: skip
    keep = x.shape[:-1] + (1,)
    return mean.reshape(keep), invstd.reshape(keep)


@op("LayerNormGrad")
def layer_norm_grad(
    graph: Graph, xhat: Tensor, invstd: Tensor, dy: Tensor, gamma: Tensor | None, prog: Prog
) -> tuple[Tensor, Tensor | None, Tensor | None]:
    return _norm_grad(graph, xhat, invstd, dy, gamma, [xhat.rank - 1], list(range(xhat.rank - 1)), prog)


def _channel_param(p: Tensor | None, rank: int) -> Tensor | None:
    # a [C] parameter of an NC... tensor, broadcast along the other axes
    return None if p is None else p.reshape((1, p.numel()) + (1,) * (rank - 2))


@op("BatchNorm")
def batch_norm(
    graph: Graph, x: Tensor, gamma: Tensor | None, beta: Tensor | None, prog: Prog, eps: float = 1e-5
) -> tuple[Tensor, Tensor, Tensor]:
    """Training-mode batch norm of ``x[N, C, ...]`` over all axes but C; returns (y, xhat, invstd)."""
    axes = [0] + list(range(2, x.rank))
    xhat, _, invstd = _norm_core(graph, x, axes, eps, prog)
    return _affine(graph, xhat, _channel_param(gamma, x.rank), _channel_param(beta, x.rank), prog), xhat, invstd


@op("BatchNormGrad")
def batch_norm_grad(
    graph: Graph, xhat: Tensor, invstd: Tensor, dy: Tensor, gamma: Tensor | None, prog: Prog
) -> tuple[Tensor, Tensor | None, Tensor | None]:
    axes = [0] + list(range(2, xhat.rank))
    dx, dg, db = _norm_grad(graph, xhat, invstd, dy, _channel_param(gamma, xhat.rank), axes, axes, prog)
    return dx, (None if dg is None else dg.reshape(-1)), (None if db is None else db.reshape(-1))


@op("GroupNorm")
def group_norm(
    graph: Graph, x: Tensor, groups: int, gamma: Tensor | None, beta: Tensor | None, prog: Prog, eps: float = 1e-5
) -> tuple[Tensor, Tensor, Tensor]:
    """Group norm of ``x[N, C, ...]`` (C split into ``groups``); returns (y, xhat, invstd)."""
    n, c = x.shape[:2]
    if c % groups:
        raise OpError(f"group_norm: {c} channels do not split into {groups} groups")
    xg = x.reshape(n, groups, -1)
    xhat, _, invstd = _norm_core(graph, xg, [2], eps, prog)
    xhat = xhat.reshape(x.shape)
    return _affine(graph, xhat, _channel_param(gamma, x.rank), _channel_param(beta, x.rank), prog), xhat, invstd


@op("GroupNormGrad")
def group_norm_grad(
    graph: Graph, xhat: Tensor, invstd: Tensor, dy: Tensor, groups: int, gamma: Tensor | None, prog: Prog
) -> tuple[Tensor, Tensor | None, Tensor | None]:
    n = xhat.shape[0]
    g = dy if gamma is None else ew.mul(graph, dy, _channel_param(gamma, dy.rank), prog)
    dxg, _, _ = _norm_grad(graph, xhat.reshape(n, groups, -1), invstd, g.reshape(n, groups, -1), None, [2], [], prog)
    dx = dxg.reshape(xhat.shape)
    if gamma is None:
        return dx, None, None
    axes = [0] + list(range(2, xhat.rank))
    dgamma = reduce_sum(graph, ew.mul(graph, dy, xhat, prog), axes, prog)
    return dx, dgamma, reduce_sum(graph, dy, axes, prog)


def parameter(graph: Graph, dtype: object, shape: tuple[int, ...], name: str, grain: int = 1) -> Tensor:
    """A trainable parameter mapped linearly over the tiles (host-writable and readable as ``name``)."""
    t = add_mapped(graph, dtype, shape, name, grain)
    graph.create_host_write(name, t)
    graph.create_host_read(name, t)
    return t
