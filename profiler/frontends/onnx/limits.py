"""Sizes checked before a node makes its output: the operators whose output can be far larger than
their inputs (Expand to 1e6 x 1e6, Tile x 1e9, a ConstantOfShape of 1e11 elements) are sized from
their inputs' shapes and values first, so an impossible model stops with one line naming the node
and the bytes, before numpy or the simulator allocates anything.

A value computed on the host (a folded constant) must fit the host's free memory; a value on the
device must also fit the target's tile memory, all IPUs together (every value a node makes is held
in tile memory at some point), and the host's (the simulator keeps device values in host memory).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper

from profiler.chip.targets import Target
from profiler.host import host_memory

from .errors import FrontendError


def _shape(v: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in np.shape(v)) if isinstance(v, np.ndarray) else tuple(v.shape)


def _ints(v: Any) -> list[int] | None:
    """The integer values of a host input (a shape, repeats, pads), or None when not known on the host."""
    if not isinstance(v, np.ndarray) or v.dtype.kind not in "iu" or v.size > 64:
        return None
    return [int(x) for x in v.reshape(-1)]


def planned_shape(node: onnx.NodeProto, args: Sequence[Any]) -> list[int] | None:
    """The shape the node's first output will have, for the operators that can make an output much
    larger than their inputs; None for the others, or when an input it depends on is unknown."""
    op, first = node.op_type, (args[0] if args else None)
    if first is None:
        return None
    if op == "ConstantOfShape":
        return _ints(first)
    if op == "Expand" and len(args) > 1:
        target = _ints(args[1])
        if target is None:
            return None
        try:  # ONNX Expand broadcasts both ways, as numpy does; shapes that cannot are the operator's to say
            return list(np.broadcast_shapes(_shape(first), tuple(target)))
        except ValueError:
            return None
    if op == "Tile" and len(args) > 1:
        reps = _ints(args[1])
        shape = _shape(first)
        return None if reps is None or len(reps) != len(shape) else [d * r for d, r in zip(shape, reps, strict=True)]
    if op == "Pad" and len(args) > 1:
        pads = _ints(args[1])
        shape = _shape(first)
        if pads is None or len(pads) != 2 * len(shape):  # axes-restricted pads: left to the operator
            return None
        return [d + pads[i] + pads[i + len(shape)] for i, d in enumerate(shape)]
    if op == "Range" and len(args) == 3 and all(isinstance(a, np.ndarray) and a.size == 1 for a in args):
        start, limit, delta = (float(np.asarray(a).reshape(-1)[0]) for a in args)
        if delta == 0 or not np.isfinite([start, limit, delta]).all():
            return None
        return [max(int(np.ceil((limit - start) / delta)), 0)]
    if op == "OneHot" and len(args) > 1 and isinstance(args[1], np.ndarray) and args[1].size == 1:
        return [*_shape(first), int(np.asarray(args[1]).reshape(-1)[0])]
    return None


def _itemsize(node: onnx.NodeProto, args: Sequence[Any]) -> int:
    if node.op_type == "ConstantOfShape":
        for a in node.attribute:
            if a.name == "value":
                return int(helper.tensor_dtype_to_np_dtype(a.t.data_type).itemsize)
        return 4  # float32 zeros by default (ONNX ConstantOfShape)
    if node.op_type == "Range":
        return int(np.asarray(args[0]).dtype.itemsize)
    if node.op_type == "OneHot" and len(args) > 2 and args[2] is not None:
        return int(np.dtype(args[2].dtype).itemsize)
    return int(np.dtype(args[0].dtype).itemsize)


def check_output_size(node: onnx.NodeProto, name: str, args: Sequence[Any], target: Target, on_host: bool) -> None:
    """FrontendError or HostMemoryError (one line, with the bytes) when the node's output cannot be
    held; nothing when it can, or when its size is not known before it is made."""
    shape = planned_shape(node, args)
    if shape is None:
        return
    if any(d < 0 for d in shape):
        raise FrontendError(f"node {name!r} ({node.op_type}): output shape {shape} has a negative dimension")
    elements = math.prod(shape)  # Python ints: 1e6 x 1e6 x 1e9 would overflow int64
    size = elements * _itemsize(node, args)
    what = f"node {name!r} ({node.op_type}, output {shape}, {size:,} bytes)"
    if not on_host:
        total = target.num_ipus * target.tiles_per_ipu * target.bytes_per_tile
        if size > total:
            raise FrontendError(
                f"{what}: more than the whole target's tile memory ({total:,} bytes on {target.num_ipus} "
                f"IPU{'s' if target.num_ipus > 1 else ''})"
            )
    host_memory.ensure(size, what)
