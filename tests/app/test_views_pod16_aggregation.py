"""Per-IPU and per-program aggregation on a multi-IPU report, against independent pandas sums of
the per-tile / per-(step, IPU) rows (the numpy paths that make a POD16 report fast must agree)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from app.views import ipus, program_tree
from app.views.grouped import executed_by_program
from report_format.reader import Report, open_report
from report_format.synthetic import synthetic_report
from report_format.vocabulary import StepType


@pytest.fixture(scope="module")
def four_ipus(tmp_path_factory: pytest.TempPathFactory) -> Report:
    path = tmp_path_factory.mktemp("pod") / "r"
    return open_report(synthetic_report(path, num_ipus=4, tiles_per_ipu=8, executed_steps=300, variables=50))


def test_ipu_compute_cycles_are_the_sum_of_each_ipus_compute_steps(four_ipus: Report) -> None:
    r = four_ipus
    run = 1
    es = r.df("execution_steps")
    es = es[es["run"] == run]
    kind = r.programs().set_index("program_id")["type"].reindex(es["program_id"]).to_numpy()
    span = es["cycles_to"] - es["cycles_from"]
    ref = span[kind == StepType.ON_TILE_EXECUTE].groupby(es["ipu"][kind == StepType.ON_TILE_EXECUTE]).sum()
    got = ipus.ipu_execution(r, run)
    assert got["ipu"].tolist() == [0, 1, 2, 3]
    assert got["compute_cycles"].tolist() == ref.reindex(range(4), fill_value=0).tolist()
    assert got["compute_cycles"].sum() > 0
    # the table is cached: a caller changing its copy changes nothing for the next
    got["compute_cycles"] = 0
    assert ipus.ipu_execution(r, run)["compute_cycles"].tolist() == ref.reindex(range(4), fill_value=0).tolist()


def test_ipu_memory_equals_the_per_tile_sum(four_ipus: Report) -> None:
    tm = four_ipus.tile_memory()
    ref = tm.groupby(tm["tile"].to_numpy() // 8)["total_bytes_including_gaps"].sum()
    mem = ipus.ipu_memory(four_ipus)
    assert mem["bytes_including_gaps"].tolist() == ref.tolist()
    assert int(mem["bytes_including_gaps"].sum()) == int(tm["total_bytes_including_gaps"].sum())


def test_executed_by_program_against_a_pandas_group_by(four_ipus: Report) -> None:
    es = four_ipus.df("execution_steps")
    es["cycles"] = es["cycles_to"] - es["cycles_from"]
    # one executed step (run, step): its longest IPU's cycles, its IPUs' FLOPs summed
    per_step = es.groupby(["run", "step", "program_id"], as_index=False).agg(
        cycles=("cycles", "max"), flops=("flops", "sum")
    )
    for run in (None, 0, 1):
        rows = per_step if run is None else per_step[per_step["run"] == run]
        ref = rows.groupby("program_id").agg(cycles=("cycles", "sum"), flops=("flops", "sum"), n=("cycles", "size"))
        cycles, flops, execs = executed_by_program(four_ipus, run)
        ids = ref.index.to_numpy()
        assert cycles[ids].tolist() == ref["cycles"].tolist()
        assert flops[ids].tolist() == ref["flops"].tolist()
        assert execs[ids].tolist() == ref["n"].tolist()
        others = np.setdiff1d(np.arange(len(cycles)), ids)
        assert not cycles[others].any() and not execs[others].any()
    tree = program_tree.program_tree(four_ipus)
    leaves = tree[tree["step"] >= 0]
    assert int(leaves["executions"].sum()) == len(per_step)


def test_an_empty_group_by_has_its_columns() -> None:
    from app.views.grouped import sums_and_tiles

    out = sums_and_tiles(np.array([3, 3]), np.array([1, 2]), sums={"b": np.array([2, 5])})
    pd.testing.assert_frame_equal(
        out, pd.DataFrame({"b": [7], "tiles": [2]}, index=pd.Index([3], name="key")), check_dtype=False
    )
