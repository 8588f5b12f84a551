"""How the engine reads and writes a tensor's values: gathers and scatters against the run state
(one flat numpy array per variable), built once per field when a step is compiled.

A view of one variable that numpy strides can describe is read and written through a strided view
of the variable (no index array); any other view by element index; a convolution window (im2col)
through sliding windows.
"""

from __future__ import annotations

import itertools
import math
import weakref

import numpy as np

from profiler.executable.convert import converted, copy_into
from profiler.executable.strided import strided_view
from profiler.host import scratch
from profiler.poplar.layout import Affine, Factored, Window, memory_order, merged_dims, strided_layout
from profiler.poplar.tensor import Tensor


class Access:
    """Precomputed gather/scatter of a tensor's elements against per-variable flat value arrays.

    A view of one variable laid out as a strided numpy view (slices, transposes, broadcasts of it)
    is read as that view - no copy, read-only so no codelet can change the state through it - and
    written through it; any other view is gathered and scattered by element index.
    """

    __slots__ = ("shape", "dtype", "groups", "strided", "window", "source", "flat_shape", "_copies")

    shape: tuple[int, ...]
    dtype: np.dtype
    # (variable, positions in the view or None for all of them, element indices), by variable
    groups: list[tuple[int, np.ndarray | None, np.ndarray]]
    strided: tuple[int, int, tuple[int, ...], bool] | None  # var, offset, byte strides, writable
    window: Window | None  # read by sliding windows (im2col)
    source: Tensor | None
    flat_shape: tuple[int, ...]  # a factored view is strided over its factor dims

    def __init__(self, t: Tensor) -> None:
        self.shape = t.shape
        self.dtype = t.dtype
        self.source = None
        self._copies: bool | None = None
        self.window = t._lay if isinstance(t._lay, Window) else None
        if self.window is not None:
            self.strided, self.groups = None, []
            return
        t = t._explicit()
        single = t.single_variable()
        if single is None and isinstance(t._var, np.ndarray) and t._var.size:  # one variable's elements
            v = t._var.reshape(-1)  # held as an id each (a slice of a concatenation): read as that one
            single = int(v[0]) if (v == v[0]).all() else None
        self.strided = None
        self.flat_shape = self.shape
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
            self.groups = [(single, None, idx)]
        else:
            var_ids, idx = t.elements()
            order = np.argsort(var_ids, kind="stable")
            sv = var_ids[order]
            cuts = np.flatnonzero(sv[1:] != sv[:-1]) + 1
            self.groups = [
                (int(sv[a]), order[a:b], idx[order[a:b]].astype(np.intp))
                for a, b in zip(np.concatenate(([0], cuts)), np.append(cuts, sv.size), strict=True)
            ]

    @property
    def variable(self) -> int | None:
        """The one variable the view reads, or None (several, or a window)."""
        if self.strided is not None:
            return self.strided[0]
        return self.groups[0][0] if len(self.groups) == 1 and self.groups[0][1] is None else None

    @property
    def copies(self) -> bool:
        """Whether ``gather`` (in the stored type, all rows) makes a new array rather than a view: a
        view read by element index, or a strided one whose shape merges dims numpy cannot merge."""
        if self._copies is None:
            if self.window is not None or self.strided is None:
                self._copies = True
            else:
                self._copies = _merge_copies(self.flat_shape, self.strided[2], self.shape)
        return self._copies

    def view(self, state: list[np.ndarray], writeable: bool = False) -> np.ndarray:
        """A strided access's numpy view of its variable, in its flat shape (a factored view's
        factor dims; writeable only for a one-to-one access's writer)."""
        return self._view(state, writeable)

    def _view(self, state: list[np.ndarray], writeable: bool, rows: slice | None = None) -> np.ndarray:
        """A strided access's numpy view of its variable (``rows`` of its flat view when given)."""
        assert self.strided is not None, "a strided access's view"
        var, offset, strides, _ = self.strided
        view = strided_view(state[var], offset, self.flat_shape, strides, writeable)
        return view if rows is None else view[rows]

    def rows_shape(self, rows: slice) -> tuple[int, ...]:
        """The shape of ``rows`` of a strided access's (flat) view."""
        return (len(range(*rows.indices(self.flat_shape[0]))), *self.flat_shape[1:])

    def gather(self, state: list[np.ndarray], dtype: np.dtype | None = None, rows: slice | None = None) -> np.ndarray:
        """The tensor's values: a read-only view of the state when strided, else a new array; in
        ``dtype`` when given (converted while copied: a new array then). ``rows``: only those rows
        of a strided access's view (its flat view, the shape when aligned - align_positionwise)."""
        if self.window is not None:
            return im2col(self.window, state, dtype)
        if self.strided is not None:
            values = self._view(state, writeable=False, rows=rows)
            if dtype is not None and dtype != values.dtype:
                values = converted(values, dtype)  # in the view's memory order
            # a factored view's values are copied into its own order (an aligned view needs no reshape),
            # in chunks of rows on the run's threads when the dims it merges are not one run
            if rows is not None:
                return values
            if _merge_copies(values.shape, values.strides, self.shape):
                out = np.empty(values.shape, dtype=values.dtype)
                copy_into(out, values)
                return out.reshape(self.shape)
            return values.reshape(self.shape)
        values = self._taken(state)
        return values if dtype is None or dtype == values.dtype else converted(values, dtype)

    def _taken(self, state: list[np.ndarray]) -> np.ndarray:
        """The values of a view read by element index, in their stored type."""
        # np.take(mode="clip") skips the per-element bounds check (the indices come from tensor views,
        # so they are in range): up to ~3x faster than fancy indexing on scattered reads
        if len(self.groups) == 1 and self.groups[0][1] is None:
            var, _, idx = self.groups[0]
            return np.take(state[var], idx, mode="clip").reshape(self.shape)
        out = np.empty(math.prod(self.shape), dtype=self.dtype)
        for var, pos, idx in self.groups:
            out[pos] = np.take(state[var], idx, mode="clip")
        return out.reshape(self.shape)

    def scatter(self, state: list[np.ndarray], values: np.ndarray, rows: slice | None = None) -> None:
        """Write ``values`` (the tensor's shape, or ``rows`` of a strided access's view) into the state."""
        if self.window is not None:
            raise ValueError("a convolution window view is read-only")
        if rows is not None and (self.strided is None or not self.strided[3]):
            raise ValueError("only a one-to-one strided view is written by rows")
        if self.strided is not None and self.strided[3]:
            view = self._view(state, writeable=True, rows=rows)
            values = np.asarray(values).reshape(view.shape)
            if np.may_share_memory(values, view):  # e.g. a codelet handing back its operand's view
                values = values.copy()
            copy_into(view, values)  # in chunks on the run's threads; inline when this is a chunk
            return
        flat = np.asarray(values).reshape(-1)
        if self.strided is not None and self.source is not None:  # a broadcast view written: indices now
            self.groups = [(self.strided[0], None, self.source._idx.reshape(-1).astype(np.intp))]
            self.source = None
        for var, pos, idx in self.groups:
            state[var][idx] = flat if pos is None else flat[pos]


