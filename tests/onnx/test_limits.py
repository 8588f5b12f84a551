"""The sizes the importer checks before a node runs (profiler/frontends/onnx/limits.py): each planned
shape equals the shape onnx.reference gives when it runs the node, so the check refuses exactly the
outputs that would be made, and nothing is allocated to find out."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from profiler.chip.targets import get_target
from profiler.frontends.onnx.errors import FrontendError
from profiler.frontends.onnx.limits import check_output_size, planned_shape
from profiler.host.host_memory import HostMemoryError

I64 = np.int64
CASES = [
    ("Expand", [np.ones((3, 1), np.float32), np.array([2, 3, 4], I64)], {}),
    ("Expand", [np.ones((1, 5), np.float16), np.array([4, 1], I64)], {}),
    ("Tile", [np.ones((2, 3), np.float32), np.array([3, 2], I64)], {}),
    ("Pad", [np.ones((2, 3), np.float32), np.array([1, 0, 2, 4], I64)], {}),
    ("Range", [np.array(1.5, np.float32), np.array(9.0, np.float32), np.array(2.0, np.float32)], {}),
    ("Range", [np.array(10, I64), np.array(1, I64), np.array(-3, I64)], {}),
    ("OneHot", [np.array([0, 2, 1], I64), np.array(5, I64), np.array([0.0, 1.0], np.float32)], {}),
    ("ConstantOfShape", [np.array([2, 7], I64)], {"value": numpy_helper.from_array(np.array([3], np.int32))}),
]


@pytest.mark.parametrize(("op", "args", "attrs"), CASES, ids=[f"{c[0]}{i}" for i, c in enumerate(CASES)])
def test_planned_shape_is_the_shape_the_node_makes(op: str, args: list[np.ndarray], attrs: dict) -> None:
    names = [f"i{k}" for k in range(len(args))]
    node = helper.make_node(op, names, ["out"], **attrs)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape) for n, a in zip(names, args, strict=True)],
        [helper.make_empty_tensor_value_info("out")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    (made,) = ReferenceEvaluator(model).run(None, dict(zip(names, args, strict=True)))
    assert planned_shape(node, args) == list(made.shape)


def test_a_device_output_larger_than_all_tiles_is_refused_with_its_bytes() -> None:
    target = get_target("GC200", 2)
    total = 2 * target.tiles_per_ipu * target.bytes_per_tile
    node = helper.make_node("Tile", ["x", "r"], ["y"])

    class DeviceValue:  # what a device tensor shows the check: its shape and type
        shape, dtype = (1, 4), np.dtype(np.float32)

    rows = total // 16 + 1  # 16 bytes a row: one more than the tiles hold
    with pytest.raises(FrontendError, match=rf"output \[{rows}, 4\], {rows * 16:,} bytes\): more than .* 2 IPUs"):
        check_output_size(node, "t", [DeviceValue(), np.array([rows, 1], I64)], target, on_host=False)
    check_output_size(node, "t", [DeviceValue(), np.array([rows - 2, 1], I64)], target, on_host=False)  # fits


def test_a_host_value_larger_than_host_memory_is_refused_before_it_is_made() -> None:
    node = helper.make_node("ConstantOfShape", ["s"], ["y"])
    with pytest.raises(
        HostMemoryError, match=r"\(ConstantOfShape, output \[1000000, 1000000000\], 4,000,000,000,000,000 bytes\)"
    ):
        check_output_size(node, "c", [np.array([10**6, 10**9], I64)], get_target("GC200", 1), on_host=True)
