"""The value arrays of variables a run makes and drops step by step, handed on instead of freed.

The engine makes a variable's values at the first step that touches it and drops them after the
last (host memory follows the live values). A fresh array of hundreds of megabytes is mapped and
faulted in page by page at its first write, every run: at ResNet-50 batch 32 that first touch cost
4-11 ns an element against ~0.1 to zero a warm one. Here a dropped array waits for the next variable
of the same type and size, which gets it zeroed. A request nothing waits for first frees every
waiting array, so the memory held never exceeds the live values at the last such request: the
peak is the same as freeing at once. The arrays waiting at the end of a run are kept for the next
run's variables (the engine frees them when it closes), as onnxruntime keeps its arena.
"""

from __future__ import annotations

import numpy as np


class ValuePool:
    """Dropped value arrays by (type, size), for the next variable of the same type and size."""

    def __init__(self) -> None:
        self._waiting: dict[tuple[np.dtype, int], list[np.ndarray]] = {}

    def zeros(self, n: int, dtype: np.dtype, zeroed: bool = True) -> np.ndarray:
        """``n`` zeros of ``dtype``: a waiting array zeroed, else a new one (after freeing the rest).
        ``zeroed=False``: any values (the caller writes every element before reading one)."""
        waiting = self._waiting.get((np.dtype(dtype), n))
        if waiting:
            values = waiting.pop()
            if zeroed:
                values.fill(0)
            return values
        self._waiting.clear()
        return np.zeros(n, dtype) if zeroed else np.empty(n, dtype)

    def drop(self, values: np.ndarray) -> None:
        """Keep ``values`` (no longer a variable's) for the next request of its type and size."""
        if values.size:
            self._waiting.setdefault((values.dtype, values.size), []).append(values)

    def clear(self) -> None:
        self._waiting.clear()