def align_positionwise(fields: dict[str, Access], written: tuple[str, ...]) -> bool:
    """Let a positionwise codelet's fields (one shape; element i of a result depends only on element
    i of each operand) be read and written in the storage order of its first written field.

    Each access becomes a strided view over the common refinement of the fields' factor dims,
    permuted by the written field's strides, with the dims every field walks contiguously merged:
    a conv result held channel-grouped and read as [B, C, H, W] is then walked in memory order, not
    copied through a transpose each way. Applies (and returns True) when every field is strided,
    the written ones one-to-one, and all have one shape; else leaves them as they are."""
    acc = list(fields.values())
    laid = {f: a.strided for f, a in fields.items() if a.strided is not None}
    if not written or len(laid) != len(fields) or any(not laid[f][3] for f in written):
        return False
    if len({a.shape for a in acc}) != 1 or math.prod(acc[0].shape) == 0:
        return False
    refined = _common_refinement([a.flat_shape for a in acc])
    if not refined:  # cuts that do not nest, or one element
        return False
    strides = [_refined_strides(a.flat_shape, laid[f][2], refined) for f, a in fields.items()]
    lead = strides[acc.index(fields[written[0]])]
    order = sorted(range(len(refined)), key=lambda d: -lead[d])
    # in the written field's order, dims every field walks contiguously merged into one
    shape, merged = merged_dims(tuple(refined[d] for d in order), tuple(tuple(st[d] for d in order) for st in strides))
    for (f, a), st in zip(fields.items(), merged, strict=True):
        var, offset, _, one_to_one = laid[f]
        a.shape = a.flat_shape = tuple(shape)
        a.strided = (var, offset, tuple(st), one_to_one)
    return True


