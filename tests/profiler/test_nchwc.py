"""profiler.host.nchwc: convolutions through onnxruntime's NCHWc kernel on inputs held in channel
blocks (``batch_run._run_as_blocked_conv``). Checked against a float64 numpy convolution written
here; the bits do not depend on how a convolution's output channels are split over threads."""

import numpy as np
import pytest

from profiler import Engine, Graph, Sequence, ipu_model, ops
from profiler.engine import batch_run
from profiler.host import nchwc, parallel
from tests.ops.helpers import rng, run
from tests.ops.test_conv import ref_conv

pytestmark = pytest.mark.skipif(nchwc.block() == 0, reason="no onnxruntime NCHWc kernel on this machine")

# (stride, padding, dilation, kernel)
GEOMETRIES = [(1, 0, 1, 1), (1, 1, 1, 3), (2, 1, 1, 3), (1, 2, 2, 3), (2, 0, 1, 1)]


def _blocked(x: np.ndarray, b: int) -> np.ndarray:
    c, h, w = x.shape
    return np.ascontiguousarray(x.reshape(c // b, b, h, w).transpose(0, 2, 3, 1))


@pytest.mark.parametrize("geometry", GEOMETRIES)
@pytest.mark.parametrize("blocks_in", [2, 0])  # 0: three channels in, read as NCHW (a network's first layer)
def test_the_kernel_is_a_convolution_whatever_span_of_output_channels_a_session_takes(geometry, blocks_in) -> None:
    s, p, d, k = geometry
    b = nchwc.block()
    c, o, h = blocks_in * b or 3, 4 * b, 9
    r = rng(3)
    x = r.standard_normal((c, h, h)).astype(np.float32)
    w = (r.standard_normal((o, c, k, k)) * 0.2).astype(np.float32)
    want = ref_conv(x[None].astype(np.float64), w.astype(np.float64), s, p, d, 1)[0]
    ho = want.shape[1]
    xb = _blocked(x, b) if blocks_in else x
    whole = np.empty((o // b, ho, ho, b), np.float32)
    nchwc.NchwcConv(w, (s, s), (p, p), (d, d), b).run(xb, whole)
    got = whole.transpose(0, 3, 1, 2).reshape(o, ho, ho)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    split = np.empty_like(whole)  # a block, then the other three: each session its own weights
    nchwc.NchwcConv(w[:b], (s, s), (p, p), (d, d), b).run(xb, split[:1])
    nchwc.NchwcConv(w[b:], (s, s), (p, p), (d, d), b).run(xb, split[1:])
    assert np.array_equal(split.view(np.uint32), whole.view(np.uint32))


def _run(inputs, monkeypatch, threads: int, blocked: bool = True):
    """A strided 3x3 convolution whose result (channel-grouped, as PopLibs holds it: 16 channels a
    group) a 1x1 reads, whose result (8 a group) a 3x3 reads; their weights laid out for them (poplin::createWeights: not rearranged by the program, so kept): the
    output of a second run (the first makes the sessions) and the blocked convolutions' count."""
    calls: list[int] = []
    with monkeypatch.context() as m:
        m.setattr(parallel, "threads", lambda: threads)
        if not blocked:
            m.setattr(nchwc, "_block", 0)
        run_conv = nchwc.NchwcConv.run
        m.setattr(nchwc.NchwcConv, "run", lambda self, x, out: calls.append(1) or run_conv(self, x, out))
        g = Graph(ipu_model(tiles_per_ipu=4, bytes_per_tile=1 << 22))
        prog = Sequence()
        dtype = inputs["x"].dtype
        x = ops.add_mapped(g, dtype, inputs["x"].shape, "x")
        w1 = ops.create_conv_weights(g, dtype, x.shape, inputs["w1"].shape, "w1", stride=2, padding=1)
        y = ops.relu(g, ops.conv2d(g, x, w1, prog, stride=2, padding=1), prog)
        grp = ops.conv.channel_group(y)
        w2 = ops.create_conv_weights(g, dtype, y.shape, inputs["w2"].shape, "w2", channel_group=grp)
        z = ops.conv2d(g, y, w2, prog)
        w3 = ops.create_conv_weights(
            g, dtype, z.shape, inputs["w3"].shape, "w3", padding=1, channel_group=ops.conv.channel_group(z)
        )
        out = ops.conv2d(g, z, w3, prog, padding=1)
        for name, t in (("x", x), ("w1", w1), ("w2", w2), ("w3", w3)):
            g.create_host_write(name, t)
        g.create_host_read("out", out)
        engine = Engine(g, [prog])
        engine.load()
        for name, value in inputs.items():
            engine.write_tensor(name, value)
        engine.run(0)
        calls.clear()
        engine.run(0)
        return engine.read_tensor("out"), len(calls)


def _inputs(dtype, cin: int = 32) -> dict[str, np.ndarray]:
    r = rng(5)
    return {
        "x": r.standard_normal((1, cin, 30, 30)).astype(dtype),
        "w1": (r.standard_normal((64, cin, 3, 3)) * 0.1).astype(dtype),
        "w2": (r.standard_normal((48, 64, 1, 1)) * 0.1).astype(dtype),
        "w3": (r.standard_normal((32, 48, 3, 3)) * 0.1).astype(dtype),
    }


@pytest.mark.parametrize("cin", [32, 3])  # 3: the first convolution reads an image's channels as NCHW
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_a_convolution_held_in_channel_blocks_runs_blocked_with_the_bits_of_any_split(dtype, cin, monkeypatch) -> None:
    inputs = _inputs(dtype, cin)
    one, calls = _run(inputs, monkeypatch, threads=1)
    assert calls == 3  # each convolution: the first from an input held [C, H, W], the others grouped
    for threads in (2, 3):
        got, _ = _run(inputs, monkeypatch, threads)
        assert np.array_equal(got.view(np.uint8), one.view(np.uint8))
    f = np.float64
    y = np.maximum(ref_conv(inputs["x"].astype(f), inputs["w1"].astype(f), 2, 1, 1, 1), 0)
    if dtype == np.float16:
        y = y.astype(np.float16).astype(f)  # the first result is stored in half
    z = ref_conv(y, inputs["w2"].astype(f), 1, 0, 1, 1)
    if dtype == np.float16:
        z = z.astype(np.float16).astype(f)
    want = ref_conv(z, inputs["w3"].astype(f), 1, 1, 1, 1)
    tol = 2e-2 if dtype == np.float16 else 1e-4
    np.testing.assert_allclose(one.astype(f), want, rtol=tol, atol=tol)


def test_without_the_kernel_a_convolution_is_its_columns_product(monkeypatch) -> None:
    inputs = _inputs(np.float32)
    blocked, _ = _run(inputs, monkeypatch, threads=2)
    columns, calls = _run(inputs, monkeypatch, threads=2, blocked=False)
    assert calls == 0
    np.testing.assert_allclose(columns, blocked, rtol=1e-5, atol=1e-5)  # another order of the sums


def test_the_blocked_path_declines_what_it_cannot_run(monkeypatch) -> None:
    # channels neither in whole blocks nor fewer than one (20 in): the columns' product, no session made
    r = rng(2)
    inputs = {
        "x": r.standard_normal((1, 20, 12, 12)).astype(np.float32),
        "w": r.standard_normal((16, 20, 3, 3)).astype(np.float32),
    }
    made: list[int] = []
    conv_of = nchwc.conv_of
    monkeypatch.setattr(nchwc, "conv_of", lambda *a: made.append(1) or conv_of(*a))
    out, _, _ = run(inputs, lambda g, t, prog: {"y": ops.conv2d(g, t["x"], t["w"], prog, padding=1)}, tiles=4)
    assert not made
    np.testing.assert_allclose(out["y"], ref_conv(inputs["x"], inputs["w"], 1, 1, 1, 1), rtol=1e-4, atol=1e-4)


def test_two_convolutions_of_one_input_convert_it_once_a_run_and_again_once_it_is_written(monkeypatch) -> None:
    # a ResNet stage's first block: its downsample and its first convolution read one half input
    monkeypatch.setattr(parallel, "threads", lambda: 2)
    r = rng(8)
    shapes = {"x": (1, 32, 12, 12), "wa": (32, 32, 3, 3), "wb": (16, 32, 1, 1)}
    values = {k: (r.standard_normal(s) * (1 if k == "x" else 0.1)).astype(np.float16) for k, s in shapes.items()}
    g = Graph(ipu_model(tiles_per_ipu=4, bytes_per_tile=1 << 22))
    prog = Sequence()
    x = ops.add_mapped(g, np.float16, shapes["x"], "x")
    wa = ops.create_conv_weights(g, np.float16, shapes["x"], shapes["wa"], "wa", padding=1)
    wb = ops.create_conv_weights(g, np.float16, shapes["x"], shapes["wb"], "wb")
    g.create_host_read("a", ops.conv2d(g, x, wa, prog, padding=1))
    g.create_host_read("b", ops.conv2d(g, x, wb, prog))
    for name, t in (("x", x), ("wa", wa), ("wb", wb)):
        g.create_host_write(name, t)
    engine = Engine(g, [prog])
    engine.load()
    for name, value in values.items():
        engine.write_tensor(name, value)
    made: list[int] = []
    last = batch_run.ReadCache.last
    monkeypatch.setattr(
        batch_run.ReadCache, "last", lambda self, v, key, make: last(self, v, key, lambda: made.append(1) or make())
    )
    f = np.float64
    for scale in (1, -3):  # the second run's input written anew: converted again, not the first's
        engine.write_tensor("x", values["x"] * scale)
        made.clear()
        engine.run(0)
        assert len(made) == 1
        xs = (values["x"] * scale).astype(f)
        for name, w, p in (("a", "wa", 1), ("b", "wb", 0)):
            want = ref_conv(xs, values[w].astype(f), 1, p, 1, 1)
            np.testing.assert_allclose(engine.read_tensor(name).astype(f), want, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize(("gi", "go"), [(8, 16), (16, 8), (16, 16), (16, 64), (64, 16)])
@pytest.mark.parametrize("kind", ["copy", "to_half", "to_float"])
def test_a_regroup_of_channels_is_numpys_reshape_and_astype(gi, go, kind) -> None:
    from profiler.executable.convert import kernels

    m, c = 21, 128
    src_type, dst_type = {"copy": (np.float32, np.float32), "to_half": (np.float32, np.float16)}.get(
        kind, (np.float16, np.float32)
    )
    r = rng(4)
    x = (r.standard_normal((c // gi, m, gi)) * 1e3).astype(src_type)
    x.reshape(-1)[:4] = [np.inf, -np.inf, 0.0, -0.0]
    logical = x.transpose(1, 0, 2).reshape(m, c)  # [m, C]
    out = np.full((c // go, m, go), 7, dst_type)
    first, end = 32, 96  # a span of channels, read from the start of a source holding them alone
    src = np.ascontiguousarray(logical[:, first:end].reshape(m, (end - first) // gi, gi).transpose(1, 0, 2))
    bits = {np.float16: np.uint16, np.float32: np.float32}
    loop = kernels().regroup
    nan = loop(src.reshape(-1).view(bits[src_type]), out.reshape(-1).view(bits[dst_type]), m, gi, go, first, end, first)
    assert not nan
    want = np.full((m, c), 7, dst_type)
    want[:, first:end] = logical[:, first:end].astype(dst_type)
    got = out.transpose(1, 0, 2).reshape(m, c)
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8))
    src.reshape(-1)[5] = np.nan
    assert loop(
        src.reshape(-1).view(bits[src_type]), out.reshape(-1).view(bits[dst_type]), m, gi, go, first, end, first
    ) == (kind != "copy")


def test_a_nan_in_a_blocked_convolutions_input_gives_the_columns_products_nans(monkeypatch) -> None:
    inputs = _inputs(np.float16)
    inputs["x"].reshape(-1)[100] = np.nan
    blocked, calls = _run(inputs, monkeypatch, threads=2)
    columns, _ = _run(inputs, monkeypatch, threads=2, blocked=False)
    assert calls and np.isnan(blocked).any()
    assert np.array_equal(np.isnan(blocked), np.isnan(columns))
    ok = ~np.isnan(blocked)
    np.testing.assert_allclose(blocked[ok].astype(np.float64), columns[ok].astype(np.float64), rtol=2e-2, atol=2e-2)


def test_a_regroup_the_kernel_cannot_walk_in_whole_runs_or_within_the_buffers_is_declined() -> None:
    # the compiled loop checks no bounds: a span not in runs of min(gi, go) channels, or reaching past
    # either buffer, is left to numpy (False) rather than walked
    src, dst = np.ones(32 * 4, np.float32), np.zeros(32 * 4, np.float16)  # 32 channels, 4 rows
    assert not batch_run._regrouped(src, dst, 4, 16, 16, 8, 24, 8)  # half a run of 16 in
    assert not batch_run._regrouped(src, dst, 4, 16, 8, 0, 20, 0)  # ends within a run of 8
    assert not batch_run._regrouped(src, dst, 4, 16, 16, 0, 48, 0)  # 48 channels of a 32-channel buffer
    assert batch_run._regrouped(src, dst, 4, 16, 8, 0, 32, 0) and (dst == 1).all()
