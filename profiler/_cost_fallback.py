"""TEMPORARY stand-in for profiler.cost_model (being written by another helper); deleted once it lands."""

from __future__ import annotations

import numpy as np


def _vw(dtype) -> int:
    return 4 if np.dtype(dtype).itemsize == 2 else 2


def unary_cycles(op, n, dtype, target):
    n = np.asarray(n, dtype=np.int64)
    w = target.num_worker_contexts
    return w * (17 + ((n + w - 1) // w + _vw(dtype) - 1) // _vw(dtype) * 6) + 20


def binary_cycles(op, n, dtype, target, in_place=False):
    n = np.asarray(n, dtype=np.int64)
    w = target.num_worker_contexts
    return w * (29 + ((n + w - 1) // w + _vw(dtype) - 1) // _vw(dtype) * 3) + 11


def reduce_cycles(op, n_in, n_out, dtype, target):
    n_in = np.asarray(n_in, dtype=np.int64)
    return 33 + 9 * -(-n_in // _vw(dtype)) + 10 * np.asarray(n_out)


def copy_cycles(n_bytes, target):
    return 20 + -(-np.asarray(n_bytes, dtype=np.int64) // 8)


def fill_cycles(n, dtype, target):
    return 22 + -(-np.asarray(n, dtype=np.int64) // _vw(dtype))


def amp_matmul_cycles(rows, in_chans, out_chans, dtype, partials_dtype, target):
    rows, k, m = (np.asarray(x, dtype=np.int64) for x in (rows, in_chans, out_chans))
    return 300 + rows * -(-(k * m) // 64) * 4


def tile_compute_cycles(tile, cycles, multi_worker, num_tiles, target):
    tile = np.asarray(tile)
    cycles = np.asarray(cycles, dtype=np.int64)
    return np.bincount(tile, weights=cycles, minlength=num_tiles).astype(np.int64)


def exchange_cycles(bytes_in, bytes_out, target):
    b = np.maximum(np.asarray(bytes_in), np.asarray(bytes_out))
    return np.where(b > 0, -(-b // 4) + 30, 0).astype(np.int64)


def global_exchange_cycles(bytes_, target):
    b = np.asarray(bytes_)
    return np.where(b > 0, np.ceil(b / target.ipu_link_bytes_per_cycle) + 100, 0).astype(np.int64)


def stream_copy_cycles(total_bytes, target):
    return int(np.ceil(total_bytes / target.host_bytes_per_cycle)) + 500


def sync_cycles(kind, target):
    return target.internal_sync_cycles if kind == "internal" else target.external_sync_cycles


def unary_flops(op, n, dtype):
    return np.asarray(n, dtype=np.int64)


def binary_flops(op, n, dtype):
    return np.asarray(n, dtype=np.int64)


def reduce_flops(op, n_in, n_out, dtype):
    return np.asarray(n_in, dtype=np.int64) - np.asarray(n_out, dtype=np.int64)


def matmul_flops(rows, in_chans, out_chans):
    return 2 * np.asarray(rows, dtype=np.int64) * in_chans * out_chans
