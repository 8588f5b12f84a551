"""Summary: target, graph counts, memory, liveness and execution headlines, engine options,
report files and notes (the same figures as `tilescope summary`)."""

from __future__ import annotations

from typing import Any

import dash
import dash_bootstrap_components as dbc
import pandas as pd
from dash import html

from app import ids, state
from app.comparison.pages import summary as compare  # the page's compare tab
from app.comparison.pages.components import compare_tabs
from app.components import key_values, provenance_note, section, stat_card
from app.grid import plain_table, small_grid
from app.units import format_bytes, format_count, format_flops, format_percent, format_seconds
from app.views.ipus import ipu_execution, ipu_memory
from app.views.provenance import estimated
from app.views.runs import run_table
from app.views.summary import summary


def card(*args: Any, **kwargs: Any) -> Any:
    """The Summary's headline cards share the row (up to seven on one line)."""
    return stat_card(*args, share=True, **kwargs)


def layout(**_: object) -> html.Div:
    report = state.report()
    doc = summary(report)
    t, g, m, lv, ex = doc["target"], doc["graph"], doc["memory"], doc["liveness"], doc["execution"]
    cards = [
        card(
            "Total memory (incl. gaps)",
            format_bytes(m["total_bytes_including_gaps"]),
            f"of {format_bytes(t['total_memory'])}",
        ),
        card(
            "Fullest tile",
            format_bytes(m["max_tile_bytes"]),
            f"tile {m['max_tile']} of {format_bytes(m['bytes_per_tile'])}",
        ),
        card("Out-of-memory tiles", format_count(m["out_of_memory_tiles"]), alarm=m["out_of_memory_tiles"] > 0),
        card(
            "Peak not-always-live", format_bytes(lv["peak_not_always_live_bytes"]), f"at program step {lv['peak_step']}"
        ),
    ]
    if ex["captured"] and ex["headline"]:
        # the run that computes leads (as `tilescope summary`'s headline line and `tilescope run`);
        # a one-off weight upload is its own card, not part of the headline
        h = ex["headline"]
        cards += [
            card(
                "Cycles (estimated)" if estimated(report) else "Cycles",
                format_count(h["cycles"]),  # exact, as the Execution Trace, the CLI and the exports show it
                f"run {h['run']} ({h['name']}), {format_seconds(h['seconds'])} at {t['clock_hz'] / 1e9:.3g} GHz; "
                f"all {ex['runs']} runs {format_count(ex['total_cycles'])}"
                if ex["runs"] > 1
                else f"run {h['run']} ({h['name']}), {format_seconds(h['seconds'])} at {t['clock_hz'] / 1e9:.3g} GHz",
            ),
            card("FLOPs", format_flops(h["flops"]), f"run {h['run']}"),
            card("Tile balance", format_percent(h["tile_balance"]), f"run {h['run']}, cycle-weighted, Sync left out"),
        ]
        if h["data_only_runs"]:
            runs_ = h["data_only_runs"]
            cards.append(
                card(
                    "Weight upload",
                    format_count(h["data_only_cycles"]),
                    f"cycles in run{'' if len(runs_) == 1 else 's'} {', '.join(map(str, runs_))}: data only",
                )
            )
    else:
        cards.append(card("Execution", "not captured"))
    target_block = {
        "Name": t["name"],
        "Type": t["type"],
        "Architecture": t["architecture"],
        "IPUs": t["num_ipus"],
        "Tiles per IPU": format_count(t["tiles_per_ipu"]),
        "Total tiles": format_count(t["num_tiles"]),
        "Memory per tile": format_bytes(t["bytes_per_tile"]),
        "Memory per IPU": format_bytes(t["bytes_per_ipu"]),
        "Total memory": format_bytes(t["total_memory"]),
        "Clock": f"{t['clock_hz'] / 1e9:.3g} GHz",
        "Worker contexts": t["num_worker_contexts"],
    }
    mi = doc["multi_ipu"]
    if t["num_replicas"] > 1:  # PopVision shows these only for replicated reports; so does "IPUs" then
        target_block.update({"Replicas": t["num_replicas"], "IPUs per replica": t["ipus_per_replica"],
                             "Total IPUs": mi["total_ipus"], "Profiled replica": mi["profiled_replica"]})  # fmt: skip
    graph_block = {
        "Variables": format_count(g["variables"]),
        "Compute sets": format_count(g["compute_sets"]),
        "Vertices": format_count(g["vertices"]),
        "Codelets": format_count(g["codelets"]),
        "Program steps": format_count(g["program_steps"]),
        "Program nodes": format_count(g["programs"]),
    }
    runs = []
    if ex["captured"]:
        r = run_table(report)
        runs = [
            section(
                "Runs",
                small_grid(
                    # simulated time at the target clock; microseconds, as runs are short
                    r.assign(
                        microseconds=(r["cycles"] / t["clock_hz"] * 1e6).round(2),
                        tile_balance=r["tile_balance"].map(format_percent),
                    )[["run", "name", "steps", "cycles", "microseconds", "flops", "tile_balance"]].rename(
                        columns={"steps": "executed steps"}
                    ),
                    grid_id=ids.SUMMARY_RUNS,
                ),
            )
        ]
    multi = _multi_ipu_section(report, mi) if mi["total_ipus"] > 1 else []
    notes = [dbc.Alert(n, color="warning", className="py-2 mb-1") for n in doc["notes"]]
    said = provenance_note(report)  # an estimated trace, steps whose cycles follow data
    notes += [said] if said is not None else []
    notes += [
        dbc.Alert(
            f"Truncated {tr['kind']}: captured {tr['captured']:,} of {tr['total']:,} — {tr['reason']}",
            color="warning",
            className="py-2 mb-1",
        )
        for tr in doc["truncations"]
    ]
    files = pd.DataFrame(report.files(), columns=["file", "bytes"])
    return html.Div(
        [
            html.H3("Summary", className="mb-2"),
            compare_tabs(
                "summary",
                [
                    html.Div(notes, id=ids.SUMMARY_NOTES),
                    dbc.Row(cards, className="g-2", id=ids.SUMMARY_BODY),
                    dbc.Row(
                        [
                            dbc.Col(section("Target", key_values(target_block)), md=4),
                            dbc.Col(section("Graph", key_values(graph_block)), md=4),
                            dbc.Col(
                                section(
                                    "Report",
                                    key_values(
                                        {
                                            "Path": str(report.path),
                                            "Format version": doc["format_version"],
                                            "Producer": f"{doc['producer'].get('name', '')} {doc['producer'].get('version', '')}",
                                            "Created": doc["created"],
                                            "Engine": doc["engine"] or "-",
                                            "Profiles": ", ".join(k for k, v in doc["profiles"].items() if v) or "none",
                                        }
                                    ),
                                ),
                                md=4,
                            ),
                        ]
                    ),
                    *runs,
                    *multi,
                    dbc.Row(
                        [
                            # option names run to 40 characters (autoReport.executionProfileProgramRunCount)
                            dbc.Col(section("Engine options", plain_table(report.engine_options())), md=7),
                            dbc.Col(section("Report files", plain_table(files)), md=5),
                        ]
                    ),
                ],
                compare.section(),
            ),
        ]
    )


