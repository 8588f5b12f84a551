"""The fabricator derives what follows from a spec; a 2 IPU x 2 tile report worked by hand.

Program steps: 0 matmul (OnTileExecute), 1 sync, 2 add (OnTileExecute). Tile cycles per step
(tiles 0, 1 | 2, 3): matmul 10 30 | 0 20, sync 5 5 | 5 5, add 4 4 | 8 8. IPU 0 finishes the matmul
at 30, IPU 1 at 20; the sync starts both at 30. Variables: a (always live, 100 B on tiles 0 and 2),
t (live steps 0..1, 40 B on tile 1), u (live 1..2, 8 B on tile 1 and tile 3).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from report_format.fabricate import (
    ComputeSets,
    Execution,
    Memory,
    Placements,
    Programs,
    ReportSpec,
    Run,
    Target,
    TileBytes,
    TileCycles,
    Variables,
    Vertices,
    variable_tile_bytes,
    write_report,
)
from report_format.reader import open_report


def _spec() -> ReportSpec:
    variables = Variables(
        name=["a", "t", "u"],
        dtype=["float32"] * 3,
        shape=[[50], [10], [4]],
        debug_context_id=[-1] * 3,
        first_step=[-1, 0, 1],
        last_step=[-1, 1, 2],
        constant=[False] * 3,
        interleaved=[False] * 3,
        placements=Placements(
            variable_id=[0, 0, 1, 2, 2], tile=[0, 2, 1, 1, 3], bytes=[50, 50, 40, 4, 4], offset=[0] * 5
        ),
    )
    cycles = np.array([[10, 30, 0, 20], [5, 5, 5, 5], [4, 4, 8, 8]])
    return ReportSpec(
        target=Target(num_ipus=2, tiles_per_ipu=2, bytes_per_tile=1000),
        programs=Programs(
            parent_id=[-1, 0, 0, 0],
            child_index=[0, 0, 1, 2],
            type=["Sequence", "OnTileExecute", "Sync", "OnTileExecute"],
            name=["main", "matmul", "sync", "add"],
            compute_set_id=[-1, 0, -1, 1],
        ),
        variables=variables,
        memory=Memory.from_tiles([TileBytes(np.full(4, 10), "vertexCode"), *variable_tile_bytes(variables, 4)]),
        compute_sets=ComputeSets(name=["matmul", "add"], debug_context_id=[-1, -1]),
        vertices=Vertices(
            compute_set_id=[0, 0, 0, 1, 1, 1, 1],
            tile=[0, 1, 3, 0, 1, 2, 3],
            codelet_id=[0] * 7,
            count=[1, 2, 1, 1, 1, 1, 1],
            state_bytes=[0] * 7,
            cycles=[0] * 7,
            flops=[100, 200, 300, 1, 1, 1, 1],
        ),
        execution=Execution([Run([0, 1, 2], TileCycles(cycles), "run 0")], synchronised=[False, True, False]),
    )


def test_a_spec_becomes_a_consistent_report(tmp_path: Path) -> None:
    report = open_report(write_report(tmp_path / "r", _spec()))
    report.verify()
    steps = report.table("execution_steps").to_pandas().set_index(["step", "ipu"])
    assert steps["cycles_from"].tolist() == [0, 0, 30, 30, 35, 35]  # the sync waits for IPU 0
    assert steps["cycles_to"].tolist() == [30, 20, 35, 35, 39, 43]
    assert steps["active_tiles"].tolist() == [2, 1, 2, 2, 2, 2]
    assert steps.loc[(0, 0), "tile_balance"] == np.float32(20 / 30)  # mean 20 of max 30
    assert steps.loc[(0, 1), "active_tile_balance"] == 1.0 and steps.loc[(0, 1), "tile_balance"] == 0.5
    assert steps["flops"].tolist() == [300, 300, 0, 0, 2, 2]  # the compute set's vertices on each IPU
    runs = report.table("runs").to_pylist()
    assert runs == [{"run": 0, "program_id": 0, "name": "run 0", "cycles": 43, "flops": 604, "steps": 3}]
    assert report.table("programs").column("step").to_pylist() == [-1, 0, 1, 2]
    assert report.table("compute_sets").to_pydict()["vertices"] == [4, 4]
    assert report.table("compute_sets").to_pydict()["tiles"] == [3, 4]
    variables = report.table("variables").to_pydict()
    assert variables["bytes"] == [100, 40, 8] and variables["tiles"] == [2, 1, 2]
    assert variables["always_live"] == [True, False, False]
    live = report.table("liveness").to_pandas().pivot(index="step", columns="ipu", values="not_always_live_bytes")
    assert live.values.tolist() == [[40, 0], [44, 4], [4, 4]]
    memory = report.table("tile_memory").to_pandas().set_index("tile")
    assert memory["always_live_bytes"].tolist() == [60, 10, 60, 10]
    assert memory["not_always_live_bytes"].tolist() == [0, 44, 0, 4]  # tile 1's peak: t and u at step 1
    assert memory["total_bytes_excluding_gaps"].tolist() == [60, 54, 60, 14]
