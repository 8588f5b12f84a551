"""Element types: Poplar's names (FLOAT, HALF, INT, ...) and numpy's, mapped to one numpy dtype."""

from __future__ import annotations

import numpy as np
from numpy.typing import DTypeLike

_ALIASES = {
    "float": "float32",
    "float32": "float32",
    "half": "float16",
    "float16": "float16",
    "int": "int32",
    "int32": "int32",
    "unsigned": "uint32",
    "uint32": "uint32",
    "uint8": "uint8",
    "char": "int8",
    "int8": "int8",
    "bool": "bool",
    "short": "int16",
    "int16": "int16",
}


def as_dtype(dtype: DTypeLike) -> np.dtype:
    """Normalise a dtype given as a Poplar name ("FLOAT", "half"), a numpy dtype or a type."""
    if isinstance(dtype, str):
        key = dtype.strip().lower()
        if key not in _ALIASES:
            raise ValueError(f"unknown element type {dtype!r}; known: {', '.join(sorted(_ALIASES))}")
        return np.dtype(_ALIASES[key])
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise ValueError(f"unknown element type {dtype!r}") from None
    if dt.name not in _ALIASES.values():
        raise ValueError(f"element type {dt.name} is not supported; use one of {sorted(set(_ALIASES.values()))}")
    return dt


def is_float(dt: np.dtype) -> bool:
    return dt.kind == "f"