def _common_refinement(shapes: list[tuple[int, ...]]) -> tuple[int, ...] | None:
    """The coarsest shape that refines every one of ``shapes`` (equal sizes, row-major): cut where
    any of them cuts; None when their cuts do not nest (e.g. (4, 6) and (6, 4))."""
    cuts = {1}
    for shape in shapes:
        p = 1
        for n in reversed(shape):
            p *= n
            cuts.add(p)
    ordered = sorted(cuts, reverse=True)
    if any(a % b for a, b in itertools.pairwise(ordered)):
        return None
    return tuple(a // b for a, b in itertools.pairwise(ordered))


def _refined_strides(shape: tuple[int, ...], strides: tuple[int, ...], refined: tuple[int, ...]) -> list[int]:
    """Strides over ``refined`` of a view of ``shape`` with ``strides``: a dim split into factors
    walks its stride times the size of the factors inside each."""
    out, r = [], len(refined) - 1
    for n, s in zip(reversed(shape), reversed(strides), strict=True):
        m = 1
        while m < n:
            out.append(s * m)
            m *= refined[r]
            r -= 1
    return out[::-1]


def im2col(w: Window, state: list[np.ndarray], dtype: np.dtype | None = None) -> np.ndarray:
    """The values of a Window view: the input padded with the pad constant, read through sliding
    windows (numpy strides, no index array), in the view's [G, B*Ho*Wo, C/G*kh*kw] order; in
    ``dtype`` when given (converted in storage order before a kernel's windows repeat the input's
    elements, else while copied). A channel-grouped input is windowed over its factor dims as
    stored: the one copy is the final gather of the columns."""
    # kernel-major columns (i, j, c) read pixels' channels together; grouped ones (c // grp, i, j,
    # c % grp) of a store grouped alike read it in its own order: runs of kw x grp either way
    win, _ = column_windows(w, state, dtype)
    out = scratch.buffer("columns", win.shape, win.dtype if dtype is None else dtype)
    copy_into(out, win)  # a 1x1 kernel's elements are converted here, in the one copy
    (kh, kw), (ho, wo) = w.kernel, w.out
    b, c = _x_shape(w)[:2]
    return out.reshape(w.groups, b * ho * wo, c // w.groups * kh * kw)


def column_windows(w: Window, state: list[np.ndarray], dtype: np.dtype | None = None) -> tuple[np.ndarray, int]:
    """The strided view ``im2col`` copies its columns from: ``[G, B.., Ho, Wo, K..]`` whose row dims
    (B.., Ho, Wo) flatten to the columns' rows and K dims to their elements in the columns' order
    (padded and converted first where ``windows`` does that); and how many row dims it has. A part
    of the columns' rows copied from a slice of the first row dim larger than one is their rows
    ``[d0 * R, d1 * R)`` (R the later row dims' size)."""
    c = _x_shape(w)[1]
    grp, cg = w.channel_group, c // w.groups
    win = windows(w, state, dtype, channels_last=grp == cg > 1)  # [G, B.., Ho, Wo, C.., kh, kw]
    first_c = win.ndim - 2 - _factor_dims(w)[1]
    if grp == cg > 1:  # columns (i, j, c): the kernel dims before the channel dims
        win = win.transpose([*range(first_c), win.ndim - 2, win.ndim - 1, *range(first_c, win.ndim - 2)])
    elif grp > 1:  # columns (c // grp, i, j, c % grp): the kernel dims between the channel dims
        if win.ndim - first_c != 4 or win.shape[first_c + 1] != grp:  # the channel dims as (C/G/grp, grp)
            win = win.reshape([*win.shape[:first_c], cg // grp, grp, *win.shape[-2:]])
        win = win.transpose([*range(first_c), first_c, first_c + 2, first_c + 3, first_c + 1])
    return win, first_c - 1


def windows(
    w: Window, state: list[np.ndarray], dtype: np.dtype | None = None, channels_last: bool = False
) -> np.ndarray:
    """The windows of a Window view as a strided view ``[G, B.., Ho, Wo, C.., kh, kw]`` (B and C
    as their factor dims when the input is channel-grouped) over the input - padded with the pad
    constant and converted to ``dtype`` first (in a scratch buffer) when either is needed and the
    kernel is larger than 1x1 (a 1x1 kernel's view is converted where it is copied).
    ``channels_last``: that buffer holds each pixel's channels together (for kernel-major columns,
    whose ``(j, c)`` elements are then one contiguous run of kw x C)."""
    x = state[w.x_var]
    flat = w.x.flat if isinstance(w.x, Factored) else w.x
    xv = strided_view(x, flat.offset, flat.shape, tuple(st * x.itemsize for st in flat.strides))
    base: tuple[np.ndarray, int] | None = (x, flat.offset)  # xv's 1-d storage and its first element there
    (kh, kw), (sh, sw), (ph, pw), (dh, dw), (ho, wo) = w.kernel, w.stride, w.padding, w.dilation, w.out
    nb, nc = _factor_dims(w)
    if xv.ndim != nb + nc + 2:
        xv, base = xv.reshape(_x_shape(w)), None
    # windows repeat elements: convert once
    convert_to = dtype if dtype is not None and dtype != xv.dtype and kh * kw > 1 else None
    if ph or pw or convert_to is not None:
        fill = state[w.pad_var][w.pad.offset] if w.pad is not None else 0  # every pad element holds the constant
        xv, storage = _padded(
            xv, xv.dtype if convert_to is None else convert_to, ph, pw, fill, nb if channels_last else None
        )
        base = (storage, 0)
    # [B.., C.., Ho, Wo, kh, kw]: each window position steps the stride, each kernel position the dilation
    (s_h, s_w), lead = xv.strides[-2:], xv.shape[:-2]
    shape, strides = (*lead, ho, wo, kh, kw), (*xv.strides[:-2], s_h * sh, s_w * sw, s_h * dh, s_w * dw)
    if base is not None:  # np.ndarray over the storage: sliding_window_view's checks cost ~10 us a call
        win = strided_view(base[0], base[1], shape, strides)
    else:
        win = np.lib.stride_tricks.as_strided(xv, shape, strides, writeable=False)
    c, g = _x_shape(w)[1], w.groups
    # split channel c into (group, c): one dim when not factored, else one group (_factor_dims)
    win = win.reshape(win.shape[:nb] + (g, c // g) + win.shape[nb + 1 :]) if nc == 1 else np.expand_dims(win, nb)
    bs, cs = list(range(nb)), list(range(nb + 1, nb + 1 + nc))
    oh = nb + 1 + nc
    return win.transpose([nb, *bs, oh, oh + 1, *cs, oh + 2, oh + 3])


def blocked_input(w: Window, state: list[np.ndarray], block: int) -> np.ndarray | None:
    """A Window's input ``[1, C, H, W]`` as a strided view whose C-contiguous copy is its NCHWc layout
    ``[C/block, H, W, block]`` (``profiler.host.nchwc``; ``[C, H, W]`` for fewer channels than a
    block, which MLAS reads as NCHW): ``[C/block, H, W, r, g]`` for channels held
    in groups of ``g`` (``r * g == block``), ``[C/g, r, H, W, block]`` for groups of ``g = r *
    block``, ``[C/block, H, W, block]`` else; the view is that layout itself where the input is
    held so. None for a batch over one, channels not in blocks, or a window split in groups."""
    if w.groups != 1:
        return None
    x = state[w.x_var]
    flat = w.x.flat if isinstance(w.x, Factored) else w.x
    nb, nc = _factor_dims(w)
    if len(flat.shape) != nb + nc + 2 or any(n != 1 for n in flat.shape[:nb]):
        return None
    xv = strided_view(x, flat.offset, flat.shape, tuple(st * x.itemsize for st in flat.strides))
    shape = tuple(int(n) for n in flat.shape[nb:])  # [C.., H, W]: the batch's unit dims dropped
    xv = xv.reshape(shape)  # a view
    h, wd = shape[-2], shape[-1]
    if nc == 1:
        c = shape[0]
        if c < block:  # read as NCHW
            return xv
        if c % block:
            return None
        return xv.reshape(c // block, block, h, wd).transpose(0, 2, 3, 1)
    if nc != 2:
        return None
    c1, g = shape[0], shape[1]
    if g == block:
        return xv.transpose(0, 2, 3, 1)
    if block % g == 0 and c1 % (block // g) == 0:
        r = block // g
        return xv.reshape(c1 // r, r, g, h, wd).transpose(0, 3, 4, 1, 2)
    if g % block == 0:
        return xv.reshape(c1, g // block, block, h, wd).transpose(0, 1, 3, 4, 2)
    return None


def grouped_input(w: Window) -> tuple[int, int] | None:
    """``(offset, g)`` of a Window's input ``[1, C, H, W]`` held ``[C/g, H, W, g]`` in its variable
    from element ``offset`` on, one channel group after the other (PopLibs' grouped layout at batch
    1), else None."""
    if not isinstance(w.x, Factored):
        return None
    nb, nc = _factor_dims(w)
    shape, strides = w.x.flat.shape, w.x.flat.strides
    if nc != 2 or len(shape) != nb + 4 or any(n != 1 for n in shape[:nb]):
        return None
    c1, g, h, wd = shape[nb:]
    if tuple(strides[nb:]) != (h * wd * g, 1, wd * g, g) and c1 > 1:
        return None
    if c1 == 1 and tuple(strides[nb + 1 :]) != (1, wd * g, g):
        return None
    return w.x.flat.offset, g


# A window's input shape by window: a channel-grouped input's shape is a product over its factor
# dims, worked out at each read (3 times a convolution, ~15 us each); the windows live as long as
# their compiled graph
_X_SHAPES: weakref.WeakKeyDictionary[Window, tuple[int, ...]] = weakref.WeakKeyDictionary()


def _x_shape(w: Window) -> tuple[int, ...]:
    """``w.x.shape``, worked out once per window."""
    shape = _X_SHAPES.get(w)
    if shape is None:
        shape = _X_SHAPES[w] = w.x.shape
    return shape


def _factor_dims(w: Window) -> tuple[int, int]:
    """How many dims B and C of the window's input take in ``windows``: their factor dims for a
    channel-grouped input windowed as stored, else one each (H or W factored, or channel groups
    across factors)."""
    if not isinstance(w.x, Factored):
        return 1, 1
    nb, nc = w.x.groups[:2]
    if len(w.x.flat.shape) != nb + nc + 2 or (nc > 1 and w.groups > 1):
        return 1, 1
    return nb, nc


def _padded(
    x: np.ndarray, dtype: np.dtype, ph: int, pw: int, fill: object, batch_dims: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``x`` in ``dtype`` with ``ph`` / ``pw`` elements of ``fill`` on both sides of its last two
    dims, in a scratch buffer laid out in ``x``'s memory order (so the copy streams both sides), or
    with ``batch_dims``: ``x`` is ``[B.., C.., H, W]`` and the buffer ``[B.., H, W, C..]`` (B dims
    in their memory order, a pixel's channels together in their own order); and the buffer, 1-d."""
    if batch_dims is None:
        perm = memory_order(x)
    else:
        b = sorted(range(batch_dims), key=lambda d: -abs(x.strides[d]))
        perm = [*b, x.ndim - 2, x.ndim - 1, *range(batch_dims, x.ndim - 2)]
    shape = (*x.shape[:-2], x.shape[-2] + 2 * ph, x.shape[-1] + 2 * pw)
    storage = scratch.buffer("padded", (math.prod(shape),), dtype)
    out = storage.reshape(tuple(shape[d] for d in perm)).transpose(np.argsort(perm))
    h, w = x.shape[-2:]
    for edge in (
        np.s_[..., :ph, :],
        np.s_[..., ph + h :, :],
        np.s_[..., ph : ph + h, :pw],
        np.s_[..., ph : ph + h, pw + w :],
    ):
        out[edge] = fill
    copy_into(out[..., ph : ph + h, pw : pw + w], x)
    return out, storage


def _merge_copies(shape: tuple[int, ...], strides: tuple[int, ...], to: tuple[int, ...]) -> bool:
    """Whether reshaping an array of ``shape`` and ``strides`` to ``to``, which merges runs of its dims,
    copies: some merged neighbours are not a stride apart. False for any other reshape (numpy's own
    reshape then decides)."""
    dims = [(n, st) for n, st in zip(shape, strides, strict=True) if n != 1]
    i = 0
    for want in (n for n in to if n != 1):
        size, first = 1, i
        while i < len(dims) and size < want:
            size *= dims[i][0]
            i += 1
        if size != want:
            return False  # not a merge of whole dims
        if any(dims[j][1] != dims[j + 1][1] * dims[j + 1][0] for j in range(first, i - 1)):
            return True
    return False
