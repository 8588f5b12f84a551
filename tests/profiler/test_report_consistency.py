"""Every example's report is consistent with SPEC.md's meaning of each table (cross-table invariants)."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from report_format import open_report

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module", params=["tutorial1_variables", "matvec", "logistic_regression"])
def report(request, tmp_path_factory):
    spec = importlib.util.spec_from_file_location(f"consistency_{request.param}", EXAMPLES / f"{request.param}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path_factory.mktemp(request.param) / "report"
    mod.run(options={"autoReport.all": "true", "autoReport.directory": str(out)}, verbose=False)
    r = open_report(out)
    r.verify()
    return r


def test_memory_tables_agree(report):
    t = report.target_info
    tm = report.tile_memory()
    assert tm["tile"].tolist() == list(range(t.num_tiles))
    assert (tm["tile"] == tm["ipu"] * t.tiles_per_ipu + tm["tile_in_ipu"]).all()
    assert (tm["total_bytes_including_gaps"] >= tm["total_bytes_excluding_gaps"]).all()
    parts = tm["non_interleaved_bytes_excluding_gaps"] + tm["interleaved_bytes_excluding_gaps"] + tm["overflowed_bytes"]
    assert (parts == tm["total_bytes_excluding_gaps"]).all()
    bc = report.tile_memory_by_category()
    assert (bc["bytes"] > 0).all()
    per_tile = bc.groupby("tile")["bytes"].sum().reindex(tm["tile"], fill_value=0)
    assert (per_tile.values == tm["total_bytes_excluding_gaps"].values).all()
    al = bc[bc["always_live"]].groupby("tile")["bytes"].sum().reindex(tm["tile"], fill_value=0)
    assert (al.values == tm["always_live_bytes"].values).all()
    # the vertices' state (SPEC: instance state plus out-of-line field data) is those two categories
    state = bc[bc["category"].isin(["vertexInstanceState", "vertexFieldData"])].groupby("tile")["bytes"].sum()
    vx = report.vertices().groupby("tile")["state_bytes"].sum()
    assert (vx.reindex(tm["tile"], fill_value=0).values == state.reindex(tm["tile"], fill_value=0).values).all()
    # placements add up to each variable's bytes; offsets lie inside the tile
    pl, var = report.variable_placements(), report.variables().set_index("variable_id")
    assert (pl.groupby("variable_id")["bytes"].sum() == var["bytes"][var["bytes"] > 0]).all()
    assert (pl.groupby("variable_id").size() == var["tiles"][var["tiles"] > 0]).all()
    assert ((pl["offset"] >= 0) & (pl["offset"] + pl["bytes"] <= t.bytes_per_tile)).all()


def test_program_tree_and_liveness_agree(report):
    progs = report.programs()
    ids = set(progs["program_id"])
    assert progs["program_id"].tolist() == list(range(len(progs)))
    assert all(p in ids or p == -1 for p in progs["parent_id"])
    leaves = progs[progs["step"] >= 0]
    assert leaves["step"].tolist() == list(range(len(leaves)))  # pre-order numbering
    assert not set(leaves["program_id"]) & set(progs["parent_id"])  # leaves have no children
    nsteps, nipus = len(leaves), report.target_info.num_ipus
    lv = report.liveness()
    assert len(lv) == nsteps * nipus
    li = report.liveness_intervals()
    assert ((li["first_step"] >= 0) & (li["first_step"] <= li["last_step"]) & (li["last_step"] < nsteps)).all()
    var = report.variables().set_index("variable_id")
    assert not var.loc[li["variable_id"], "always_live"].any()
    # liveness per step = bytes of the variables whose intervals cover it
    expected = np.zeros(nsteps, dtype=np.int64)
    for v, a, b in li[["variable_id", "first_step", "last_step"]].itertuples(index=False):
        expected[a : b + 1] += var.loc[v, "bytes"]
    assert (lv.groupby("step")["not_always_live_bytes"].sum().values == expected).all()
    ex = report.exchanges()
    types = progs.set_index("program_id")["type"]
    assert set(types[ex["program_id"]]) <= {"DoExchange", "GlobalExchange", "StreamCopyMid"}
    cs = report.compute_sets().set_index("compute_set_id")
    vx = report.vertices()
    assert (vx.groupby("compute_set_id")["count"].sum() == cs.loc[vx["compute_set_id"].unique(), "vertices"]).all()


def test_execution_tables_agree(report):
    progs = report.programs().set_index("program_id")
    runs = report.runs()
    for run, steps_n, cycles, flops in runs[["run", "steps", "cycles", "flops"]].itertuples(index=False):
        st = report.execution_steps(run)
        assert len(st) == steps_n * report.target_info.num_ipus
        assert (progs.loc[st["program_id"], "step"] >= 0).all()  # executed steps are leaves
        assert st["cycles_to"].max() == cycles and st["flops"].sum() == flops
        for _, s in st.groupby("ipu"):
            assert (s["cycles_from"].values[1:] >= s["cycles_to"].values[:-1]).all()
        tc = report.tile_cycles_range(run, 0, steps_n)
        assert (tc.max(axis=2).reshape(-1) == (st["cycles_to"] - st["cycles_from"]).values).all()
        assert ((st["tile_balance"] >= 0) & (st["tile_balance"] <= 1)).all()
