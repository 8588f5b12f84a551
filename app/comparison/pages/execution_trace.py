"""Execution Trace in compare mode: runs matched by index (cycles, FLOPs, steps, tile balance of
both), and for the chosen run the cycle delta of every executed step along the alignment, with
the biggest per-step changes listed."""

from __future__ import annotations

from typing import Any

import dash_bootstrap_components as dbc
from dash import Input, Output, callback, html

from app import grid, ids
from app.comparison.figures import step_cycles_delta_figure
from app.comparison.pages import baselines
from app.comparison.pages.components import frame, graph, shown, unavailable
from app.comparison.steps import STEP_DELTA_COLUMNS
from app.render.html import RUN_COLUMNS
from app.units import format_percent, with_minus
from app.views.runs import run_figures

TOP = 15
STEP_COLUMNS = [
    "baseline_step", "active_step", "baseline_program_step", "active_program_step",
    *STEP_DELTA_COLUMNS[2:], "delta_cycles_from",
]  # fmt: skip
#: Executed-step indices say so in the grid ("base executed step"), beside the program step they run.
EXECUTED_NAMES = {"baseline_step": "baseline_executed_step", "active_step": "active_executed_step"}
#: Executed steps drawn at most (largest change per bin beyond that).
MAX_STEP_POINTS = 2000


def section() -> html.Div:
    return html.Div(id=ids.COMPARE_TRACE)


def top_steps(key: str, run: int) -> Any:
    """The ``TOP`` executed steps whose cycles changed most (added / removed steps included). An
    executed step is numbered within its run; the program step it runs is the number the Program
    Tree, the Program steps comparison and ``tilescope diff`` show."""
    ex = baselines.comparison(key).executed_steps(run)
    changed = ex[ex["delta_cycles"] != 0]
    order = changed["delta_cycles"].abs().sort_values(ascending=False, kind="stable").index[:TOP]
    top = changed.loc[order, STEP_COLUMNS].copy()
    # as the other compare tables say it: a step in both whose cycles moved "changed"
    top["status"] = top["status"].where(top["status"] != "same", "changed")
    for col in STEP_COLUMNS[:4]:  # a step on one side only has no index on the other: a blank, not -1
        top[col] = top[col].astype(object).where(top[col] >= 0, None)
    return top.rename(columns=EXECUTED_NAMES)


def run_rows(runs: Any) -> Any:
    """The runs comparison as shown: tile balance as a percentage, like every other page."""
    out = runs[[c for c in RUN_COLUMNS if c in runs]].copy()
    for col in out.columns:
        if "tile_balance" in col:
            out[col] = out[col].map(format_percent)
    return out


@callback(
    Output(ids.COMPARE_TRACE, "children"),
    Input(shown("execution_trace"), "data"),
    Input(ids.TRACE_RUN, "value"),
    prevent_initial_call=True,  # the pane starts empty and hidden: nothing to ask the server on load
)
def render(key: str | None, run: Any) -> Any:
    blocked = unavailable(key)
    if blocked is not None:
        return blocked
    c = baselines.comparison(key)
    if not c.baseline.has_execution_profile:
        return frame(key, "execution", dbc.Alert("The baseline has no execution profile.", color="warning"))
    run = int(run or 0)
    runs = c.runs
    body: list[Any] = [
        html.H6("Runs, matched by index", className="mt-1"),
        grid.small_grid(run_rows(runs), grid_id=ids.COMPARE_TRACE_RUNS, short=True),
    ]
    if run not in set(c.run_tables[0]["run"]):
        body.append(dbc.Alert(f"The baseline has no run {run}.", color="warning", className="mt-2"))
        return frame(key, "execution", *body)
    ex = c.executed_steps(run)
    counts = ex["status"].value_counts()
    fb, fa = run_figures(c.baseline, run), run_figures(c.active, run)
    delta = fa["cycles"] - fb["cycles"]
    top = top_steps(key, run)
    fig = step_cycles_delta_figure(ex, max_points=MAX_STEP_POINTS)
    fig.update_layout(title_text=f"Run {run}: cycles per executed step, active − baseline")
    fig.update_xaxes(title_text="executed step, aligned (execution order)")
    body += [
        html.Div(
            f"Run {run}: {fa['steps']:,} executed steps in active, {fb['steps']:,} in baseline "
            f"({int(counts.get('same', 0)):,} in both, {int(counts.get('added', 0)):,} only in active, "
            f"{int(counts.get('removed', 0)):,} only in baseline); the run's cycles changed by "
            f"{with_minus(f'{delta:+,}' if delta else '0')} ({fb['cycles']:,} → {fa['cycles']:,}).",
            className="mt-2",
            id=ids.COMPARE_TRACE_TEXT,
        ),
        graph(fig),
        html.H6(f"Biggest executed-step changes (top {TOP}; each with the program step it runs)"),
        grid.small_grid(top, grid_id=ids.COMPARE_TRACE_STEPS, short=True)
        if len(top)
        else html.Div(f"No executed step of run {run} changed its cycles.", className="text-muted"),
    ]
    return frame(key, "execution", *body)
