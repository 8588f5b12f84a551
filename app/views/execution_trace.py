"""The execution trace view: the BSP timeline of executed steps per IPU (flat and flame), the
tiles x steps cycles picture, and the run summary.

Level of detail: a timeline never returns more than ``max_per_row`` spans per row. When more
steps fall in the visible cycle range, the range is cut into that many equal bins and each bin
shows the kind of step that used most of its cycles; zooming in re-queries with a smaller range
and so shows finer detail, down to exact steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd

from app.units import plural
from app.views import flame, model_names
from app.views.runs import run_figures, weighted_figures
from app.views.step_kinds import KIND_OF_TYPE, KINDS
from report_format.reader import Report


def kind_of(step_type: pd.Series) -> pd.Series:
    return step_type.map(KIND_OF_TYPE).fillna("other")


@lru_cache(maxsize=8)
def trace_steps(report: Report, run: int) -> pd.DataFrame:
    """Executed steps of ``run`` (all IPUs) with their program's type, name, kind and label.

    Text columns are categoricals built from the (small) programs table, so filtering and grouping
    10^5..10^6 executed steps never touches per-row strings.
    """
    es = report.execution_steps(run)
    p = report.programs().sort_values("program_id")
    pos = np.searchsorted(p["program_id"].to_numpy(), es["program_id"].to_numpy())
    # the model's name first where the report is of an ONNX model, as Liveness names a step:
    # "s3b0_b_conv_365 (matmul, OnTileExecute)"
    model = model_names.of_programs(report).reindex(p["program_id"].to_numpy()).fillna("").to_numpy(dtype=object)
    per_program = {
        "type": p["type"].to_numpy(dtype=object),
        "name": p["name"].to_numpy(dtype=object),
        "kind": kind_of(p["type"]).to_numpy(dtype=object),
        "label": model_names.with_model_name(model, p["name"].to_numpy(dtype=object), p["type"].to_numpy(dtype=object)),
    }
    for col, values in per_program.items():
        cats, codes = np.unique(values.astype(str), return_inverse=True)
        es[col] = pd.Categorical.from_codes(codes[pos], categories=cats)
    es["cycles"] = es["cycles_to"] - es["cycles_from"]
    return es


@dataclass(frozen=True)
class Spans:
    """Spans to draw: columns row, start, end, kind, label, step (-1 for a bin or an enclosing
    frame), steps (in the span), and any other columns the spans had (a flame's hover text).
    ``visible_steps``: executed steps in view (``visible_step_count``), the same number in the flat
    view and the flame of one IPU; ``frames``: the flame's enclosing spans in view (0 when flat)."""

    table: pd.DataFrame
    exact: bool
    visible_steps: int
    x0: int
    x1: int
    frames: int = 0

    @property
    def detail(self) -> str:
        what = f"{plural(self.visible_steps, 'executed step')} in cycles {self.x0:,}..{self.x1:,}"
        if self.frames:
            what += f" (under {plural(self.frames, 'enclosing span')}: programs, layers, operations)"
        if self.exact:
            return f"exact: {what}"
        return f"binned: {what} shown as {len(self.table):,} bins (zoom in for exact steps)"


def visible_step_count(spans: pd.DataFrame) -> int:
    """Executed steps among ``spans`` (those with a step index; a flame's enclosing frames have -1):
    the one count the trace's flat and flame views both report."""
    return int((spans["step"].to_numpy() >= 0).sum())


def _overlaps(start: np.ndarray, end: np.ndarray, x0: int, x1: int) -> np.ndarray:
    """Spans overlapping cycles [x0, x1]; a zero-length step (a StreamCopyEnd at the run's last
    cycle) counts where it sits, so the whole run shows every executed step."""
    return ((end > x0) & (start < x1)) | ((start == end) & (start >= x0) & (start <= x1))


def level_of_detail(spans: pd.DataFrame, x0: int, x1: int, max_per_row: int = 1500) -> Spans:
    """Keep spans overlapping [x0, x1]; if a row has more than ``max_per_row``, bin that range.

    ``spans`` has columns row, start, end, kind, label, step. Binned, a span at least a bin wide
    stays exact, and the shorter ones in a bin become one span of the bin's main kind whose length
    is the share of the bin they fill (from the bin's start): an IPU idle for most of a bin, waiting
    in a pipeline, shows mostly empty, not solid.
    """
    vis = spans[_overlaps(spans["start"].to_numpy(), spans["end"].to_numpy(), x0, x1)]
    if "steps" not in vis:
        vis = vis.assign(steps=1)
    n = len(vis)
    steps = visible_step_count(vis)
    per_row = vis.groupby("row").size()
    if n == 0 or per_row.max() <= max_per_row:
        return Spans(vis.reset_index(drop=True), True, steps, x0, x1, n - steps)
    width = max((x1 - x0) / max_per_row, 1.0)
    start = vis["start"].to_numpy()
    end = vis["end"].to_numpy()
    dur = np.minimum(end, x1) - np.maximum(start, x0)
    long = dur >= width
    b = np.clip(((np.maximum(start, x0) - x0) / width).astype(np.int64), 0, max_per_row - 1)
    short = ~long
    g = pd.DataFrame({"row": vis["row"].to_numpy()[short], "bin": b[short], "kind": vis["kind"].to_numpy()[short],
                      "dur": dur[short]})  # fmt: skip
    by_kind = g.groupby(["row", "bin", "kind"], as_index=False)["dur"].sum()
    dominant = by_kind.sort_values("dur", ascending=False, kind="stable").drop_duplicates(["row", "bin"])
    counts = g.groupby(["row", "bin"]).size().rename("steps")
    busy = g.groupby(["row", "bin"])["dur"].sum().rename("busy")
    dominant = dominant.join(counts, on=["row", "bin"]).join(busy, on=["row", "bin"]).sort_values(["row", "bin"])
    bins = dominant["bin"].to_numpy()
    share = np.clip(dominant["busy"].to_numpy() / width, 0.0, 1.0)
    bin_start = x0 + bins * width
    binned = pd.DataFrame(
        {
            "row": dominant["row"].to_numpy(),
            "start": bin_start.astype(np.int64),
            "end": np.maximum(bin_start + share * width, bin_start + 1).astype(np.int64),
            "kind": dominant["kind"].to_numpy(),
            "label": [
                f"{plural(int(c), 'step')}, mostly {k}; busy {f:.0%} of {width:,.0f} cycles"
                for c, k, f in zip(dominant["steps"], dominant["kind"], share, strict=True)
            ],
            "step": -1,
            "steps": dominant["steps"].to_numpy(),
        }
    )
    exact = vis[long]
    out = pd.concat([exact, binned], ignore_index=True).sort_values(["row", "start"], kind="stable")
    return Spans(out.reset_index(drop=True), False, steps, x0, x1, n - steps)


@lru_cache(maxsize=8)
def flat_spans(report: Report, run: int) -> pd.DataFrame:
    """Flat view: one row per IPU, one span per executed step."""
    es = trace_steps(report, run)
    return pd.DataFrame(
        {
            "row": es["ipu"].to_numpy(),
            "start": es["cycles_from"].to_numpy(),
            "end": es["cycles_to"].to_numpy(),
            "kind": es["kind"],
            "label": es["label"],
            "step": es["step"].to_numpy(),
        }
    )


@lru_cache(maxsize=16)
def flame_spans(report: Report, run: int, ipu: int) -> pd.DataFrame:
    """Flame view of one IPU: row d holds the frames at depth d — the program tree, then the model's
    layers and operations (debug contexts), then the steps (``app.views.flame``); consecutive executed
    steps under the same frame merge into one span (a layer, a Repeat iteration, a whole Sequence)."""
    es = trace_steps(report, run)
    return flame.flame_spans(report, es[es["ipu"].to_numpy() == ipu])


def run_length(report: Report, run: int) -> int:
    es = trace_steps(report, run)
    return int(es["cycles_to"].max()) if len(es) else 0


def steps_in_cycle_range(report: Report, run: int, ipu: int, x0: int, x1: int) -> tuple[int, int]:
    """Executed steps [first, last) of one IPU that overlap cycles [x0, x1]."""
    es = trace_steps(report, run)
    es = es[es["ipu"] == ipu]
    hit = es.loc[_overlaps(es["cycles_from"].to_numpy(), es["cycles_to"].to_numpy(), x0, x1), "step"]
    if hit.empty:
        return 0, 0
    return int(hit.min()), int(hit.max()) + 1


def tile_step_cycles(
    report: Report, run: int, ipu: int, first: int, last: int, max_steps: int = 96, max_tiles: int = 368
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """The BSP picture of one IPU: cycles of each tile (rows) in each executed step (columns).

    At most ``max_steps`` steps are read (evenly sampled from [first, last) when there are more)
    and tiles are binned to at most ``max_tiles`` rows showing the busiest tile of the bin.
    Returns (cycles[tile_bins, steps], step indices, first tile of each bin, tiles per bin).
    """
    n = last - first
    if n <= 0:
        return np.zeros((0, 0), np.int32), np.zeros(0, np.int64), np.zeros(0, np.int64), 1
    if n <= max_steps:
        steps = np.arange(first, last)
        cyc = report.tile_cycles_range(run, first, last, ipu)
    else:
        steps = np.unique(np.linspace(first, last - 1, max_steps).round().astype(np.int64))
        cyc = np.stack([report.tile_cycles(run, int(s), ipu) for s in steps])
    tiles = cyc.shape[1]
    width = max(1, -(-tiles // max_tiles))
    if width > 1:
        pad = (-tiles) % width
        cyc = np.pad(cyc, ((0, 0), (0, pad))).reshape(len(steps), -1, width).max(axis=2)
    return cyc.T, steps, np.arange(0, tiles, width), width


def step_at(report: Report, run: int, ipu: int, cycle: float) -> int:
    """The executed step running on ``ipu`` at ``cycle`` (the nearest one if it falls in a gap), -1 if none."""
    es = trace_steps(report, run)
    es = es[es["ipu"] == ipu]
    if es.empty:
        return -1
    start, end = es["cycles_from"].to_numpy(), es["cycles_to"].to_numpy()
    inside = np.flatnonzero((start <= cycle) & (cycle < end))
    if len(inside):
        return int(es["step"].to_numpy()[inside[0]])
    gap = np.minimum(np.abs(start - cycle), np.abs(end - cycle))
    return int(es["step"].to_numpy()[gap.argmin()])


def step_details(report: Report, run: int, step: int) -> pd.DataFrame:
    """One executed step on every IPU: its program, span, active tiles, balance, data and FLOPs."""
    es = trace_steps(report, run)
    rows = es[es["step"] == step]
    cols = [
        "ipu",
        "program_id",
        "type",
        "name",
        "cycles_from",
        "cycles_to",
        "cycles",
        "active_tiles",
        "tile_balance",
        "active_tile_balance",
        "data_in_bytes",
        "data_out_bytes",
        "flops",
    ]
    out = rows[cols].astype({"type": str, "name": str}).reset_index(drop=True)
    return out.round({"tile_balance": 3, "active_tile_balance": 3})


def trace_summary(report: Report, run: int) -> dict[str, float | int]:
    """Run totals: cycles, FLOPs, executed steps, tile balance and utilisation (all four from
    ``app.views.runs``, the one definition every page uses), cycle proportions by kind of the IPUs'
    time (the run's length on each IPU that ran a step; ``idle``: an IPU in no step, waiting for
    another in a pipeline or a sync across IPUs), stream-copy, global-exchange and exchange bytes."""
    es = trace_steps(report, run)
    ipus = int(es["ipu"].nunique())
    total = float(run_length(report, run)) * ipus
    busy = float(es["cycles"].to_numpy(dtype=np.float64).sum())
    total = max(total, busy)  # steps of one IPU never overlap; kept safe for a malformed report
    out: dict[str, float | int] = dict(run_figures(report, run))
    out.pop("name")
    by_kind = es.groupby("kind", observed=False)["cycles"].sum()
    for k in KINDS:
        out[f"proportion.{k}"] = float(by_kind.get(k, 0) / total) if total else 0.0
    out["proportion.idle"] = (total - busy) / total if total else 0.0
    for k, key in (("stream copy", "stream_copy"), ("global exchange", "global_exchange"), ("exchange", "exchange")):
        sub = es[es["kind"] == k]
        out[f"{key}_bytes_in"] = int(sub["data_in_bytes"].sum())
        out[f"{key}_bytes_out"] = int(sub["data_out_bytes"].sum())
    out["flops_per_cycle"] = out["flops"] / out["cycles"] if out["cycles"] else 0.0
    return out


def ipu_table(report: Report, run: int) -> pd.DataFrame:
    """One row per IPU for ``run`` (PopVision's per-IPU summary): ipu, cycles (when its last step
    ends), cycles by step kind (compute, exchange, global exchange, stream copy, sync), FLOPs, data
    in / out, and tile balance and utilisation weighted as ``app.views.runs`` defines them."""
    es = trace_steps(report, run)
    ipus = pd.Index(range(report.target_info.num_ipus), name="ipu")
    out = pd.DataFrame(index=ipus)
    out["cycles"] = es.groupby("ipu")["cycles_to"].max().reindex(ipus).fillna(0).astype(np.int64)
    by_kind = es.groupby(["ipu", "kind"], observed=True)["cycles"].sum().unstack(fill_value=0)
    for k in KINDS[:-1]:
        out[f"{k} cycles"] = (
            (by_kind[k] if k in by_kind else pd.Series(dtype=np.int64)).reindex(ipus).fillna(0).astype(np.int64)
        )
    # the rest of the run: waiting for another IPU (a pipeline stage's turn, a sync across IPUs)
    out["idle cycles"] = run_length(report, run) - out[[f"{k} cycles" for k in KINDS[:-1]]].sum(axis=1)
    out["flops"] = es.groupby("ipu")["flops"].sum().reindex(ipus).fillna(0).astype(np.int64)
    out["data_in_bytes"] = es.groupby("ipu")["data_in_bytes"].sum().reindex(ipus).fillna(0).astype(np.int64)
    out["data_out_bytes"] = es.groupby("ipu")["data_out_bytes"].sum().reindex(ipus).fillna(0).astype(np.int64)
    w = weighted_figures(report, es, "ipu").reindex(ipus)
    out["tile_balance"] = w["tile_balance"].to_numpy()
    out["tile_utilisation"] = w["tile_utilisation"].to_numpy()
    return out.reset_index()


@lru_cache(maxsize=16)  # asked on every zoom of the trace; the per-IPU table is the run's, not the zoom's
def busiest_ipu(report: Report, run: int) -> int:
    """The IPU with the most compute cycles in ``run`` (the first of equals): what the one-IPU views
    (flame, tiles x steps) show when "All IPUs" is chosen, rather than an IPU 0 that may sit idle in a
    pipeline."""
    t = ipu_table(report, run)
    return int(t["ipu"].iat[int(t["compute cycles"].to_numpy().argmax())]) if len(t) else 0


def step_tile_split(report: Report, run: int, step: int, ipu: int, max_tiles: int = 1500) -> pd.DataFrame:
    """One executed step on one IPU, per tile (BSP): ``busy`` cycles (computing or exchanging, as the
    step's kind says) and ``waiting`` cycles (idle until the slowest tile reaches the sync that ends
    the step), with columns tile (first tile of the bin), tiles (per bin), busy, waiting, kind.
    More than ``max_tiles`` tiles are binned, each bin showing its busiest tile."""
    es = trace_steps(report, run)
    row = es[(es["step"] == step) & (es["ipu"] == ipu)]
    if row.empty:
        return pd.DataFrame(columns=["tile", "tiles", "busy", "waiting", "kind"])
    length = int(row["cycles"].iat[0])
    busy = np.asarray(report.tile_cycles(run, step, ipu), dtype=np.int64)
    width = max(1, -(-len(busy) // max_tiles))
    if width > 1:
        busy = np.pad(busy, (0, (-len(busy)) % width)).reshape(-1, width).max(axis=1)
    return pd.DataFrame(
        {
            "tile": np.arange(len(busy)) * width,
            "tiles": width,
            "busy": busy,
            "waiting": np.maximum(length - busy, 0),
            "kind": str(row["kind"].iat[0]),
        }
    )
