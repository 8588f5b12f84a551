"""Tile runs of a grouped view by bands of rows, not by groups (``Graph.view_runs``).

A matmul result held as PopLibs creates it is stored ``{C/ocpg, rows, ocpg}`` (lib/poplin/Convolution.cpp
``getPartialOutputShape``) and read as ``[rows, C]``: each row of the view is ``C/ocpg`` runs of 8 or 16
elements. Its mapping gives each tile a rectangle of rows by groups, so within a stretch of rows no
interval starts (a *band*) every row crosses the same tiles at the same columns. The view's runs on
one tile are then found once per band and column group and repeated for the band's rows: the work
follows the mapping's intervals and the runs it returns, where walking the view a group at a time
took a piece per 8 elements (the attention scores at S = 2,048: 16.8 M pieces a layer).
"""

from __future__ import annotations

import numpy as np

from profiler.host import sorting
from profiler.poplar.layout import Affine, cut_ranges


def band_runs(
    lay: Affine, inner: int, starts: np.ndarray, tiles: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:  # fmt: skip
    """(first position, tile) of each run of ``lay``'s positions on one tile, in order, neighbours on
    one tile merged, for a view whose trailing ``inner`` positions read consecutive elements and one
    of whose dims outside them (the rows) steps ``inner`` elements: ``[rows, inner]`` is contiguous
    in the variable, so each combination of the other dims is a contiguous *column* of it, cut where
    the mapping's intervals (``starts``, on ``tiles``) start. None when there is no such dim, an
    interval starts inside a row's ``inner`` elements, or bands save nothing over a piece per row
    and column (the caller then walks the columns' runs)."""
    dims = [(int(n), int(s)) for n, s in zip(lay.shape, lay.strides, strict=True) if n != 1]
    size, k = 1, len(dims)
    while k > 0 and size < inner:  # the trailing dims the inner run covers
        k -= 1
        size *= dims[k][0]
    outer = dims[:k]
    band_dim = next((d for d, (_, s) in enumerate(outer) if s == inner), None)
    if size != inner or band_dim is None:
        return None
    rows = outer[band_dim][0]
    pre, post = outer[:band_dim], outer[band_dim + 1 :]
    n_pre = int(np.prod([n for n, _ in pre], dtype=np.int64))
    n_post = int(np.prod([n for n, _ in post], dtype=np.int64))
    # each column's first element: pre-major, then post, in the view's order
    base = np.full(1, lay.offset, dtype=np.int64)
    for n, s in pre + post:
        base = (base[:, None] + np.arange(n, dtype=np.int64) * s).reshape(-1)
    span = rows * inner
    sub, pieces = cut_ranges(starts, base, np.full(base.size, span, dtype=np.int64))
    column = np.repeat(np.arange(base.size, dtype=np.int64), pieces)
    offset = sub - base[column]  # each piece's first element within its column
    if (offset % inner).any():
        return None  # a tile's part starts inside a row's run
    piece_row = offset // inner
    piece_tile = tiles[np.searchsorted(starts, sub, side="right") - 1]
    # the bands of each pre index: every row where any of its columns' pieces starts
    pre_of = column // n_post
    key = sorting.unique(pre_of * rows + piece_row)
    band_pre, band_row = key // rows, key % rows
    n_bands = np.bincount(band_pre, minlength=n_pre)
    if int(n_bands.sum()) * n_post * 2 > lay.size // inner:
        return None
    # the tile of every (band, post) column: the piece of that column holding the band's first row
    band_first = np.cumsum(n_bands) - n_bands
    cell_band = np.repeat(np.arange(key.size, dtype=np.int64), n_post)
    cell_col = band_pre[cell_band] * n_post + np.tile(np.arange(n_post, dtype=np.int64), key.size)
    at = np.searchsorted(column * rows + piece_row, cell_col * rows + band_row[cell_band], side="right") - 1
    cell_tile = piece_tile[at].reshape(key.size, n_post)
    # a band's rows cross its tiles at the same columns: its runs in one row, then repeated
    change = np.ones(cell_tile.shape, dtype=bool)
    change[:, 1:] = cell_tile[:, 1:] != cell_tile[:, :-1]
    run_band, run_col = np.nonzero(change)  # band by band, each band's runs in column order
    per_band = np.bincount(run_band, minlength=key.size)
    run_first = np.cumsum(per_band) - per_band
    band_end = np.append(band_row[1:], rows)
    band_end[(band_first + n_bands - 1)[n_bands > 0]] = rows  # a pre index's last band runs to its end
    # a band on one tile throughout is one run of all its rows (consecutive in the view); another
    # gives each of its rows its runs, row by row
    height = np.where(per_band == 1, 1, band_end - band_row)
    count = height * per_band
    band = np.repeat(np.arange(key.size, dtype=np.int64), count)
    e = np.arange(band.size, dtype=np.int64) - np.repeat(np.cumsum(count) - count, count)
    run = run_first[band] + e % per_band[band]
    r = band_row[band] + e // per_band[band]
    pos = band_pre[band] * (rows * n_post * inner) + r * (n_post * inner) + run_col[run] * inner
    tile = cell_tile.reshape(-1)[band * n_post + run_col[run]]
    keep = np.ones(tile.size, dtype=bool)
    keep[1:] = tile[1:] != tile[:-1]
    return pos[keep], tile[keep]
