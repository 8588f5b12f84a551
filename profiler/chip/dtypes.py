"""Element types: Poplar's names (FLOAT, HALF, INT, ...) and numpy's, mapped to one numpy dtype.

FP8 is Graphcore's pair of 8-bit formats (the C600's quarter type, ``ipu21``): 1.4.3 (e4m3) and 1.5.2
(e5m2) with the IPU's encoding: one NaN (0x80, no negative zero, no infinities) and exponent biases
8 and 16, which is what ``ml_dtypes.float8_e4m3fnuz`` / ``float8_e5m2fnuz`` implement ("fnuz": finite,
NaN, unsigned zero; Noune et al. 2022, "8-bit Numerical Formats for Deep Neural Networks", arXiv
2206.02915, whose formats PopXL exposes as float8_143 / float8_152). "float8" alone means e4m3: the
paper's recommendation for weights and activations (1.4.3; 1.5.2 for gradients), the forward pass
being all inference runs.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
from numpy.typing import DTypeLike

FLOAT8_E4M3 = np.dtype(ml_dtypes.float8_e4m3fnuz)
FLOAT8_E5M2 = np.dtype(ml_dtypes.float8_e5m2fnuz)
FLOAT8_TYPES = frozenset({FLOAT8_E4M3, FLOAT8_E5M2})

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
    # Poplar's QUARTER and PopXL's float8_143 / float8_152
    "float8": "float8_e4m3fnuz",
    "quarter": "float8_e4m3fnuz",
    "float8_143": "float8_e4m3fnuz",
    "float8_e4m3fnuz": "float8_e4m3fnuz",
    "float8_152": "float8_e5m2fnuz",
    "float8_e5m2fnuz": "float8_e5m2fnuz",
}
_FLOAT8_BY_NAME = {dt.name: dt for dt in FLOAT8_TYPES}


def _named(name: str) -> np.dtype:
    return _FLOAT8_BY_NAME.get(name) or np.dtype(name)


def as_dtype(dtype: DTypeLike) -> np.dtype:
    """Normalise a dtype given as a Poplar name ("FLOAT", "half"), a numpy dtype or a type."""
    if isinstance(dtype, str):
        key = dtype.strip().lower()
        if key not in _ALIASES:
            raise ValueError(f"unknown element type {dtype!r}; known: {', '.join(sorted(_ALIASES))}")
        return _named(_ALIASES[key])
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise ValueError(f"unknown element type {dtype!r}") from None
    if dt.name not in _ALIASES.values():
        raise ValueError(f"element type {dt.name} is not supported; use one of {sorted(set(_ALIASES.values()))}")
    return dt


def is_float8(dt: DTypeLike) -> bool:
    """Whether ``dt`` is one of the FP8 formats (ml_dtypes' types have numpy kind "V", not "f")."""
    try:
        return np.dtype(dt) in FLOAT8_TYPES
    except TypeError:
        return False


def is_float(dt: np.dtype) -> bool:
    return dt.kind == "f" or is_float8(dt)
