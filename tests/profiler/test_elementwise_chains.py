"""Consecutive elementwise steps on half or float32 run as one chain
(profiler.executable.elementwise_chains, profiler.engine.step_chains): numpy's bits, op by op (on
half rounded to half), whether the steps run as a chain or one by one; results read after the
chain kept, NaNs left to the general path."""

import numpy as np
import pytest

from profiler import Engine, Graph, Sequence, ipu_model, ops
from profiler.engine import engine as engine_module
from profiler.engine.step_chains import ChainedSteps
from tests.profiler.test_half_maps import _values


def _run(shapes, build, values, reads=("out",), chained=True, monkeypatch=None, dtype="half"):
    if not chained:
        monkeypatch.setattr(engine_module.Engine, "_chained", lambda self, block: list(block.acting))
    g = Graph(ipu_model(tiles_per_ipu=4, bytes_per_tile=1 << 20))
    prog = Sequence()
    ins = [ops.add_mapped(g, dtype, s, f"in{i}", grain=8) for i, s in enumerate(shapes)]
    for i, t in enumerate(ins):
        g.create_host_write(f"in{i}", t)
    outs = build(g, ins, prog)
    for name in reads:
        g.create_host_read(name, outs[name])
    e = Engine(g, [prog])
    e.load()
    for i, v in enumerate(values):
        e.write_tensor(f"in{i}", v)
    e.run(0)
    e.run(0)  # a second run: the spare arrays and value pool as a repeated run finds them
    chains = [c for items in e._chains.values() for c in items if isinstance(c, ChainedSteps)]
    return {name: e.read_tensor(name) for name in reads}, chains


def _half(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to half and back: one step's result as the next step reads it."""
    return x.astype(np.float16).astype(np.float32)


def _batch_norm_relu(g, ins, prog):
    scaled = ops.binary(g, "mul", ins[0], ins[1], prog)
    shifted = ops.binary(g, "add", scaled, ins[2], prog)
    return {"out": ops.relu(g, shifted, prog), "shifted": shifted}


BN_SHAPES = [(6, 40, 16), (16,), (16,)]


@pytest.mark.parametrize("special", [False, True], ids=["finite", "special"])
def test_a_batch_norm_and_relu_chain_gives_numpys_bits(special: bool, monkeypatch) -> None:
    from profiler.host import parallel

    monkeypatch.setattr(parallel, "threads", lambda: 3)  # rows split unevenly over three chunks
    values = [_values(s, i, special and i == 0) for i, s in enumerate(BN_SHAPES)]
    got, chains = _run(BN_SHAPES, _batch_norm_relu, values)
    x, s, b = (v.astype(np.float32) for v in values)
    with np.errstate(all="ignore"):
        want = np.maximum(_half(_half(x * s) + b).astype(np.float16), np.float16(0))
    # numpy's half maximum keeps a NaN's bits and -0 (the engine's relu is its): compare bits
    assert np.array_equal(got["out"].view(np.uint16), want.view(np.uint16))
    assert [len(c.nodes) for c in chains] == [3]  # the three steps ran as one chain (NaNs: then one by one)
    assert chains[0].stored == (False, False, True)  # only the relu's result is read after the chain


def test_a_result_read_after_the_chain_is_kept(monkeypatch) -> None:
    values = [_values(s, i, False) for i, s in enumerate(BN_SHAPES)]
    got, chains = _run(BN_SHAPES, _batch_norm_relu, values, reads=("out", "shifted"))
    x, s, b = (v.astype(np.float32) for v in values)
    shifted = _half(_half(x * s) + b)
    assert np.array_equal(got["shifted"], shifted.astype(np.float16))
    assert np.array_equal(got["out"], np.maximum(shifted.astype(np.float16), np.float16(0)))
    assert [c.stored for c in chains] == [(False, True, True)]


def _residual(g, ins, prog):
    # the chain's value as the right operand (c - v), a same-shape operand, a per-row one
    a = ops.binary(g, "mul", ins[0], ins[1], prog)
    b = ops.binary(g, "sub", ins[2], a, prog)
    c = ops.binary(g, "div", b, ins[3], prog)
    return {"out": ops.relu(g, c, prog)}


@pytest.mark.parametrize("special", [False, True], ids=["finite", "special"])
def test_a_chain_gives_the_bits_of_its_steps_one_by_one(special: bool, monkeypatch) -> None:
    shapes = [(5, 24, 32), (32,), (5, 24, 32), (5, 24, 1)]
    values = [_values(s, 10 + i, special) for i, s in enumerate(shapes)]
    chained, chains = _run(shapes, _residual, values)
    one_by_one, none = _run(shapes, _residual, values, chained=False, monkeypatch=monkeypatch)
    assert np.array_equal(chained["out"].view(np.uint16), one_by_one["out"].view(np.uint16))
    assert [len(c.nodes) for c in chains] == [4] and not none
    x, s, c, d = (v.astype(np.float32) for v in values)
    with np.errstate(all="ignore"):
        want = np.maximum(_half(_half(c - _half(x * s)) / d).astype(np.float16), np.float16(0))
    # a NaN's payload follows the engine's rule for its operands (test_half_maps); the rest bit for bit
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(chained["out"]), nan)
    assert np.array_equal(chained["out"][~nan].view(np.uint16), want[~nan].view(np.uint16))


