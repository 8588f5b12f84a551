"""Typed tile selections: "0-3, 7, 100-103" -> [0, 1, 2, 3, 7, 100, 101, 102, 103]."""

from __future__ import annotations


def parse_tile_list(text: str, num_tiles: int) -> list[int]:
    """Parse a comma-separated list of tiles and inclusive ranges; ValueError names the bad part."""
    tiles: set[int] = set()
    for part in (p.strip() for p in text.replace(";", ",").split(",")):
        if not part:
            continue
        lo_s, sep, hi_s = part.partition("-")
        try:
            lo = int(lo_s)
            hi = int(hi_s) if sep else lo
        except ValueError:
            raise ValueError(f"tile list: {part!r} is not a tile number or a range like 4-7") from None
        if lo > hi:
            raise ValueError(f"tile list: range {part!r} runs backwards")
        if lo < 0 or hi >= num_tiles:
            raise ValueError(f"tile list: {part!r} is outside tiles 0-{num_tiles - 1}")
        tiles.update(range(lo, hi + 1))
    return sorted(tiles)
