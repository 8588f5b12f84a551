"""The Execution Trace's flame nested by the model's structure (app.views.flame), on hand-built
reports whose spans are worked out by hand below."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from app.views import execution_trace as et
from app.views import flame
from report_format.fabricate import DebugContexts, Execution, Programs, Run, TileCycles, write_report
from report_format.reader import Report, open_report
from tests.app.small_report import small_spec


def chain_report(path: Path, names: list[str], cycles: list[int], sync: int = 10) -> Report:
    """Program > Sequence > per ONNX node ``names[i]``: an OnTileExecute of ``cycles[i]`` cycles made
    by a PopLibs ``conv`` inside it, and between two nodes a Sync of ``sync`` cycles made outside
    any debug context (as the simulator makes them). Every IPU runs the same steps back to back."""
    progs = [(-1, "Program", "main program", -1), (0, "Sequence", "main", -1)]
    dc_parent, dc_layer, dc_name, dc_type = [], [], [], []
    step_cycles = []
    for i, (name, c) in enumerate(zip(names, cycles, strict=True)):
        if i:
            progs.append((1, "Sync", "sync", -1))
            step_cycles.append(sync)
        onnx = len(dc_name)
        dc_parent += [-1, onnx]
        dc_layer += ["onnx", "poplibs"]
        dc_name += [name, "conv"]
        dc_type += ["Conv", "Conv"]
        progs.append((1, "OnTileExecute", f"conv{i + 1}", onnx + 1))
        step_cycles.append(c)
    base = small_spec()
    n_steps = len(step_cycles)
    tiles = base.target.num_ipus * base.target.tiles_per_ipu
    per_tile = np.repeat(np.array(step_cycles)[:, None], tiles, axis=1)  # every tile busy the whole step
    child = [0, 0, *range(len(progs) - 2)]
    spec = dataclasses.replace(
        base,
        programs=Programs(
            parent_id=[p[0] for p in progs],
            child_index=child,
            type=[p[1] for p in progs],
            name=[p[2] for p in progs],
            debug_context_id=[p[3] for p in progs],
        ),
        exchanges=None,
        debug_contexts=DebugContexts(
            parent_id=dc_parent,
            layer=dc_layer,
            name=dc_name,
            op_type=dc_type,
            file=[""] * len(dc_name),
            line=[0] * len(dc_name),
            attributes=["{}"] * len(dc_name),
        ),
        execution=Execution([Run(list(range(n_steps)), TileCycles(per_tile), "r")]),
    )
    return open_report(write_report(path, spec))


@pytest.fixture(scope="module")
def resnet_like(tmp_path_factory: pytest.TempPathFactory) -> Report:
    """Four convolutions named as ResNet's ONNX export names them: two in stage 0, two in stage 1."""
    names = ["s0b0_a_conv_1", "s0b0_b_conv_2", "s1b0_a_conv_3", "s1b0_b_conv_4"]
    return chain_report(tmp_path_factory.mktemp("flame") / "r", names, [100, 200, 300, 400])


def spans_by_row(fl: pd.DataFrame) -> dict[int, list[tuple[str, int, int]]]:
    return {
        int(r): [(lab, int(s), int(e)) for lab, s, e in zip(g["label"], g["start"], g["end"], strict=True)]
        for r, g in fl.groupby("row")
    }


def test_flame_nests_steps_under_layers_and_operations(resnet_like):
    """Steps (cycles): conv1 0-100, sync 100-110, conv2 110-310, sync 310-320, conv3 320-620,
    sync 620-630, conv4 630-1030. The sync between s0b0_a and s0b0_b sits in what both share
    (s0 > s0b0); the one between stages s0 and s1 in the Sequence itself."""
    rows = spans_by_row(et.flame_spans(resnet_like, 0, 0))
    assert rows[0] == [("main program (Program)", 0, 1030)]
    assert rows[1] == [("main (Sequence)", 0, 1030)]
    assert rows[2] == [("s0", 0, 310), ("sync (Sync)", 310, 320), ("s1", 320, 1030)]
    assert rows[3] == [("s0b0", 0, 310), ("s1b0", 320, 1030)]
    assert rows[4] == [
        ("s0b0_a", 0, 100),
        ("sync (Sync)", 100, 110),
        ("s0b0_b", 110, 310),
        ("s1b0_a", 320, 620),
        ("sync (Sync)", 620, 630),
        ("s1b0_b", 630, 1030),
    ]
    assert [lab for lab, _, _ in rows[5]] == [f"{n} (Conv)" for n in ("s0b0_a_conv_1", "s0b0_b_conv_2",
                                                                       "s1b0_a_conv_3", "s1b0_b_conv_4")]  # fmt: skip
    assert rows[6] == [("conv (Conv)", s, e) for s, e in ((0, 100), (110, 310), (320, 620), (630, 1030))]
    assert rows[7] == [(f"conv{i} (OnTileExecute)", s, e) for i, s, e in ((1, 0, 100), (2, 110, 310),
                                                                           (3, 320, 620), (4, 630, 1030))]  # fmt: skip
    assert flame.row_names(et.flame_spans(resnet_like, 0, 0))[2] == "2 layers"


