"""--fail-if expressions: parsing, the three modes and edge cases, on hand-written metric deltas."""

from __future__ import annotations

import math

import pytest

from app.comparison.metrics import metric_deltas
from app.comparison.thresholds import ThresholdError, check_thresholds, parse_threshold

METRICS = metric_deltas(
    {"execution.total_cycles": 1000, "memory.max_tile_bytes": 500_000, "memory.out_of_memory_tiles": 0, "only.base": 1},
    {"execution.total_cycles": 1100, "memory.max_tile_bytes": 480_000, "memory.out_of_memory_tiles": 2},
)


def crossed(expr: str) -> bool:
    (result,) = check_thresholds([parse_threshold(expr, METRICS)], METRICS)
    return result["crossed"]


def test_metric_deltas() -> None:
    assert METRICS["execution.total_cycles"] == {"baseline": 1000, "active": 1100, "delta": 100, "ratio": 1.1}
    assert METRICS["memory.out_of_memory_tiles"]["ratio"] is None
    assert METRICS["only.base"] == {"baseline": 1, "active": None, "delta": None, "ratio": None}


@pytest.mark.parametrize(
    ("expr", "mode", "value"),
    [
        ("execution.total_cycles>+5%", "relative", 5.0),
        ("execution.total_cycles > 5%", "relative", 5.0),
        ("execution.total_cycles<-2.5%", "relative", -2.5),
        ("execution.total_cycles>+100", "delta", 100.0),
        ("execution.total_cycles>=1e3", "value", 1000.0),
        ("memory.max_tile_bytes>600_000", "value", 600000.0),
    ],
)
def test_parse(expr: str, mode: str, value: float) -> None:
    t = parse_threshold(expr, METRICS)
    assert (t.mode, t.value) == (mode, value)


def test_relative_delta_and_value_modes() -> None:
    assert crossed("execution.total_cycles>+5%") and not crossed("execution.total_cycles>+10%")
    assert crossed("execution.total_cycles>=+10%")
    assert crossed("execution.total_cycles>+99") and not crossed("execution.total_cycles>+100")
    assert crossed("execution.total_cycles>1099") and not crossed("execution.total_cycles>1100")
    assert crossed("memory.max_tile_bytes<-3%") and not crossed("memory.max_tile_bytes<-5%")
    assert not crossed("memory.max_tile_bytes>600000")


def test_relative_change_from_zero_is_infinite() -> None:
    t = parse_threshold("memory.out_of_memory_tiles>+1000%", METRICS)
    (r,) = check_thresholds([t], METRICS)
    assert r["crossed"] and math.isinf(r["measured"])


def test_metric_missing_on_one_side_counts_as_crossed() -> None:
    (r,) = check_thresholds([parse_threshold("only.base>+1%", METRICS)], METRICS)
    assert r["crossed"] and "missing in one report" in r["message"]


@pytest.mark.parametrize("expr", ["", "execution.total_cycles", ">5", "execution.total_cycles>>5", "a>5%%"])
def test_malformed(expr: str) -> None:
    with pytest.raises(ThresholdError, match="malformed"):
        parse_threshold(expr, METRICS)


def test_unknown_metric_suggests_close_names() -> None:
    with pytest.raises(ThresholdError, match="did you mean memory.max_tile_bytes"):
        parse_threshold("memory.max_tile_byte>1", METRICS)
