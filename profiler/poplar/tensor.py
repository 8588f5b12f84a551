"""Tensor views over graph variables.

A tensor is a view: for each of its elements, which variable and which flat element of that
variable it refers to. Both are numpy arrays (the variable id is a plain int when the view
covers one variable), so slicing, reshaping, transposing, broadcasting and concatenating are
numpy index operations, never Python loops over elements.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeAlias, cast

import numpy as np

from profiler.host import sorting
from profiler.poplar.layout import (
    Affine,
    Blocks,
    Factored,
    Runs,
    VarRuns,
    Window,
    WindowBlocks,
    cut_ranges,
    factored,
    group_dims,
    inner_run,
    piece_lengths,
    strided_layout,
)

if TYPE_CHECKING:
    from profiler.poplar.variables import VariableStore


# What a view holds (see Tensor): a layout of one variable, or the flat element index of each element
TensorLayout: TypeAlias = (
    "Affine | Factored | Blocks | Runs | VarRuns | Window[Tensor] | WindowBlocks[Tensor] | np.ndarray"
)

# A [rows, width] field is kept as runs (profiler.poplar.layout.Runs) when its runs average at least this
# many elements: three int64 per run against one int32 index (and maybe a variable id) per element.
RUNS_WORTH_IT = 8


def index_dtype(numel: int) -> np.dtype:
    """Element indices of a variable of ``numel`` elements: int32 when they fit. Vertex fields are
    index arrays (a ResNet-50's hold billions of elements), so this halves the graph's host memory."""
    return np.dtype(np.int32 if numel <= np.iinfo(np.int32).max else np.int64)


class Tensor:
    """A view of elements of one or more variables of ``graph`` (Poplar's ``poplar::Tensor``).

    A view of one variable is held as an affine layout (profiler.poplar.layout: a few integers, whatever
    its size) while it stays one; fancy indexing and concatenation give an explicit index array.
    """

    __slots__ = ("graph", "_var", "_lay", "dtype")

    def __init__(self, graph: VariableStore, var: int | np.ndarray, layout: TensorLayout, dtype: np.dtype) -> None:
        self.graph = graph
        self._var = var  # int: one variable; else int32 array shaped like the view
        # a layout (one variable only), or the flat element index of each element
        self._lay = layout
        self.dtype = dtype

    @property
    def structured(self) -> bool:
        """A convolution window (or blocks of one): held by its geometry, see profiler.poplar.layout.Window;
        or runs of several variables (profiler.poplar.layout.VarRuns). Both give an index per element
        only when asked (``_explicit``)."""
        return isinstance(self._lay, Window | WindowBlocks | VarRuns)

    def _explicit(self) -> Tensor:
        """The same view with an index per element (windows materialise on first use)."""
        lay = self._lay
        if isinstance(lay, Window):
            return lay.materialised()
        if isinstance(lay, WindowBlocks):
            w = lay.window.materialised()
            return w.blocks([lay.g, lay.r0, lay.c0], (1, lay.rows, lay.cols), drop=(0,))
        if isinstance(lay, VarRuns):
            var, idx = lay.elements(index_dtype(max(self.graph.variables[v].numel for v in self.variable_ids())))
            return Tensor(self.graph, var, idx, self.dtype)
        return self

    @property
    def strided(self) -> bool:
        """An affine or factored view: a few integers, whatever its size (``affine_rows`` reads it so)."""
        return isinstance(self._lay, Affine | Factored)

    @property
    def affine(self) -> Affine | None:
        """The view's affine layout (one variable, regular strides), or None."""
        return self._lay if isinstance(self._lay, Affine) else None

    @property
    def _idx(self) -> np.ndarray:
        """Flat element index of every element (materialised for an affine view: per-element paths only)."""
        lay = self._lay
        if isinstance(lay, np.ndarray):
            return lay
        if isinstance(lay, Window | WindowBlocks | VarRuns):  # structured
            return self._explicit()._idx
        var = self.graph.variables[self._var]
        return lay.indices(index_dtype(var.numel))

    # -- shape ---------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._lay.shape)

    @property
    def rank(self) -> int:
        return len(self.shape)

    def numel(self) -> int:
        return int(self._lay.size)

    @property
    def nbytes(self) -> int:
        return self.numel() * self.dtype.itemsize

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        names = sorted({self.graph.variables[v].name for v in self.variable_ids()})
        return f"Tensor({', '.join(names)}, shape={self.shape}, dtype={self.dtype.name})"

    # -- elements ------------------------------------------------------------------------
    def variable_ids(self) -> list[int]:
        if isinstance(self._lay, VarRuns):
            return [int(v) for v in sorting.unique(self._lay.var)]
        if isinstance(self._lay, Window | WindowBlocks):  # structured
            w = self._lay.window if isinstance(self._lay, WindowBlocks) else self._lay
            return sorted({w.x_var} | ({w.pad_var} if w.pad_var >= 0 else set()))
        if isinstance(self._var, int):
            return [self._var]
        v = self._var.reshape(-1)  # runs of one variable (a concatenation's parts): unique over run heads
        heads = np.ones(v.size, dtype=bool)
        np.not_equal(v[1:], v[:-1], out=heads[1:])
        return [int(x) for x in sorting.unique(v[heads])]

    def elements(self) -> tuple[np.ndarray, np.ndarray]:
        """(variable id, flat element index) of every element, flattened in row-major order."""
        if self.structured:
            return self._explicit().elements()
        idx = self._idx.reshape(-1)
        if isinstance(self._var, int):
            return np.full(idx.size, self._var, dtype=np.int32), idx
        return self._var.reshape(-1), idx

    def single_variable(self) -> int | None:
        if self.structured:
            ids = self.variable_ids()
            return ids[0] if len(ids) == 1 else None
        return self._var if isinstance(self._var, int) else None

    # -- views ---------------------------------------------------------------------------
    def _apply(self, fn: Callable[[np.ndarray], np.ndarray]) -> Tensor:
        """A view by a numpy function of the index array (the explicit path)."""
        if self.structured:
            return self._explicit()._apply(fn)
        idx = fn(self._idx)
        if isinstance(self._var, int):
            return Tensor(self.graph, self._var, idx, self.dtype)
        var = fn(self._var)
        return _var_runs(self.graph, var, idx, self.dtype) or Tensor(self.graph, var, idx, self.dtype)

    def _view(
        self, affine: Callable[[Affine | Factored], Affine | Factored | None], fn: Callable[[np.ndarray], np.ndarray]
    ) -> Tensor:
        """``affine`` on an affine or factored view (None: not one), else ``fn`` on the index array."""
        if isinstance(self._lay, Affine | Factored):
            lay = affine(self._lay)
            if lay is not None:
                return Tensor(self.graph, self._var, lay, self.dtype)
        return self._apply(fn)

    def __getitem__(self, key: object) -> Tensor:
        aff = self.affine
        if aff is not None and len(aff.shape) == 1 and isinstance(key, np.ndarray) and key.ndim >= 2 and key.size:
            rows = _regular_rows(key, aff)
            if rows is not None:  # the same pattern in every row (a vertex per row): blocks, not an index each
                return Tensor(self.graph, self._var, rows, self.dtype)
            if key.dtype.kind in "iu" and key.min() >= 0 and key.max() < aff.shape[0]:
                runs = Runs.encode(aff.offset + key.astype(np.int64) * aff.strides[0])
                if runs.start.size * RUNS_WORTH_IT <= key.size:  # rows of a few long runs: kept as runs
                    return Tensor(self.graph, self._var, runs, self.dtype)
        try:
            # key is whatever numpy takes as an index (its stubs have no one type for it); numpy's
            # IndexError, caught below, reports any other
            return self._view(lambda a: a.getitem(key), lambda a: np.asarray(a[key]))  # type: ignore[call-overload]
        except IndexError as exc:
            raise IndexError(f"{self!r}: bad index {key!r}: {exc}") from None

    def slice(self, start: int, end: int, dim: int = 0) -> Tensor:
        """Elements start..end-1 along ``dim`` (Poplar ``Tensor::slice``)."""
        if not (0 <= start <= end <= self.shape[dim]):
            raise IndexError(f"{self!r}: slice [{start}, {end}) out of range for dimension {dim}")
        key = (slice(None),) * (dim % self.rank) + (slice(start, end),)
        return self[key]

    def index(self, i: int) -> Tensor:
        return self[i]

    def reshape(self, *shape: int | Sequence[int]) -> Tensor:
        # reshape(2, 3) or reshape((2, 3)): ints, unless one sequence
        new = tuple(shape[0]) if len(shape) == 1 and not isinstance(shape[0], int) else cast("tuple[int, ...]", shape)
        try:
            if isinstance(self._lay, VarRuns) and new and new[0] == self.shape[0] and new.count(-1) <= 1:
                # a field's rows regrouped (a reduction's [vertices, k, partials] as [vertices, k * partials])
                n_rows, inner = new[0], list(new[1:])
                if -1 in inner:
                    known = int(np.prod([n for n in inner if n != -1], dtype=np.int64))
                    inner[inner.index(-1)] = self.numel() // max(n_rows * known, 1)
                return Tensor(self.graph, self._var, self._lay.reshaped(n_rows, tuple(inner)), self.dtype)
            aff = self.affine
            if aff is not None and aff.reshape(new) is None:
                rows = _merged_rows(aff, new)
                if rows is not None:
                    return Tensor(self.graph, self._var, rows, self.dtype)
                sizes = _merge_sizes(aff.shape, new)
                if sizes is not None:  # only merges neighbouring dims (heads back into the hidden dim): factored
                    return Tensor(self.graph, self._var, group_dims(aff, sizes), self.dtype)
            return self._view(lambda a: a.reshape(new), lambda a: a.reshape(new))
        except ValueError:
            raise ValueError(f"{self!r}: cannot reshape {self.shape} to {new}") from None

    def flatten(self) -> Tensor:
        return self.reshape(-1)

    def group_dims(self, *sizes: int) -> Tensor:
        """Consecutive dims merged, ``sizes[i]`` of them into dim i: a reshape that stays a view of
        an affine tensor whatever its strides (its dims become factors, profiler.poplar.layout.Factored), as
        PopLibs sees a grouped store ``[C/16][N][16]`` as ``[N, C]``."""
        if not isinstance(self._lay, Affine | Factored):
            raise ValueError(f"{self!r}: only an affine view groups its dims")
        return Tensor(self.graph, self._var, group_dims(self._lay, tuple(sizes)), self.dtype)

    def transpose(self, *axes: int) -> Tensor:
        return self._view(lambda a: a.transpose(axes or None), lambda a: np.transpose(a, axes or None))

    @property
    def T(self) -> Tensor:  # noqa: N802 - numpy's name
        return self.transpose()

    def expand(self, axis: int) -> Tensor:
        if isinstance(self._lay, VarRuns) and axis == 0:  # one row of runs (a kernel's field), not an index each
            return Tensor(self.graph, self._var, self._lay.one_row(), self.dtype)
        return self._view(lambda a: a.expand(axis), lambda a: np.expand_dims(a, axis))

    def broadcast_to(self, shape: Sequence[int]) -> Tensor:
        try:
            return self._view(lambda a: a.broadcast_to(tuple(shape)), lambda a: np.broadcast_to(a, tuple(shape)).copy())
        except ValueError:
            raise ValueError(f"{self!r}: cannot broadcast {self.shape} to {tuple(shape)}") from None

    def blocks(self, starts: Sequence[np.ndarray], shape: Sequence[int], drop: Sequence[int] = ()) -> Tensor:
        """Equal blocks of this view, one per row: row v is ``self[starts[0][v]:+shape[0], ...]``
        (shape ``[V, *shape]``, less the block dims in ``drop``, which must have length 1): a
        planner's per-vertex operand blocks, held as a few integers per block when this view is affine."""
        shape = tuple(int(n) for n in shape)
        if any(shape[d] != 1 for d in drop):
            raise ValueError(f"{self!r}: only block dims of length 1 can be dropped")
        kept = [d for d in range(len(shape)) if d not in drop]
        begin = [np.asarray(s, dtype=np.int64).reshape(-1) for s in starts]
        if len(begin) != self.rank or len(shape) != self.rank or len({b.size for b in begin}) > 1:
            raise ValueError(f"{self!r}: blocks need one start array and one length per dimension")
        for d, (b, n) in enumerate(zip(begin, shape, strict=True)):
            if b.size and (b.min() < 0 or b.max() + n > self.shape[d]):
                raise IndexError(f"{self!r}: a block of {n} from {int(b.max())} leaves dimension {d}")
        if isinstance(self._lay, Window) and tuple(drop) == (0,) and shape[0] == 1:
            window_blocks = WindowBlocks(self._lay, begin[0], begin[1], begin[2], shape[1], shape[2])
            return Tensor(self.graph, self._var, window_blocks, self.dtype)
        if self.structured:
            return self._explicit().blocks(starts, shape, drop)
        if isinstance(self._lay, Factored):
            found = _factored_blocks(self._lay, begin, shape, kept)
            if found is not None:
                return Tensor(self.graph, self._var, found, self.dtype)
            return self._explicit_blocks(begin, shape, kept)
        if isinstance(self._lay, Blocks) and isinstance(self._lay.inner, Affine):
            # blocks of blocks: the row picks an offset, the rest is affine
            lay, inner = self._lay, self._lay.inner
            offsets = lay.offsets[begin[0]] + sum((b * st for b, st in zip(begin[1:], inner.strides, strict=True)),
                                                  np.int64(0))  # fmt: skip
            strides = (0,) + inner.strides  # a block's row dim has length 1 here when it is dropped
            if shape[0] != 1 or 0 not in drop:
                return self._explicit_blocks(begin, shape, kept)
            inner2 = Affine(0, tuple(shape[d] for d in kept), tuple(strides[d] for d in kept))
            return Tensor(self.graph, self._var, Blocks(np.asarray(offsets, dtype=np.int64), inner2), self.dtype)
        aff = self.affine
        if aff is not None:
            first = aff.offset + sum((b * s for b, s in zip(begin, aff.strides, strict=True)), np.int64(0))
            offsets = np.broadcast_to(first, begin[0].shape).astype(np.int64)
            inner = Affine(0, tuple(shape[d] for d in kept), tuple(aff.strides[d] for d in kept))
            return Tensor(self.graph, self._var, Blocks(offsets, inner), self.dtype)
        return self._explicit_blocks(begin, shape, kept)

    def _explicit_blocks(self, begin: list[np.ndarray], shape: tuple[int, ...], kept: list[int]) -> Tensor:
        grid = np.ix_(*(np.arange(n) for n in shape))
        index = tuple(b.reshape((-1,) + (1,) * len(shape)) + g[None] for b, g in zip(begin, grid, strict=True))
        out_shape = (begin[0].size,) + tuple(shape[d] for d in kept)
        t = self._apply(lambda a: a[index].reshape(out_shape))
        if isinstance(t._var, int) and isinstance(t._lay, np.ndarray) and t.numel() and len(out_shape) > 1:
            # blocks of a view that is not affine (attention heads merged back): kept as runs when long
            # (t has an index per element, as _apply makes it)
            runs = Runs.encode(t._lay)
            if runs.start.size * RUNS_WORTH_IT <= t.numel():
                return Tensor(self.graph, t._var, runs, self.dtype)
        return t

    def pattern_rows(self, first: np.ndarray, shape: Sequence[int], strides: Sequence[int]) -> Tensor:
        """``self[key]`` for ``key[v, i...] = first[v] + sum(i_d * strides[d])`` (row v a vertex's
        field, the same pattern in every row) on a one-dimensional affine view: the blocks indexing
        would find (``_regular_rows``), built from the pattern instead of checked over an index per
        element. Any other case indexes with the key itself."""
        first = np.asarray(first, dtype=np.int64).reshape(-1)
        shape = tuple(int(n) for n in shape)
        # strides as strided_layout reads them from a pattern: 0 along dims of one element
        st = tuple(0 if n == 1 else int(s) for n, s in zip(shape, strides, strict=True))
        aff = self.affine
        span = sum((n - 1) * s for n, s in zip(shape, st, strict=True))
        if (
            aff is None
            or len(aff.shape) != 1
            or first.size == 0
            or 0 in shape
            or min(st, default=0) < 0
            or first.min() < 0
            or int(first.max()) + span >= aff.shape[0]
        ):
            return self[first.reshape((-1,) + (1,) * len(shape)) + Affine(0, shape, st).indices(np.int64)]
        s0 = aff.strides[0]
        lay = Blocks(aff.offset + first * s0, Affine(0, shape, tuple(s * s0 for s in st)))
        return Tensor(self.graph, self._var, lay, self.dtype)

    def permuted_rows(self, index: np.ndarray, breaks: np.ndarray, first: np.ndarray, width: int) -> Tensor:
        """``self[index[first[:, None] + np.arange(width)]]`` for ``index`` with no two equal neighbours
        (a permutation: a reduction's result elements in its partials' order), given ``breaks``, where
        ``index`` stops counting up by one (``np.flatnonzero(np.diff(index) != 1) + 1``): on a
        contiguous one-dimensional view, the blocks (each row one run) or runs indexing finds, built
        per run of each row rather than per element; any other case indexes."""
        first = np.asarray(first, dtype=np.int64).reshape(-1)
        aff = self.affine
        if aff is None or len(aff.shape) != 1 or aff.strides[0] != 1 or first.size == 0 or width < 1:
            return self[index[first[:, None] + np.arange(width)]]
        start, pieces = cut_ranges(breaks, first, np.full(first.size, width))
        if width > 1 and (pieces == width).all():  # every element a run of its own: maybe one stride, as blocks
            return self[index[first[:, None] + np.arange(width)]]
        value = index[start]
        length = piece_lengths(start, pieces, first, np.full(first.size, width))
        if value.min() < 0 or (value + length).max() > aff.shape[0]:
            return self[index[first[:, None] + np.arange(width)]]  # out of range: indexing says so
        if (pieces == 1).all():  # every row one run from its first element: what _regular_rows finds
            return self.pattern_rows(value, (width,), (1,))
        if start.size * RUNS_WORTH_IT > first.size * width:  # too short to be worth runs: an index each
            return self[index[first[:, None] + np.arange(width)]]
        # a row with some runs, but not one run or one per element, has no single stride: runs, as
        # Runs.encode cuts them (step 1: no two equal neighbours)
        row_first = np.append(np.cumsum(pieces) - pieces, start.size).astype(np.int64)
        step = np.broadcast_to(np.ones(1, dtype=np.int64), start.shape)
        runs = Runs(aff.offset + value, length, step, row_first, int(width))
        return Tensor(self.graph, self._var, runs, self.dtype)

    def affine_rows(self, index: np.ndarray, breaks: np.ndarray, first: np.ndarray, width: int) -> Tensor:
        """``permuted_rows`` for any affine or factored view (a broadcast operand, a transposed one, a
        grouped matmul result): each row's
        runs of flattened positions cut where the view's innermost contiguous dims end (every
        ``inner`` positions), each piece one run of the variable (step 1, or step 0 over broadcast
        dims), built per piece rather than per element. A binary op's [1, S, 1] scale broadcast over
        [1, S, 4,096] is then one run per row and position, not 4,096 indices. Any other view, or too
        many pieces for runs to be worth it, indexes."""
        first = np.asarray(first, dtype=np.int64).reshape(-1)
        # a grouped view (a matmul's result store) walks its elements in its factor view's order
        aff = self._lay.flat if isinstance(self._lay, Factored) else self.affine
        if aff is None or len(aff.shape) < 2 or first.size == 0 or width < 1:
            return self.reshape(-1)[index[first[:, None] + np.arange(width)]]
        inner, step = inner_run(aff)
        spread_dim = _spread_inner(aff) if inner < 2 else None
        if inner < 2 and spread_dim is None:
            return self.reshape(-1)[index[first[:, None] + np.arange(width)]]
        spread: int | None = None
        if spread_dim is not None:  # the inner dim reads one element every ``spread``: runs of 1-blocks
            inner, spread = spread_dim
        widths = np.full(first.size, width, dtype=np.int64)
        start, pieces = cut_ranges(breaks, first, widths)
        pos = index[start].astype(np.int64)  # each piece's first flattened position of this view
        length = piece_lengths(start, pieces, first, widths)
        # cut again where a run of the view's inner dims ends: per piece, never per element
        cuts = (pos + length - 1) // inner - pos // inner + 1
        # short inner runs (a matmul result stored in groups of 4 columns) may still make runs of
        # blocks, one a row where they take one a group
        blocks = _block_stride(aff, inner) if step == 1 else None
        head = np.repeat(np.cumsum(cuts) - cuts, cuts)
        k = np.arange(int(cuts.sum())) - head  # the cut's rank within its piece
        p_of = np.repeat(pos, cuts)
        sub = np.where(k == 0, p_of, (p_of // inner + k) * inner)
        end = np.minimum(np.repeat(pos + length, cuts), (sub // inner + 1) * inner)
        coords = np.unravel_index(sub, aff.shape)
        value = aff.offset + sum((c.astype(np.int64) * st for c, st in zip(coords, aff.strides, strict=True)),
                                 np.zeros(sub.size, np.int64))  # fmt: skip
        row = np.repeat(np.repeat(np.arange(first.size), pieces), cuts)
        if spread is not None:  # a transposed read (a serial matmul's rhs rearranged): a run a piece
            found = _block_runs(value, end - sub, row, first.size, int(width), 1, spread)
            if found is None:
                return self.reshape(-1)[index[first[:, None] + np.arange(width)]]
            return Tensor(self.graph, self._var, found, self.dtype)
        # pieces that continue each other in memory are one run (a tile's rows of one group of 4
        # columns of a grouped store: the group's rows are consecutive elements); else runs of
        # blocks; else an index per element
        runs = _merged_runs(value, end - sub, step, row, first.size, int(width))
        if runs.start.size * RUNS_WORTH_IT > first.size * width:
            if step == 0:  # a per-row operand over a tile's rows of a short group: repeats of consecutive elements
                found = _repeat_runs(value, end - sub, row, first.size, int(width))
            else:
                found = (
                    None
                    if blocks is None
                    else _block_runs(value, end - sub, row, first.size, int(width), inner, blocks)
                )
            if found is None:
                return self.reshape(-1)[index[first[:, None] + np.arange(width)]]
            return Tensor(self.graph, self._var, found, self.dtype)
        return Tensor(self.graph, self._var, runs, self.dtype)

    def var_runs_rows(self, index: np.ndarray, breaks: np.ndarray, first: np.ndarray, width: int) -> Tensor | None:
        """``permuted_rows`` for runs of several variables (a rotary embedding's [-x2, x1]): each row's
        pieces of ``index`` (cut at ``breaks``) read as ranges of this view's runs, per piece and run,
        never per element. None when this view is not such runs (or they cycle)."""
        if not isinstance(self._lay, VarRuns):
            return None
        first = np.asarray(first, dtype=np.int64).reshape(-1)
        widths = np.full(first.size, width, dtype=np.int64)
        start, pieces = cut_ranges(breaks, first, widths)
        length = piece_lengths(start, pieces, first, widths)
        row_first = np.append(0, np.cumsum(pieces)).astype(np.int64)
        lay = self._lay.take_ranges(index[start], length, row_first, int(width))
        return None if lay is None else Tensor(self.graph, -1, lay, self.dtype)

    def head(self, k: int) -> Tensor | None:
        """The first ``k`` elements of this view flattened, with an index each (a probe of a large
        view, built without indexing all of it); None for a window view."""
        k = min(int(k), self.numel())
        lay = self._lay.flat if isinstance(self._lay, Factored) else self._lay
        if isinstance(lay, Affine):
            coords = np.unravel_index(np.arange(k), lay.shape)
            idx = lay.offset + sum((c * st for c, st in zip(coords, lay.strides, strict=True)), np.zeros(k, np.int64))
        elif isinstance(lay, Blocks) and lay.inner.size:
            idx = Blocks(lay.offsets[: -(-k // lay.inner.size)], lay.inner).indices().reshape(-1)[:k]
        elif isinstance(lay, np.ndarray):
            idx = lay.reshape(-1)[:k]
        elif isinstance(lay, VarRuns):  # the runs that hold the first k elements
            r = lay.runs
            n = int(np.searchsorted(np.cumsum(r.length), k, side="left")) + 1 if k else 0
            length = r.length[:n]
            within = np.arange(int(length.sum()), dtype=np.int64) - np.repeat(np.cumsum(length) - length, length)
            first = np.repeat(r.start[:n].astype(np.int64), length) + within * np.repeat(r.step[:n], length)
            of = np.repeat(lay.var[:n], length)[:k].astype(np.int32)
            return Tensor(self.graph, of, first[:k], self.dtype)
        else:
            return None
        var = self._var if isinstance(self._var, int) else self._var.reshape(-1)[:k]
        return Tensor(self.graph, var, idx, self.dtype)

    def broadcast(self, n: int, dim: int = 0) -> Tensor:
        """Repeat the tensor ``n`` times along ``dim`` (Poplar ``Tensor::broadcast``)."""
        d = dim % self.rank

        def affine(a: Affine | Factored) -> Affine | Factored | None:
            rep = a.expand(d).broadcast_to(a.shape[:d] + (n,) + a.shape[d:])
            return rep.reshape(a.shape[:d] + (n * a.shape[d],) + a.shape[d + 1 :])

        return self._view(affine, lambda a: np.concatenate([a] * n, axis=dim))


def _factored_blocks(lay: Factored, begin: list[np.ndarray], shape: tuple[int, ...], kept: list[int]) -> Blocks | None:
    """Blocks of a factored view when every block is whole inner factors of each factored dim, or
    lies within one outer index of it (a matmul's weight blocks over kernel positions x channels);
    None otherwise. Dims of more than two factors are left to the explicit path."""
    offsets = np.full(begin[0].shape, lay.offset, dtype=np.int64)
    inner: list[list[tuple[int, int]]] = []
    for g, b, n in zip(lay.factors(), begin, shape, strict=True):
        if len(g) == 1:
            offsets += b * g[0][1]
            inner.append([(n, g[0][1])])
            continue
        if len(g) > 2:
            return None
        (_, s0), (n1, s1) = g
        if (b % n1 == 0).all() and n % n1 == 0:  # whole inner factors
            offsets += (b // n1) * s0
            inner.append([(n // n1, s0), (n1, s1)])
        elif (b % n1 + n <= n1).all():  # inside one outer index
            offsets += (b // n1) * s0 + (b % n1) * s1
            inner.append([(n, s1)])
        else:
            return None
    return Blocks(offsets, factored(0, [inner[d] for d in kept]))


def _regular_rows(key: np.ndarray, aff: Affine) -> Blocks | None:
    """Blocks for ``flat_view[key]`` when every row of ``key`` is its first element plus one shared
    affine pattern (vertex fields over regular groups); None otherwise. Checked in one pass."""
    if key.dtype.kind not in "iu":
        return None
    k = key.astype(np.int64, copy=False)
    first = k.reshape(k.shape[0], -1)[:, 0]
    if first.min() < 0:
        return None
    pattern = k[0] - first[0]
    layout = strided_layout(pattern) if pattern.size > 1 else (0, (0,) * pattern.ndim)
    if layout is None or not np.array_equal(
        k - first.reshape((-1,) + (1,) * pattern.ndim), np.broadcast_to(pattern, k.shape)
    ):
        return None
    span = int(first.max()) + sum((n - 1) * st for n, st in zip(pattern.shape, layout[1], strict=True))
    if span >= aff.shape[0]:
        return None
    s = aff.strides[0]
    return Blocks(aff.offset + first * s, Affine(0, pattern.shape, tuple(st * s for st in layout[1])))


def _spread_inner(aff: Affine) -> tuple[int, int] | None:
    """(positions, stride) of a one-to-one view's innermost dim (not of length one) when its stride is
    over 1 and it holds at least ``RUNS_WORTH_IT`` positions: a transposed read, each run along it
    one element every stride (``Runs.block`` of 1); else None."""
    dims = [(int(n), int(st)) for n, st in zip(aff.shape, aff.strides, strict=True) if n != 1]
    if not dims or dims[-1][1] < 2 or dims[-1][0] < RUNS_WORTH_IT or not aff.one_to_one():
        return None
    return dims[-1]


def _block_stride(aff: Affine, inner: int) -> int | None:
    """The stride between consecutive runs of ``inner`` elements of a one-to-one view (that of the
    dim just outside them), when it is at least ``inner`` (blocks never overlap); else None."""
    if not aff.one_to_one():
        return None
    span = 1
    for n, st in zip(reversed(aff.shape), reversed(aff.strides), strict=True):
        if n == 1:
            continue
        if span >= inner:
            return int(st) if st >= inner else None
        span *= n
    return None


def _block_runs(
    start: np.ndarray, length: np.ndarray, row: np.ndarray, rows: int, width: int, block: int, stride: int
) -> Runs | None:
    """Pieces of at most ``block`` elements (``row`` each's, rows in order) as runs of blocks
    (``Runs.block``): a piece joins the one before it in its row when that one is a whole block
    and it starts ``stride`` after it. None when the runs would still be short."""
    head = np.ones(start.size, dtype=bool)
    head[1:] = (row[1:] != row[:-1]) | (length[:-1] != block) | (start[1:] != start[:-1] + stride)
    at = np.flatnonzero(head)
    if at.size * RUNS_WORTH_IT > rows * width:
        return None
    return _runs_from(start, length, row, rows, width, at, 1, block=block, stride=stride)


def _repeat_runs(start: np.ndarray, length: np.ndarray, row: np.ndarray, rows: int, width: int) -> Runs | None:
    """Step-0 pieces (``row`` each's, rows in order), each one element repeated, as runs of repeats
    (``Runs.repeat``: element i of a run reads ``start + i // repeat``): a piece joins the one before
    it in its row when that one repeats its element ``repeat`` times (the most any piece does) and it
    reads the next element, so only a run's last piece may be shorter. None when the runs would still
    be short."""
    if start.size == 0:
        return None
    rep = int(length.max())
    head = np.ones(start.size, dtype=bool)
    head[1:] = (row[1:] != row[:-1]) | (length[:-1] != rep) | (start[1:] != start[:-1] + 1)
    at = np.flatnonzero(head)
    if rep < 2 or at.size * RUNS_WORTH_IT > rows * width:
        return None
    return _runs_from(start, length, row, rows, width, at, 0, repeat=rep)


def _merged_runs(start: np.ndarray, length: np.ndarray, step: int, row: np.ndarray, rows: int, width: int) -> Runs:
    """Runs of one step (``row`` each's, rows in order), neighbours in a row that continue each
    other merged: step 1 where one starts at the other's end, step 0 where both repeat one element."""
    head = np.ones(start.size, dtype=bool)
    cont = start[1:] == (start[:-1] + length[:-1] if step else start[:-1])
    head[1:] = ~cont | (row[1:] != row[:-1])
    return _runs_from(start, length, row, rows, width, np.flatnonzero(head), step)


def _runs_from(
    start: np.ndarray, length: np.ndarray, row: np.ndarray, rows: int, width: int, at: np.ndarray, step: int,
    block: int = 0, stride: int = 0, repeat: int = 0,
) -> Runs:  # fmt: skip
    """Pieces (``row`` each's, rows in order) joined into runs at the pieces ``at`` (each run's first),
    all of one ``step``, with Runs' ``block`` and ``stride`` or ``repeat``."""
    merged = np.add.reduceat(length, at) if at.size else length[:0]
    row_first = np.searchsorted(row[at], np.arange(rows + 1)).astype(np.int64)
    steps = np.broadcast_to(np.full(1, step, dtype=np.int64), at.shape)
    return Runs(start[at].astype(np.int64), merged.astype(np.int64), steps, row_first, width,
                block=block, stride=stride, repeat=repeat)  # fmt: skip


def _merge_sizes(shape: tuple[int, ...], new: tuple[int, ...]) -> tuple[int, ...] | None:
    """How many of ``shape``'s consecutive dims make each dim of ``new`` (``group_dims``' sizes), when
    ``new`` only merges neighbouring dims (no dim split, none of length one added or dropped); else None."""
    if -1 in new or not new or int(np.prod(shape, dtype=np.int64)) != int(np.prod(new, dtype=np.int64)):
        return None
    sizes, i = [], 0
    for n in new:
        k, p = 0, 1
        while i + k < len(shape) and (p < n or k == 0):  # at least one dim each
            p *= shape[i + k]
            k += 1
        if k == 0 or p != n:
            return None
        sizes.append(k)
        i += k
    return tuple(sizes) if i == len(shape) else None


def _merged_rows(aff: Affine, new: tuple[int, ...]) -> Blocks | None:
    """Blocks for a reshape that merges leading dims numpy could not merge without a copy (heads of
    a transposed projection, say): one offset per merged row, the trailing dims kept affine."""
    new = tuple(int(n) for n in new)
    if not new or -1 in new[1:]:
        return None
    for p in range(2, len(aff.shape)):
        if aff.shape[p:] == new[1:] and new[0] in (-1, int(np.prod(aff.shape[:p], dtype=np.int64))):
            lead = Affine(aff.offset, aff.shape[:p], aff.strides[:p]).indices(np.int64).reshape(-1)
            return Blocks(lead, Affine(0, aff.shape[p:], aff.strides[p:]))
    return None


def concat(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    """Join views along ``axis`` (Poplar ``poplar::concat``); they may come from different variables."""
    if not tensors:
        raise ValueError("concat needs at least one tensor")
    first = tensors[0]
    if any(t.dtype != first.dtype or t.graph is not first.graph for t in tensors):
        raise ValueError("concat: tensors must share a graph and an element type")
    if len(tensors) == 1:
        return first
    blocks = _concat_blocks(tensors, axis)
    if blocks is not None:
        return blocks
    tensors = [t._explicit() for t in tensors]
    try:
        idx = np.concatenate([t._idx for t in tensors], axis=axis)
    except ValueError as exc:
        raise ValueError(f"concat: shapes {[t.shape for t in tensors]} do not fit along axis {axis}: {exc}") from None
    singles = {t._var for t in tensors if isinstance(t._var, int)}
    if len(singles) == 1 and all(isinstance(t._var, int) for t in tensors):
        return Tensor(first.graph, first._var, idx, first.dtype)
    var = np.concatenate(
        [np.full(t.shape, t._var, dtype=np.int32) if isinstance(t._var, int) else t._var for t in tensors], axis=axis
    )
    return _var_runs(first.graph, var, idx, first.dtype) or Tensor(first.graph, var, idx, first.dtype)


def _concat_blocks(tensors: Sequence[Tensor], axis: int) -> Tensor | None:
    """``concat`` of views of several variables along a dim after the first, each an affine or grouped
    view whose part from ``axis`` on is stretches of consecutive elements (``_stretches``): the runs
    ``_var_runs`` would cut, made from the views' integers, never an index per element (a rotary
    embedding's [-x2, x1] at S = 2,048: 8 M elements a layer). None where that does not hold, where a
    run would join its neighbour's, or where runs are not worth it: the general path then."""
    if not all(isinstance(t._var, int) for t in tensors):
        return None
    ids = [int(t._var) for t in tensors]
    shape = tensors[0].shape
    nd = len(shape)
    if nd < 2 or not -nd <= axis < nd or len(set(ids)) == 1:
        return None
    axis %= nd
    if axis == 0 or any(len(t.shape) != nd or t.shape[:axis] != shape[:axis] or t.shape[axis + 1 :] != shape[axis + 1 :] for t in tensors):  # fmt: skip
        return None
    parts = [_stretches(t._lay, axis) for t in tensors]
    found = [p for p in parts if p is not None]  # ([outer positions, runs of a block], run length) each
    if len(found) < len(parts):
        return None
    start = np.concatenate([o for o, _ in found], axis=1).reshape(-1)
    outer = found[0][0].shape[0]
    length = np.tile(np.concatenate([np.full(o.shape[1], n, np.int64) for o, n in found]), outer)
    var = np.tile(
        np.concatenate([np.full(o.shape[1], v, np.int32) for (o, _), v in zip(found, ids, strict=True)]), outer
    )
    total = start.size
    joined = (*shape[:axis], sum(t.shape[axis] for t in tensors), *shape[axis + 1 :])
    width = int(np.prod(joined[1:], dtype=np.int64))
    rows = joined[0]
    if total * RUNS_WORTH_IT > rows * width:
        return None
    # a run continuing its neighbour in one variable (the next starting where it ends, or on its
    # last element) would be cut otherwise by Runs.encode: left to the general path
    gap = start[1:] - (start[:-1] + length[:-1] - 1)
    same_row = (np.arange(1, total) % (total // rows)) != 0
    if ((var[1:] == var[:-1]) & same_row & ((gap == 0) | (gap == 1))).any():
        return None
    row_first = np.arange(rows + 1, dtype=np.int64) * (total // rows)
    steps = np.broadcast_to(np.ones(1, np.int64), (total,))
    runs = Runs(start, length, steps, row_first, width, tuple(joined[1:]) if nd > 2 else ())
    return Tensor(tensors[0].graph, -1, VarRuns(runs, var), tensors[0].dtype)


def _stretches(lay: TensorLayout, axis: int) -> tuple[np.ndarray, int] | None:
    """An affine or grouped view's part from ``axis`` on, at each position of the dims before it, as
    runs of consecutive elements of its variable: (first element of each run, [positions, runs]) and
    the runs' length (the longest innermost stretch of its dims laid out as one; a grouped view's
    factor dims, so a matmul result stored in groups of columns is a run a group). None for another
    view, or runs of one element (Runs.encode's runs of repeats could form)."""
    if isinstance(lay, Factored):
        a, first = lay.flat, sum(lay.groups[:axis])  # its factor dims: the same elements in the same order
    elif isinstance(lay, Affine):
        a, first = lay, axis
    else:
        return None
    shape, strides = a.shape[first:], a.strides[first:]
    k, step = len(shape), 1
    while k and (shape[k - 1] == 1 or strides[k - 1] == step):
        step *= shape[k - 1]
        k -= 1
    if step < 2:
        return None
    runs = Affine(0, shape[:k], strides[:k]).indices(np.int64).reshape(-1)
    outer = Affine(a.offset, a.shape[:first], a.strides[:first]).indices(np.int64).reshape(-1)
    return outer[:, None] + runs[None, :], step


def _var_runs(graph: VariableStore, var: np.ndarray, idx: np.ndarray, dtype: np.dtype) -> Tensor | None:
    """A view of several variables (``var``, ``idx``: each element's variable and index, shaped like it)
    kept as runs of its rows (profiler.poplar.layout.VarRuns) when they average ``RUNS_WORTH_IT``
    elements: a rotary embedding's [-x2, x1] halves, and the fields of the ops that read it, are two
    runs a row where an index and a variable id per element grow with the sequence (issue 38)."""
    if idx.ndim < 2 or idx.size == 0:
        return None
    # one key per element, consecutive only within a variable (no index reaches big - 1): the runs
    # Runs.encode cuts are runs of one variable
    big = int(idx.max()) + 2
    key = var.astype(np.int64) * big + idx.astype(np.int64)
    # every neighbouring pair whose step is neither 0 nor 1 starts a run: a lower bound on the runs that
    # turns away, in one pass, most views not worth it (DenseNet-121's concatenations: 3,100 full encodes,
    # 5.8 s of its import, came back unused)
    if (np.count_nonzero(np.diff(key.reshape(-1)).view(np.uint64) > 1) + 1) * RUNS_WORTH_IT > idx.size:
        return None
    runs = Runs.encode(key)
    if runs.start.size * RUNS_WORTH_IT > idx.size:
        return None
    start, of = runs.start % big, (runs.start // big).astype(np.int32)
    kept = Runs(start, runs.length, runs.step, runs.row_first, runs.width, runs.inner)
    return Tensor(graph, -1, VarRuns(kept, of), dtype)  # its variables are the runs' (variable_ids)
