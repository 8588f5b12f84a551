"""The engine's reads and writes of tensor values (profiler.executable.access) and the conversions they make,
checked against plain numpy on the same views."""

import numpy as np
import pytest

from profiler import Graph, ipu_model
from profiler.executable.access import Access, align_positionwise
from profiler.executable.convert import converted, copy_into
from profiler.ops.elementwise import _relu
from tests.split_parts import record_parts

HALVES = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)  # every half bit pattern


def test_half_to_float_is_bit_exact_for_every_half() -> None:
    got = converted(HALVES, np.float32)
    assert np.array_equal(got.view(np.uint32), HALVES.astype(np.float32).view(np.uint32))


@pytest.mark.parametrize(
    "view",
    [
        lambda a: a,
        lambda a: a.transpose(2, 0, 1),
        lambda a: a[:, ::2, 1:],
        lambda a: np.broadcast_to(a[:, :1, :], (3, 40, 50)),
        lambda a: a[1],
    ],
    ids=["whole", "transpose", "slice", "broadcast", "row"],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_conversion_keeps_the_memory_order_and_the_values(view, dtype) -> None:
    a = np.random.default_rng(0).standard_normal((3, 40, 50)).astype(np.float16)
    v = view(a)
    got = converted(v, dtype)
    assert got.dtype == dtype and got.shape == v.shape
    assert np.array_equal(got, v.astype(dtype))
    order = lambda x: [d for d in np.argsort([-abs(s) for s in x.strides], kind="stable") if x.shape[d] > 1]  # noqa: E731
    assert order(got) == order(v)  # dims walked in the order the source lies in memory
    assert [s == 0 for s in got.strides] == [s == 0 for s in v.strides]  # a broadcast dim stays one


def test_half_relu_on_the_bits_matches_numpy_maximum_for_every_half() -> None:
    want = np.maximum(HALVES, 0)
    assert np.array_equal(_relu(HALVES).view(np.uint16), want.view(np.uint16))  # NaNs and -0 kept alike


def _grouped_fields() -> tuple[Graph, dict[str, Access], dict[str, np.ndarray]]:
    """A conv result held channel-grouped ([C/4][B*H*W][4], read as [B, C, H, W]) times a per-channel
    parameter, into a plain [B, C, H, W] result - the fields of a batch-norm multiply."""
    g = Graph(ipu_model(tiles_per_ipu=2))
    b, c, h, w, nb = 2, 8, 3, 5, 4
    store = g.add_variable("half", [c // nb, b * h * w, nb], "store")
    x = store.reshape([c // nb, b, h, w, nb]).transpose(1, 0, 4, 2, 3).group_dims(1, 2, 1, 1)
    scale = g.add_variable("half", [c], "scale")
    out = g.add_variable("half", [b, c, h, w], "out")
    fields = {
        "in1": Access(x),
        "in2": Access(scale.reshape([1, c, 1, 1]).broadcast_to((b, c, h, w))),
        "out": Access(out),
    }
    rng = np.random.default_rng(1)
    state = [rng.standard_normal(v.numel).astype(np.float16) for v in g.variables]
    logical = {
        "in1": state[0].reshape(c // nb, b, h, w, nb).transpose(1, 0, 4, 2, 3).reshape(b, c, h, w),
        "in2": np.broadcast_to(state[1].reshape(1, c, 1, 1), (b, c, h, w)),
    }
    return g, fields, {"state": state, **logical}  # type: ignore[dict-item]


@pytest.mark.parametrize("lead", ["out", "in1"])
def test_positionwise_fields_walked_in_the_written_fields_order_give_the_same_result(lead: str) -> None:
    _, fields, data = _grouped_fields()
    state = data["state"]
    if lead == "in1":  # written in place into the grouped store
        fields = {"in1": fields["in1"], "in2": fields["in2"]}
    assert align_positionwise(fields, (lead,))
    shapes = {a.shape for a in fields.values()}
    assert len(shapes) == 1  # one common order
    vals = {f: a.gather(state, np.dtype(np.float32)) for f, a in fields.items() if f != "out" or lead == "in1"}
    fields[lead].scatter(state, vals["in1"] * vals["in2"])
    want = (data["in1"].astype(np.float32) * data["in2"].astype(np.float32)).astype(np.float16)
    # read the written variable back through an access of its logical view, not aligned
    _, plain, _ = _grouped_fields()
    got = plain[lead].gather(state)
    assert np.array_equal(got, want)
    if lead == "in1":  # the grouped store itself is walked contiguously: one merged dim per run of it
        assert fields["in1"].strided[2][-1] == 2  # type: ignore[index]  # innermost: consecutive halves


def test_fields_of_different_shapes_or_index_gathered_are_left_alone() -> None:
    g = Graph(ipu_model(tiles_per_ipu=2))
    v = g.add_variable("float", [4, 6], "v")
    a, b = Access(v), Access(v.transpose())
    assert not align_positionwise({"in": a, "out": b}, ("out",))
    assert a.shape == (4, 6) and b.shape == (6, 4)
    picked = Access(v[np.array([2, 0, 1])])  # an explicit index view: gathered, not strided
    assert not align_positionwise({"in": picked, "out": Access(v[:3])}, ("out",))


def test_work_split_in_chunks_on_threads_covers_every_row_once_even_when_nested(monkeypatch) -> None:
    from profiler.host import parallel

    monkeypatch.setattr(parallel, "threads", lambda: 2)
    hits = np.zeros(1000, dtype=int)

    def outer(rows: slice) -> None:  # each chunk splits its own rows again: run inline, no deadlock
        parallel.in_row_chunks(lambda r: np.add.at(hits, np.arange(1000)[rows][r], 1), rows.stop - rows.start, 10**6, 1)

    parallel.in_row_chunks(outer, 1000, 4000, 1000)  # four chunks of 250 rows, on two workers
    assert (hits == 1).all()
    src = np.random.default_rng(2).standard_normal((1, 300, 700)).astype(np.float32)
    dst = np.zeros((700, 300), np.float16).T[None]  # a transposed destination of another type
    monkeypatch.setattr(parallel, "COPY_CHUNK_ELEMENTS", 1000)
    copy_into(dst, src)
    assert np.array_equal(dst, src.astype(np.float16))


def test_an_operation_under_two_chunks_is_split_a_part_per_thread_down_to_part_elements(monkeypatch) -> None:
    from profiler.host import parallel

    monkeypatch.setattr(parallel, "threads", lambda: 2)
    chunk = 1 << 18
    assert parallel.chunk_for(200_000, chunk) == 1 << 17  # 200,000 // 131,072: one part, on this thread
    assert parallel.chunk_for(400_000, chunk) == 200_000  # two parts (was one chunk of 400,000)
    assert parallel.chunk_for(10**6, chunk) == chunk  # several chunks: as before
    parts = record_parts(monkeypatch)
    src = np.random.default_rng(3).standard_normal((1, 400, 1000)).astype(np.float32)  # 400,000 elements
    dst = np.zeros((1000, 400), np.float16).T[None]
    copy_into(dst, src)
    assert sorted((p.start, p.stop) for p in parts) == [(0, 200), (200, 400)]
    assert np.array_equal(dst, src.astype(np.float16))


def test_float_to_half_is_bit_exact_with_numpy_across_the_float_range() -> None:
    # every half (as float: exact), random bit patterns (NaNs, infs, subnormals, overflows of both
    # signs), ties between halves, and a sweep of 1.3 M floats spread over all 2^32 patterns
    halves = HALVES.astype(np.float32)
    rng = np.random.default_rng(3)
    patterns = rng.integers(0, 1 << 32, 1 << 20, dtype=np.uint64).astype(np.uint32).view(np.float32)
    lo, hi = HALVES[:-1][np.isfinite(HALVES[:-1])].astype(np.float64), HALVES[1:][np.isfinite(HALVES[:-1])]
    ties = ((lo + hi.astype(np.float64)) / 2).astype(np.float32)
    sweep = np.arange(0, 1 << 32, 3271, dtype=np.uint64).astype(np.uint32).view(np.float32)
    for x in (halves, patterns, ties, sweep, sweep[: sweep.size // 7 * 7].reshape(-1, 7)[:, ::2]):
        out = np.empty(x.shape, np.float16)
        with np.errstate(all="ignore"):
            want = x.astype(np.float16)
        copy_into(out, x)
        assert np.array_equal(out.view(np.uint16), want.view(np.uint16))


@pytest.mark.parametrize(
    "dst_view",
    [
        lambda a: a,
        lambda a: a.transpose(4, 2, 0, 3, 1),  # more dims than the compiled loops take, none merged
        lambda a: a[::-1, :, ::-1],  # reversed dims
        lambda a: a[:, :, 1:, :, ::2],  # gaps between rows
    ],
    ids=["whole", "transposed-5d", "reversed", "gaps"],
)
@pytest.mark.parametrize("to", [np.float16, np.float32])
def test_copies_between_half_and_float_of_any_layout_are_bit_exact(dst_view, to) -> None:
    """Every layout's dims are merged or walked until three are left for the compiled loop; NaNs
    (quiet and signalling, both signs) come out as numpy writes them."""
    rng = np.random.default_rng(5)
    other = np.float32 if to == np.float16 else np.float16
    bits = rng.integers(0, 1 << (8 * np.dtype(other).itemsize), (4, 3, 5, 6, 4), dtype=np.uint64)
    src = bits.astype(np.uint32 if other == np.float32 else np.uint16).view(other)
    dst_whole = np.zeros((4, 3, 5, 6, 4), to)
    dst = dst_view(dst_whole)
    s = dst_view(src)
    copy_into(dst, s)
    with np.errstate(all="ignore"):
        want = s.astype(to)
    uint = np.uint16 if to == np.float16 else np.uint32
    assert np.isnan(want).any()
    assert np.array_equal(dst.view(uint), want.view(uint))


@pytest.mark.parametrize("chunk", [1 << 30, 64])
def test_a_grouped_store_is_gathered_in_its_views_order(chunk, monkeypatch) -> None:
    """A matmul result's store [N/16, M, 16] seen as [M, N] (a factored view): gathering it copies the
    values into the view's order, in chunks of rows on the run's threads when they are many (here
    whenever the chunk is small), the same values as numpy's transpose and reshape."""
    from profiler.host import parallel

    monkeypatch.setattr(parallel, "COPY_CHUNK_ELEMENTS", chunk)
    g = Graph(ipu_model(tiles_per_ipu=4))
    store = g.add_variable(np.float32, (3, 40, 16), "store")
    g.set_tile_mapping(store, np.zeros(store.numel(), dtype=np.int64))
    view = store.transpose(1, 0, 2).group_dims(1, 2)
    values = np.arange(store.numel(), dtype=np.float32).reshape(3, 40, 16)
    state = [values.reshape(-1).copy()]
    got = Access(view).gather(state)
    np.testing.assert_array_equal(got, values.transpose(1, 0, 2).reshape(40, 48))
    assert not np.shares_memory(got, state[0])


@pytest.mark.parametrize("group", [3, 4, 8, 16])
def test_grouped_layout_conversions_are_astypes_bits(group: int) -> None:
    # a channel-grouped [C/g, HW, g] store read as [HW, C/g, g] (rows of g: a fixed-length row
    # loop for 4, 8 and 16) and back, over every half pattern (NaNs, infs, subnormals included)
    m = (1 << 16) // (4 * group)
    halves = HALVES[: 4 * m * group].reshape(4, m, group)
    got = np.empty((m, 4, group), np.float32)
    copy_into(got, halves.transpose(1, 0, 2))
    assert np.array_equal(got.view(np.uint32), halves.transpose(1, 0, 2).astype(np.float32).view(np.uint32))
    patterns = np.random.default_rng(group).integers(0, 1 << 32, got.size, dtype=np.uint64).astype(np.uint32)
    floats = patterns.view(np.float32).reshape(got.shape)
    back = np.empty((4, m, group), np.float16)
    copy_into(back.transpose(1, 0, 2), floats)
    assert np.array_equal(back.view(np.uint16), floats.astype(np.float16).transpose(1, 0, 2).view(np.uint16))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_strided_copies_of_short_rows_move_every_bit(dtype) -> None:
    # a [C/g, HW, g] store copied into [HW, C/g, g] rows (the compiled copy, g <= 64) and a long-row
    # one (numpy's copy), NaN payloads included: the same bits as numpy's assignment
    bits = np.dtype(f"u{np.dtype(dtype).itemsize}")
    raw = np.random.default_rng(4).integers(0, np.iinfo(bits).max, (6, 50, 16), dtype=np.uint64).astype(bits)
    src = raw.view(dtype)
    for g in (3, 8, 16, 100):
        s = np.ascontiguousarray(np.resize(src, (6, 50, g)))
        got = np.zeros((50, 6, g), dtype)
        copy_into(got, s.transpose(1, 0, 2))
        assert np.array_equal(got.view(bits), s.transpose(1, 0, 2).view(bits))


def test_walks_are_worked_out_once_per_geometry_and_give_the_same_copy(monkeypatch) -> None:
    """convert._walk keeps each geometry's order and merged shape: a second copy of the same
    geometry takes the kept walk and copies the same elements; the kept walks are bounded."""
    from profiler.executable import convert

    monkeypatch.setattr(convert, "_WALKS", {})
    monkeypatch.setattr(convert, "_WALKS_KEPT", 2)
    src = np.arange(4 * 6 * 8, dtype=np.float32).reshape(4, 6, 8).transpose(1, 0, 2)  # [6, 4, 8], strided
    dst = np.empty((4, 6, 8), np.float32).transpose(1, 0, 2)
    convert.store(dst, src)
    assert len(convert._WALKS) == 1
    assert next(iter(convert._WALKS.values())) == ((1, 0, 2), (1, 1, 192))  # walked in dst's order: one row
    again = np.empty((4, 6, 8), np.float32).transpose(1, 0, 2)
    convert.store(again, src)
    assert len(convert._WALKS) == 1 and np.array_equal(again, src) and np.array_equal(dst, src)
    for shape in ((3, 5, 2), (5, 3, 2)):  # two more geometries: the third clears the kept walks first
        a = np.ones(shape, np.float16).transpose(1, 0, 2)
        b = np.empty(shape, np.float32).transpose(1, 0, 2)
        convert.store(b, a)
        assert np.array_equal(b, a.astype(np.float32))
    assert len(convert._WALKS) <= 2
