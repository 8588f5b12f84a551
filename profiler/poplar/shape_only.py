"""Shape-only host values: a tensor's shape and type without its data (compile-only profiles).

A compile-only import (``tilescope.compileOnly``) does not load a model's weights: each large
initializer becomes ``placeholder(shape, dtype)``, a read-only array whose every stride is 0 over
one zero element, so it holds no memory whatever its declared size, reads as zeros, and keeps
numpy's views (reshape, transpose, slicing) free. What would copy it (a type conversion, a
contiguous copy) goes through ``astype``/``contiguous`` here, which hand back another placeholder.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def placeholder(shape: Sequence[int], dtype: Any) -> np.ndarray:
    """A read-only array of ``shape`` and ``dtype`` that holds no data (every element reads 0)."""
    return np.broadcast_to(np.zeros((), dtype=dtype), tuple(int(d) for d in shape))


def is_placeholder(value: object) -> bool:
    """Whether ``value`` is a shape-only array: more than one element, all at one address, read-only
    (a real array of one repeated value, e.g. numpy's own broadcast, is treated the same: its data is
    never needed where this is asked)."""
    return isinstance(value, np.ndarray) and value.size > 1 and not value.flags.writeable and not any(value.strides)


def astype(value: np.ndarray, dtype: Any) -> np.ndarray:
    """``value.astype(dtype)``; a placeholder stays one (no data is made)."""
    return placeholder(value.shape, dtype) if is_placeholder(value) else value.astype(dtype)


def contiguous(value: np.ndarray) -> np.ndarray:
    """``np.ascontiguousarray(value)``; a placeholder stays one."""
    return value if is_placeholder(value) else np.ascontiguousarray(value)