def test_flame_totals_are_children_plus_self(resnet_like, small_report):
    """A span's cycles are its children's plus its own (self) cycles, at every level; with steps back
    to back only the steps themselves have self cycles. On the small report's IPU 0 the Repeat
    (cycles 50..180) is its two iterations of MatMul_0 (matmul 40 + exchange 20) and Add_1 (5)."""
    for fl in (et.flame_spans(resnet_like, 0, 0), et.flame_spans(small_report, 0, 0)):
        children = fl[fl["parent"] >= 0].groupby("parent")["cycles"].sum()
        parents = fl.set_index("span")
        has = parents.index.isin(children.index)
        assert (parents["cycles"][has] == children.reindex(parents.index[has]) + parents["self_cycles"][has]).all()
        assert (parents.loc[~has, "self_cycles"] == parents.loc[~has, "cycles"]).all()  # a step: its own
    r = et.flame_spans(resnet_like, 0, 0)
    assert (r.loc[r["step"] < 0, "self_cycles"] == 0).all()
    small = et.flame_spans(small_report, 0, 0)
    loop = small[small["label"] == "loop (Repeat)"].iloc[0]
    inside = small[small["parent"] == loop["span"]]
    assert inside["label"].tolist() == ["MatMul_0 (MatMul)", "Add_1 (Add)"] * 2
    assert inside["cycles"].tolist() == [60, 5, 60, 5] and (loop["cycles"], loop["self_cycles"]) == (130, 0)


def test_flat_and_flame_count_the_same_steps(resnet_like, small_report):
    """The level-of-detail sentence counts executed steps, not the flame's enclosing spans: 7 on
    one IPU in both views (the flame adds 18 enclosing spans: 1 + 1 + 2 + 2 + 4 + 4 + 4 by row)."""
    for report, run in ((resnet_like, 0), (small_report, 0), (small_report, 1)):
        length = et.run_length(report, run)
        for ipu in (0, 1):
            flat = et.flat_spans(report, run)
            flat = flat[flat["row"] == ipu]
            a = et.level_of_detail(flat, 0, length)
            b = et.level_of_detail(et.flame_spans(report, run, ipu), 0, length)
            assert a.visible_steps == b.visible_steps == len(flat)
            assert a.detail.split(" in cycles")[0] == b.detail.split(" in cycles")[0]
    fl = et.level_of_detail(et.flame_spans(resnet_like, 0, 0), 0, 1030)
    assert (fl.visible_steps, fl.frames) == (7, 18) and fl.detail.startswith("exact: 7 executed steps in cycles")
    assert "under 18 enclosing spans" in fl.detail


def test_repeated_blocks_are_layers(tmp_path):
    """Node names repeating with a fixed period (BERT's encoder layers) group as blocks."""
    names = ["attn_q_1", "attn_k_2", "ffn_3", "attn_q_4", "attn_k_5", "ffn_6"]
    report = chain_report(tmp_path / "b", names, [10, 20, 30, 40, 50, 60], sync=1)
    rows = spans_by_row(et.flame_spans(report, 0, 0))
    # block 1: 10 + 1 + 20 + 1 + 30; the sync between blocks; block 2: 40 + 1 + 50 + 1 + 60
    assert rows[2] == [("block 1", 0, 62), ("sync (Sync)", 62, 63), ("block 2", 63, 215)]
    assert [lab for lab, _, _ in rows[3]][:2] == ["attn", "sync (Sync)"]  # attn_q, attn_k share 'attn'


def test_flame_spans_of_a_report_without_debug_contexts(tmp_path):
    """Without debug information the flame is the program tree, as before."""
    report = open_report(write_report(tmp_path / "nodebug", small_spec(debug_info=False)))
    rows = spans_by_row(et.flame_spans(report, 0, 1))
    assert [lab for lab, _, _ in rows[2]] == ["in (StreamCopyBegin)", "in (StreamCopyMid)", "in (StreamCopyEnd)",
                                              "loop (Repeat)", "sync (Sync)"]  # fmt: skip


@pytest.mark.slow
def test_resnet50_flame_reads_by_stage_and_counts_the_flat_steps(tmp_path_factory):
    """The --real-size ResNet-50 (b32) report: its inference run's flame has the model's stages
    (stem, s0..s3) under the program and counts the same executed steps as the flat view (672 and
    674 before: the flame counted its Program and Sequence spans as steps)."""
    from app.views.runs import opening_run
    from tilescope.samples import REAL_SIZE_SAMPLES, make_sample

    out = tmp_path_factory.mktemp("real")
    make_sample(next(s for s in REAL_SIZE_SAMPLES if s.name == "resnet50_b32"), out)
    report = open_report(out / "resnet50_b32")
    run = opening_run(report)
    length = et.run_length(report, run)
    fl = et.flame_spans(report, run, 0)
    flat = et.level_of_detail(et.flat_spans(report, run), 0, length)
    nested = et.level_of_detail(fl, 0, length)
    steps = int(report.runs().set_index("run").at[run, "steps"])
    assert flat.visible_steps == nested.visible_steps == steps
    stages = fl.loc[fl["row"] == 2, "label"].tolist()
    assert [s for s in stages if s in {"stem", "s0", "s1", "s2", "s3"}] == ["stem", "s0", "s1", "s2", "s3"]
    assert {"s0b0", "s3b2"} <= set(fl.loc[fl["row"] == 3, "label"])
