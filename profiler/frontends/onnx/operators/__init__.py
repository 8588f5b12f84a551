"""ONNX operators on the device: one handler per op type, following the semantics of the model's opset.

A handler is ``handler(builder, node, inputs) -> outputs``: ``inputs`` are host arrays (np.ndarray),
device tensors or None (an omitted optional input), in the node's input order; it returns one value
per node output. Shape-only ops (Reshape targets, Slice bounds, Split sizes, axes given as inputs)
need their shape inputs on the host: they always are in exported models (Shape of a statically
shaped tensor and Constant are folded at import).

Every handler composes public operations (``profiler.ops`` functions, the builder's elementwise
``map`` and tensor views: slice, reshape, transpose, concat, broadcast, indexing); none needs a new
codelet. The handlers are grouped by what the operators are, one module per group; each registers
its handlers in ``registry.HANDLERS`` when imported, and this package imports every group, so the
registry is complete once it is imported. ``common`` holds the helpers the groups share.
"""

from __future__ import annotations

from . import (
    activations,
    attention,
    convolution,
    elementwise,
    host_values,
    indexing,
    logic,
    losses,
    matmul,
    normalization,
    pooling,
    quantization,
    recurrent,
    reductions,
    resize,
    shape,
)
from .registry import HANDLERS, Handler, handles, wrong_kernel

# the operator groups, each of which registered its handlers when it was imported above
GROUPS = (
    activations, attention, convolution, elementwise, host_values, indexing, logic, losses, matmul, normalization,
    pooling, quantization, recurrent, reductions, resize, shape,
)  # fmt: skip
SUPPORTED: tuple[str, ...] = tuple(sorted(HANDLERS))

__all__ = ["GROUPS", "HANDLERS", "SUPPORTED", "Handler", "handles", "wrong_kernel"]
