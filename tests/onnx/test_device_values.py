"""A model's weights in the device type (``builder.device_values``): float32 to float16 through the run's
compiled conversion gives numpy's ``astype`` bits, specials included; other casts and shape-only
placeholders are as before."""

import numpy as np

from profiler.frontends.onnx.builder import device_values
from profiler.poplar import shape_only


def test_float32_weights_in_half_are_astypes_bits() -> None:
    x = np.random.default_rng(4).standard_normal((512, 700)).astype(np.float32) * 3e3
    specials = [np.nan, np.inf, -np.inf, 7e4, -7e4, 6e-8, -3e-8, 1e-45, 0.0, -0.0, 65504.0, 65520.0]
    x[0, : len(specials)] = specials
    x[1, :4] = np.frombuffer(
        np.array([0x7FC00001, 0xFFA00000, 0x7F800001, 0x7FFFFFFF], np.uint32).tobytes(), np.float32
    )
    with np.errstate(over="ignore", invalid="ignore"):
        want = x.astype(np.float16)
    got = device_values(x, np.dtype(np.float16))
    assert got.dtype == np.float16 and got.shape == x.shape and got.flags.writeable
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


def test_other_casts_and_placeholders_are_as_astype() -> None:
    x = np.arange(12, dtype=np.float64).reshape(3, 4)
    np.testing.assert_array_equal(device_values(x, np.dtype(np.float32)), x.astype(np.float32))
    strided = np.arange(24, dtype=np.float32).reshape(4, 6)[:, ::2]  # not contiguous: numpy's cast
    np.testing.assert_array_equal(device_values(strided, np.dtype(np.float16)), strided.astype(np.float16))
    held = shape_only.placeholder((1024, 1024), np.float32)
    assert shape_only.is_placeholder(device_values(held, np.dtype(np.float16)))
