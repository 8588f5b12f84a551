"""Convolutions by a layer's weights through onnxruntime's NCHWc kernel, on inputs held in channel blocks.

PopLibs holds a convolution's activations channel-grouped: ``[C/16][H][W][16]`` at batch 1
(``poplar.layout.Factored``), which is MLAS's NCHWc layout with its AVX-512 block of 16 channels
(``MlasNchwcGetBlockSize``; 8 on AVX2). onnxruntime's ``com.microsoft.nchwc`` Conv (the op its own
graph optimiser puts in a CNN's place on x86) convolves such an input directly: no columns copied
out (im2col: a 3x3 kernel's input read nine times), no padded copy, and the result written in the
same blocked layout as the result's channel groups. One thread, ResNet-50's layers, weights in
cache: 168-223 GFLOP/s, where the columns' copy, the packed product and the grouped store took
1.9-2.3 thread-ms for what it does in ~1.1 (its 14x14 3x3 layer; 2026-11-30, this machine).

Bits: each output channel block is computed alike whatever span of blocks a session takes (checked
in tests/profiler/test_nchwc.py), so splitting a convolution's output channels over the run's
threads does not change them; they differ from the columns' product in the last places (another
order of the sums). The block size is found once by running a small convolution both ways; where
neither matches (no MLAS NCHWc kernels, or no onnxruntime), convolutions take the columns' product.
"""

from __future__ import annotations

import threading

import numpy as np

from profiler.host import packed

_block: int | None = None  # MLAS's channel block: 16 (AVX-512), 8 (AVX2), 0 when unavailable
_lock = threading.Lock()


class NchwcConv:
    """A convolution of an NCHWc float32 input ``[C/B, H, W, B]`` (batch 1; ``[C, H, W]`` when C is
    under a block, as a network's first layer reads its image) by fixed weights ``[O, C, kh, kw]``: an
    onnxruntime session of one ``com.microsoft.nchwc`` Conv, one thread, no spinning workers; its
    result ``[O/B, Ho, Wo, B]``. Weights are laid out as MLAS reads them (OIHWBiBo, or OIHWBo)."""

    def __init__(
        self,
        w: np.ndarray,
        stride: tuple[int, int],
        padding: tuple[int, int],
        dilation: tuple[int, int],
        block: int,
    ) -> None:
        from onnx import TensorProto, helper

        o, c, kh, kw = w.shape
        if c < block:  # an input of fewer channels than a block is read as NCHW (MLAS's NCHW algorithm):
            # OIHWBo, [O/B, C, kh, kw, B (output channel)] (MlasReorderFilterOIHWBo)
            blocked = w.reshape(o // block, block, c, kh, kw).transpose(0, 2, 3, 4, 1)
        else:  # OIHWBiBo: [O/B, C/B, kh, kw, B (input channel), B (output channel)] (MlasReorderFilterOIHWBiBo)
            blocked = w.reshape(o // block, block, c // block, block, kh, kw).transpose(0, 2, 4, 5, 3, 1)
        weights = helper.make_tensor(
            "w", TensorProto.FLOAT, [o, c, kh, kw], np.ascontiguousarray(blocked, np.float32).tobytes(), raw=True
        )
        (ph, pw) = padding
        node = helper.make_node(
            "Conv",
            ["x", "w"],
            ["y"],
            domain="com.microsoft.nchwc",
            kernel_shape=[kh, kw],
            strides=list(stride),
            pads=[ph, pw, ph, pw],
            dilations=list(dilation),
            group=1,
        )
        graph = helper.make_graph(
            [node],
            "nchwc",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, "h", "w"])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
            initializer=[weights],
        )
        model = helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft.nchwc", 1)]
        )
        self._session = packed.session(model)
        self.channels, self.block = (o, c), block

    def run(self, x: np.ndarray, out: np.ndarray) -> None:
        """``out`` ``[O/B, Ho, Wo, B]`` = the convolution of ``x`` ``[C/B, H, W, B]`` (``[C, H, W]``); both
        C-contiguous float32 (their memory is bound to the session: nothing is copied)."""
        o, c = self.channels
        io = self._session.io_binding()
        io.bind_input("x", "cpu", 0, np.float32, [1, c, x.shape[1], x.shape[2]], x.ctypes.data)
        io.bind_output("y", "cpu", 0, np.float32, [1, o, out.shape[1], out.shape[2]], out.ctypes.data)
        self._session.run_with_iobinding(io)


def block() -> int:
    """MLAS's NCHWc channel block on this machine (16 with AVX-512, 8 with AVX2), found once by a
    small convolution run both ways against numpy; 0 where neither gives its result."""
    global _block
    if _block is None:
        with _lock:
            if _block is None:
                _block = _probe()
    return _block


def _probe() -> int:
    if not packed.available():
        return 0
    rng = np.random.default_rng(0)
    for b in (16, 8):
        c = o = 2 * b  # two blocks each way, two pixels: the layouts of 16 and 8 differ
        w = rng.integers(-3, 4, (o, c, 1, 1)).astype(np.float32)
        x = rng.integers(-3, 4, (c, 1, 2)).astype(np.float32)  # [C, H, W], small integers: exact sums
        want = np.einsum("oc,chw->ohw", w[:, :, 0, 0], x)
        try:
            conv = NchwcConv(w, (1, 1), (0, 0), (1, 1), b)
            xb = np.ascontiguousarray(x.reshape(c // b, b, 1, 2).transpose(0, 2, 3, 1))
            out = np.empty((o // b, 1, 2, b), np.float32)
            conv.run(xb, out)
        except Exception:  # no such op or kernel in this onnxruntime build
            continue
        if np.array_equal(out.transpose(0, 3, 1, 2).reshape(o, 1, 2), want):
            return b
    return 0


def conv_of(
    weights: np.ndarray,
    first: int,
    end: int,
    columns: tuple[int, int, int, int],
    geometry: tuple[tuple[int, int], tuple[int, int], tuple[int, int]],
) -> NchwcConv | None:
    """The NCHWc convolution by output channels ``first`` to ``end`` of ``weights`` (kept ``Weights``
    ``[k, n]``, a convolution's columns by its output channels) whose rows are ordered
    ``(c // grp, i, j, c % grp)`` (``columns``: C, kh, kw, grp; ``poplar.layout.Window``), made at its
    first use and kept with the weights; None where ``weights`` are not kept or onnxruntime refuses."""
    if not isinstance(weights, packed.Weights) or not weights.packable or weights._whole is None:
        return None
    if weights.size != weights._whole.size or weights.ctypes.data != weights._whole.ctypes.data:
        return None  # a part of the kept weights: their columns are not its columns
    c, kh, kw, grp = columns
    whole = weights._whole.reshape(-1, weights._whole.shape[-1])

    def make() -> NchwcConv:  # rows (c // grp, i, j, c % grp) by columns -> [O, C, kh, kw]
        span = whole[:, first:end].reshape(c // grp, kh, kw, grp, end - first)
        return NchwcConv(span.transpose(4, 0, 3, 1, 2).reshape(end - first, c, kh, kw), *geometry, block())

    # refused (memory, or columns not so ordered): None, the columns' product
    return packed.kept_session(weights, ("nchwc", first, end, columns, geometry), make)
