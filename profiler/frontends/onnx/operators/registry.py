"""The registry of operator handlers: ``HANDLERS`` by ONNX op type, filled by the ``handles`` decorator."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import onnx

from profiler import ops

from ..builder import Builder, at_least_1d
from ..errors import FrontendError

Handler = Callable[[Builder, onnx.NodeProto, list[Any]], list[Any]]
HANDLERS: dict[str, Handler] = {}


def handles(*op_types: str) -> Callable[[Handler], Handler]:
    """Register the decorated function as the handler of ``op_types`` (each op type has one handler:
    a second registration is an error, so no group can silently replace another's)."""

    def deco(fn: Handler) -> Handler:
        for t in op_types:
            if t in HANDLERS:
                had = HANDLERS[t]
                raise ValueError(f"{t}: handled by {had.__module__}.{had.__name__} and {fn.__module__}.{fn.__name__}")
            HANDLERS[t] = fn
        return fn

    return deco


@contextlib.contextmanager
def wrong_kernel(op_type: str | None) -> Iterator[None]:
    """Test-only (``tilescope run --test-wrong-kernel OP``): while active, ``op_type``'s handler adds 1
    to its first output on the device: a deliberately wrong kernel that ``--check`` must catch."""
    if not op_type:
        yield
        return
    if op_type not in HANDLERS:
        raise FrontendError(f"--test-wrong-kernel: no handler for {op_type!r}")
    right = HANDLERS[op_type]

    def wrong(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
        outs = right(b, node, inputs)
        y = b.device(outs[0])
        return [ops.add_scalar(b.graph, at_least_1d(y), 1.0, b.prog).reshape(y.shape), *outs[1:]]

    HANDLERS[op_type] = wrong
    try:
        yield
    finally:
        HANDLERS[op_type] = right
