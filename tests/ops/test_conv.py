import json

import numpy as np
import pytest

from profiler import ops
from tests.ops.helpers import fd_grad, rng, run


def ref_conv(x, w, s, p, d, groups):
    """Direct convolution: a loop over kernel positions on the zero-padded input."""
    b, c, h, wd = x.shape
    co, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
    ho, wo = (h + 2 * p - d * (kh - 1) - 1) // s + 1, (wd + 2 * p - d * (kw - 1) - 1) // s + 1
    y = np.zeros((b, co, ho, wo))
    cog = co // groups
    for gi in range(groups):
        for i in range(kh):
            for j in range(kw):
                patch = xp[
                    :,
                    gi * cg : (gi + 1) * cg,
                    i * d : i * d + s * (ho - 1) + 1 : s,
                    j * d : j * d + s * (wo - 1) + 1 : s,
                ]
                y[:, gi * cog : (gi + 1) * cog] += np.einsum(
                    "bchw,oc->bohw", patch, w[gi * cog : (gi + 1) * cog, :, i, j]
                )
    return y


def ref_pool(x, k, s, p, mode, d=1):
    b, c, h, w = x.shape
    lowest = np.iinfo(x.dtype).min if x.dtype.kind in "iu" else -np.inf
    fill = lowest if mode == "max" else 0.0
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=fill)
    ho, wo = (h + 2 * p - d * (k - 1) - 1) // s + 1, (w + 2 * p - d * (k - 1) - 1) // s + 1
    win = np.stack(
        [
            xp[:, :, i * d : i * d + s * (ho - 1) + 1 : s, j * d : j * d + s * (wo - 1) + 1 : s]
            for i in range(k)
            for j in range(k)
        ]
    )
    return win.max(0) if mode == "max" else win.mean(0)


CASES = [
    # B, C, H, W, Cout, k, stride, pad, dilation, groups
    (2, 3, 7, 6, 4, 3, 1, 1, 1, 1),
    (1, 4, 9, 9, 4, 3, 2, 1, 2, 4),  # depthwise, strided, dilated
    (2, 6, 5, 5, 4, 2, 1, 0, 1, 2),  # grouped
    (1, 1, 4, 4, 1, 1, 1, 0, 1, 1),  # 1x1, single channel
    (1, 2, 5, 3, 3, 3, 3, 0, 1, 1),  # stride larger than the kernel leaves input unread
    (2, 4, 7, 6, 6, 1, 2, 0, 1, 2),  # strided 1x1, grouped: dx is zeros and a 1x1 convolution of dy
    (1, 2, 5, 5, 2, 1, 1, 1, 1, 1),  # padding beyond the kernel: no backward convolution (columns)
]


