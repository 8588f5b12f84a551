"""How a report's execution figures were obtained: simulated runs, or estimated ones (a compile-only
profile: the cost model over the program tree, no values), and which steps' cycles depend on data."""

from __future__ import annotations

import pandas as pd

from report_format.reader import Report

#: The word the viewer puts beside cycles of each kind of run.
SIMULATED, ESTIMATED = "simulated", "estimated"


def estimated(report: Report) -> bool:
    """Whether the report's execution profile is a compile-only estimate (every captured run is)."""
    return report.has_execution_profile and bool(report.estimated_runs)


def cycles_word(report: Report) -> str:
    return ESTIMATED if estimated(report) else SIMULATED


def data_dependent(report: Report) -> pd.DataFrame:
    """Program-tree nodes whose cycles depend on data: program_id, name, reason (program order)."""
    dd = report.data_dependent_programs()
    if dd.empty:
        return pd.DataFrame({"program_id": [], "name": [], "reason": []})
    names = report.programs().set_index("program_id")["name"]
    out = dd.assign(name=names.reindex(dd["program_id"]).fillna("").to_numpy())
    return out[["program_id", "name", "reason"]].sort_values("program_id").reset_index(drop=True)


ESTIMATED_SENTENCE = (
    "Estimated trace: a compile-only profile (tilescope.compileOnly). No value was computed; each step's cycles "
    "come from the same cost model a simulated run charges, and an If or Switch takes its longest branch."
)


def data_dependent_sentence(report: Report, shown: int = 3) -> str:
    """Which program steps' cycles depend on data ("" when none do)."""
    dd = data_dependent(report)
    if not len(dd):
        return ""
    # nodes of one name and reason said once, with their count (a POD16 decoder's lookups repeat per stage)
    dd = dd.assign(label=[n or f"program {p}" for p, n in zip(dd["program_id"], dd["name"], strict=True)])
    kinds = dd.groupby(["label", "reason"], sort=False).size().reset_index(name="count")
    named = "; ".join(
        f"{label}: {reason}" + (f" ({count} nodes)" if count > 1 else "")
        for label, reason, count in kinds.head(shown).itertuples(index=False)
    )
    more = f"; and {len(kinds) - shown} more" if len(kinds) > shown else ""
    many = len(dd) != 1
    return (
        f"{len(dd)} program node{'s' if many else ''} ha{'ve' if many else 's'} cycles that depend on data, charged "
        f"the cost model's estimate whatever the values ({named}{more})."
    )


def note(report: Report) -> str:
    """One paragraph for a page showing cycles: whether they are estimated, and which depend on data
    ("" for a simulated report with no data-dependent step, and for one with no execution profile:
    it shows no cycles to qualify)."""
    if not report.has_execution_profile:
        return ""
    parts = [ESTIMATED_SENTENCE] if estimated(report) else []
    return " ".join([*parts, data_dependent_sentence(report)]).strip()