def test_a_step_reading_an_earlier_result_twice_ends_the_chain() -> None:
    shapes = [(4, 16, 16), (16,)]
    values = [_values(s, 20 + i, False) for i, s in enumerate(shapes)]

    def square(g, ins, prog):
        a = ops.binary(g, "mul", ins[0], ins[1], prog)
        return {"out": ops.binary(g, "mul", a, a, prog)}

    got, chains = _run(shapes, square, values)
    a = _half(values[0].astype(np.float32) * values[1].astype(np.float32))
    assert np.array_equal(got["out"], (a * a).astype(np.float16))
    assert not chains


@pytest.mark.parametrize("special", [False, True], ids=["finite", "special"])
def test_a_cast_from_float_then_an_in_place_relu_chain_with_the_half_steps(special: bool, monkeypatch) -> None:
    # a 1x1 convolution's float partials cast to half, its batch norm, its relu in place (ResNet-50)
    shapes = [(6, 40, 16), (16,), (16,)]
    values = [_values(s, 30 + i, special and i == 0) for i, s in enumerate(shapes)]

    def build(g, ins, prog):
        partials = ops.cast(g, ins[0], "float", prog)  # float32 values a step reads as half again
        halved = ops.cast(g, ops.binary(g, "mul", partials, partials, prog), "half", prog)
        shifted = ops.binary(g, "add", ops.binary(g, "mul", halved, ins[1], prog), ins[2], prog)
        ops.unary_in_place(g, "relu", shifted, prog)
        return {"out": shifted}

    chained, chains = _run(shapes, build, values)
    one_by_one, _ = _run(shapes, build, values, chained=False, monkeypatch=monkeypatch)
    assert np.array_equal(chained["out"].view(np.uint16), one_by_one["out"].view(np.uint16))
    assert [len(c.nodes) for c in chains] == [4]  # cast, mul, add, relu in place
    assert chains[0].stored == (False, False, False, True)  # the add's result is overwritten by the relu
    x, s, b = (v.astype(np.float32) for v in values)
    with np.errstate(all="ignore"):
        want = np.maximum(_half(_half(_half(x * x) * s) + b).astype(np.float16), np.float16(0))
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(chained["out"]), nan)
    assert np.array_equal(chained["out"][~nan].view(np.uint16), want[~nan].view(np.uint16))


@pytest.mark.parametrize("special", [False, True], ids=["finite", "special"])
def test_a_float_chain_gives_the_bits_of_its_steps_one_by_one(special: bool, monkeypatch) -> None:
    shapes = [(5, 24, 32), (32,), (5, 24, 32), (5, 24, 1)]
    values = [_values(s, 50 + i, special).astype(np.float32) for i, s in enumerate(shapes)]

    def build(g, ins, prog):
        outs = _residual(g, ins, prog)
        ops.unary_in_place(g, "relu", outs["out"], prog)  # a relu in place on float too
        return outs

    chained, chains = _run(shapes, build, values, dtype="float")
    one_by_one, none = _run(shapes, build, values, chained=False, monkeypatch=monkeypatch, dtype="float")
    assert np.array_equal(chained["out"].view(np.uint32), one_by_one["out"].view(np.uint32))
    assert [len(c.nodes) for c in chains] == [5] and chains[0].chain.dtype == np.float32 and not none
    x, s, c, d = values
    with np.errstate(all="ignore"):
        want = np.maximum(np.maximum((c - x * s) / d, 0), 0)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(chained["out"]), nan)
    assert np.array_equal(chained["out"][~nan], want[~nan])
