"""What-if proposals: an insight's change of run options, as data, with its predicted effect.

A ``Proposal`` carries the options to change (``{"available_memory_proportion": 0.3}``,
``{"batch": 64}``, ``{"ipus": 2}``) and, where the insight has one, the predicted change of the
report's headline figures (``FIGURES``) as a range: a bound the cost model guarantees, or an
estimate from the report's own numbers, never a tuned factor. ``tilescope whatif REPORT --apply N``
re-simulates with the change and sets the measured change beside it.

Pure functions of a report (and its manifest's ``origin``); ``app.views.insights`` decides when a
proposal is made, this module what it says.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from app.units import format_bytes, format_count, signed_bytes, with_minus
from app.views.runs import computing_runs
from report_format.origin import Origin
from report_format.reader import Report

#: The figures a what-if compares, in table order: (key, label, unit).
FIGURES: tuple[tuple[str, str, str], ...] = (
    ("max_tile_bytes", "memory peak (fullest tile)", "bytes"),
    ("total_bytes", "total memory (all tiles)", "bytes"),
    ("cycles", "cycles per run", "cycles"),
    ("samples_per_second", "samples/s", "samples/s"),
)
#: A lower availableMemoryProportion is proposed as half the current one (a step users take by hand:
#: PopART's memory guide suggests lowering it in steps), never below this floor.
MIN_AVAILABLE_MEMORY_PROPORTION = 0.05


@dataclass(frozen=True)
class Proposal:
    """One change of run options an insight proposes. ``predicted[figure] = (low, high)`` bounds the
    change (after - before) of a figure of ``FIGURES``; ``None`` is an open end; a figure left out
    has no prediction. ``basis`` says where the prediction comes from."""

    insight: str
    change: dict[str, Any]
    predicted: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    basis: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "insight": self.insight,
            "change": dict(self.change),
            "predicted": {k: {"low": lo, "high": hi} for k, (lo, hi) in self.predicted.items()},
            "basis": self.basis,
        }


def origin(report: Report) -> Origin | None:
    """How the report was made, when its manifest says (reports from before, or from a user's own
    engine, do not)."""
    return report.manifest.origin


def samples_per_run(o: Origin | None) -> int | None:
    """Samples a run of a model: batch x replicas x micro-batches (as ``tilescope run`` counts them)."""
    if o is None or o.kind != "model" or not isinstance(o.options.get("batch"), int):
        return None
    opts = o.options
    return int(opts["batch"]) * int(opts.get("replicas", 1)) * int(opts.get("micro_batches", 1))


def figures(report: Report) -> dict[str, float | None]:
    """The report's headline figures a what-if compares (``FIGURES``): memory from the graph
    profile, cycles as the mean of the runs that compute (the inference runs ``tilescope run``
    counts; a weight upload is left out), samples/s from those at the target's clock."""
    tm = report.tile_memory()["total_bytes_including_gaps"].to_numpy()
    out: dict[str, float | None] = {
        "max_tile_bytes": float(tm.max()) if tm.size else None,
        "total_bytes": float(tm.sum()) if tm.size else None,
        "cycles": None,
        "samples_per_second": None,
    }
    if report.has_execution_profile and report.num_rows("runs"):
        runs = report.table("runs", ["run", "cycles"]).to_pandas()
        computing = runs[runs["run"].isin(computing_runs(report))]
        if len(computing):
            cycles = float(np.mean(computing["cycles"].to_numpy()))
            out["cycles"] = cycles
            samples = samples_per_run(origin(report))
            if samples and cycles:
                out["samples_per_second"] = samples * report.target_info.clock_hz / cycles
    return out


def change_text(change: dict[str, Any]) -> str:
    """``--option value`` as ``tilescope run`` takes them (what a user would type)."""
    parts = []
    for k, v in change.items():
        flag = "--" + k.replace("_", "-")
        parts.append(flag if v is True else f"{flag} {v:g}" if isinstance(v, float) else f"{flag} {v}")
    return " ".join(parts)


def format_figure(key: str, value: float | None, signed: bool = False) -> str:
    """A what-if figure in its unit; ``signed``: a change, with "+" or the minus sign the rest of the
    app and the CLI write ("+1.5 KiB", "−1.5 KiB", "−10": ``app.units.signed_bytes`` / ``with_minus``)."""
    if value is None:
        return "—"
    if key.endswith("bytes"):
        return signed_bytes(value) if signed else format_bytes(value)
    text = f"{value:,.1f}" if key == "samples_per_second" else format_count(int(round(value)))
    return with_minus(("+" if value > 0 else "") + text) if signed else text


def predicted_text(key: str, bounds: tuple[float | None, float | None] | None) -> str:
    """A predicted change as a reader says it: "≥ −187.2 KiB", "≤ +0", "+1,024 to +2,048", "≈ +5"."""
    if bounds is None:
        return "—"
    lo, hi = bounds
    if lo is not None and hi is not None:
        if lo == hi:
            return "≈ " + format_figure(key, lo, signed=True)
        return f"{format_figure(key, lo, signed=True)} to {format_figure(key, hi, signed=True)}"
    if lo is not None:
        return "≥ " + format_figure(key, lo, signed=True)
    if hi is not None:
        return "≤ " + format_figure(key, hi, signed=True)
    return "—"


