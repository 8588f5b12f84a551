"""A sweep's grid: comma-separated values of ``tilescope run`` options, and the points they make.

Each point is a ``tilescope run`` command line (``Point.argv``) parsed and checked by ``run``'s own
parser (``tilescope.commands.run.parse_options``), so a value ``run`` would refuse is refused here,
before anything starts, with the same words. A point's identity is its parsed options
(``Point.options``), never a file name: a rerun finds finished points by it.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
from dataclasses import dataclass
from typing import Any

from tilescope.errors import CommandError

#: Options a sweep takes as comma-separated lists, in grid order (the first varies slowest), with the
#: short prefix each contributes to a point's name. The values are ``tilescope run``'s, unchanged.
GRID: dict[str, str] = {
    "target": "",
    "batch": "b",
    "dtype": "",
    "partials": "partials-",
    "available_memory_proportion": "amp",
    "ipus": "ipus",
    "replicas": "replicas",
}
#: A grid larger than this is a typo, not a sweep (each point is seconds to minutes of host time).
MAX_POINTS = 1000


def flag(option: str) -> str:
    return "--" + option.replace("_", "-")


def split_values(option: str, text: str) -> list[str]:
    """``"1,8,32"`` -> ``["1", "8", "32"]``; CommandError for an empty or repeated value."""
    values = [v.strip() for v in text.split(",")]
    if any(not v for v in values):
        raise CommandError(f"{flag(option)} {text!r}: an empty value; give values separated by commas, e.g. 1,8,32")
    repeated = sorted({v for v in values if values.count(v) > 1})
    if repeated:
        raise CommandError(f"{flag(option)} {text!r}: {repeated[0]} is given twice")
    return values


@dataclass(frozen=True)
class Point:
    """One point of the grid."""

    index: int
    values: dict[str, str]  # grid option -> value, as given
    argv: list[str]  # the point's ``tilescope run`` options (the model path excluded)
    options: dict[str, Any]  # the parsed options: what the point *is*
    label: str  # the options that vary over the grid

    @property
    def name(self) -> str:
        """A directory name for the point's report and record: its label and a digest of its options
        (unique per options; nothing is ever looked up by it)."""
        digest = hashlib.sha256(json.dumps(self.options, sort_keys=True).encode()).hexdigest()[:8]
        return f"{self.label}-{digest}" if self.label else digest

    def key(self) -> str:
        """The options as canonical JSON: equal for equal points."""
        return json.dumps(self.options, sort_keys=True)


def _label(values: dict[str, str], varying: set[str]) -> str:
    return "-".join(f"{GRID[k]}{v}" for k, v in values.items() if k in varying)


def points(grid: dict[str, str | None], fixed: list[str], pipeline: bool) -> list[Point]:
    """The grid's points: every combination of ``grid``'s value lists (an option left out takes
    ``run``'s default), each with the ``fixed`` run options; with ``pipeline``, the points on two
    or more IPUs are pipelined (a one-IPU point has no stages to pipeline, so it runs as it is)."""
    from tilescope.commands.run import parse_options

    lists = {k: split_values(k, v) for k, v in grid.items() if v is not None}
    total = 1
    for values in lists.values():
        total *= len(values)
    if total > MAX_POINTS:
        raise CommandError(f"the grid has {total:,} points; at most {MAX_POINTS:,} (is a list mistyped?)")
    varying = {k for k, v in lists.items() if len(v) > 1}
    out = []
    for index, combo in enumerate(itertools.product(*lists.values())):
        chosen = dict(zip(lists, combo, strict=True))
        argv = [a for k, v in chosen.items() for a in (flag(k), v)] + fixed
        if pipeline and int(_parsed(parse_options, argv, chosen).ipus) >= 2:
            argv.append("--pipeline")
        args = _parsed(parse_options, argv, chosen)
        options = {k: v for k, v in sorted(vars(args).items()) if k not in _NOT_THE_POINT}
        out.append(Point(index, chosen, argv, options, _label(chosen, varying)))
    return out


def script_points(grid: dict[str, str | None]) -> list[Point]:
    """A workload script's points: each combination's values given to the script as its own
    arguments (``--batch 8``); ``run``'s parser does not know a script's options, so the script checks them."""
    lists = {k: split_values(k, v) for k, v in grid.items() if v is not None}
    varying = {k for k, v in lists.items() if len(v) > 1}
    out = []
    for index, combo in enumerate(itertools.product(*lists.values())):
        chosen = dict(zip(lists, combo, strict=True))
        argv = [a for k, v in chosen.items() for a in (flag(k), v)]
        out.append(Point(index, chosen, argv, {"script_args": argv}, _label(chosen, varying)))
    return out


#: Parsed run options that do not change what a point computes (they concern only ``run``'s terminal).
_NOT_THE_POINT = frozenset({"json", "force", "save_outputs", "check", "check_tolerance", "report_dir", "random_inputs"})


def _parsed(parse: Any, argv: list[str], values: dict[str, str]) -> argparse.Namespace:
    """``run``'s parse of a point; its one-line error names the point when the grid has several."""
    try:
        return parse(argv)
    except CommandError as exc:
        where = " ".join(f"{flag(k)} {v}" for k, v in values.items())
        raise CommandError(f"{exc} (at the point {where})" if where else str(exc)) from None
