"""What if: re-simulate a report's model with an insight's change of options, and compare.

Without --apply, list the report's what-if proposals: the insights (as the viewer's Insights page
shows them) that a change of run options answers, numbered, each with its change and its predicted
effect. With --apply N, run the model the report was made from again (its manifest's origin:
path, sha256, options) with proposal N's change into a new report, REPORT.whatif-N beside it
unless --out says where, and print the predicted change beside the measured one for the memory
peak, total memory, cycles per run and samples/s.

The re-run needs the model: when it is gone, or its content is not what the report recorded
(sha256), that is one line and exit 2 (a changed model is re-run with --force). A report with no
origin (written before tilescope recorded one, or by a user's own engine) cannot be re-run.
A report is only ever written where tilescope may write one: a new directory, an empty one or an
earlier tilescope report (the original report itself is refused).

Exit status: 0 listed, or re-simulated (a change that no longer fits in memory is an answer too:
the table says so); 2 bad input (one line).

examples:
  tilescope whatif ./report                   # list the proposals
  tilescope whatif ./report --apply 1         # re-simulate with the first; ./report.whatif-1
  tilescope whatif ./report --apply 1 --json --out /tmp/amp03
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from tilescope.errors import CommandError

HELP = "list a report's what-if proposals, or re-simulate one and compare predicted with measured"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("report", help="report directory (holds manifest.json)")
    p.add_argument("--apply", type=int, metavar="N", help="re-simulate with proposal N (as listed without --apply)")
    p.add_argument("--out", metavar="DIR", help="where the new report goes (default REPORT.whatif-N beside REPORT)")
    p.add_argument(
        "--force", action="store_true", help="re-run even when the model's content differs from the report's"
    )
    p.add_argument("--json", action="store_true", help="print JSON")


def _progress(msg: str) -> None:
    print(f"tilescope whatif: {msg}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    from app.views.insights import proposals
    from app.views.whatif import origin
    from report_format.reader import open_report

    report = open_report(args.report)
    found = proposals(report)
    o = origin(report)
    if args.apply is None:
        print(json.dumps(_listing_json(report, found), indent=2) if args.json else _listing(report, found))
        return 0
    if o is None:
        raise CommandError(
            f"{report.path}: the report records no origin (written before tilescope recorded one, or by an engine "
            "outside `tilescope run`): nothing to re-run"
        )
    if o.kind != "model":
        raise CommandError(f"{report.path}: made from the script {o.path}; what-ifs re-run ONNX models only")
    if not 1 <= args.apply <= len(found):
        have = f"1 to {len(found)}" if found else "none: the report has no what-if proposals"
        raise CommandError(f"--apply {args.apply}: no such proposal (proposals: {have})")
    problem = o.source_problem()
    if problem and ("gone" in problem or not args.force):
        raise CommandError(problem + ("" if "gone" in problem else "; --force re-runs it anyway"))
    proposal = found[args.apply - 1]
    out = Path(args.out) if args.out else Path(f"{report.path}.whatif-{args.apply}")
    if out.absolute().resolve() == report.path.absolute().resolve():
        raise CommandError(f"--out {out}: that is the report itself; a what-if writes a new report")
    after_path = _resimulate(o, proposal.change, out)
    doc = compare(report, open_report(after_path), proposal.to_json(), args.apply)
    print(json.dumps(doc, indent=2, allow_nan=False) if args.json else render(doc))
    return 0


def _resimulate(o: Any, change: dict[str, Any], out: Path) -> Path:
    """Run the origin's model with ``change`` applied, writing the report to ``out``."""
    from profiler.capture.options import ENV_VAR
    from profiler.frontends.onnx.profile import ProfileError, ProfileOptions, profile_model
    from report_format.writer import check_destination
    from tilescope.commands.run import _load_inputs
    from tilescope.progress import Counter

    known = set(ProfileOptions.__dataclass_fields__)
    options = ProfileOptions(**{k: v for k, v in {**o.options, **change}.items() if k in known})
    check_destination(out.absolute())  # one line before any work: never into a directory tilescope did not write
    os.environ[ENV_VAR] = json.dumps(
        {**o.engine_options, "autoReport.all": "true", "autoReport.directory": str(out)}
    )  # the original's capture options, so both reports hold the same profiles
    try:
        result = profile_model(Path(o.path), options, lambda s: _load_inputs(s, None), progress=_progress,
                               stage=Counter)  # fmt: skip
    except ProfileError as exc:
        raise CommandError(str(exc)) from None
    if result.report_path is None:
        raise CommandError(f"{o.path}: the re-run wrote no report")
    return result.report_path