def predicted_phrase(key: str, bounds: tuple[float | None, float | None] | None) -> str:
    """A predicted change in words, for a sentence: "falls by at most 187.2 KiB" rather than
    "≥ −187.2 KiB", which reads as a negative memory peak when set after the figure's name."""
    if bounds is None:
        return "—"
    lo, hi = bounds

    def mag(v: float) -> str:
        return format_figure(key, abs(v))

    if lo is not None and hi is not None:
        if lo == hi:
            return "does not change" if lo == 0 else f"{'rises' if lo > 0 else 'falls'} by about {mag(lo)}"
        if lo >= 0:
            return f"rises by {mag(lo)} to {mag(hi)}"
        if hi <= 0:
            return f"falls by {mag(hi)} to {mag(lo)}"
        return f"changes by {format_figure(key, lo, signed=True)} to {format_figure(key, hi, signed=True)}"
    if lo is not None:
        if lo < 0:
            return f"falls by at most {mag(lo)}"
        return "does not fall" if lo == 0 else f"rises by at least {mag(lo)}"
    if hi is not None:
        if hi > 0:
            return f"rises by at most {mag(hi)}"
        return "does not rise" if hi == 0 else f"falls by at least {mag(hi)}"
    return "—"


def predicted_line(p: Proposal) -> str:
    """A proposal's predictions as one line: "memory peak falls by at most 2.0 KiB, cycles per run
    does not fall" (the Insights page and ``tilescope whatif`` both print it)."""
    return ", ".join(
        f"{label.split(' (')[0]} {predicted_phrase(key, p.predicted[key])}"
        for key, label, _ in FIGURES
        if key in p.predicted
    )


def lower_memory_proportion(report: Report, insight: str) -> Proposal | None:
    """Halve availableMemoryProportion. PopLibs' planners keep each matmul's and convolution's
    temporaries on a tile within ``bytes_per_tile x proportion`` (profiler.ops.matmul.plan_matmul's
    budget, after PopLibs' MatMul.cpp/ConvPlan.cpp), so a tile can lose at most the difference of the
    two budgets; the plans chosen under the larger budget were the fastest that fitted, so under a
    subset of them no planned operation gets faster: cycles do not fall."""
    o = origin(report)
    if o is None or o.kind != "model":
        return None
    amp = float(o.options.get("available_memory_proportion", 0.0))
    new = round(max(MIN_AVAILABLE_MEMORY_PROPORTION, amp / 2), 2)
    if not new < amp:
        return None
    t = report.target_info
    freed = (amp - new) * t.bytes_per_tile
    return Proposal(
        insight,
        {"available_memory_proportion": new},
        {
            "max_tile_bytes": (-freed, None),
            "total_bytes": (-freed * t.num_tiles, None),
            "cycles": (0.0, None),
            "samples_per_second": (None, 0.0),
        },
        f"each matmul/convolution plan's temporaries on a tile stay within bytes_per_tile x {new:g} instead of "
        f"x {amp:g}: a tile frees at most {format_bytes(freed)}; plans are chosen from fewer, so cycles do not fall",
    )


def more_ipus(report: Report, insight: str) -> Proposal | None:
    """Twice the IPUs: the model's nodes split into groups of about equal memory (sharding by
    memory). No figure is predicted: what each IPU holds depends on where the cut falls."""
    o = origin(report)
    if o is None or o.kind != "model" or o.options.get("outline") or o.options.get("pipeline"):
        return None
    ipus = int(o.options.get("ipus", 1))
    return Proposal(
        insight,
        {"ipus": 2 * ipus},
        {},
        f"the model's nodes split over {2 * ipus} IPUs in groups of about equal memory; what each IPU holds "
        "depends on where the cut falls",
    )


def bigger_batch(report: Report, insight: str) -> Proposal | None:
    """Twice the batch for a host-I/O-bound run: each stream copy pays the host link's latency once
    however many samples it carries (profiler.chip.cost_model.stream_copy_cycles), so more samples a
    run spread it. No figure is predicted: the report does not separate a copy's latency from its
    bytes, and the convolutions' and matmuls' plans change with the batch (faster or slower a sample)."""
    o = origin(report)
    if o is None or samples_per_run(o) is None:
        return None
    return Proposal(
        insight,
        {"batch": 2 * int(o.options["batch"])},
        {},
        "each stream copy's latency is paid once for twice the samples; the operations' plans change with the batch",
    )


def compute_split(report: Report, insight: str) -> Proposal | None:
    """An idle IPU of a model split by memory: split it by simulated cycles instead."""
    o = origin(report)
    if o is None or o.kind != "model" or int(o.options.get("ipus", 1)) < 2 or o.options.get("split") == "compute":
        return None
    return Proposal(
        insight,
        {"split": "compute"},
        {},
        "the nodes cut again into groups of about equal simulated cycles",
    )


def result_rows(doc: dict[str, Any]) -> list[dict[str, str]]:
    """A what-if's result (``tilescope whatif --apply N --json``) as table rows of text: figure,
    before, predicted change, re-simulated, measured change, within (yes / NO / — when nothing was
    predicted). The CLI's table and the Insights page show these same rows."""
    rows = []
    for key, r in doc["figures"].items():
        pred = r["predicted"]
        bounds = (pred["low"], pred["high"]) if pred else None
        rows.append(
            {
                "figure": r["label"],
                "before": format_figure(key, r["before"]),
                "predicted change": predicted_text(key, bounds),
                "re-simulated": format_figure(key, r["after"]),
                "measured change": format_figure(key, r["measured_change"], signed=True),
                "within": {True: "yes", False: "NO", None: "—"}[r["within_prediction"]],
            }
        )
    return rows