def _multi_ipu_section(report: Any, mi: dict[str, Any]) -> list[Any]:
    """Per-IPU memory and execution, replication and pipeline stages (several IPUs only)."""
    per_ipu = ipu_memory(report)
    ex = ipu_execution(report)
    if len(ex):
        per_ipu = per_ipu.merge(ex, on="ipu", how="left")
        per_ipu["utilisation"] = per_ipu["utilisation"].map(format_percent)
    for c in ("bytes_including_gaps", "bytes_excluding_gaps", "fullest_tile_bytes"):
        per_ipu[c] = per_ipu[c].map(format_bytes)
    facts = {
        "Replicas": mi["num_replicas"],
        "IPUs per replica": mi["ipus_per_replica"],
        "Pipeline": f"{mi['pipeline_stages']} stages, {mi['micro_batches']} micro-batches"
        if mi["pipeline_stages"]
        else "not pipelined",
        "Global exchange (all runs)": format_bytes(mi["global_exchange_bytes"]),
    }
    body = [dbc.Col(section("Multi-IPU", key_values(facts)), md=3),
            dbc.Col(section("Per IPU", small_grid(per_ipu, grid_id=ids.SUMMARY_IPUS)), md=9)]  # fmt: skip
    stages = report.pipeline_stages()
    rows = [dbc.Row(body)]
    if len(stages):
        rows.append(section("Pipeline stages (cycles per micro-batch)", small_grid(stages)))
    return rows


dash.register_page(__name__, path="/", name="Summary", order=0, title="tilescope · Summary", layout=layout)
