"""Elementwise half ops run as one compiled pass (profiler.executable.half_maps): the same bits as numpy's
float arithmetic rounded to half, NaNs, infinities, overflow and subnormals included, in every
layout the pass takes and in those it leaves to the general path."""

import numpy as np
import pytest

from profiler import Engine, Graph, Sequence, ipu_model, ops
from profiler.ops.elementwise import _relu

# halves that test the rounding and the special cases: NaNs (quiet, signalling, both signs, with
# payloads), infinities, the largest finite (whose sums overflow), subnormals, both zeros
SPECIAL = np.array([0x7E00, 0xFE00, 0x7C01, 0xFD55, 0x7C00, 0xFC00, 0x7BFF, 0xFBFF, 0x0001, 0x83FF, 0x0000, 0x8000],
                   np.uint16).view(np.float16)  # fmt: skip
NUMPY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}


def _values(shape: tuple[int, ...], seed: int, special: bool) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = (rng.standard_normal(shape) * 4).astype(np.float16)
    if special:
        flat = v.reshape(-1)
        at = rng.choice(flat.size, min(flat.size, SPECIAL.size * 3), replace=False)
        flat[at] = np.resize(SPECIAL, at.size)
    return v


def _run(shapes: list[tuple[int, ...]], build, values: list[np.ndarray], dtype: str = "half"):
    g = Graph(ipu_model(tiles_per_ipu=4, bytes_per_tile=1 << 20))
    prog = Sequence()
    ins = [ops.add_mapped(g, dtype, s, f"in{i}", grain=8) for i, s in enumerate(shapes)]
    for i, t in enumerate(ins):
        g.create_host_write(f"in{i}", t)
    g.create_host_read("out", build(g, ins, prog))
    e = Engine(g, [prog])
    e.load()
    for i, v in enumerate(values):
        e.write_tensor(f"in{i}", v)
    e.run(0)
    batches = [b for p in e.compiled.cs_plans.values() for b in (p.kernel or p.batches)]  # type: ignore[union-attr]
    return e.read_tensor("out"), batches


# (operand shapes, whether the compiled pass takes them)
LAYOUTS = {
    "same-shape": ([(6, 40, 16), (6, 40, 16)], True),
    "per-channel, short rows joined": ([(6, 40, 16), (16,)], True),  # a 16-element row repeated
    "per-channel, odd rows joined": ([(3, 49, 8), (8,)], True),  # 147 rows of 8: joined 21 at a time
    "per-row": ([(6, 40, 16), (6, 40, 1)], True),  # the second operand one element per row
    "per-row first": ([(6, 40, 1), (6, 40, 16)], False),  # the first operand's last dim broadcast: general path
    "transposed": ([(16, 40, 6), (6, 40, 16)], False),  # not walked contiguously alike: general path
}


@pytest.mark.parametrize("special", [False, True], ids=["finite", "special"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("name", list(NUMPY))
def test_binary_half_ops_give_numpys_bits(name: str, layout: str, special: bool, monkeypatch) -> None:
    from profiler.host import parallel

    monkeypatch.setattr(parallel, "threads", lambda: 3)  # rows split unevenly over three chunks
    shapes, compiled = LAYOUTS[layout]
    values = [_values(s, i, special) for i, s in enumerate(shapes)]
    transposed = layout == "transposed"

    def build(g, ins, prog):
        a = ins[0].transpose(2, 1, 0) if transposed else ins[0]
        return ops.binary(g, name, a, ins[1], prog)

    got, batches = _run(shapes, build, values)
    a = values[0].transpose(2, 1, 0) if transposed else values[0]
    with np.errstate(all="ignore"):
        want = NUMPY[name](a.astype(np.float32), values[1].astype(np.float32)).astype(np.float16)
    assert np.array_equal(got.view(np.uint16), want.view(np.uint16))
    assert any(b.on_halves for b in batches) == compiled


@pytest.mark.parametrize("special", [False, True], ids=["finite", "special"])
def test_half_relu_gives_numpys_bits(special: bool) -> None:
    v = _values((7, 33, 24), 9, special)
    got, batches = _run([v.shape], lambda g, ins, prog: ops.relu(g, ins[0], prog), [v])
    assert np.array_equal(got.view(np.uint16), _relu(v).view(np.uint16))
    assert np.array_equal(got.view(np.uint16), np.maximum(v, np.float16(0)).view(np.uint16))
    assert any(b.on_halves for b in batches)


# floats that test the special cases: NaNs (quiet, signalling, both signs, with payloads),
# infinities, the largest finite (whose sums overflow), subnormals (whose products underflow), both zeros
SPECIAL_FLOAT = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFA5A5A5, 0x7F800000, 0xFF800000, 0x7F7FFFFF,
                          0xFF7FFFFF, 0x00000001, 0x807FFFFF, 0x00000000, 0x80000000], np.uint32).view(np.float32)  # fmt: skip


