"""2-D convolution and pooling (poplin::convolution, popnn::pooling), forward and backward.

A convolution is lowered to the matmul planner as PopLibs' ``expandDims`` transform does (ref §4.1):
kernel positions fold into the input channels, so ``y[g] = cols[g] @ W[g]`` with ``cols[G, B*Ho*Wo,
Cin/G*kh*kw]`` a *view* of the input (im2col; zero padding reads a per-tile zero constant) and
``W[G, Cin/G*kh*kw, Cout/G]`` a view of the weights. Batch and field positions become matmul rows,
so the planner's row split is the conv's batch x field split; grouped and depthwise convolutions
are matmul groups. Gradients are matmuls on transposed views plus a col2im scatter-add
(``reduce_groups``). Pooling reduces the same window views.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from profiler.chip import cost_model
from profiler.chip.dtypes import as_dtype
from profiler.ops import elementwise as ew
from profiler.ops.core import OpError, add_like, constant_per_tile, linear_tiles, op, padded_rows, set_attributes
from profiler.ops.matmul import (
    DEFAULT_AVAILABLE_MEMORY_PROPORTION,
    by_columns,
    columns_view,
    matmul,
    operand_runs,
    operand_tiles,
    plan_matmul,
)
from profiler.ops.reduce import reduce_groups
from profiler.poplar import layout
from profiler.poplar.graph import Graph
from profiler.poplar.layout import Factored
from profiler.poplar.programs import Sequence as Prog
from profiler.poplar.tensor import Tensor

# The forward convolution's matmul takes its columns (c // grp, i, j, c % grp), PopLibs' weight order
# ({..., IC/icpg, kh, kw, ..., icpg}, lib/poplin/Convolution.cpp createWeights): a tile's block of
# columns is then a few channel groups at every kernel position, so what it reads of a
# channel-grouped input is the union of its windows - a rectangle of input rows per group, one run
# each - not one kernel position's channels at every output position (a region per position and
# group when the conv is strided). grp: the input's stored channel group (``channel_group``).


@dataclass(frozen=True)
class WeightStorage:
    """Weights w[Cout, C/groups, kh, kw] stored [Cout, C/groups/grp, kh, kw, grp] - the forward
    matmul's column order per output channel - so that each vertex's weight block is a few runs."""

    group: int

    def shape(self, w_shape: tuple[int, ...]) -> list[int]:
        cout, cg, kh, kw = w_shape
        return [cout, cg // self.group, kh, kw, self.group]

    def view(self, stored: Tensor) -> Tensor:
        """The [Cout, C/groups, kh, kw] view of the stored variable."""
        return stored.transpose(0, 1, 4, 2, 3).group_dims(1, 2, 1, 1)

    def stored(self, w: np.ndarray) -> np.ndarray:
        """Host values w[Cout, C/groups, kh, kw] in the stored order."""
        cout, cg, kh, kw = w.shape
        return w.reshape(cout, cg // self.group, self.group, kh, kw).transpose(0, 1, 3, 4, 2)


def _pair(v: int | tuple[int, int]) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else (int(v[0]), int(v[1]))


@dataclass(frozen=True)
class Window:
    """Where each (output position, kernel position) reads the input: the im2col index map."""

    batch: int
    channels: int
    height: int
    width: int
    out_h: int
    out_w: int
    kh: int
    kw: int
    src: np.ndarray  # [B, Ho, Wo, C, kh, kw] flat input index (clipped where invalid)
    valid: np.ndarray  # same shape: inside the input (not padding)


def _window_out(
    shape: tuple[int, ...], kernel: tuple[int, int], stride: tuple[int, int], padding: tuple[int, int],
    dilation: tuple[int, int], what: str,
) -> tuple[int, int]:  # fmt: skip
    """(Ho, Wo) of a window over ``shape``; one line naming ``what`` when it gives no output."""
    ho, wo = _out_hw(shape, kernel, stride, padding, dilation)
    if ho < 1 or wo < 1 or min(*stride, *dilation) < 1:
        raise OpError(f"{what}: input {shape} with kernel {kernel}, stride {stride}, padding {padding}, "
                      f"dilation {dilation} gives no output")  # fmt: skip
    return ho, wo


def window(
    shape: tuple[int, ...], kernel: tuple[int, int], stride: tuple[int, int], padding: tuple[int, int],
    dilation: tuple[int, int], what: str,
) -> Window:  # fmt: skip
    b, c, h, w = shape
    kh, kw = kernel
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    ho, wo = _window_out(shape, kernel, stride, padding, dilation, what)
    ih = (np.arange(ho) * sh - ph)[:, None] + np.arange(kh) * dh  # [Ho, kh]
    iw = (np.arange(wo) * sw - pw)[:, None] + np.arange(kw) * dw  # [Wo, kw]
    vh, vw = (ih >= 0) & (ih < h), (iw >= 0) & (iw < w)
    ihc, iwc = np.clip(ih, 0, h - 1), np.clip(iw, 0, w - 1)
    bb = np.arange(b)[:, None, None, None, None, None]
    cc = np.arange(c)[None, None, None, :, None, None]
    hh = ihc[None, :, None, None, :, None]
    ww = iwc[None, None, :, None, None, :]
    src = ((bb * c + cc) * h + hh) * w + ww
    valid = np.broadcast_to(vh[None, :, None, None, :, None] & vw[None, None, :, None, None, :], src.shape)
    return Window(b, c, h, w, ho, wo, kh, kw, src, valid)


def _cols(graph: Graph, x: Tensor, win: Window, groups: int, pad_value: float = 0.0, channel_group: int = 1) -> Tensor:
    """The im2col view cols[G, B*Ho*Wo, C/G*kh*kw] of ``x`` (padding reads ``pad_value`` on the tile
    of the nearest input element); columns (c // grp, i, j, c % grp) with grp = ``channel_group``."""
    cg = win.channels // groups
    grp = channel_group
    shape8 = (win.batch, win.out_h, win.out_w, groups, cg // grp, grp, win.kh, win.kw)
    order = (3, 0, 1, 2, 4, 6, 7, 5)
    src = win.src.reshape(shape8).transpose(order)
    valid = win.valid.reshape(shape8).transpose(order)
    m = win.batch * win.out_h * win.out_w
    src = src.reshape(groups, m, -1)
    valid = valid.reshape(groups, m, -1)
    if valid.all():
        return x.reshape(-1)[src]
    pad = constant_per_tile(graph, x.dtype, pad_value)
    pad_tile = graph.tile_of(x.reshape(-1)).astype(np.int64)[src]
    return padded_rows(x, src, valid, pad, pad_tile)


def _weights(w: Tensor, groups: int, channel_group: int = 1) -> Tensor:
    """The matmul rhs [G, K, Cout/G] of weights w[Cout, Cg, kh, kw]: K is (c // grp, i, j, c % grp)
    with grp = ``channel_group`` (a grouped view of the weights, profiler.poplar.layout.Factored)."""
    cout, cg, kh, kw = w.shape
    grp = channel_group
    if grp == 1:
        return w.reshape(groups, cout // groups, -1).transpose(0, 2, 1)  # [G, Cg*kh*kw, Cout/G]
    return (w.reshape(groups, cout // groups, cg // grp, grp, kh, kw).transpose(0, 2, 4, 5, 3, 1)
            .group_dims(1, 4, 1))  # fmt: skip


def _out_view(y_mm: Tensor, b: int, ho: int, wo: int) -> Tensor:
    g, _, cog = y_mm.shape
    return y_mm.reshape(g, b, ho, wo, cog).transpose(1, 0, 4, 2, 3).reshape(b, g * cog, ho, wo)


def _dy_mm(dy: Tensor, groups: int) -> Tensor:
    b, cout, ho, wo = dy.shape
    return dy.reshape(b, groups, cout // groups, ho, wo).transpose(1, 0, 3, 4, 2).reshape(groups, b * ho * wo, -1)


def _check_conv(x: Tensor, w: Tensor, groups: int) -> None:
    if x.rank != 4 or w.rank != 4:
        raise OpError(f"conv2d: needs x[B,C,H,W] and w[Cout,C/groups,kh,kw], got {x.shape} and {w.shape}")
    if x.shape[1] % groups or w.shape[0] % groups or w.shape[1] * groups != x.shape[1]:
        raise OpError(f"conv2d: {x.shape[1]} input / {w.shape[0]} output channels and {groups} groups "
                      f"do not match weights {w.shape}")  # fmt: skip


def _window_view(
    graph: Graph, x: Tensor, kernel: tuple[int, int], stride: tuple[int, int], padding: tuple[int, int],
    dilation: tuple[int, int], groups: int, pad_value: float = 0.0, channel_group: int = 1,
) -> Tensor:  # fmt: skip
    """The im2col view of ``x`` as a Window (its geometry, no index per element) when ``x`` is an
    affine view or a channel-grouped store; else the explicit view ``_cols`` builds. Padding reads
    ``pad_value``; columns (c // grp, i, j, c % grp) with grp = ``channel_group``."""

    def explicit() -> Tensor:
        win = window(x.shape, kernel, stride, padding, dilation, "conv2d")
        return _cols(graph, x, win, groups, pad_value, channel_group)

    aff = x.affine if x.affine is not None else _channel_grouped(x)
    if aff is None:
        return explicit()
    b, c, h, w = x.shape
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    ho = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    wo = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    if ho < 1 or wo < 1 or min(sh, sw, dh, dw) < 1:
        return explicit()  # its one-line error
    pad = constant_per_tile(graph, x.dtype, pad_value) if ph or pw else None
    lay = layout.Window(aff, x.single_variable(), groups, kernel, stride, padding, dilation, (ho, wo),  # type: ignore[arg-type]
                 -1 if pad is None else pad.single_variable(), None if pad is None else pad.affine, explicit,
                 channel_group)  # fmt: skip
    return Tensor(graph, x.single_variable(), lay, x.dtype)  # type: ignore[arg-type]


def _channel_grouped(x: Tensor) -> Factored | None:
    """``x``'s layout when it is a channel-grouped store (channel c at (c // grp) * stride + c % grp,
    every other dim one stride: a convolution result, profiler.ops.matmul), which windows read as
    runs of each group's channels; else None."""
    lay = x._lay
    if not isinstance(lay, Factored) or lay.groups != (1, 2, 1, 1) or lay.factors()[1][1][1] != 1:
        return None
    return lay


def channel_group(x: Tensor, groups: int = 1) -> int:
    """grp of the forward convolution's columns (c // grp, i, j, c % grp) over input ``x``: the
    group of a channel-grouped store (a convolution's result; PopLibs creates activations {...,
    IC/icpg, N, H, W, icpg} and weights with the same icpg), else C/groups - kernel-major columns
    (i, j, c), which read an affine input's pixels as runs of channels."""
    cg = x.shape[1] // groups
    lay = _channel_grouped(x)
    if lay is not None:
        grp = lay.factors()[1][1][0]
        if cg % grp == 0:
            return int(grp)
    return cg


def new_conv_weights(
    graph: Graph, dtype: object, w_shape: tuple[int, ...], name: str, channel_group: int | None = None
) -> Tensor:
    """A new (unmapped) variable for weights w[Cout, C/groups, kh, kw], stored in the forward
    matmul's column order (WeightStorage; ``channel_group`` None: C/groups, kernel-major) so that its
    weight view stays strided (each vertex's block a few runs, not an index per element)."""
    if len(w_shape) != 4:
        return graph.add_variable(dtype, w_shape, name)
    storage = WeightStorage(w_shape[1] if channel_group is None else channel_group)
    return storage.view(graph.add_variable(dtype, storage.shape(w_shape), name))


def create_conv_weights(
    graph: Graph, dtype: object, x_shape: tuple[int, ...], w_shape: tuple[int, ...], name: str = "weights",
    stride: int | tuple[int, int] = 1, padding: int | tuple[int, int] = 0, dilation: int | tuple[int, int] = 1,
    groups: int = 1, partials_dtype: object = "float32",
    available_memory_proportion: float = DEFAULT_AVAILABLE_MEMORY_PROPORTION, channel_group: int | None = None,
) -> Tensor:  # fmt: skip
    """New weights w[Cout, C/groups, kh, kw] laid out for ``conv2d(x[x_shape], w)``'s matmul plan
    (poplin::createWeights, the createMatMulInputRHS of the conv's matmul): the conv then uses them
    without rearranging them first (docs/fidelity.md "Exchange model" item 4). ``channel_group``:
    ``channel_group(x)`` of the input the conv will read (None: C/groups, as for an affine input)."""
    w = new_conv_weights(graph, dtype, w_shape, name, channel_group)
    if not map_conv_weights(graph, w, x_shape, stride, padding, dilation, groups, partials_dtype,
                            available_memory_proportion, channel_group):  # fmt: skip
        graph.set_tile_mapping(w, linear_tiles(w.numel(), graph.target.num_tiles))
    return w


def map_conv_weights(
    graph: Graph, w: Tensor, x_shape: tuple[int, ...], stride: int | tuple[int, int] = 1,
    padding: int | tuple[int, int] = 0, dilation: int | tuple[int, int] = 1, groups: int = 1,
    partials_dtype: object = "float32", available_memory_proportion: float = DEFAULT_AVAILABLE_MEMORY_PROPORTION,
    channel_group: int | None = None,
) -> bool:  # fmt: skip
    """Map the (unmapped) weights ``w`` as ``conv2d(x[x_shape], w)``'s matmul plan wants its rhs
    (``channel_group`` as ``create_conv_weights``); False (nothing mapped) for a serial plan or an
    empty output."""
    b, c, h, wd = x_shape
    cout, cg, kh, kw = w.shape
    (sh, sw), (ph, pw), (dh, dw) = _pair(stride), _pair(padding), _pair(dilation)
    ho = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    wo = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    if min(ho, wo) < 1 or cout % groups:
        return False
    shape = (groups, b * ho * wo, cg * kh * kw, cout // groups)
    grp = cg if channel_group is None else channel_group
    plan = plan_matmul(graph.target, *shape, as_dtype(w.dtype), partials_dtype, available_memory_proportion,
                       conv=(kh, kw, wo, grp), slic_stride=slic_stride((sh, sw), (dh, dw)))  # fmt: skip
    if plan.in_chan_serial * plan.out_chan_serial > 1:
        return False
    rhs = _weights(w, groups, grp)
    if by_columns(rhs):  # [Cout, Cg, kh, kw] in its own order: mapped by intervals
        graph.map_intervals(columns_view(rhs), *operand_runs(plan, shape, "rhs", w.dtype.itemsize, columns=True))
    else:
        graph.set_tile_mapping(rhs, operand_tiles(plan, shape, "rhs", w.dtype.itemsize))
    return True


@op("Conv")
def conv2d(
    graph: Graph,
    x: Tensor,
    w: Tensor,
    prog: Prog,
    stride: int | tuple[int, int] = 1,
    padding: int | tuple[int, int] = 0,
    dilation: int | tuple[int, int] = 1,
    groups: int = 1,
    partials_dtype: object = "float32",
    available_memory_proportion: float = DEFAULT_AVAILABLE_MEMORY_PROPORTION,
    log2_scale: int = 0,
) -> Tensor:
    """y[B, Cout, Ho, Wo] = conv(x[B, C, H, W], w[Cout, C/groups, kh, kw]) (no bias), times 2^log2_scale
    (FP8 operands' power-of-two scales undone, as ``matmul``)."""
    _check_conv(x, w, groups)
    grp, cg = channel_group(x, groups), x.shape[1] // groups
    geometry = (_pair(w.shape[2:]), _pair(stride), _pair(padding), _pair(dilation), groups)
    cols = _window_view(graph, x, *geometry, channel_group=grp)
    # the host sums the same product kernel-major, (i, j, c): its columns are copied in runs of kw x C
    # rather than kw x grp (the vertices keep the modelled order, which the host's sum does not see)
    host = None
    if 1 < grp < cg and w.shape[2] * w.shape[3] > 1:
        host = (_window_view(graph, x, *geometry, channel_group=cg), _weights(w, groups, cg))
    set_attributes(graph, {"conv": {"stride": _pair(stride), "padding": _pair(padding), "dilation": _pair(dilation),
                                    "groups": groups, "kernel": list(w.shape[2:]), "input": list(x.shape)}})  # fmt: skip
    ho, wo = _out_hw(x.shape, w.shape[2:], stride, padding, dilation)
    y = matmul(graph, cols, _weights(w, groups, grp), prog, partials_dtype=partials_dtype,
               available_memory_proportion=available_memory_proportion, grouped_out=True,
               host_operands=host, conv=(w.shape[2], w.shape[3], wo, grp), log2_scale=log2_scale,
               slic_stride=slic_stride(_pair(stride), _pair(dilation)), debug_name="conv matmul")  # fmt: skip

    # the plan (splits, vertex type) also on the conv's own context, where the Operations view looks
    plan = json.loads(next(c for c in reversed(graph.debug_contexts) if c.op_type == "MatMul").attributes)
    plan |= _amp_grouping(graph, plan, x.dtype)
    set_attributes(graph, {"plan": plan})
    return _out_view(y, x.shape[0], ho, wo)


def _amp_grouping(graph: Graph, plan: dict, dtype: np.dtype) -> dict[str, int]:
    """The AMP input channel grouping of a ConvPartialnx1 plan's blocks, the kernel rows each AMP pass
    takes (PopLibs' inChansPerGroup and convUnitWeightHeight; cost_model.amp_nx1_cycles) and the share
    of the AMP's MACs that are the block's own (the rest pad channels, kernel rows and out groups), so
    the Operations view shows how the plan pads a convolution with few input channels. A SLIC plan
    gives its vertex variant instead: conv groups and channels a group, conv unit chains."""
    conv = plan.get("conv")
    if plan["method"] == "SLIC" and conv is not None:  # the SLIC variant the planner costed the blocks with
        gb, mb, kb, nb = plan["block"]
        kh, kw, wo = conv[:3]
        _, which = cost_model.slic_best(mb, wo, (kh, kw), gb, max(kb // (kh * kw), nb), dtype, plan["partials_dtype"],
                                        graph.target, plan["slic_stride"])  # fmt: skip
        cfg = cost_model.slic_candidates(dtype, plan["partials_dtype"], graph.target)[int(which)]
        return {"conv_groups_per_group": cfg.conv_groups_per_group, "chans_per_group": cfg.chans_per_group,
                "conv_unit_chains": cfg.chains}  # fmt: skip
    if plan["method"] != "AMP" or conv is None or conv[0] * conv[1] == 1:
        return {}
    _, mb, kb, nb = plan["block"]
    kh, kw, wo, grp = conv
    icpg = cost_model.amp_nx1_in_chans_per_group(mb, wo, (kh, kw), kb, nb, dtype, plan["partials_dtype"],
                                                 graph.target, grp or None)  # fmt: skip
    wpu = cost_model.amp_config(dtype, plan["partials_dtype"], graph.target).in_chans_per_group
    padded = cost_model.amp_nx1_macs(mb, (kh, kw), kb, nb, dtype, plan["partials_dtype"], graph.target, grp or None,
                                     icpg)  # fmt: skip
    return {"in_chans_per_group": icpg, "kernel_rows_per_pass": wpu // icpg,
            "amp_mac_utilisation": round(mb * kb * nb / int(padded), 4)}  # fmt: skip


def slic_stride(stride: tuple[int, int], dilation: tuple[int, int]) -> int:
    """The innermost output stride when PopLibs may run the convolution on the SLIC vertex, else 0:
    an output stride of 1 or 2 in the innermost dimension and no kernel dilation (ConvModel.cpp
    addSLICConstraints; the input padding SLIC needs applied first is not costed [INF])."""
    return stride[1] if stride[1] <= 2 and dilation == (1, 1) else 0


def _out_hw(
    shape: tuple[int, ...], kernel: tuple[int, ...], stride: object, padding: object, dilation: object
) -> tuple[int, int]:
    (sh, sw), (ph, pw), (dh, dw) = _pair(stride), _pair(padding), _pair(dilation)  # type: ignore[arg-type]
    h, w = shape[2:]
    kh, kw = kernel
    return (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1, (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1


def _scatter_add(
    graph: Graph, contrib: Tensor, target: np.ndarray, like: Tensor, prog: Prog, scale: float = 1.0
) -> Tensor:
    """A tensor shaped and mapped like ``like``: element i = scale * sum of contrib[j] with target[j] = i
    (0 where nothing lands) - col2im."""
    out = add_like(graph, like, "scatter add")
    n = like.numel()
    covered = np.bincount(target, minlength=n) > 0
    if not covered.all():
        ew.fill(graph, out.reshape(-1)[np.flatnonzero(~covered)], 0.0, prog)
    remap = np.cumsum(covered) - 1
    reduce_groups(graph, contrib, np.arange(target.size), remap[target], out.reshape(-1)[np.flatnonzero(covered)],
                  "add", prog, scale)  # fmt: skip
    return out


def _input_grad(
    graph: Graph, dy: Tensor, w: Tensor, prog: Prog, padding: tuple[int, int], dilation: tuple[int, int],
    groups: int, partials_dtype: object,
) -> Tensor:  # fmt: skip
    """dx of a stride-1 ``conv2d`` as PopLibs' backward pass computes it (lib/poplin/Convolution.cpp): a
    convolution of dy with the weights flipped in x and y and their channels transposed in each group,
    copied first into weights created for that convolution (weightsTransposeChansFlipXY) - so dx is a
    convolution's output, not a scatter-add of columns."""
    (ph, pw), (dh, dw) = padding, dilation
    cog, cg, kh, kw = w.shape[0] // groups, w.shape[1], w.shape[2], w.shape[3]
    flipped = w.reshape(groups, cog, cg, kh, kw).transpose(0, 2, 1, 3, 4)[:, :, :, ::-1, ::-1]
    geometry = {"padding": (dh * (kh - 1) - ph, dw * (kw - 1) - pw), "dilation": dilation, "groups": groups}
    w_bwd = create_conv_weights(graph, w.dtype, dy.shape, (groups * cg, cog, kh, kw), "bwd weights",
                                partials_dtype=partials_dtype, channel_group=channel_group(dy, groups),
                                **geometry)  # type: ignore[arg-type]  # fmt: skip
    ew.copy(graph, flipped.reshape(w_bwd.shape), prog, dst=w_bwd)
    return conv2d(graph, dy, w_bwd, prog, partials_dtype=partials_dtype, debug_name="input grad", **geometry)


@op("ConvGrad")
def conv2d_grad(
    graph: Graph,
    x: Tensor,
    w: Tensor,
    dy: Tensor,
    prog: Prog,
    stride: int | tuple[int, int] = 1,
    padding: int | tuple[int, int] = 0,
    dilation: int | tuple[int, int] = 1,
    groups: int = 1,
    need_dx: bool = True,
    partials_dtype: object = "float32",
) -> tuple[Tensor | None, Tensor]:
    """(dx, dw) of ``conv2d`` given the stashed input ``x``, weights ``w`` and output gradient ``dy``."""
    _check_conv(x, w, groups)
    _window_out(x.shape, w.shape[2:], _pair(stride), _pair(padding), _pair(dilation), "conv2d_grad")
    # the weight gradient's columns as the forward convolution's, (c // grp, i, j, c % grp) in x's channel
    # groups: a window (its geometry, not an index per element) where x allows one
    grp = channel_group(x, groups)
    cols = _window_view(graph, x, w.shape[2:], _pair(stride), _pair(padding), _pair(dilation), groups,
                        channel_group=grp)  # fmt: skip
    dym = _dy_mm(dy, groups)
    dw_mm = matmul(graph, cols.transpose(0, 2, 1), dym, prog, partials_dtype=partials_dtype, debug_name="weight grad")
    cout, cg, kh, kw = w.shape
    dw = (dw_mm.reshape(groups, cg // grp, kh, kw, grp, cout // groups).transpose(0, 5, 1, 4, 2, 3)
          .reshape(w.shape))  # fmt: skip
    if not need_dx:
        return None, dw
    (sh, sw), (ph, pw), (dh, dw_) = _pair(stride), _pair(padding), _pair(dilation)
    kh, kw = w.shape[2:]
    if (kh, kw) == (1, 1) and (sh, sw) != (1, 1) and (ph, pw) == (0, 0):
        # PopLibs convolves dy dilated by the stride: the input positions the forward pass skipped get
        # zeros, the others a 1x1 convolution of dy
        dx = add_like(graph, x, "input grad")
        hit = dx[:, :, ::sh, ::sw]
        skipped = np.ones(x.shape, dtype=bool)
        skipped[:, :, ::sh, ::sw] = False
        ew.fill(graph, dx.reshape(-1)[np.flatnonzero(skipped)], 0.0, prog)
        ew.copy(graph, _input_grad(graph, dy, w, prog, (0, 0), (1, 1), groups, partials_dtype), prog, dst=hit)
        return dx, dw
    if (sh, sw) == (1, 1) and ph <= dh * (kh - 1) and pw <= dw_ * (kw - 1):
        return _input_grad(graph, dy, w, prog, (ph, pw), (dh, dw_), groups, partials_dtype), dw
    # other strided kernels: the columns' gradients scatter-added back (an index per window element)
    win = window(x.shape, w.shape[2:], _pair(stride), _pair(padding), _pair(dilation), "conv2d_grad")
    dcols = matmul(graph, dym, _weights(w, groups).transpose(0, 2, 1), prog, partials_dtype=partials_dtype,
                   debug_name="input grad")  # fmt: skip
    cg = win.channels // groups
    shape6 = (win.batch, win.out_h, win.out_w, groups, cg * win.kh * win.kw)
    src = win.src.reshape(shape6).transpose(3, 0, 1, 2, 4).reshape(-1)
    valid = win.valid.reshape(shape6).transpose(3, 0, 1, 2, 4).reshape(-1)
    keep = np.flatnonzero(valid)
    dx = _scatter_add(graph, dcols.reshape(-1)[keep], src[keep], x, prog)
    return dx, dw
