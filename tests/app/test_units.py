"""The one formatter per unit (app.units), on hand-computed cases."""

from __future__ import annotations

import pytest

from app.units import (
    binary_ticks,
    format_delta,
    format_flops,
    format_pp,
    graph_counts,
    plural,
)

MiB = 1024**2


def test_byte_ticks_are_binary_and_cover_the_peak():
    # the case: a 501.6 MiB peak; decimal ticks put it above a "500M" line
    vals, labels = binary_ticks(0, 501.6 * MiB)
    assert vals == [0, 128 * MiB, 256 * MiB, 384 * MiB, 512 * MiB]
    assert labels == ["0", "128 MiB", "256 MiB", "384 MiB", "512 MiB"]


@pytest.mark.parametrize(
    ("lo", "hi", "labels"),
    [
        (0, 638_976, ["0", "128 KiB", "256 KiB", "384 KiB", "512 KiB", "640 KiB"]),  # a C600 tile: 624 KiB
        (0, 3000, ["0", "0.5 KiB", "1 KiB", "1.5 KiB", "2 KiB", "2.5 KiB", "3 KiB"]),
        (0, 100, ["0", "32 B", "64 B", "96 B", "128 B"]),
        (-2_000_000, 5_000_000, ["\u22122 MiB", "0", "2 MiB", "4 MiB", "6 MiB"]),  # a delta axis, U+2212 as plotly
        (0, 1.3 * 1024**3, ["0", "0.25 GiB", "0.5 GiB", "0.75 GiB", "1 GiB", "1.25 GiB", "1.5 GiB"]),
    ],
)
def test_byte_ticks(lo, hi, labels):
    vals, got = binary_ticks(lo, hi)
    assert got == labels
    step = vals[1] - vals[0]
    assert step == 2 ** int(step).bit_length() / 2  # a power of two
    assert vals[0] <= lo and vals[-1] >= hi


def test_byte_ticks_of_an_empty_range():
    assert binary_ticks(0, 0) == ([0.0], ["0"])


def test_plural():
    assert plural(1, "sample") == "1 sample"
    assert plural(0, "sample") == "0 samples"
    assert plural(1234, "compute set") == "1,234 compute sets"
    assert plural(1, "vertex", "vertices") == "1 vertex"
    assert plural(2, "vertex", "vertices") == "2 vertices"
    g = {"variables": 1, "compute_sets": 1, "vertices": 2, "program_steps": 1}
    assert graph_counts(g) == "1 variable, 1 compute set, 2 vertices, 1 program step"


def test_flops():
    assert format_flops(1) == "1 FLOP"
    assert format_flops(4) == "4 FLOPs"
    assert format_flops(2_843_000_000) == "2.84 GFLOPs"
    assert format_flops(1_500) == "1.5 kFLOPs"


def test_percentage_changes_are_points():
    assert format_pp(0.079) == "+7.9 pp"
    assert format_pp(-0.0125) == "\u22121.2 pp"  # the minus sign, as the grids (d3-format) write it
    assert format_pp(None) == "-"
    # a tile balance from 75% to 82.9%: +7.9 points, with no relative change beside it
    assert format_delta("execution.tile_balance", 0.079, 0.829 / 0.75) == "+7.9 pp"
    # bytes keep their relative change
    assert format_delta("memory.total_bytes_including_gaps", 1536, 1.1055) == "+1.5 KiB (+10.55%)"
    assert format_delta("execution.total_cycles", -200, 0.8) == "\u2212200 (\u221220.00%)"
    assert format_delta("execution.total_cycles", 0, 1.0) == "0"


def test_changes_in_text_use_the_grids_minus_sign() -> None:
    """Sentences and delta cells write a negative change with U+2212, as AG Grid's d3-format does in
    the compare grids beside them; a hyphen inside a name is left alone."""
    from app.units import MINUS, signed_bytes, with_minus

    assert MINUS == "\u2212"
    assert signed_bytes(-1536) == "\u22121.5 KiB" and signed_bytes(1536) == "+1.5 KiB" and signed_bytes(0) == "0 B"
    assert with_minus("-3 (-0.50%) s3b0-conv") == "\u22123 (\u22120.50%) s3b0-conv"
    assert "-" not in format_delta("memory.total_bytes_including_gaps", -2048, 0.5)
