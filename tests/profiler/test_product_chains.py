"""A convolution's product and the chain of elementwise steps over its result (its batch norm and
relu) run as a pair (profiler.engine.step_chains.ProductThenChain): each part of the product, once
its rows (or, a product of few rows, its channel groups) are written, runs the chain over them on
its own thread. The bits are those of the product and the chain run one after the other."""

import numpy as np
import pytest

from profiler import ops
from profiler.engine import engine as engine_module
from profiler.engine import step_chains
from profiler.host import parallel
from tests.ops.helpers import rng, run
from tests.ops.test_conv import ref_conv


def _conv_batch_norm_relu(g, t, prog):
    y = ops.conv2d(g, t["x"], t["w"], prog, padding=(t["w"].shape[2] - 1) // 2)
    scaled = ops.binary(g, "mul", y, t["s"], prog)
    shifted = ops.binary(g, "add", scaled, t["b"], prog)
    return {"out": ops.relu(g, shifted, prog)}


def _inputs(dtype, x_shape, w_shape, nan=False):
    r = rng(11)
    c = w_shape[0]
    x = r.standard_normal(x_shape).astype(dtype)
    if nan:
        x.reshape(-1)[7] = np.nan
    return {
        "x": x,
        "w": (r.standard_normal(w_shape) * 0.2).astype(dtype),
        "s": r.standard_normal((1, c, 1, 1)).astype(dtype),
        "b": r.standard_normal((1, c, 1, 1)).astype(dtype),
    }


def _run_twice(inputs, paired: bool, monkeypatch):
    """The outputs of a second run (spares and value pool as a repeated run finds them), the pairs
    made and the chains that ran on their own."""
    with monkeypatch.context() as m:
        if not paired:
            m.setattr(engine_module, "pair_products", lambda items: list(items))
        alone: list[int] = []
        run_chain = engine_module.run_chain
        m.setattr(engine_module, "run_chain", lambda item, buffers: alone.append(1) or run_chain(item, buffers))
        # a first run on other values: a result the second run's pass misses keeps the first's
        _, _, engine = run(inputs | {"x": inputs["x"] * 2}, _conv_batch_norm_relu, tiles=4, bytes_per_tile=1 << 22)
        engine.write_tensor("x", inputs["x"])
        alone.clear()
        engine.run(0)
        out = engine.read_tensor("out")
        pairs = [i for items in engine._chains.values() for i in items if isinstance(i, step_chains.ProductThenChain)]
        return out, pairs, len(alone)


# (x, w): a 3x3 convolution of 900 result rows (its product in parts of rows, 450 or 300 each: not
# whole rows of the chain's walk, which joins a channel group's rows in fours or more) and a 1x1
# one of 196 rows and 256 channels (its product in parts of channel groups)
CASES = {
    "rows": ((1, 16, 30, 30), (64, 16, 3, 3)),
    "groups": ((1, 64, 14, 14), (256, 64, 1, 1)),
}


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_a_product_and_the_chain_over_its_result_give_the_bits_of_each_on_its_own(dtype, case, threads, monkeypatch):
    # the parts' rows end within rows of the chain's walk: those straddling two parts run after
    monkeypatch.setattr(parallel, "threads", lambda: threads)
    inputs = _inputs(dtype, *CASES[case])
    paired, pairs, alone = _run_twice(inputs, True, monkeypatch)
    assert len(pairs) == 1 and alone == 0  # the chain ran within the product's parts
    plain, no_pairs, alone = _run_twice(inputs, False, monkeypatch)
    assert not no_pairs and alone == 1
    assert np.array_equal(paired.view(np.uint8), plain.view(np.uint8))
    # and against numpy: the convolution (float64), then the batch norm and relu in the stored type
    f = np.float64
    y = ref_conv(inputs["x"].astype(f), inputs["w"].astype(f), 1, (inputs["w"].shape[2] - 1) // 2, 1, 1)
    want = np.maximum(y * inputs["s"].astype(f) + inputs["b"].astype(f), 0)
    tol = 5e-2 if dtype == np.float16 else 1e-4
    np.testing.assert_allclose(paired.astype(f), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_nan_in_a_pairs_chain_runs_its_steps_one_by_one(case, monkeypatch):
    monkeypatch.setattr(parallel, "threads", lambda: 2)
    inputs = _inputs(np.float16, *CASES[case], nan=True)
    paired, pairs, _ = _run_twice(inputs, True, monkeypatch)
    plain, _, _ = _run_twice(inputs, False, monkeypatch)
    assert len(pairs) == 1
    assert np.isnan(paired).any()
    assert np.array_equal(paired.view(np.uint8), plain.view(np.uint8))
