"""The operations library (PopLibs-style): elementwise, reductions, matmul/convolution planners,
NN layers, gradients and optimizers, each op in its own debug context.

Usage (Poplar style: every op appends its programs to a Sequence and returns its result)::

    from profiler import Graph, Sequence, get_target
    from profiler import ops
    g = Graph(get_target("GC200")); prog = Sequence()
    x = ops.add_mapped(g, "half", (128, 256), "x")
    w = ops.add_mapped(g, "half", (256, 64), "w")
    y = ops.relu(g, ops.matmul(g, x, w, prog), prog, debug_name="layer1")

May import: ``poplar``, ``chip``, ``host``.
"""

from profiler.ops.conv import conv2d, conv2d_grad, create_conv_weights, map_conv_weights
from profiler.ops.core import OpError, add_like, add_mapped, constant_per_tile, linear_tiles, op, set_attributes
from profiler.ops.elementwise import (
    add,
    add_scalar,
    binary,
    binary_in_place,
    broadcast,
    cast,
    copy,
    div,
    fill,
    mul,
    pow2scale_cast,
    scale,
    scaled_add,
    sub,
    unary,
    unary_in_place,
)
from profiler.ops.matmul import (
    MatMulPlan,
    create_matmul_lhs,
    create_matmul_rhs,
    map_for_matmul,
    matmul,
    operand_storage,
    plan_matmul,
)
from profiler.ops.nn import (
    batch_norm,
    batch_norm_grad,
    cross_entropy,
    cross_entropy_grad,
    gelu,
    group_norm,
    group_norm_grad,
    layer_norm,
    layer_norm_grad,
    log_softmax,
    mse_loss,
    mse_loss_grad,
    nll_loss,
    nll_loss_grad,
    nonlinearity_grad,
    one_hot,
    parameter,
    relu,
    sigmoid,
    softmax,
    softmax_grad,
    tanh,
)
from profiler.ops.optim import AdamState, adam, init_state, sgd, state_like
from profiler.ops.pooling import avg_pool2d, avg_pool2d_grad, max_pool2d, max_pool2d_grad
from profiler.ops.reduce import reduce, reduce_many, reduce_max, reduce_mean, reduce_sum, reduce_sum_grad
from profiler.ops.seed import set_seed, set_seed_from_host
from profiler.ops.slicing import (
    dynamic_slice,
    dynamic_slice_grad,
    dynamic_update,
    embedding_table,
    gather,
    gather_grad,
    replicated_index,
    sliceable,
)

__all__ = [
    "AdamState", "MatMulPlan", "OpError", "adam", "add", "add_like", "add_mapped", "add_scalar", "avg_pool2d",
    "avg_pool2d_grad", "batch_norm", "batch_norm_grad", "binary", "binary_in_place", "broadcast", "cast", "constant_per_tile",
    "conv2d", "conv2d_grad", "create_conv_weights", "map_conv_weights", "map_for_matmul",
    "copy", "cross_entropy", "cross_entropy_grad", "div", "dynamic_slice", "dynamic_slice_grad", "dynamic_update", "embedding_table",
    "fill", "gather", "gather_grad", "gelu", "group_norm", "group_norm_grad", "init_state", "layer_norm",
    "layer_norm_grad", "linear_tiles", "log_softmax", "matmul", "max_pool2d", "max_pool2d_grad", "mse_loss",
    "mse_loss_grad", "mul", "nll_loss", "nll_loss_grad", "nonlinearity_grad", "one_hot", "op", "parameter",
    "plan_matmul", "operand_storage", "create_matmul_lhs", "create_matmul_rhs", "reduce", "reduce_many", "reduce_max", "reduce_mean", "reduce_sum", "reduce_sum_grad", "relu", "pow2scale_cast", "replicated_index", "scale", "scaled_add",
    "set_attributes", "set_seed", "set_seed_from_host", "sgd", "sigmoid", "sliceable", "softmax", "softmax_grad", "state_like", "sub", "tanh", "unary",
    "unary_in_place",
]  # fmt: skip
