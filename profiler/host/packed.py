"""Products by a layer's weights through a copy of them packed once, by onnxruntime's MLAS kernels.

OpenBLAS packs a matmul's right-hand matrix into its kernel's panels at every call. A convolution's
weights multiply a few rows at batch 1 (ResNet-50's 7x7 layers: 49), where that packing is most of
the work: (49, 4608) @ (4608, 512) ran at ~63 GFLOP/s a thread. onnxruntime packs a MatMul's
constant operand once, when its session is made (MLAS ``MlasGemmPackB``), and then multiplies at
~100 (101-113 GFLOP/s for ResNet-50's 49-row layers, 145-158 for its larger ones against 116-137;
one thread, six weights in turn so that each comes from memory, 2026-11-30). A weight the running
program does not write (``ReadCache`` keeps its float32 copy) is packed at its first product, per
span of columns a product takes, within ``PACKED_BYTES`` a cache.

Bits: MLAS computes each element of a product alike whatever rows and columns it is computed with
(checked in tests/profiler/test_packed.py), as OpenBLAS does, so splitting a product over the run's
threads does not change them; they differ from OpenBLAS's in the last places (another order of
the sums). A product takes one of the two by its weight alone, whatever the machine's cores.
Without onnxruntime, every product is numpy's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from profiler.host import scratch

# Bytes of packed weights one read cache holds (ResNet-50's: ~100 MB in float32); a weight beyond
# it multiplies through numpy's BLAS, so a large model's host memory does not grow by its weights
PACKED_BYTES = 256 << 20

_ort: Any = None  # onnxruntime, imported at the first packing
_UNMADE: Any = object()  # a span not packed yet (None: one onnxruntime could not pack)
_looked = False
lock = threading.Lock()  # held while a kept span's session is made (each made once)


def _onnxruntime() -> Any:
    global _ort, _looked
    if not _looked:
        _looked = True
        try:
            import onnxruntime

            _ort = onnxruntime
        except ImportError:  # optional at run time: numpy's BLAS then
            _ort = None
    return _ort


def available() -> bool:
    """Whether products can run packed (onnxruntime imports)."""
    return _onnxruntime() is not None


def session(model: Any) -> Any:
    """An onnxruntime session of ``model`` (an ``onnx.ModelProto``) on one thread with no spinning
    workers, unoptimised: the run's own threads split the work (``profiler.host.parallel``)."""
    ort = _onnxruntime()
    assert ort is not None, "a session needs onnxruntime (packed.available())"
    model.ir_version = 8  # what every onnxruntime since 1.10 reads
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


class PackedMatrix:
    """``a @ w`` for a fixed float32 ``w`` ``[k, n]``: an onnxruntime session of one MatMul whose
    constant operand MLAS packed when the session was made; one thread, no spinning workers."""

    def __init__(self, w: np.ndarray) -> None:
        from onnx import TensorProto, helper, numpy_helper

        k, n = w.shape
        graph = helper.make_graph(
            [helper.make_node("MatMul", ["a", "w"], ["y"])],
            "packed",
            [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["m", k])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["m", n])],
            initializer=[numpy_helper.from_array(np.ascontiguousarray(w, np.float32), "w")],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        self._session = session(model)
        self.shape = (k, n)

    def multiply(self, a: np.ndarray, out: np.ndarray) -> None:
        """``out[...] = a @ w``: ``a`` ``[m, k]`` and ``out`` ``[m, n]``, both C-contiguous float32."""
        io = self._session.io_binding()
        io.bind_cpu_input("a", a)
        io.bind_output("y", "cpu", 0, np.float32, list(out.shape), out.ctypes.data)
        self._session.run_with_iobinding(io)


class Weights(np.ndarray):
    """A product operand ``[k, n]`` (float32, C-contiguous) the running program does not write,
    kept by a read cache: its column spans' packed copies are made at their first product and kept
    with it (views of it share them). ``packable``: within the cache's ``PACKED_BYTES``."""

    _packs: dict[object, Any]  # by span: its PackedMatrix, or its nchwc.NchwcConv (None: refused)
    _whole: np.ndarray | None
    packable: bool

    def __array_finalize__(self, obj: object) -> None:
        self._packs = getattr(obj, "_packs", {})
        self._whole = getattr(obj, "_whole", None)
        self.packable = getattr(obj, "packable", False)


def weights(values: np.ndarray, packable: bool) -> np.ndarray:
    """``values`` (a kept float32 product operand) as ``Weights`` whose products run packed where
    ``packable`` and onnxruntime imports; else as they are."""
    if not packable or values.dtype != np.float32 or values.ndim < 2 or not values.flags.c_contiguous:
        return values
    if not available():
        return values
    w = values.view(Weights)
    w._packs, w._whole, w.packable = {}, values, True
    return w


def packed_of(b: np.ndarray) -> PackedMatrix | None:
    """The packed copy of ``b`` (a 2-d view of ``Weights``: whole rows, a span of its columns),
    made at its first use; None where ``b`` is not such a view (an array computed from one is not:
    it lies outside the weights' memory), or onnxruntime could not pack it (numpy's then)."""
    if not isinstance(b, Weights) or not b.packable or b.ndim != 2 or b._whole is None:
        return None
    whole = b._whole
    rows = whole.reshape(-1, whole.shape[-1])
    if b.shape[0] != rows.shape[0] or b.strides[0] != rows.strides[0] or b.strides[1] != 4:
        return None
    start_byte = b.__array_interface__["data"][0] - rows.__array_interface__["data"][0]
    start = start_byte // 4
    if not 0 <= start_byte < rows.strides[0] or start + b.shape[1] > rows.shape[1]:
        return None  # not a span of the weights' columns
    first, end = start, start + b.shape[1]
    return kept_session(b, (first, end), lambda: PackedMatrix(np.asarray(rows[:, first:end])))


def kept_session(weights: Weights, key: object, make: Callable[[], Any]) -> Any:
    """``make()`` (a session made from ``weights``: a span packed, or a convolution's), made at its
    first use under ``key`` and kept with the weights; None, kept alike, where onnxruntime refused it
    (memory, a build without the kernel): that span is then numpy's every run. Two threads' sessions
    are made one at a time (each once)."""
    made = weights._packs.get(key, _UNMADE)
    if made is _UNMADE:
        with lock:
            made = weights._packs.get(key, _UNMADE)
            if made is _UNMADE:
                try:
                    made = make()
                except Exception:
                    made = None
                weights._packs[key] = made
    return made


def multiply(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """``out[...] = a @ b`` for 2-d ``a``, ``b``, ``out`` on this thread: packed where ``b`` is a
    view of ``Weights`` (``a`` and ``out`` C-contiguous float32), else numpy's."""
    packed = packed_of(b)
    if packed is not None and a.flags.c_contiguous and a.dtype == np.float32:
        if out.flags.c_contiguous:
            packed.multiply(a, out)
        else:  # a span of out's columns: through this thread's buffer
            tmp = scratch.buffer("packed", out.shape, np.float32)
            packed.multiply(a, tmp)
            out[...] = tmp
        return
    np.matmul(np.asarray(a), np.asarray(b), out=out)
