"""Element types: Poplar's names (FLOAT, HALF, INT, ...) and numpy's, mapped to one numpy dtype."""

from __future__ import annotations

import numpy as np

from profiler import parallel

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


def as_dtype(dtype: object) -> np.dtype:
    """Normalise a dtype given as a Poplar name ("FLOAT", "half"), a numpy dtype or a type."""
    if isinstance(dtype, str):
        key = dtype.strip().lower()
        if key not in _ALIASES:
            raise ValueError(f"unknown element type {dtype!r}; known: {', '.join(sorted(_ALIASES))}")
        return np.dtype(_ALIASES[key])
    try:
        dt = np.dtype(dtype)  # type: ignore[call-overload]
    except TypeError:
        raise ValueError(f"unknown element type {dtype!r}") from None
    if dt.name not in _ALIASES.values():
        raise ValueError(f"element type {dt.name} is not supported; use one of {sorted(set(_ALIASES.values()))}")
    return dt


def is_float(dt: np.dtype) -> bool:
    return dt.kind == "f"


# Every float16 value as float32, indexed by its bits. numpy converts half to float one element at a
# time where the CPU lacks AVX512-FP16 (this machine: AVX2 + F16C, numpy 2.4), ~2.5 ns per element;
# a lookup in this 256 KiB table (it stays in L2) is about twice as fast and gives the same bits.
_HALF_TO_FLOAT = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)


def converted(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``values`` in ``dtype``, converted in the order they lie in memory: a new array whose dims
    have the same stride order as ``values``' (a transposed view stays transposed, so both sides of
    the copy are walked contiguously) and whose broadcast dims stay broadcast (each distinct element
    is converted once; the result is then a read-only view). Bit for bit what ``astype`` gives."""
    dtype = np.dtype(dtype)
    distinct = tuple(
        slice(0, 1) if st == 0 and n > 1 else slice(None) for n, st in zip(values.shape, values.strides, strict=True)
    )
    core = values[distinct]
    perm = sorted(range(core.ndim), key=lambda d: -abs(core.strides[d]))
    out = _converted_c(core.transpose(perm), dtype).transpose(np.argsort(perm))
    return np.broadcast_to(out, values.shape) if core.shape != values.shape else out


def _converted_c(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``values`` as a new C-ordered array of ``dtype``; half to float by table lookup."""
    if values.dtype != np.float16 or dtype != np.float32:
        return values.astype(dtype, order="C")
    out = np.empty(values.shape, np.float32)
    bits = values.view(np.uint16)
    bits = bits.reshape(-1) if bits.flags.c_contiguous else bits.reshape(_without_leading_ones(bits.shape))
    rows = out.reshape(bits.shape)

    def part(r: slice) -> None:
        np.take(_HALF_TO_FLOAT, bits[r], out=rows[r], mode="clip")

    # chunks bound np.take's temporary index array (8 B an element) and run on the run's threads
    parallel.in_row_chunks(part, bits.shape[0], bits.size, parallel.COPY_CHUNK_ELEMENTS)
    return out


def _without_leading_ones(shape: tuple[int, ...]) -> tuple[int, ...]:
    i = 0
    while i < len(shape) - 1 and shape[i] == 1:
        i += 1
    return shape[i:] or (1,)
