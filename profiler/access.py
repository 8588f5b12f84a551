"""How the engine reads and writes a tensor's values: gathers and scatters against the run state
(one flat numpy array per variable), built once per field when a step is compiled.

A view of one variable that numpy strides can describe is read and written through a strided view
of the variable (no index array); any other view by element index; a convolution window (im2col)
through sliding windows.
"""

from __future__ import annotations

import numpy as np

from profiler.layout import Affine, Factored, Window, strided_layout
from profiler.tensor import Tensor


class Access:
    """Precomputed gather/scatter of a tensor's elements against per-variable flat value arrays.

    A view of one variable laid out as a strided numpy view (slices, transposes, broadcasts of it)
    is read as that view - no copy, read-only so no codelet can change the state through it - and
    written through it; any other view is gathered and scattered by element index.
    """

    __slots__ = ("shape", "dtype", "groups", "strided", "window", "source", "flat_shape")

    def __init__(self, t: Tensor) -> None:
        self.shape = t.shape
        self.dtype = t.dtype
        self.source: Tensor | None = None
        self.window = t._lay if isinstance(t._lay, Window) else None  # read by sliding windows (im2col)
        if self.window is not None:
            self.strided, self.groups = None, []
            return
        t = t._explicit()
        single = t.single_variable()
        self.strided: tuple[int, int, tuple[int, ...], bool] | None = None  # var, offset, byte strides, writable
        self.flat_shape = self.shape  # a factored view is strided over its factor dims
        if single is not None:
            aff = t.affine
            if isinstance(t._lay, Factored):
                aff = t._lay.flat
                self.flat_shape = aff.shape
            layout = (aff.offset, aff.strides) if aff is not None else strided_layout(t._idx)
            if layout is not None and min(layout[1], default=0) >= 0:
                offset, strides = layout
                nbytes = tuple(s * t.dtype.itemsize for s in strides)
                self.strided = (single, offset, nbytes, Affine(offset, self.flat_shape, strides).one_to_one())
            # gathered indices as intp once here: np.take would convert int32 ones on every run; a
            # strided view needs none to be read (a broadcast one that is written - rare - builds
            # them then: 8 B per element held for every broadcast operand otherwise)
            self.source = t if self.strided else None
            idx = np.zeros(0, np.intp) if self.strided else t._idx.reshape(-1).astype(np.intp)
            self.groups: list[tuple[int, np.ndarray | None, np.ndarray]] = [(single, None, idx)]
        else:
            var_ids, idx = t.elements()
            order = np.argsort(var_ids, kind="stable")
            sv = var_ids[order]
            cuts = np.flatnonzero(sv[1:] != sv[:-1]) + 1
            self.groups = [
                (int(sv[a]), order[a:b], idx[order[a:b]].astype(np.intp))
                for a, b in zip(np.concatenate(([0], cuts)), np.append(cuts, sv.size), strict=True)
            ]

    def _view(self, state: list[np.ndarray], writeable: bool) -> np.ndarray:
        var, offset, strides, _ = self.strided  # type: ignore[misc]
        return np.lib.stride_tricks.as_strided(state[var][offset:], self.flat_shape, strides, writeable=writeable)

    def gather(self, state: list[np.ndarray], dtype: np.dtype | None = None) -> np.ndarray:
        """The tensor's values: a read-only view of the state when strided, else a new array; in
        ``dtype`` when given (converted while copied: a new array then)."""
        if self.window is not None:
            return im2col(self.window, state, dtype)
        values = self._stored(state)
        return values if dtype is None or dtype == values.dtype else values.astype(dtype)

    def _stored(self, state: list[np.ndarray]) -> np.ndarray:
        """The tensor's values in their stored type."""
        if self.strided is not None:  # a factored view's values are copied into its own order
            return self._view(state, writeable=False).reshape(self.shape)
        # np.take(mode="clip") skips the per-element bounds check (the indices come from tensor views,
        # so they are in range): up to ~3x faster than fancy indexing on scattered reads
        if len(self.groups) == 1 and self.groups[0][1] is None:
            var, _, idx = self.groups[0]
            return np.take(state[var], idx, mode="clip").reshape(self.shape)
        out = np.empty(int(np.prod(self.shape, dtype=np.int64)), dtype=self.dtype)
        for var, pos, idx in self.groups:
            out[pos] = np.take(state[var], idx, mode="clip")
        return out.reshape(self.shape)

    def scatter(self, state: list[np.ndarray], values: np.ndarray) -> None:
        if self.window is not None:
            raise ValueError("a convolution window view is read-only")
        if self.strided is not None and self.strided[3]:
            # numpy copies through a temporary when ``values`` overlaps the destination
            self._view(state, writeable=True)[...] = np.asarray(values).reshape(self.flat_shape)
            return
        flat = np.asarray(values).reshape(-1)
        if self.strided is not None and self.source is not None:  # a broadcast view written: indices now
            self.groups = [(self.strided[0], None, self.source._idx.reshape(-1).astype(np.intp))]
            self.source = None
        for var, pos, idx in self.groups:
            state[var][idx] = flat if pos is None else flat[pos]


def im2col(w: Window, state: list[np.ndarray], dtype: np.dtype | None = None) -> np.ndarray:
    """The values of a Window view: the input padded with the pad constant, read through sliding
    windows (numpy strides, no index array), in the view's [G, B*Ho*Wo, C/G*kh*kw] order; in
    ``dtype`` when given (the input is converted before the windows repeat its elements)."""
    x = state[w.x_var]
    flat = w.x.flat if isinstance(w.x, Factored) else w.x  # a grouped store: copied into [B, C, H, W] order
    xv = np.lib.stride_tricks.as_strided(
        x[flat.offset :], flat.shape, tuple(st * x.itemsize for st in flat.strides), writeable=False
    ).reshape(w.x.shape)
    if dtype is not None and dtype != xv.dtype:
        xv = xv.astype(dtype)
    (kh, kw), (sh, sw), (ph, pw), (dh, dw), (ho, wo) = w.kernel, w.stride, w.padding, w.dilation, w.out
    if ph or pw:
        fill = state[w.pad_var][w.pad.offset] if w.pad is not None else 0  # every pad element holds the constant
        xv = np.pad(xv, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=fill)
    win = np.lib.stride_tricks.sliding_window_view(xv, ((kh - 1) * dh + 1, (kw - 1) * dw + 1), axis=(2, 3))
    win = win[:, :, : (ho - 1) * sh + 1 : sh, : (wo - 1) * sw + 1 : sw, ::dh, ::dw]  # [B, C, Ho, Wo, kh, kw]
    b, c = xv.shape[:2]
    g = w.groups
    order = (1, 0, 3, 4, 5, 6, 2) if w.kernel_major else (1, 0, 3, 4, 2, 5, 6)  # columns (i, j, c) or (c, i, j)
    win = win.reshape(b, g, c // g, ho, wo, kh, kw).transpose(order)
    return np.ascontiguousarray(win).reshape(g, b * ho * wo, c // g * kh * kw)
