"""Comparison on synthetic reports: figures checked against the raw Arrow tables (pandas written
separately), a report against itself, and a pair that differs only in out-of-memory tiles.
Real simulator pairs are in test_compare_simulated.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from compare_builders import assert_signs

from app.comparison.comparison import Comparison
from app.comparison.metrics import numeric_metrics
from app.comparison.steps import executed_steps, step_table
from app.views.summary import summary
from report_format import schema
from report_format.reader import open_report
from report_format.synthetic import synthetic_report
from report_format.writer import ReportWriter


def _raw(path: Path, table: str):
    return pa.ipc.open_file(pa.memory_map(str(path / f"{table}.arrow"))).read_all().to_pandas()


def test_executed_steps_and_step_table_match_raw_tables(small_report: Path) -> None:
    report = open_report(small_report)
    es = _raw(small_report, "execution_steps")
    es["dur"] = es["cycles_to"] - es["cycles_from"]
    ref = es.groupby(["run", "step"]).agg(
        cycles=("dur", "max"), flops=("flops", "sum"), program_id=("program_id", "first")
    )
    got = executed_steps(report).set_index(["run", "step"])
    np.testing.assert_array_equal(got["cycles"].to_numpy(), ref["cycles"].to_numpy())
    np.testing.assert_array_equal(got["flops"].to_numpy(), ref["flops"].to_numpy())
    st = step_table(report)
    per_prog = ref.groupby("program_id")["cycles"].sum()
    np.testing.assert_array_equal(st["cycles"].to_numpy(), per_prog.reindex(st["program_id"]).fillna(0).to_numpy())
    lv = _raw(small_report, "liveness").groupby("step")["not_always_live_bytes"].sum()
    np.testing.assert_array_equal(st["not_always_live_bytes"].to_numpy(), lv.to_numpy())
    # run 1 only: half the executions of run 0 + run 1
    assert st["executions"].sum() == 2 * step_table(report, run=1)["executions"].sum()


def test_report_against_itself_has_no_differences(small_report: Path) -> None:
    r = open_report(small_report)
    c = Comparison(r, open_report(small_report))
    assert c.parity == []
    assert c.step_counts() == {"same": 60, "added": 0, "removed": 0}
    assert all(m["delta"] == 0 for m in c.metrics.values())
    assert (c.variables["status"] == "same").all() and (c.operations["status"] == "same").all()
    assert not any(c.top_changes(5)[k] for k in ("tiles", "variables", "operations_by_cycles", "steps_by_cycles"))
    # metric names are summary's: every numeric summary figure is compared
    assert set(numeric_metrics(summary(r))) <= set(c.metrics)


def test_operations_account_for_all_executed_cycles(small_report: Path) -> None:
    c = Comparison(open_report(small_report), open_report(small_report))
    ops = c.operation_tables[0]
    es = executed_steps(c.baseline)
    assert ops["cycles"].sum() == es["cycles"].sum()
    assert ops["flops"].sum() == es["flops"].sum() == c.metrics["execution.total_flops"]["baseline"]
    assert ops["memory_bytes"].sum() == _raw(small_report, "variables")["bytes"].sum()


@pytest.fixture(scope="module")
def oom_pair(tmp_path_factory: pytest.TempPathFactory) -> Comparison:
    root = tmp_path_factory.mktemp("oom")
    kw = dict(num_ipus=2, tiles_per_ipu=16, seed=3, runs=1)
    b = synthetic_report(root / "fits", **kw)
    a = synthetic_report(root / "oom", oom_tiles=3, **kw)
    return Comparison(open_report(b), open_report(a))


def test_out_of_memory_tiles_show_up_as_the_biggest_tile_deltas(oom_pair: Comparison) -> None:
    m = oom_pair.metrics
    assert (m["memory.out_of_memory_tiles"]["baseline"], m["memory.out_of_memory_tiles"]["active"]) == (0, 3)
    # same program, same execution; only memory grew
    assert_signs(
        oom_pair,
        {
            "memory.max_tile_bytes": +1,
            "memory.category.variable": +1,
            "execution.total_cycles": 0,
            "execution.total_flops": 0,
            "liveness.peak_not_always_live_bytes": 0,
            "graph.program_steps": 0,
        },
    )
    top = [t["tile"] for t in oom_pair.top_changes(3)["tiles"]]
    assert sorted(top) == [0, 1, 2]
    assert oom_pair.step_counts()["same"] == 60


def test_executed_steps_do_not_depend_on_row_order(small_report: Path, tmp_path: Path) -> None:
    """A writer that emits execution_steps in another order gives the same executed steps."""
    src = open_report(small_report)
    dst = tmp_path / "shuffled"
    with ReportWriter(dst, engine=src.manifest.engine) as w:
        for name in schema.TABLE_NAMES:
            t = src.table(name)
            if name == "execution_steps":
                t = t.take(np.random.default_rng(0).permutation(t.num_rows))
            if t.num_rows:
                w.write(name, t)
    a = executed_steps(src).sort_values(["run", "step"]).reset_index(drop=True)
    b = executed_steps(open_report(dst)).sort_values(["run", "step"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)