@pytest.mark.parametrize("case", CASES)
def test_conv_forward_and_gradients(case):
    b, c, h, w, co, k, s, p, d, groups = case
    r = rng(30)
    x = r.standard_normal((b, c, h, w)).astype(np.float32)
    wt = r.standard_normal((co, c // groups, k, k)).astype(np.float32)
    y_ref = ref_conv(x.astype(np.float64), wt.astype(np.float64), s, p, d, groups)
    dy = r.standard_normal(y_ref.shape).astype(np.float32)

    def build(g, t, prog):
        kw = dict(stride=s, padding=p, dilation=d, groups=groups)
        y = ops.conv2d(g, t["x"], t["w"], prog, debug_name="conv", **kw)
        dx, dw = ops.conv2d_grad(g, t["x"], t["w"], t["dy"], prog, **kw)
        return {"y": y, "dx": dx, "dw": dw}

    out, g, _ = run({"x": x, "w": wt, "dy": dy}, build, tiles=5)
    np.testing.assert_allclose(out["y"], y_ref, rtol=1e-5, atol=1e-5)
    fx = fd_grad(lambda v: ref_conv(v, wt.astype(np.float64), s, p, d, groups), x, dy)
    fw = fd_grad(lambda v: ref_conv(x.astype(np.float64), v, s, p, d, groups), wt, dy)
    np.testing.assert_allclose(out["dx"], fx, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out["dw"], fw, rtol=1e-4, atol=1e-4)
    attrs = json.loads(next(c for c in g.debug_contexts if c.name == "conv").attributes)
    assert attrs["conv"]["groups"] == groups and attrs["conv"]["stride"] == [s, s]


def test_conv_half():
    r = rng(31)
    x = r.standard_normal((2, 16, 6, 6)).astype(np.float16)
    wt = (r.standard_normal((16, 16, 3, 3)) * 0.2).astype(np.float16)
    out, _, _ = run({"x": x, "w": wt}, lambda g, t, p: {"y": ops.conv2d(g, t["x"], t["w"], p, padding=1)}, tiles=8)
    ref = ref_conv(x.astype(np.float64), wt.astype(np.float64), 1, 1, 1, 1)
    np.testing.assert_allclose(out["y"], ref, rtol=2e-2, atol=3e-2)


@pytest.mark.parametrize("k,s,p", [(2, 2, 0), (3, 2, 1), (2, 1, 1), (3, 3, 0)])
def test_pooling_forward_and_gradients(k, s, p):
    r = rng(32)
    x = r.standard_normal((2, 3, 7, 6)).astype(np.float32)
    ym, ya = ref_pool(x.astype(np.float64), k, s, p, "max"), ref_pool(x.astype(np.float64), k, s, p, "avg")
    dy = r.standard_normal(ym.shape).astype(np.float32)

    def build(g, t, prog):
        mp = ops.max_pool2d(g, t["x"], k, prog, stride=s, padding=p)
        ap = ops.avg_pool2d(g, t["x"], k, prog, stride=s, padding=p)
        return {
            "mp": mp,
            "ap": ap,
            "dmp": ops.max_pool2d_grad(g, t["x"], mp, t["dy"], k, prog, stride=s, padding=p),
            "dap": ops.avg_pool2d_grad(g, t["x"], t["dy"], k, prog, stride=s, padding=p),
        }

    out, _, _ = run({"x": x, "dy": dy}, build, tiles=4)
    np.testing.assert_allclose(out["mp"], ym, rtol=1e-6)
    np.testing.assert_allclose(out["ap"], ya, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["dmp"], fd_grad(lambda v: ref_pool(v, k, s, p, "max"), x, dy), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out["dap"], fd_grad(lambda v: ref_pool(v, k, s, p, "avg"), x, dy), rtol=1e-4, atol=1e-5)


def test_dilated_pooling():
    x = rng(36).standard_normal((1, 3, 9, 8)).astype(np.float32)

    def build(g, t, prog):
        kw = dict(stride=2, padding=1, dilation=2)
        return {"mp": ops.max_pool2d(g, t["x"], 3, prog, **kw), "ap": ops.avg_pool2d(g, t["x"], 3, prog, **kw)}

    out, _, _ = run({"x": x}, build)
    np.testing.assert_allclose(out["mp"], ref_pool(x.astype(np.float64), 3, 2, 1, "max", d=2), rtol=1e-6)
    np.testing.assert_allclose(out["ap"], ref_pool(x.astype(np.float64), 3, 2, 1, "avg", d=2), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.uint8])
def test_integer_max_pooling_is_exact(dtype):
    # extreme values: padding (the type's lowest) must never win, and results keep their type
    info = np.iinfo(dtype)
    x = rng(35).integers(info.min, info.max, (1, 2, 5, 5), dtype=dtype, endpoint=True)
    x[0, 0, 0, 0] = info.min
    out, _, _ = run({"x": x}, lambda g, t, prog: {"y": ops.max_pool2d(g, t["x"], 3, prog, stride=2, padding=1)})
    assert out["y"].dtype == dtype
    np.testing.assert_array_equal(out["y"], ref_pool(x, 3, 2, 1, "max"))


def test_conv_context_holds_the_plan_and_the_call_site():
    x = rng(33).standard_normal((1, 4, 5, 5)).astype(np.float32)
    wt = rng(34).standard_normal((4, 4, 3, 3)).astype(np.float32)
    _, g, _ = run({"x": x, "w": wt}, lambda g, t, p: {"y": ops.conv2d(g, t["x"], t["w"], p, debug_name="c1")})
    ctx = next(c for c in g.debug_contexts if c.name == "c1")
    assert ctx.file == __file__  # where the op was called (the run helper's build lambda is in this file)
    assert json.loads(ctx.attributes)["plan"]["method"] in ("AMP", "HMAC")


@pytest.mark.parametrize("k,s,p,d", [(3, 2, 1, 1), (2, 2, 0, 1), (3, 1, 1, 2)])
def test_pooling_of_channels_innermost_input(k, s, p, d):
    # a convolution's result is stored channels innermost (NHWC): pooling reads its windows through
    # the im2col view, one vertex per tile and worker share, whatever the batch
    r = rng(37)
    x_nhwc = r.standard_normal((3, 9, 8, 5)).astype(np.float32)
    x = x_nhwc.transpose(0, 3, 1, 2)

    def build(g, t, prog):
        xv = t["x"].transpose(0, 3, 1, 2)
        return {"mp": ops.max_pool2d(g, xv, k, prog, stride=s, padding=p, dilation=d),
                "ap": ops.avg_pool2d(g, xv, k, prog, stride=s, padding=p, dilation=d)}  # fmt: skip

    out, g, _ = run({"x": x_nhwc}, build, tiles=4)
    np.testing.assert_allclose(out["mp"], ref_pool(x.astype(np.float64), k, s, p, "max", d=d), rtol=1e-6)
    np.testing.assert_allclose(out["ap"], ref_pool(x.astype(np.float64), k, s, p, "avg", d=d), rtol=1e-5, atol=1e-6)
    pools = [b for cs in g.compute_sets for b in cs.batches if b.codelet.name.startswith("popnn::")]
    assert pools and sum(b.count for b in pools) <= 2 * 4 * g.target.num_worker_contexts
    assert all(b.fields["out"].shape[2] == 5 for b in pools)  # a vertex's positions with all their channels


def test_max_pooling_in_slabs_on_threads_gives_the_whole_result(monkeypatch, request):
    # the windows' maximum is taken in slabs of its outermost dim, one chunk at a time on each
    # thread: slabs of a few rows, uneven over three threads
    from profiler.host import parallel

    slabs = []
    chunks = parallel.in_row_chunks
    from profiler.ops import poplibs_codelets

    monkeypatch.setattr(poplibs_codelets, "POOL_PART_ELEMENTS", 16)
    monkeypatch.setattr(parallel, "threads", lambda: 3)
    monkeypatch.setattr(
        parallel,
        "in_row_chunks",
        lambda work, rows, n, chunk=None: (
            (slabs.append(min(rows, n // chunk)) if work.__name__ == "slab" else None) or chunks(work, rows, n, chunk)
        ),
    )
    r = rng(41)
    x_nhwc = r.standard_normal((1, 11, 10, 6)).astype(np.float32)  # batch 1: slabs of another dim
    x = x_nhwc.transpose(0, 3, 1, 2)

    def build(g, t, prog):
        return {"mp": ops.max_pool2d(g, t["x"].transpose(0, 3, 1, 2), 3, prog, stride=2, padding=1)}

    out, _, _ = run({"x": x_nhwc}, build, tiles=2)
    np.testing.assert_array_equal(out["mp"], ref_pool(x.astype(np.float64), 3, 2, 1, "max").astype(np.float32))
    if "vertices" not in request.node.name:  # the kernel's windows (each vertex's batch has none)
        assert slabs and slabs[0] >= 2  # in several slabs (with batch 1 too)


def test_global_pooling_spreads_channel_chunks_over_tiles():
    # fewer positions (one per image) than tiles: vertices take chunks of channels so every tile works
    x_nhwc = rng(38).standard_normal((2, 3, 4, 16)).astype(np.float32)
    x = x_nhwc.transpose(0, 3, 1, 2)

    def build(g, t, prog):
        xv = t["x"].transpose(0, 3, 1, 2)
        return {"mp": ops.max_pool2d(g, xv, (3, 4), prog), "ap": ops.avg_pool2d(g, xv, (3, 4), prog)}

    out, g, _ = run({"x": x_nhwc}, build, tiles=8)
    np.testing.assert_allclose(out["mp"][:, :, 0, 0], x.max(axis=(2, 3)), rtol=1e-6)
    np.testing.assert_allclose(out["ap"][:, :, 0, 0], x.mean(axis=(2, 3)), rtol=1e-5, atol=1e-6)
    pools = [b for cs in g.compute_sets for b in cs.batches if b.codelet.name == "popnn::MaxPooling"]
    tiles = np.concatenate([b.tiles for b in pools])
    # 2 positions x 16 channels over 8 tiles: chunks of 4 channels (the largest that feeds every tile)
    assert sorted(tiles.tolist()) == list(range(8)) and {b.fields["out"].shape[1:] for b in pools} == {(1, 4)}


def test_chained_convolutions_hold_results_channel_grouped_and_compute_them_exactly():
    # a conv's result is stored block-major by its plan's out-channel blocks ([G][C/nb][B*H*W][nb], as
    # PopLibs creates conv outputs grouped by channels) and the next conv, a relu, a residual add and a
    # max pool read it through grouped views: the values are a direct convolution's
    from profiler.ops.matmul import plan_matmul
    from profiler.poplar.layout import Factored

    r = rng(41)
    x = r.standard_normal((2, 16, 10, 10)).astype(np.float32)
    w1 = (r.standard_normal((32, 16, 3, 3)) / 12).astype(np.float32)
    w2 = (r.standard_normal((32, 32, 1, 1)) / 6).astype(np.float32)
    w3 = (r.standard_normal((8, 32, 3, 3)) / 17).astype(np.float32)
    held = {}

    def build(g, t, prog):
        y1 = ops.conv2d(g, t["x"], t["w1"], prog, padding=1)
        a = ops.relu(g, y1, prog)
        y2 = ops.conv2d(g, a, t["w2"], prog)
        s = ops.add(g, y2, a, prog)
        held.update(y1=y1, a=a, s=s)
        # a padded 3x3 conv over the grouped result: its columns come from a channels-last copy
        y3 = ops.conv2d(g, s, t["w3"], prog, padding=1)
        y4 = ops.conv2d(g, s, t["w3"], prog, stride=2, padding=1)  # strided: columns (c // nb, i, j, c % nb)
        return {"y1": y1, "s": s, "p": ops.max_pool2d(g, s, 3, prog, stride=2, padding=1), "y3": y3, "y4": y4}

    out, g, _ = run({"x": x, "w1": w1, "w2": w2, "w3": w3}, build, tiles=16)
    y1 = ref_conv(x.astype(np.float64), w1.astype(np.float64), 1, 1, 1, 1)
    a = np.maximum(y1, 0)
    s = ref_conv(a, w2.astype(np.float64), 1, 0, 1, 1) + a
    np.testing.assert_allclose(out["y1"], y1, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out["s"], s, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out["p"], ref_pool(s, 3, 2, 1, "max"), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out["y3"], ref_conv(s, w3.astype(np.float64), 1, 1, 1, 1), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out["y4"], ref_conv(s, w3.astype(np.float64), 2, 1, 1, 1), rtol=1e-4, atol=1e-4)

    plan = plan_matmul(g.target, 1, 2 * 10 * 10, 16 * 9, 32, np.dtype(np.float32), "float32", 0.6)
    nb = plan.block[3]
    assert 32 // nb > 1  # the plan splits the out channels: the result is grouped
    y1t = held["y1"]
    assert isinstance(y1t._lay, Factored)
    var = g.variables[y1t.single_variable()]
    assert var.shape == (1, 32 // nb, 200, nb)
    # each tile's block (its rows of one out-channel block) is one interval of the store
    rows = -(-200 // plan.block[1])
    assert var.mapping.starts.size <= rows * (32 // nb)
    for t in (held["a"], held["s"]):  # elementwise results are clones: the same store, the same intervals
        assert isinstance(t._lay, Factored) and g.variables[t.single_variable()].shape == var.shape


def test_a_convolution_over_a_grouped_result_reads_runs_not_elements():
    # the second conv's vertices read whole channel groups at a kernel position: runs along the input
    # rows (PopLibs' in-channel groups per kernel position), far fewer regions than elements
    from profiler import Graph, Sequence
    from profiler.chip.targets import get_target
    from profiler.compiler.compile import compile_programs
    from profiler.poplar.regions import field_regions

    g = Graph(get_target("GC200"))
    prog = Sequence()
    x = ops.add_mapped(g, "float16", (2, 64, 28, 28), "x")
    w1 = ops.create_conv_weights(g, "float16", x.shape, (64, 64, 3, 3), "w1", padding=1)
    assert g.variables[w1.single_variable()].shape == (64, 1, 3, 3, 64)  # stored [Cout, kh, kw, Cin]
    y1 = ops.conv2d(g, x, w1, prog, padding=1)
    grp = ops.conv.channel_group(y1)
    assert grp < 64 and 64 % grp == 0  # y1 is stored in channel groups: the columns take them
    w2 = ops.create_conv_weights(g, "float16", y1.shape, (64, 64, 3, 3), "w2", padding=1, channel_group=grp)
    assert g.variables[w2.single_variable()].shape == (64, 64 // grp, 3, 3, grp)  # [Cout, C/grp, kh, kw, grp]
    y = ops.conv2d(g, y1, w2, prog, padding=1)
    compiled = compile_programs(g, [prog])
    base = np.cumsum([0] + [v.numel for v in g.variables])
    cs = [p.compute_set for p in compiled.cs_plans.values() if p.compute_set.name == "matmul"][1]
    for f in ("a", "b"):
        t = next(b.fields[f] for b in cs.batches if f in b.fields)
        regions = field_regions(t, base)
        assert regions.count * 8 < regions.elements(), f
    # the weights' shares are runs of a few columns: far fewer mapping intervals than elements
    assert g.variables[w2.single_variable()].mapping.starts.size * 8 < w2.numel()
    assert y.shape == (2, 64, 28, 28)


def _conv_receives(channel_group: int | None) -> tuple[int, int]:
    """(regions, bytes) the tiles receive for a strided 3x3 conv over a conv's channel-grouped
    result, its columns in channel groups of ``channel_group`` (None: the input's own group)."""
    from profiler import Graph, Sequence
    from profiler.chip.targets import get_target
    from profiler.compiler.compile import compile_programs
    from profiler.ops import conv

    g = Graph(get_target("GC200"))
    prog = Sequence()
    x = ops.add_mapped(g, "float16", (1, 64, 28, 28), "x")
    y1 = ops.conv2d(g, x, ops.create_conv_weights(g, "float16", x.shape, (128, 64, 3, 3), "w1", padding=1), prog,
                    padding=1)  # fmt: skip
    assert conv.channel_group(y1) < 128  # stored in channel groups
    grp = conv.channel_group(y1) if channel_group is None else channel_group
    w2 = ops.create_conv_weights(g, "float16", y1.shape, (128, 128, 3, 3), "w2", stride=2, padding=1,
                                 channel_group=grp)  # fmt: skip
    real = conv.channel_group
    conv.channel_group = lambda *_: grp  # the column order under test
    try:
        ops.conv2d(g, y1, w2, prog, stride=2, padding=1)
    finally:
        conv.channel_group = real
    compiled = compile_programs(g, [prog])
    plan = [p for p in compiled.cs_plans.values() if p.compute_set.name == "matmul"][1]
    return int(plan.exchange.regions_in.sum()), int(plan.exchange.bytes_in.sum())


def test_a_strided_convolution_receives_whole_channel_groups_once():
    # columns (c // grp, i, j, c % grp) in the stored group grp put every kernel position of a few
    # channel groups on one tile (PopLibs' weight order): a tile receives the union of its windows,
    # a rectangle of input rows per group, once - not one or two kernel positions' channels of many
    # groups (a slice of rows per kernel position and group, each element fetched per kernel position)
    grouped = _conv_receives(None)
    kernel_major = _conv_receives(128)  # columns (i, j, c)
    assert grouped[0] * 2 < kernel_major[0]
    assert grouped[1] * 2 < kernel_major[1]


def test_a_wide_out_channel_block_is_stored_in_amp_channel_groups():
    # a swapped plan (a 1x1 convolution over 1152 channels: a wider kernel is not swapped) gives each
    # tile all 128 out channels of a few positions; the result is still stored grouped by 16 channels
    # (PopLibs' conv output {C/ocpg, N, H, W, ocpg} whatever the tile split), so the next conv reads
    # runs of a group's positions, not a run per position
    from profiler import Graph, Sequence
    from profiler.chip.targets import get_target
    from profiler.compiler.compile import compile_programs
    from profiler.ops import conv
    from profiler.ops.matmul import plan_matmul
    from profiler.poplar.regions import field_regions

    g = Graph(get_target("GC200"))
    prog = Sequence()
    plan = plan_matmul(g.target, 1, 28 * 28, 1152, 128, np.dtype(np.float16), "float32", 0.6, conv=(1, 1, 28))
    assert plan.swap_operands and plan.block[3] == 128  # the shape's plan: every tile holds all out channels
    x = ops.add_mapped(g, "float16", (1, 1152, 28, 28), "x")
    w = ops.create_conv_weights(g, "float16", x.shape, (128, 1152, 1, 1), "w")
    y = ops.conv2d(g, x, w, prog)
    assert conv.channel_group(y) == 16
    assert g.variables[y.single_variable()].shape == (1, 8, 28 * 28, 16)
    # a 1x1 conv over it reads each tile's channel groups as runs of positions, not a run per position
    w2 = ops.create_conv_weights(g, "float16", y.shape, (64, 128, 1, 1), "w2", channel_group=16)
    ops.conv2d(g, y, w2, prog)
    compiled = compile_programs(g, [prog])
    base = np.cumsum([0] + [v.numel for v in g.variables])
    cs = [p.compute_set for p in compiled.cs_plans.values() if p.compute_set.name == "matmul"][1]
    regions = field_regions(next(b.fields["a"] for b in cs.batches if "a" in b.fields), base)
    assert regions.count * 16 < regions.elements()


def test_the_host_sums_a_grouped_convolution_kernel_major_while_its_vertices_read_groups():
    # the vertices take PopLibs' column order (c // grp, i, j, c % grp), which decides the modelled
    # exchange; the host's product (the step's kernel) takes the same columns kernel-major (i, j, c),
    # whose copy runs kw x C long - the same product, the last stop's summation order
    from profiler import Graph, Sequence
    from profiler.chip.targets import get_target
    from profiler.compiler.compile import compile_programs
    from profiler.poplar.layout import Window, WindowBlocks

    g = Graph(get_target("GC200"))
    prog = Sequence()
    x = ops.add_mapped(g, "float16", (1, 64, 28, 28), "x")
    y1 = ops.conv2d(g, x, ops.create_conv_weights(g, "float16", x.shape, (128, 64, 3, 3), "w1", padding=1), prog,
                    padding=1)  # fmt: skip
    grp = ops.conv.channel_group(y1)
    w2 = ops.create_conv_weights(g, "float16", y1.shape, (64, 128, 3, 3), "w2", padding=1, channel_group=grp)
    ops.conv2d(g, y1, w2, prog, padding=1)
    compiled = compile_programs(g, [prog])
    cs = [p.compute_set for p in compiled.cs_plans.values() if p.compute_set.name == "matmul"][1]
    vertex_a = next(b.fields["a"] for b in cs.batches if "a" in b.fields)
    assert isinstance(vertex_a._lay, WindowBlocks) and vertex_a._lay.window.channel_group == grp < 128
    # the product's kernel (on the matmul step, or on its reduction's last step when K is split)
    windows = [b.fields["a"]._lay for p in compiled.cs_plans.values() for b in (p.compute_set.kernel or [])
               if "a" in b.fields and isinstance(b.fields["a"]._lay, Window)]  # fmt: skip
    assert [w.channel_group for w in windows] == [64, 128]  # each conv's C: kernel-major


@pytest.mark.parametrize(
    "k, s, p, expect",
    [(3, 1, 1, "convolution"), (1, 2, 0, "convolution"), (3, 2, 1, "columns")],
)
def test_input_gradient_is_a_convolution_as_poplibs_computes_it(k, s, p, expect):
    """PopLibs computes a convolution's input gradient as a convolution of dy with the flipped, channel-
    transposed weights (copied into weights created for it), dilating dy by the stride: for a stride-1
    convolution and a strided 1x1 one dx is a convolution's output ("input grad" is a Conv op after a
    "bwd weights" copy); other strided kernels scatter-add the columns' gradients (a reduction)."""
    r = rng(33)
    x = r.standard_normal((2, 8, 6, 6)).astype(np.float32)
    wt = r.standard_normal((8, 8, k, k)).astype(np.float32)
    ho = (6 + 2 * p - k) // s + 1
    dy = r.standard_normal((2, 8, ho, ho)).astype(np.float32)

    def build(g, t, prog):
        dx, _ = ops.conv2d_grad(g, t["x"], t["w"], t["dy"], prog, stride=s, padding=p)
        return {"dx": dx}

    out, g, _ = run({"x": x, "w": wt, "dy": dy}, build, tiles=4)
    fx = fd_grad(lambda v: ref_conv(v, wt.astype(np.float64), s, p, 1, 1), x, dy)
    np.testing.assert_allclose(out["dx"], fx, rtol=1e-4, atol=1e-4)
    convs = [c for c in g.debug_contexts if c.op_type == "Conv" and c.name == "input grad"]
    copies = [c for c in g.debug_contexts if c.op_type == "Copy"]
    if expect == "convolution":
        assert len(convs) == 1 and copies
    else:
        assert not convs


def test_a_3x3_convolution_runs_convpartialnx1_as_poplibs_does():
    """A kernel wider than 1x1 runs PopLibs' ConvPartialnx1 (its vertex type, 48 B of state, costed by
    cost_model.amp_nx1_cycles over the block's output rows), unswapped; a 1x1 convolution keeps
    ConvPartial1x1Out. The planner costs the same vertices it builds: the plan's conv geometry is the
    convolution's (kernel 3 x 3, output rows 14 wide)."""
    from profiler import Graph, Sequence
    from profiler.chip import cost_model
    from profiler.chip.targets import get_target
    from profiler.compiler.compile import compile_programs

    t = get_target("GC200")
    g = Graph(t)
    prog = Sequence()
    x = ops.add_mapped(g, "float16", (2, 64, 14, 14), "x")
    w = ops.create_conv_weights(g, "float16", x.shape, (64, 64, 3, 3), "w", padding=1)
    ops.conv2d(g, x, w, prog, padding=1, debug_name="c3")
    w1 = ops.create_conv_weights(g, "float16", x.shape, (64, 64, 1, 1), "w1")
    ops.conv2d(g, x, w1, prog, debug_name="c1")
    plans = [json.loads(c.attributes) for c in g.debug_contexts if c.op_type == "MatMul"]
    assert plans[0]["conv"] == [3, 3, 14, 64] and not plans[0]["swap_operands"]
    assert plans[1]["conv"] == [1, 1, 14, 64]
    compiled = compile_programs(g, [prog])
    amp = [b for p in compiled.cs_plans.values() for b in p.compute_set.batches if "ConvPartial" in b.codelet.name]
    names = [b.codelet.name for b in amp]
    first_1x1 = names.index("poplin::ConvPartial1x1Out")  # c3's vertices are all built before c1's
    assert set(names[:first_1x1]) == {"poplin::ConvPartialnx1"} and set(names[first_1x1:]) == {names[first_1x1]}
    nx1 = amp[0]
    (m, k), n = nx1.fields["a"].shape[1:], nx1.fields["b"].shape[2]
    cycles, _ = nx1.codelet.estimate({"a": (m, k), "b": (k, n), "out": (m, n)}, {"a": np.dtype(np.float16),
                                     "out": np.dtype(np.float32)}, nx1.params, t)  # fmt: skip
    assert cycles == cost_model.amp_nx1_cycles(np.array([m]), 14, (3, 3), np.array([k]), np.array([n]), "float16",
                                               "float32", t)[0]  # fmt: skip
    state = nx1.codelet.vertex_bytes({"a": (m, k), "b": (k, n), "out": (m, n)},
                                     {"a": np.dtype(np.float16), "out": np.dtype(np.float32)}, nx1.params, t)  # fmt: skip
    assert state.state == 48


def test_the_weight_gradient_reads_a_grouped_input_in_its_channel_groups():
    """The weight gradient's columns follow the forward convolution's, (c // grp, i, j, c % grp) in x's
    stored channel groups, so over a convolution's channel-grouped result its vertices read runs of a
    group's channels: 1,806,336 elements in 248,144 regions here, where columns in (c, i, j) order read
    an element a region (1,741,664), and a 3x3 512-channel layer's training step took 17 s to compile
    (8 s now)."""
    from profiler import Graph, Sequence
    from profiler.chip.targets import get_target
    from profiler.compiler.compile import compile_programs
    from profiler.ops.core import linear_tiles
    from profiler.ops.matmul import output_store
    from profiler.poplar.regions import field_regions

    g = Graph(get_target("GC200"))
    prog = Sequence()
    view, store = output_store(g, "float16", 1, 2 * 14 * 14, 64, 16, "x")  # stored as a convolution's result
    g.set_tile_mapping(store, linear_tiles(store.numel(), g.target.num_tiles))
    x = view.reshape(2, 14, 14, 64).transpose(0, 3, 1, 2)
    grp = ops.conv.channel_group(x)
    assert grp == 16
    w = ops.create_conv_weights(g, "float16", x.shape, (64, 64, 3, 3), "w", padding=1, channel_group=grp)
    y = ops.conv2d(g, x, w, prog, padding=1)
    dy = ops.add_mapped(g, "float16", y.shape, "dy")
    _, dw = ops.conv2d_grad(g, x, w, dy, prog, padding=1, need_dx=False)
    assert dw.shape == w.shape
    wgrad = next(i for i, c in enumerate(g.debug_contexts) if c.name == "weight grad")
    compiled = compile_programs(g, [prog])
    base = np.cumsum([0] + [v.numel for v in g.variables])
    regions = elements = 0
    for p in compiled.cs_plans.values():
        for b in p.compute_set.batches:
            if b.debug_context_id == wgrad and "a" in b.fields:
                r = field_regions(b.fields["a"], base)
                regions, elements = regions + r.count, elements + r.elements()
    assert regions * 4 < elements


def test_a_stem_convolution_pads_its_three_channels_as_poplibs_plans_them():
    """ResNet-50's stem in small (3 input channels, 7x7 kernel, stride 2, padding 3; half in and out,
    half partials): PopLibs' AMP cannot fill a conv unit's 16 weights from 3 channels, so it takes 4
    input channels a group (3 padded to 4) and 4 kernel rows a pass (7 padded to 8), which beats 8
    channels x 2 rows and 16 channels x 1 row (tests/profiler/test_cost_model.py works the three out
    by hand). The plan says so, every ConvPartialnx1 vertex is costed by that formula, and the result
    is the direct convolution's."""
    from profiler import ipu_model
    from profiler.chip import cost_model

    r = rng(40)
    x = r.standard_normal((4, 3, 20, 20)).astype(np.float16)
    wt = (r.standard_normal((16, 3, 7, 7)) * 0.1).astype(np.float16)
    target = ipu_model(tiles_per_ipu=4, bytes_per_tile=1 << 20)  # a tile a batch element: whole kernels

    def build(g, t, prog):
        return {"y": ops.conv2d(g, t["x"], t["w"], prog, stride=2, padding=3, partials_dtype="float16",
                                debug_name="stem")}  # fmt: skip

    out, g, e = run({"x": x, "w": wt}, build, target=target)
    ref = ref_conv(x.astype(np.float64), wt.astype(np.float64), 2, 3, 1, 1)
    np.testing.assert_allclose(out["y"], ref, rtol=2e-2, atol=3e-2)
    plan = json.loads(next(c for c in g.debug_contexts if c.name == "stem").attributes)["plan"]
    assert plan["method"] == "AMP" and plan["conv"] == [7, 7, 10, 3]  # output rows 10 wide, channel group 3
    assert (plan["in_chans_per_group"], plan["kernel_rows_per_pass"]) == (4, 4)
    _, mb, kb, nb = plan["block"]
    padded = cost_model.amp_nx1_macs(mb, (7, 7), kb, nb, "float16", "float16", target, 3, 4)
    assert kb == 147 and int(padded) == mb * 4 * 8 * 7 * 16  # 3 of 4 channels, 7 of 8 rows: 65.6 %
    assert plan["amp_mac_utilisation"] == round(147 / (4 * 8 * 7), 4)
    nx1 = [b for p in e.compiled.cs_plans.values() for b in p.compute_set.batches
           if b.codelet.name == "poplin::ConvPartialnx1"]  # fmt: skip
    assert nx1
    for batch in nx1:
        (m, k), n = batch.fields["a"].shape[1:], batch.fields["b"].shape[2]
        cycles, _ = batch.codelet.estimate({"a": (m, k), "b": (k, n), "out": (m, n)}, {"a": np.dtype(np.float16),
                                           "out": np.dtype(np.float16)}, batch.params, target)  # fmt: skip
        four = cost_model.amp_nx1_cycles(np.array([m]), 10, (7, 7), np.array([k]), np.array([n]), "float16",
                                         "float16", target, channel_group=3, in_chans_per_group=4)  # fmt: skip
        assert cycles == int(four[0])


def test_a_low_memory_convolution_serialises_its_out_channels_in_a_few_steps_with_fields_by_tile():
    # At availableMemoryProportion 0.2 a 16-tile IPU-Model's budget is 13,107 bytes a tile. The
    # 3x3 conv's product is M=2*16*16=512 rows, K=16*9=144, N=32 (float16, float32 partials).
    # Unserialised, the best block [64 rows, 144, 16 out] needs (64*144 + 144*16)*2 + 64*16*4 = 27,136
    # bytes; two out-chan steps (16 out chans) still need at least 15,616 (rows 64 x in 72 on 2x8
    # tiles) or 15,872 (rows 32 on 16 tiles); four steps of 8 out chans fit: (32*144 + 144*8)*2 +
    # 32*8*4 = 12,544. So the plan is 4 serial out-chan steps and no in-chan steps (PopLibs
    # ConvPlan.cpp likewise takes the fewest serial splits that fit the temporary memory).
    from profiler import Graph, Sequence
    from profiler.chip.targets import ipu_model
    from profiler.compiler.compile import compile_programs
    from profiler.poplar.regions import field_regions

    g = Graph(ipu_model(tiles_per_ipu=16, bytes_per_tile=65536))
    prog = Sequence()
    x = ops.add_mapped(g, "float16", (2, 16, 16, 16), "x")
    w = ops.create_conv_weights(g, "float16", x.shape, (32, 16, 3, 3), "w", padding=1, available_memory_proportion=0.2)
    y = ops.conv2d(g, x, w, prog, padding=1, available_memory_proportion=0.2)
    # the result is a view of the steps' store, not an index per element: what reads it (a ReLU, a
    # pool, the next conv) then costs the host per run, as after an unserialised conv
    assert not isinstance(y._lay, np.ndarray)
    plan = [json.loads(c.attributes) for c in g.debug_contexts if c.op_type == "MatMul"][-1]
    assert (plan["in_chan_serial"], plan["out_chan_serial"], plan["block"]) == (1, 4, [1, 32, 144, 8])
    compiled = compile_programs(g, [prog])
    # compute sets: counter fills (2), the rhs rearranged once, the rhs chunk sliced, the step and its
    # cast to half, the result chunk updated, the two counter increments: 9, however many steps
    names = sorted(p.compute_set.name for p in compiled.cs_plans.values())
    assert names == sorted(["fill 0", "fill 0", "copy", "dynamic slice", "matmul step", "matmul step cast",
                            "dynamic update", "next out-chan chunk", "next in-chan chunk"])  # fmt: skip
    # the result store [4 steps, 512 x 8] is mapped 256 positions a tile, alike in every step: one
    # interval per tile and step, and the update's 16 vertices read 4 runs (one a step) and write one
    store = next(v for v in g.variables if v.name == "matmul out")
    assert store.mapping.starts.size == 4 * 16
    cs = next(p.compute_set for p in compiled.cs_plans.values() if p.compute_set.name == "dynamic update")
    base = np.cumsum([0] + [v.numel for v in g.variables])
    assert sum(b.tiles.size for b in cs.batches) == 16
    for field, runs in (("base", 4), ("update", 1)):
        regions = sum(field_regions(b.fields[field], base).count for b in cs.batches)
        assert regions == 16 * runs, field
