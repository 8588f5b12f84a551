"""A ResNet-style stack of bottleneck blocks, inference, on a GC200 by default.

Each block: 1x1 conv (C -> C/4), folded batch norm (per-channel scale and shift), relu; 3x3 conv
(stride 1, padding 1), norm, relu; 1x1 conv (C/4 -> C), norm; residual add; relu.

    POPLAR_ENGINE_OPTIONS='{"autoReport.all":"true","autoReport.directory":"./report"}' \
        python -m profiler.workloads.resnet --blocks 2
"""

from __future__ import annotations

import numpy as np

from profiler import ops
from profiler.chip.targets import Target, get_target
from profiler.poplar.graph import Graph
from profiler.poplar.programs import Copy, Sequence
from profiler.poplar.tensor import Tensor
from profiler.workloads.common import Workload, host_parameter, main
from report_format.vocabulary import Layer

DEFAULTS = {"batch": 1, "channels": 64, "size": 14, "blocks": 2}


def build(
    batch: int = 1,
    channels: int = 64,
    size: int = 14,
    blocks: int = 2,
    dtype: str = "float16",
    target: Target | None = None,
    seed: int = 0,
) -> Workload:
    g = Graph(target or get_target("GC200"))
    rng = np.random.default_rng(seed)
    mid = max(1, channels // 4)
    np_dt = np.dtype(dtype)
    initial: dict[str, np.ndarray] = {}

    def param(name: str, shape: tuple[int, ...], value: np.ndarray, x: Tensor | None = None) -> object:
        initial[name] = value.astype(np_dt)
        if x is not None:  # conv weights laid out for their conv (createWeights)
            w = ops.create_conv_weights(g, dtype, x.shape, shape, name, padding=shape[2] // 2,
                                        channel_group=ops.conv.channel_group(x))  # fmt: skip
            return host_parameter(g, w, name)
        return ops.parameter(g, dtype, shape, name)

    x = ops.add_mapped(g, dtype, (batch, channels, size, size), "images")
    prog = Sequence(name="resnet blocks")
    prog.add(Copy(g.add_host_to_device_fifo("images", dtype, [batch, channels, size, size]), x, name="images"))
    h = x
    for b in range(blocks):
        with g.debug_context(f"block{b}", op_type="Bottleneck", layer=Layer.USER):
            y = h
            for i, (cin, cout, k) in enumerate([(channels, mid, 1), (mid, mid, 3), (mid, channels, 1)]):
                w = param(
                    f"b{b}.conv{i}",
                    (cout, cin, k, k),
                    rng.standard_normal((cout, cin, k, k)) / np.sqrt(cin * k * k),
                    y,
                )
                s = param(f"b{b}.scale{i}", (cout,), np.full(cout, 0.5 if i == 2 else 1.0))
                t = param(f"b{b}.shift{i}", (cout,), rng.standard_normal(cout) * 0.1)
                y = ops.conv2d(g, y, w, prog, padding=k // 2, debug_name=f"conv{i}")
                with g.debug_context(f"norm{i}", op_type="BatchNormInference", layer=Layer.USER):
                    y = ops.add(g, ops.mul(g, y, s.reshape(1, cout, 1, 1), prog), t.reshape(1, cout, 1, 1), prog)
                if i < 2:
                    y = ops.relu(g, y, prog)
            h = ops.relu(g, ops.add(g, h, y, prog, debug_name="residual"), prog)
    result: dict[str, np.ndarray] = {}
    prog.add(Copy(h, g.add_device_to_host_fifo("out", dtype, list(h.shape)), name="out"))
    images = rng.standard_normal((batch, channels, size, size)).astype(np_dt)
    w_ = Workload("resnet", g, [Sequence(name="init"), prog], initial,
                  {"images": images, "out": lambda v: result.__setitem__("out", np.array(v))})  # fmt: skip
    w_.info = {"images": images, "result": result}
    return w_


if __name__ == "__main__":
    main(build, DEFAULTS, "Run a stack of ResNet bottleneck blocks (inference, GC200)")