def _float_values(shape: tuple[int, ...], seed: int, special: bool) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = (rng.standard_normal(shape) * 4).astype(np.float32)
    if special:
        flat = v.reshape(-1)
        at = rng.choice(flat.size, min(flat.size, SPECIAL_FLOAT.size * 3), replace=False)
        flat[at] = np.resize(SPECIAL_FLOAT, at.size)
    return v


@pytest.mark.parametrize("special", [False, True], ids=["finite", "special"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("name", list(NUMPY))
def test_binary_float_ops_give_numpys_bits(name: str, layout: str, special: bool, monkeypatch) -> None:
    from profiler.host import parallel

    monkeypatch.setattr(parallel, "threads", lambda: 3)  # rows split unevenly over three chunks
    shapes, compiled = LAYOUTS[layout]
    values = [_float_values(s, i, special) for i, s in enumerate(shapes)]
    transposed = layout == "transposed"

    def build(g, ins, prog):
        a = ins[0].transpose(2, 1, 0) if transposed else ins[0]
        return ops.binary(g, name, a, ins[1], prog)

    got, batches = _run(shapes, build, values, "float")
    a = values[0].transpose(2, 1, 0) if transposed else values[0]
    with np.errstate(all="ignore"):
        want = NUMPY[name](a, values[1])
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    assert any(b.on_halves for b in batches) == compiled


@pytest.mark.parametrize("special", [False, True], ids=["finite", "special"])
def test_float_relu_gives_numpys_bits(special: bool) -> None:
    v = _float_values((7, 33, 24), 9, special)
    got, batches = _run([v.shape], lambda g, ins, prog: ops.relu(g, ins[0], prog), [v], "float")
    assert np.array_equal(got.view(np.uint32), np.maximum(v, np.float32(0)).view(np.uint32))
    assert any(b.on_halves for b in batches)


def test_in_place_ops_keep_the_general_path() -> None:
    v = _values((6, 40, 16), 1, False)
    f = v.astype(np.float32)

    def in_place(g, ins, prog):
        ops.binary_in_place(g, "mul", ins[0], ins[1], prog)
        return ins[0]

    got, batches = _run([v.shape, v.shape], in_place, [v, v])
    assert np.array_equal(got, (f * f).astype(np.float16)) and not any(b.on_halves for b in batches)
    got, batches = _run([v.shape, v.shape], in_place, [f, f], "float")
    assert np.array_equal(got, f * f) and not any(b.on_halves for b in batches)


def test_short_rows_are_joined_by_the_fewest_that_divide_the_walk_and_make_a_long_row() -> None:
    from profiler.executable.half_maps import _LONG_ROW, join_rows

    # a 7x7 image's 49 rows of a channel group of 8 (one plane a walk row), a per-channel operand repeated
    shape, geo, repeated = join_rows((4, 49, 8), [(0, 392, 8), (0, 8, 0), (0, 392, 8)])
    assert shape == (4, 1, 392) and geo == [(0, 392, 392), (0, 392, 0), (0, 392, 392)]
    assert repeated == ((1, 0, 8, 4, 8, 49),)
    # 196 rows of 8: 28 of them (224 elements), where doubling stopped at 4 (196 = 4 x 49)
    assert join_rows((2, 196, 8), [(0, 1568, 8)])[0] == (2, 7, 224)
    assert join_rows((1, 64, 16), [(0, 0, 16)])[0] == (1, 8, _LONG_ROW)  # powers of two as before
    assert join_rows((1, 5, 200), [(0, 0, 200)])[0] == (1, 5, 200)  # long rows as they are


@pytest.mark.parametrize("special", [False, True], ids=["finite", "special"])
def test_operands_held_in_different_channel_groupings_run_as_a_pass_per_group(special: bool, monkeypatch) -> None:
    # a residual add of a [C/16, HW, 16] and a [C/8, HW, 8] tensor (ResNet-50's first 28x28 block):
    # a 4-d walk, a 3-d pass per index of its first dim
    from profiler.host import parallel

    monkeypatch.setattr(parallel, "threads", lambda: 2)
    shapes = [(4, 5, 16), (4, 2, 5, 8)]
    values = [_values(s, 40 + i, special) for i, s in enumerate(shapes)]

    def build(g, ins, prog):
        grouped16 = ins[0].reshape(4, 5, 2, 8).transpose(0, 2, 1, 3)  # as [4, 2, 5, 8]
        return ops.binary(g, "add", grouped16, ins[1], prog)

    got, batches = _run(shapes, build, values)
    a = values[0].reshape(4, 5, 2, 8).transpose(0, 2, 1, 3).astype(np.float32)
    with np.errstate(all="ignore"):
        want = (a + values[1].astype(np.float32)).astype(np.float16)
    assert any(b.on_halves for b in batches)
    assert np.array_equal(got.view(np.uint16), want.view(np.uint16))
