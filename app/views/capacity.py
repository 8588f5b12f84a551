"""Whether a graph could fit its IPUs' tile memory at all.

Tiles out of memory may be a matter of placement (one tile holds more than its share) or of size:
when all the tiles together need more than they hold, no memory proportion, plan or tile mapping
makes the graph fit; only more IPUs or less data can. The out-of-memory insight
(``app.views.insights``, and so ``tilescope whatif``) and ``tilescope run``'s line for a graph that
does not fit say so in this one sentence.
"""

from __future__ import annotations

import math

from app.units import format_bytes, plural


def fewest_ipus(total_bytes: int, bytes_per_tile: int, tiles_per_ipu: int) -> int:
    """The fewest IPUs whose tile memory holds ``total_bytes`` in all: a lower bound (every tile
    full, and a tile's code and exchange buffers do not shrink as the graph spreads over more)."""
    return max(1, math.ceil(total_bytes / (bytes_per_tile * tiles_per_ipu)))


def over_capacity(total_bytes: int, bytes_per_tile: int, tiles: int, tiles_per_ipu: int) -> str | None:
    """The sentence for a graph whose ``tiles`` together need more than they hold (``total_bytes``,
    each tile's bytes including gaps, summed); None when they hold it."""
    held = bytes_per_tile * tiles
    if total_bytes <= held:
        return None
    ipus = max(1, tiles // tiles_per_ipu)
    return (
        f"together the tiles need {format_bytes(total_bytes)}, {total_bytes / held:.1f}x the "
        f"{format_bytes(held)} that {plural(ipus, 'IPU')} {'holds' if ipus == 1 else 'hold'}: no memory proportion "
        f"or tile mapping makes the graph fit; it needs the memory of at least "
        f"{fewest_ipus(total_bytes, bytes_per_tile, tiles_per_ipu):,} IPUs, or less data (a shorter sequence, "
        "a smaller batch or type)"
    )
