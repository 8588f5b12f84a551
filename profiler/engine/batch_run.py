"""Running one batch of vertices (a codelet over every row of its fields) against the run state.

A positionwise batch whose fields are walked in one storage order (``access.align_positionwise``)
runs in chunks of rows of that order on the run's threads (``profiler.host.parallel``): each chunk is
read, converted, computed and written while it is in cache. Elements are computed independently,
so the result is the same whatever the chunks. Any other batch runs whole (its matmuls use
BLAS's own threads).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import numpy as np

from profiler.executable import half_maps
from profiler.executable.access import blocked_input, column_windows, grouped_input, windows
from profiler.executable.convert import kernels, store
from profiler.host import blas, nchwc, packed, parallel, scratch

if TYPE_CHECKING:
    from profiler.chip.codelets import Codelet
    from profiler.executable.access import Access
    from profiler.executable.plans import BatchPlan
    from profiler.poplar.layout import Window


# Bytes of copies in the stored type (``ReadCache``) one replica keeps: the copies made of weights
# read in another order than stored (a 3x3 convolution's weights, [Cout, C/grp, kh, kw, grp], read
# as its im2col product's [(i, j, c), Cout]: ResNet-50's are 45 MB in float). Beyond this they are
# copied at each read, so a large model's host memory does not grow by a copy of its weights.
KEPT_COPY_BYTES = 256 << 20


# Elements a part of a compiled elementwise pass (``half_maps``) has at least when split over the run's
# threads; a smaller pass runs on the calling thread. In cache the pass takes ~0.2-0.4 ns an element,
# but in a run its operands come from memory (ResNet-50 b1's batch norms: 1-1.8 ns an element, 8x
# the same call repeated in cache), so two threads share the memory's bandwidth and a split gains
# less than its hand-off and GIL turns cost: 64 Ki made ResNet-50 b1 runs 5 % slower than 256 Ki (fp16
# C600 and fp32 GC200, quiet and with one core busy; batch 32 and a 4-layer BERT-large unchanged;
# 2026-11-29, /tmp A/B in one process, same bits).
PASS_PART_ELEMENTS = 1 << 18


class ReadCache:
    """One replica's field values that a read converts to a codelet's compute type (weights read as
    float from half) or copies into another order, kept while their variable is unwritten: a run
    converts or copies each weight once, not at every read. Only variables the running program does
    not write are kept (the engine says which); any step that writes a variable, or a host write,
    drops its entries. Copies in the stored type are kept up to KEPT_COPY_BYTES."""

    def __init__(self) -> None:
        self._by_var: dict[int, dict[object, np.ndarray]] = {}
        self.volatile: frozenset[int] | set[int] = frozenset()  # variables the running program writes
        self._copy_bytes: dict[int, int] = {}  # of the kept copies in the stored type, by variable
        self._packed_bytes: dict[int, int] = {}  # of the kept weights multiplied packed, by variable
        self._last: dict[int, tuple[object, np.ndarray]] = {}  # a conversion of a written variable, by variable

    def read(self, acc: Access, state: list[np.ndarray], dtype: np.dtype, contiguous: bool = False) -> np.ndarray:
        """``acc``'s values in ``dtype``, kept while unwritten; ``contiguous``: laid out row-major
        (a product's weights, which BLAS multiplies faster untransposed: ``_operand``)."""
        v = acc.variable
        if v is None or v in self.volatile:
            return acc.gather(state, dtype)
        kept = self._by_var.setdefault(v, {})
        key = (id(acc), dtype, contiguous)
        if key not in kept:
            values = acc.gather(state, dtype)
            copied = acc.copies
            if contiguous and not values.flags.c_contiguous:
                values, copied = np.ascontiguousarray(values), True
            if dtype == acc.dtype and copied:  # a copy in another order: kept within the budget
                if sum(self._copy_bytes.values()) + values.nbytes > KEPT_COPY_BYTES:
                    return values
                self._copy_bytes[v] = self._copy_bytes.get(v, 0) + values.nbytes
            if contiguous:  # a product's weights: multiplied through a packed copy within its budget
                packable = sum(self._packed_bytes.values()) + values.nbytes <= packed.PACKED_BYTES
                values = packed.weights(values, packable)
                if isinstance(values, packed.Weights):
                    self._packed_bytes[v] = self._packed_bytes.get(v, 0) + values.nbytes
            kept[key] = values
        return kept[key]

    def kept(self, variable: int, key: object, make: Callable[[], np.ndarray]) -> np.ndarray:
        """``make()``, an array made from ``variable``'s values (a chain's joined rows of a
        per-channel operand, ``elementwise_chains.Chain.buffers``), kept under ``key`` while the
        variable is unwritten."""
        if variable in self.volatile:
            return make()
        kept = self._by_var.setdefault(variable, {})
        if key not in kept:
            kept[key] = make()
        return kept[key]

    def last(self, variable: int, key: object, make: Callable[[], np.ndarray]) -> np.ndarray:
        """``make()``, an array made from ``variable``'s values (a convolution's input in NCHWc blocks),
        kept under ``key`` until the variable is written, whether or not the program writes it: the
        next read alike takes it (a ResNet stage's first two convolutions read one input). One a
        variable."""
        got = self._last.get(variable)
        if got is None or got[0] != key:
            got = self._last[variable] = (key, make())
        return got[1]

    def written(self, variables: Iterable[int]) -> None:
        for v in variables:
            self._last.pop(v, None)
            self._by_var.pop(v, None)
            self._copy_bytes.pop(v, None)
            self._packed_bytes.pop(v, None)

    def clear(self) -> None:
        self._last.clear()
        self._by_var.clear()
        self._copy_bytes.clear()
        self._packed_bytes.clear()


def run_batch(b: BatchPlan, state: list[np.ndarray], cache: ReadCache | None = None) -> None:
    """Gather the batch's fields, run its codelet, scatter what it writes; fields read in another
    type than stored, or copied into another order, come through ``cache`` when given."""
    pieces = b.pieces
    if pieces:  # a concatenation's parts, each through strided views (BatchPlan.pieces), one after
        # the other (each part's own splits on the run's threads; the parts themselves taken in turn
        # by the threads made DenseNet-121's run 20 % slower: their Python contends for the GIL)
        for piece in pieces:
            run_batch(piece, state, cache)
        return
    rows = b.aligned_rows
    if (
        not rows
        and b.codelet.rows_field is not None
        and (_run_as_blocked_conv(b, state, cache, None) or _run_in_row_parts(b, state, cache))
    ):
        return
    if rows:
        n = math.prod(next(iter(b.fields.values())).shape)
        # one pass over each element: a chunk per thread (no cache to stay within; n // threads
        # makes as many), of at least PASS_PART_ELEMENTS; other batches (several numpy passes) in
        # chunks that stay in cache, or a part per thread where they are under two chunks
        chunk = (
            max(PASS_PART_ELEMENTS, n // parallel.threads())
            if b.on_halves
            else parallel.chunk_for(n, parallel.CHUNK_ELEMENTS)
        )
        parallel.in_row_chunks(lambda part: _run_rows(b, state, part, cache), rows, n, chunk)
    else:
        _run_rows(b, state, None, cache)


def _run_rows(b: BatchPlan, state: list[np.ndarray], rows: slice | None, cache: ReadCache | None) -> None:
    if rows is not None and b.on_halves and half_maps.run_rows(b, state, rows):
        return
    codelet, reads = b.codelet, b.reads
    skip = () if codelet.reads_outputs else codelet.outputs
    wf = codelet.window_field
    window = b.fields[wf].window if rows is None and wf is not None else None
    windowed = window is not None
    values = {}
    product_operands = _product_operands(codelet)
    for f, acc in b.fields.items():
        if f in skip:
            values[f] = np.empty(acc.shape if rows is None else acc.rows_shape(rows), reads[f])
        elif window is not None and f == wf:
            values[f] = windows(window, state, reads[f])
        elif rows is None:
            values[f] = _read(acc, state, reads[f], cache, f in product_operands)
        else:
            values[f] = acc.gather(state, reads[f], rows)
    out = codelet.run_windows(values, b.params) if windowed else codelet.run_batch(values, b.params)
    for f in codelet.writes:
        b.fields[f].scatter(state, out[f], rows)


def run_product_in_parts(
    b: BatchPlan,
    state: list[np.ndarray],
    cache: ReadCache | None,
    rows_done: Callable[[int, int], None],
    groups_done: Callable[[int, int], None],
) -> bool:
    """Run a product batch (a codelet with a ``rows_field``) split over the run's threads as
    ``run_batch`` would: in parts of rows (``_run_in_row_parts``), calling ``rows_done(first, end)``
    on each part's thread once its rows ``first`` to ``end`` of the result are written; or, a
    product of few rows, in parts of its channel groups (``_run_in_column_parts``), calling
    ``groups_done(first, end)`` alike. (The next step's chain over them while they are in cache:
    ``Engine._act_product_chain``.) False (nothing done) where the batch is not split so."""
    if b.pieces or b.aligned_rows or b.codelet.rows_field is None:
        return False
    return (
        _run_as_blocked_conv(b, state, cache, groups_done)
        or _run_in_row_parts(b, state, cache, rows_done)
        or _run_in_column_parts(b, state, cache, groups_done)
    )


def _run_as_blocked_conv(
    b: BatchPlan, state: list[np.ndarray], cache: ReadCache | None, groups_done: Callable[[int, int], None] | None
) -> bool:
    """A convolution at batch 1 whose input's and result's channels come in whole blocks of MLAS's
    NCHWc kernel (``profiler.host.nchwc``), its float32 weights kept by ``cache``: convolved by that
    kernel on the input as held (converted to float, or regrouped, first where it is not), its
    output channels split over the run's threads by whole channel groups, each part writing its
    groups of the result and calling ``groups_done`` (a result held row-major: by blocks, the
    chain after). False (nothing done) where this does not apply."""
    c = b.codelet
    rf = c.rows_field
    operands = _product_operands(c)
    if cache is None or rf is None or not _plain_product(b):
        return False
    fields, reads = b.fields, b.reads
    w = fields[rf].window
    f32 = np.dtype(np.float32)
    if w is None or reads[rf] != f32 or reads[operands[0]] != f32:
        return False
    v = fields[operands[0]].variable
    if v is None or v in cache.volatile:
        return False  # weights the program writes (training) are not kept: a session a run would be made
    block = nchwc.block()
    out = fields[c.outputs[0]]
    held = grouped_result(out) if block else None
    if held is None:
        return False
    m, groups, g = held
    n = groups * g
    if n % block or (block % g and g % block) or m != w.out[0] * w.out[1]:
        return False
    if w.pad_var >= 0 and w.pad is not None and state[w.pad_var][w.pad.offset] != 0:
        return False  # MLAS pads with zeros
    x = blocked_input(w, state, block)
    if x is None:
        return False
    _, cin, h, wd = w.x.shape
    kh, kw = w.kernel
    (sh, sw), (ph, pw), (dh, dw) = w.stride, w.padding, w.dilation
    if w.out != ((h + 2 * ph - dh * (kh - 1) - 1) // sh + 1, (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1):
        return False  # not the output MLAS works out from the geometry
    weights = _read(fields[operands[0]], state, f32, cache, True).reshape(cin * kh * kw, n)
    # the channel blocks a part takes: whole groups, or blocks of a result held row-major
    unit = block if groups == 1 else max(g, block)
    units = n // unit
    parts = max(1, min(units, parallel.threads()))
    spans = [(unit * (units * i // parts), unit * (units * (i + 1) // parts)) for i in range(parts)]
    columns, geometry = (cin, kh, kw, w.channel_group), (w.stride, w.padding, w.dilation)
    made = [nchwc.conv_of(weights, lo, hi, columns, geometry) for lo, hi in spans]
    convs = [cv for cv in made if cv is not None]
    if len(convs) != len(spans):
        return False
    layout = (cin // block, h, wd, block) if cin >= block else (cin, h, wd)  # NCHWc, or NCHW (nchwc.NchwcConv)
    if x.flags.c_contiguous and x.dtype == f32:
        xb = x.reshape(layout)
    else:  # converted from half, or regrouped: kept until the input is written (a stage's two convolutions)
        key = (x.ctypes.data, x.shape, x.strides, x.dtype)
        xb = cache.last(w.x_var, key, lambda: _float_blocks(w, x, state, layout, block))
    ho, wo = w.out
    assert out.strided is not None, "grouped_result holds a strided result"
    flat = state[out.strided[0]]  # the result's variable: [groups, m, g] from its start
    result = out.view(state, writeable=True)[0].reshape(m, groups, g)
    # each part's groups are contiguous planes of the result where g is the block: written there
    direct = g == block and flat.dtype == f32 and flat.ndim == 1 and flat.flags.c_contiguous

    def part(sl: slice) -> None:
        for (lo, hi), conv in zip(spans[sl], convs[sl], strict=True):
            kb = (hi - lo) // block
            if direct:  # the result's planes of these groups, sliced out of its variable: a view
                conv.run(xb, flat[lo * m : hi * m].reshape(kb, ho, wo, block))
            else:
                y = scratch.buffer("blocked output", (kb, m, block), f32)
                conv.run(xb, y.reshape(kb, ho, wo, block))
                _store_blocks(result, flat, y, lo, hi)
            if groups_done is not None and groups > 1:
                groups_done(lo // g, hi // g)

    parallel.in_row_chunks(part, parts, parts, 1)
    return True


def _run_in_column_parts(
    b: BatchPlan, state: list[np.ndarray], cache: ReadCache | None, groups_done: Callable[[int, int], None]
) -> bool:
    """A product of few rows (``blas.split_columns``) whose result is held row-major ``[m, n]`` or
    in channel groups ``[n/g, m, g]``: its columns split over the run's threads by whole groups,
    each part multiplying, writing its groups of the result (its own planes) and calling
    ``groups_done``. The bits are ``blas.matmul``'s (its column split computes each element alike).
    False (nothing done) where this does not apply."""
    c = b.codelet
    rf = c.rows_field
    operands = _product_operands(c)
    if rf is None or not _plain_product(b):
        return False
    if parallel.threads() < 2 or not blas.held_to_one_thread():
        return False
    out = b.fields[c.outputs[0]]
    shape = grouped_result(out)
    if shape is None:
        return False
    m, groups, g = shape
    n = groups * g
    fields, reads = b.fields, b.reads
    k = fields[rf].shape[-1]
    acc_type = reads[rf]  # the product's accumulation type (MatMulPartial.read_dtypes)
    if m * k * n < blas.SPLIT_MACS or not blas.split_columns(m, n) or groups < 2 or acc_type.kind != "f":
        return False
    if math.prod(fields[rf].shape) != m * k or reads[operands[0]] != acc_type:
        return False
    a = _read(fields[rf], state, acc_type, cache, False).reshape(m, k)
    w = _read(fields[operands[0]], state, acc_type, cache, True).reshape(k, n)
    result = out.view(state, writeable=True)[0].reshape(m, groups, g)

    def part(sl: slice) -> None:
        lo, hi, _ = sl.indices(groups)
        block = scratch.buffer("product", (m, (hi - lo) * g), acc_type)  # this part's columns, in a run
        packed.multiply(a, w[:, lo * g : hi * g], block)
        store(result[:, lo:hi], block.reshape(m, hi - lo, g))
        groups_done(lo, hi)

    parallel.in_row_chunks(part, groups, groups, max(1, groups // parallel.threads()))
    return True


def _float_blocks(w: Window, x: np.ndarray, state: list[np.ndarray], layout: tuple[int, ...], block: int) -> np.ndarray:
    """A convolution's input ``x`` (``access.blocked_input``'s view) as a new float32 array in MLAS's
    ``layout``: regrouped and converted by one compiled pass per part where the input is held in
    channel groups, else copied as numpy would; a part per thread down to PART_ELEMENTS (copy_into's
    chunks made three parts of ResNet-50's 56x56 inputs on two threads)."""
    xb = np.empty(layout, np.float32)
    dst = xb.reshape(x.shape)
    cuts = max(1, min(parallel.threads(), x.size // parallel.PART_ELEMENTS))
    grouped = grouped_input(w) if len(layout) == 4 else None
    if grouped is None:
        parallel.in_row_chunks(lambda sl: store(dst[sl], x[sl]), len(x), len(x), max(1, len(x) // cuts))
        return xb
    offset, gi = grouped
    src, whole = state[w.x_var][offset : offset + x.size], max(gi, block)
    cin, h, wd = layout[0] * block, layout[1], layout[2]

    def span(sl: slice) -> None:  # channels sl of cin, in units of ``whole``
        first, end = sl.start * whole, sl.stop * whole
        if not _regrouped(src, xb.reshape(-1), h * wd, gi, block, first, end, 0):
            unit = cin // len(x)  # a NaN: this span as numpy converts it (x's first dim: channels)
            store(dst[first // unit : end // unit], x[first // unit : end // unit])

    parallel.in_row_chunks(span, cin // whole, cin // whole, max(1, cin // whole // cuts))
    return xb


def _store_blocks(result: np.ndarray, flat: np.ndarray, y: np.ndarray, lo: int, hi: int) -> None:
    """Output channels ``lo`` to ``hi`` of a convolution, ``y`` (float32 NCHWc blocks ``[(hi-lo)/B,
    m, B]``), into its result ``[m, groups, g]`` (``flat``: its variable) in the result's type."""
    m, groups, g = result.shape
    kb, block = y.shape[0], y.shape[2]
    if _regrouped(y.reshape(-1), flat, m, block, g, lo, hi, lo):
        return
    # a NaN, or a type the compiled pass does not take: as numpy converts it
    if g <= block:  # a block is block // g groups
        dst, src = result[:, lo // g : hi // g].reshape(m, kb, block // g, g), y.transpose(1, 0, 2)
        store(dst, src.reshape(m, kb, block // g, g))
    elif groups == 1:  # a span of a row-major result's columns
        store(result[:, 0, lo:hi].reshape(m, kb, block), y.transpose(1, 0, 2))
    else:  # a group is g // block blocks
        ng = (hi - lo) // g
        dst = result[:, lo // g : hi // g].reshape(m, ng, g // block, block)
        store(dst, y.reshape(ng, g // block, m, block).transpose(2, 0, 1, 3))


def _regrouped(src: np.ndarray, dst: np.ndarray, m: int, gi: int, go: int, first: int, end: int, shift: int) -> bool:
    """Channels ``first`` to ``end`` of ``dst`` (flat ``[C/go, m, go]``) from channels ``first -
    shift`` on of ``src`` (flat ``[C'/gi, m, gi]``), converted to dst's type, in one compiled pass
    (``half_kernels.regroup``); False where it does not apply or a value is NaN (the caller then
    stores them as numpy converts them)."""
    bits = {np.dtype(np.float16): np.uint16, np.dtype(np.float32): np.float32}
    if src.dtype not in bits or dst.dtype not in bits:
        return False
    w = min(gi, go)  # the kernel walks runs of w channels and does not check its bounds
    if first % w or (end - first) % w or (first - shift) % w or first < shift or end <= first:
        return False
    last = end - 1 - shift
    if (last // gi + 1) * m * gi > src.size or (end - 1) // go * m * go + (m - 1) * go + (end - 1) % go >= dst.size:
        return False
    return not kernels().regroup(src.view(bits[src.dtype]), dst.view(bits[dst.dtype]), m, gi, go, first, end, shift)


def grouped_result(out: Access) -> tuple[int, int, int] | None:
    """(m, n/g, g) of a product's result held row-major ``[1, m, n]`` (g = n) or channel-grouped
    ``[n/g, m, g]`` in its variable from its start, else None."""
    if out.strided is None or out.window is not None:
        return None
    _, offset, strides, one_to_one = out.strided
    size, fs = out.dtype.itemsize, out.flat_shape
    if offset != 0 or not one_to_one:
        return None
    if len(fs) == 3 and fs[0] == 1 and tuple(strides[1:]) == (fs[2] * size, size):
        return fs[1], 1, fs[2]
    if len(fs) == 4 and fs[0] == 1 and tuple(strides[1:]) == (fs[3] * size, fs[1] * fs[3] * size, size):
        return fs[1], fs[2], fs[3]
    return None


def _run_in_row_parts(
    b: BatchPlan, state: list[np.ndarray], cache: ReadCache | None, after: Callable[[int, int], None] | None = None
) -> bool:
    """Run a batch whose outputs' rows follow its ``rows_field`` (a convolution's im2col product) in
    parts of rows, one per run thread: each part copies its rows of the columns (converted), takes
    their product and writes it into the result on its own thread, while the part is in its cache,
    where the whole batch would hand each of the three passes to the threads in turn (or, below a
    chunk, run them on one). The bits are the whole batch's: each row is computed alike whatever rows
    it is computed with (``blas.matmul``). False (nothing done) where this does not apply: one
    thread, BLAS not held to one, a product too small to split or of few rows (split by columns
    instead, ``blas.split_columns``), a field read another way than a
    one-group window of columns and a ``[1, m, n]`` result held with its rows as one dim."""
    c = b.codelet
    rf = c.rows_field
    assert rf is not None, "run_batch tries row parts for a codelet with a rows_field"
    fields, reads = b.fields, b.reads
    acc = fields[rf]
    w = acc.window
    if w is None or w.groups != 1 or parallel.threads() < 2 or not blas.held_to_one_thread():
        return False
    if len(c.outputs) != 1 or c.inouts or c.reads_outputs:
        return False
    out = fields[c.outputs[0]]
    st = out.strided
    if st is None or not st[3] or len(out.shape) != 3 or out.shape[0] != 1 or out.flat_shape[0] != 1:
        return False
    m, n = out.shape[1:]
    k = acc.shape[2]
    if out.flat_shape[1] != m or m * k * n < blas.SPLIT_MACS or blas.split_columns(m, n):
        return False  # too small to split, or few rows: whole, its product split by columns (blas.matmul)
    others: dict[str, np.ndarray] = {}
    product_operands = _product_operands(c)
    for f, a in fields.items():
        if f not in (rf, c.outputs[0]):
            others[f] = _read(a, state, reads[f], cache, f in product_operands)
    win, row_dims = column_windows(w, state, reads[rf])
    win = win[0]
    lead = next((d for d in range(row_dims) if win.shape[d] > 1), None)
    if lead is None:
        return False
    per = math.prod(win.shape[lead + 1 : row_dims])  # columns' rows per index of ``lead``
    result = out.view(state, writeable=True)[0]  # [m, ..]
    placeholder = np.broadcast_to(np.empty((), reads[c.outputs[0]]), (1, 1, 1))

    def part(sl: slice) -> None:
        lo, hi, _ = sl.indices(win.shape[lead])
        src = win[(slice(None),) * lead + (sl,)]
        cols = scratch.buffer("columns", src.shape, reads[rf])
        store(cols, src)
        rows = (hi - lo) * per
        values = {rf: cols.reshape(1, rows, k), **others, c.outputs[0]: np.broadcast_to(placeholder, (1, rows, n))}
        got = c.run_batch(values, b.params)[c.outputs[0]]
        dst = result[lo * per : hi * per]
        store(dst, np.asarray(got).reshape(dst.shape))
        if after is not None:
            after(lo * per, hi * per)

    size = win.shape[lead]
    # a part per thread (a chunk of size // threads makes as many: 7 rows over 2 threads are 3 + 4)
    parallel.in_row_chunks(part, size, size, max(1, size // parallel.threads()))
    return True


def _read(acc: Access, state: list[np.ndarray], dtype: np.dtype, cache: ReadCache | None, operand: bool) -> np.ndarray:
    """A whole field's values in ``dtype``: through ``cache`` where they are converted, copied into
    another order or a product's operand (laid out row-major, ``_product_operands``), else gathered."""
    if cache is not None and (acc.dtype != dtype or acc.copies or operand):
        return cache.read(acc, state, dtype, contiguous=operand)
    return acc.gather(state, dtype)


def _plain_product(b: BatchPlan) -> bool:
    """Whether ``b`` is a product of one operand besides its rows into one result of its own shape
    (as ``MatMulPartial.run_batch`` computes one without a scale or an output grouping)."""
    c = b.codelet
    if len(_product_operands(c)) != 1 or len(c.outputs) != 1 or c.inouts or c.reads_outputs:
        return False
    return not (b.params and (b.params.get("log2_scale") or b.params.get("out_group")))


def _product_operands(c: Codelet) -> tuple[str, ...]:
    """The inputs of a product codelet (one with a ``rows_field``: a matmul's ``b``) other than its
    rows: read through the cache laid out row-major. OpenBLAS's sgemm multiplies a few-row lhs by a
    row-major rhs faster than by a transposed view of one (a 1x1 conv's weights [Cout, C] read as
    [C, Cout]): ResNet-50's 7x7 layers (49 rows; k 512-4608, n 512-2048) 75-77 GFLOP/s a thread
    transposed against 94-100 row-major, its 14x14 3x3 layers (196, 2304, 256) 127 against 137, the
    larger products 1-3 % (bench: one thread, thread CPU time, random operands of those shapes)."""
    if c.rows_field is None:
        return ()
    return tuple(f for f in c.inputs if f != c.rows_field)