def compare(before: Any, after: Any, proposal: dict[str, Any], number: int) -> dict[str, Any]:
    """The what-if's JSON: both reports' figures, the predicted and the measured change of each,
    and whether the measured change lies within the predicted range (None: nothing predicted)."""
    from app.views.whatif import FIGURES, figures

    b, a = figures(before), figures(after)
    rows = {}
    for key, label, unit in FIGURES:
        was, now = b[key], a[key]
        change = now - was if now is not None and was is not None else None
        pred = proposal["predicted"].get(key)
        within = None
        if pred is not None and change is not None:
            lo, hi = pred["low"], pred["high"]
            within = (lo is None or change >= lo) and (hi is None or change <= hi)
        rows[key] = {"label": label, "unit": unit, "before": b[key], "after": a[key], "predicted": pred,
                     "measured_change": change, "within_prediction": within}  # fmt: skip
    notes = [n for n in after.manifest.notes if "out of memory" in n or "not executed" in n]
    return {
        "proposal": number,
        "change": proposal["change"],
        "insight": proposal["insight"],
        "basis": proposal["basis"],
        "report": str(before.path),
        "whatif_report": str(after.path),
        "executed": after.has_execution_profile and after.num_rows("runs") > 0,
        "notes": notes,
        "figures": rows,
    }


def render(doc: dict[str, Any]) -> str:
    """The side-by-side table of a what-if (``app.views.whatif.result_rows``, as the viewer shows it)."""
    from app.views.whatif import change_text, result_rows

    lines = [
        f"what-if {doc['proposal']}: {change_text(doc['change'])}",
        f"  insight    {doc['insight']}",
        f"  predicted  {doc['basis']}",
        f"  reports    {doc['report']}  ->  {doc['whatif_report']}",
        "",
    ]
    rows = result_rows(doc)
    widths = {k: max(len(k), *(len(r[k]) for r in rows)) for k in rows[0]}
    for r in [{k: k for k in rows[0]}, *rows]:
        lines.append(
            "  " + "  ".join(v.ljust(widths[k]) if k == "figure" else v.rjust(widths[k]) for k, v in r.items())
        )
    if not doc["executed"]:
        lines.append("  not executed: " + ("; ".join(doc["notes"]) or "no execution profile"))
    return "\n".join(lines)


def _listing_json(report: Any, found: list[Any]) -> dict[str, Any]:
    from app.views.whatif import origin

    o = origin(report)
    return {
        "report": str(report.path),
        "origin": o.to_json() if o else None,
        "source_problem": (o.source_problem() or None) if o else None,
        "proposals": [{"number": i, **p.to_json()} for i, p in enumerate(found, 1)],
    }


def _listing(report: Any, found: list[Any]) -> str:
    from app.views.whatif import change_text, origin, predicted_line

    o = origin(report)
    if o is None:
        head = f"{report.path}: records no origin (written before tilescope recorded one, or by a user's engine)"
    else:
        head = f"{report.path}: made from {o.kind} {o.path} (sha256 {o.sha256[:12]}…)"
        problem = o.source_problem()
        if problem:
            head += f"\n  note: {problem}"
    if not found:
        return head + "\n  no what-if proposals: no insight is answered by a change of run options"
    lines = [head]
    for i, p in enumerate(found, 1):
        pred = predicted_line(p)
        lines += [
            f"  {i}. {change_text(p.change)}",
            f"     insight    {p.insight}",
            f"     predicted  {pred or 'no figure'}: {p.basis}",
        ]
    lines.append(f"re-simulate one with: tilescope whatif {report.path} --apply N")
    return "\n".join(lines)
