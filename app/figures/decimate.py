"""Level of detail for long lines: keep what a screen can show, ship it as typed arrays.

A line of 10,000+ points (a POD16's program steps) is wider than any screen: plotly.js still lays
out, draws and hit-tests every point, which is most of a page's time in the browser. ``envelope``
keeps, in each of ``columns`` buckets of consecutive points, the lowest and the highest: at most two
points per pixel column, so the line drawn covers the same pixels, and every bucket's maximum, the
line's peak among them, is a real point at its real x with its exact value. ``typed_array`` writes
an array as plotly.js's typed-array spec (base64 ``bdata``, plotly.js >= 2.28), a quarter of the
JSON text of a list of numbers and no number parsing in the browser.
"""

from __future__ import annotations

import base64

import numpy as np

#: Buckets across a figure: about one per pixel column of a 1600 px wide window's plot area, so a
#: decimated line has at most ~2 points per column (the bucket's minimum and maximum).
SCREEN_COLUMNS = 1500

#: plotly.js's typed-array type codes (its ``dtype`` names); 64-bit integers have none.
_TYPE_CODES = {"int8": "i1", "uint8": "u1", "int16": "i2", "uint16": "u2", "int32": "i4", "uint32": "u4",
               "float32": "f4", "float64": "f8"}  # fmt: skip


def envelope(y: np.ndarray, columns: int = SCREEN_COLUMNS) -> np.ndarray:
    """Ascending indices into ``y`` that draw it at ``columns`` pixel columns: each bucket's first
    minimum and first maximum, and the first and last points. All indices when ``y`` has no more
    than two points per column. The first occurrence of ``y``'s maximum is always kept."""
    y = np.asarray(y, dtype=np.float64)
    n = y.size
    if n <= 2 * columns:
        return np.arange(n)
    per = -(-n // columns)  # points per bucket (ceil), so there are at most ``columns`` buckets
    buckets = -(-n // per)
    pad = buckets * per - n
    # padding can never be a bucket's minimum or maximum
    hi = np.concatenate([y, np.full(pad, -np.inf)]).reshape(buckets, per)
    lo = np.concatenate([y, np.full(pad, np.inf)]).reshape(buckets, per)
    start = np.arange(buckets) * per
    keep = np.concatenate([start + hi.argmax(axis=1), start + lo.argmin(axis=1), [0, n - 1]])
    return np.unique(keep)


def visible(x: np.ndarray, lo: float | None, hi: float | None) -> tuple[int, int]:
    """The slice ``[start, stop)`` of ascending ``x`` a window over ``[lo, hi]`` shows: the points
    inside it and the one just outside each edge, so the line runs on to the window's borders.
    The whole of ``x`` when ``lo`` or ``hi`` is None (no zoom)."""
    if lo is None or hi is None:
        return 0, len(x)
    start = max(int(np.searchsorted(x, lo, side="left")) - 1, 0)
    stop = min(int(np.searchsorted(x, hi, side="right")) + 1, len(x))
    return start, max(stop, start)


def envelope_in(x: np.ndarray, y: np.ndarray, x_range: tuple[float, float] | None = None,
                columns: int = SCREEN_COLUMNS) -> np.ndarray:  # fmt: skip
    """``envelope`` of the part of ``y`` (at ascending ``x``) that a zoom to ``x_range`` shows, as
    indices into the whole ``y``: zoomed into fewer points than two per column, every point there;
    ``x_range`` None: the whole line."""
    start, stop = visible(x, *(x_range or (None, None)))
    return start + envelope(np.asarray(y)[start:stop], columns)


def typed_array(values: np.ndarray) -> dict[str, str]:
    """``values`` (1-D) as plotly.js's typed-array spec: ``{"dtype": "u4", "bdata": <base64>}``.
    Integers go in the narrowest type that holds them (steps in 2 bytes, a tile's bytes in 4), as
    float64 beyond 32 bits (exact below 2**53: bytes and steps are far below); floats as float64."""
    v = np.asarray(values)
    if v.dtype.kind in "iu" or v.dtype == np.bool_:
        v = v.astype(_narrowest(int(v.min(initial=0)), int(v.max(initial=0))))
    elif v.dtype != np.float32:
        v = v.astype(np.float64)
    little = np.ascontiguousarray(v, dtype=v.dtype.newbyteorder("<"))
    return {"dtype": _TYPE_CODES[v.dtype.name], "bdata": base64.b64encode(little.tobytes()).decode("ascii")}


def _narrowest(lo: int, hi: int) -> type:
    """The narrowest numpy type plotly.js reads that holds every integer in [lo, hi]."""
    kinds = (np.uint8, np.uint16, np.uint32) if lo >= 0 else (np.int8, np.int16, np.int32)
    for kind in kinds:
        info = np.iinfo(kind)
        if info.min <= lo and hi <= info.max:
            return kind
    return np.float64


def decode_typed_array(spec: dict[str, str] | list) -> np.ndarray:
    """The array a ``typed_array`` spec (or a plain list) holds: what plotly.js draws."""
    if isinstance(spec, dict):
        code = {c: n for n, c in _TYPE_CODES.items()}[spec["dtype"]]
        return np.frombuffer(base64.b64decode(spec["bdata"]), dtype=np.dtype(code).newbyteorder("<"))
    return np.asarray(spec)
