"""A hand-made 2 IPU x 4 tile report with numbers small enough to check by hand.

Program tree (pre-order; program steps in brackets)::

    0 Program
      1 Sequence main
        2 StreamCopyBegin in [0]   3 StreamCopyMid in [1]   4 StreamCopyEnd in [2]
        5 Repeat loop x2
          6 OnTileExecute matmul [3] (cs 0)   7 DoExchange ex [4]   8 OnTileExecute add [5] (cs 1)
        9 Sync [6]

Executed steps of a run: programs 2 3 4 6 7 8 6 7 8 9. Run 1 costs twice run 0.
Variables (bytes per tile): w 16 on tiles 0,1 (always live); c 4 on tile 0 (constant);
x 4 on every tile, live steps 1..3; y 8 on every tile, live 3..5; z 8 on tile 7, live 5..6.
So not-always-live bytes: step 3 = x + y = 96 (the peak), step 5 = y + z = 72.

``small_spec()`` is the report as a ``report_format.fabricate`` spec (memory rows listed by hand,
one per variable and tile); ``write_small_report`` writes it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from report_format.fabricate import (
    Codelets,
    ComputeSets,
    DebugContexts,
    Exchanges,
    Execution,
    Memory,
    Placements,
    Programs,
    ReportSpec,
    Run,
    Streams,
    Target,
    TileCycles,
    Variables,
    Vertices,
    write_report,
)

NUM_IPUS, TILES_PER_IPU, BYTES_PER_TILE = 2, 4, 1000
NUM_TILES = NUM_IPUS * TILES_PER_IPU
#: program id, parent, child index, type, name, step, compute set, debug context, repeat, est. cycles
PROGRAMS = [
    (0, -1, 0, "Program", "main program", -1, -1, -1, 0, 0),
    (1, 0, 0, "Sequence", "main", -1, -1, -1, 0, 0),
    (2, 1, 0, "StreamCopyBegin", "in", 0, -1, 4, 0, 5),
    (3, 1, 1, "StreamCopyMid", "in", 1, -1, 4, 0, 40),
    (4, 1, 2, "StreamCopyEnd", "in", 2, -1, 4, 0, 5),
    (5, 1, 3, "Repeat", "loop", -1, -1, -1, 2, 0),
    (6, 5, 0, "OnTileExecute", "matmul", 3, 0, 1, 0, 60),
    (7, 5, 1, "DoExchange", "ex", 4, -1, 1, 0, 20),
    (8, 5, 2, "OnTileExecute", "add", 5, 1, 3, 0, 5),
    (9, 1, 4, "Sync", "sync", 6, -1, -1, 0, 10),
]
EXECUTED = [2, 3, 4, 6, 7, 8, 6, 7, 8, 9]
# Busy cycles of every tile for each program leaf (run 0).
TILE_CYCLES = {
    2: np.full(NUM_TILES, 5),
    3: np.full(NUM_TILES, 40),
    4: np.full(NUM_TILES, 5),
    6: np.array([10, 20, 30, 40, 50, 60, 0, 0]),
    7: np.full(NUM_TILES, 20),
    8: np.full(NUM_TILES, 5),
    9: np.full(NUM_TILES, 10),
}
# variable id, name, dtype, shape, always live, constant, per-tile bytes {tile: bytes}, region, debug ctx, live steps
VARIABLES = [
    (0, "w", "float16", [4, 4], True, False, {0: 16, 1: 16}, "non_interleaved", 0, None),
    (1, "x", "float32", [8], False, False, dict.fromkeys(range(8), 4), "non_interleaved", 4, (1, 3)),
    (2, "y", "float32", [16], False, False, dict.fromkeys(range(8), 8), "interleaved", 1, (3, 5)),
    (3, "z", "float32", [2], False, False, {7: 8}, "non_interleaved", 3, (5, 6)),
    (4, "c", "float32", [1], True, True, {0: 4}, "non_interleaved", -1, None),
]
GAPS = {0: 8}  # tile 0 has 8 bytes of alignment gap
CODE_BYTES = {2: 6, 3: 6, 4: 6, 7: 12}  # control/exchange code per tile of these programs
EXCHANGED = {7: (8, 8), 3: (4, 0)}  # bytes each tile receives and sends in these programs


def small_spec(*, execution: bool = True, debug_info: bool = True, estimated: bool = False) -> ReportSpec:
    """The small report; ``estimated``: its runs are a compile-only profile's estimates, and the matmul
    step (program 6) is marked as depending on data."""
    tiles = range(NUM_TILES)
    cols = list(zip(*PROGRAMS, strict=True))
    # memory by category: vertex code (matmul codelet 100 B on tiles 0..5, add 50 B everywhere),
    # control code 20 B per tile, then each variable's bytes on each of its tiles
    cat = [
        (t, c, "non_interleaved", True, b)
        for t in tiles
        for c, b in (("vertexCode", 50 + 100 * (t < 6)), ("controlCode", 20))
    ]
    cat += [(t, "constant" if v[5] else "variable", v[7], v[4], b) for v in VARIABLES for t, b in v[6].items()]
    place = [(v[0], t, b) for v in VARIABLES for t, b in v[6].items()]
    p_var, p_tile, p_bytes = zip(*place, strict=True)
    m_tile, m_category, m_region, m_always, m_bytes = zip(*cat, strict=True)
    leaves = [p[0] for p in PROGRAMS if p[5] >= 0]  # the program of each program step
    # the matmul's vertices do one vertex per tile on tiles 0..5 (2 FLOPs a cycle), the add's on every tile
    vt = [(0, t, 0, 1, 24, int(TILE_CYCLES[6][t]), 2 * int(TILE_CYCLES[6][t])) for t in range(6)]
    vt += [(1, t, 1, 1, 8, 5, 8) for t in range(NUM_TILES)]
    ex = [(7, t, 8, 8, 12) for t in range(NUM_TILES)] + [(3, t, 4, 0, 6) for t in range(NUM_TILES)]
    cycles = np.array([TILE_CYCLES[p] for p in leaves])
    bytes_in, bytes_out = ([EXCHANGED.get(p, (0, 0))[i] for p in leaves] for i in (0, 1))
    return ReportSpec(
        target=Target(
            NUM_IPUS,
            TILES_PER_IPU,
            BYTES_PER_TILE,
            interleaved_memory_start=524288,
            fp16_flops_per_cycle=64.0,
            fp32_flops_per_cycle=16.0,
        ),
        engine="main",
        options=[("autoReport.all", "true", "environment")],
        programs=Programs(
            parent_id=cols[1],
            child_index=cols[2],
            type=cols[3],
            name=cols[4],
            compute_set_id=cols[6],
            debug_context_id=cols[7],
            repeat_count=cols[8],
            code_bytes=[CODE_BYTES.get(p, 0) * NUM_TILES for p in cols[0]],
            code_tiles=[NUM_TILES if p in CODE_BYTES else 0 for p in cols[0]],
            estimated_cycles=cols[9],
        ),
        variables=Variables(
            name=[v[1] for v in VARIABLES],
            dtype=[v[2] for v in VARIABLES],
            shape=[v[3] for v in VARIABLES],
            debug_context_id=[v[8] for v in VARIABLES],
            first_step=[v[9][0] if v[9] else -1 for v in VARIABLES],
            last_step=[v[9][1] if v[9] else -1 for v in VARIABLES],
            constant=[v[5] for v in VARIABLES],
            interleaved=[v[7] == "interleaved" for v in VARIABLES],
            placements=Placements(p_var, p_tile, p_bytes, offset=[64 * i for i in range(len(place))]),
        ),
        memory=Memory(
            m_tile, m_category, m_region, m_always, m_bytes, gaps_non_interleaved=[GAPS.get(t, 0) for t in tiles]
        ),
        compute_sets=ComputeSets(name=["matmul", "add"], debug_context_id=[1, 3]),
        codelets=Codelets(
            name=["poplin::MatMul<half>", "popops::Add<float>"],
            kind=["MultiVertex", "Vertex"],
            builtin=[True, True],
            code_bytes=[100, 50],
        ),
        vertices=Vertices(*zip(*vt, strict=True)),
        exchanges=Exchanges(*zip(*ex, strict=True)),
        streams=Streams(name=["in"], direction=["host_to_device"], dtype=["float32"], shape=[[8]], bytes=[32]),
        debug_contexts=DebugContexts(
            parent_id=[-1, 0, -1, 2, -1],
            layer=["onnx", "poplibs", "onnx", "poplibs", "user"],
            name=["MatMul_0", "matMul", "Add_1", "add", "input"],
            op_type=["MatMul", "MatMul", "Add", "Add", "Stream"],
            file=["model.onnx", "", "model.onnx", "", "train.py"],
            line=[0, 0, 0, 0, 12],
            attributes=["{}"] * 5,
        )
        if debug_info
        else None,
        execution=Execution(  # run 1 costs twice run 0
            [
                Run([leaves.index(p) for p in EXECUTED], TileCycles(cycles * (r + 1), bytes_in, bytes_out), f"run {r}")
                for r in (0, 1)
            ],
            estimated=estimated,
        )
        if execution
        else None,
        data_dependent={6: "MultiSlice: how many indices fall in a tile's rows decides its copies"}
        if estimated
        else {},
        notes={
            "debug_info": "Debug information not captured.",
            "execution": "Execution profile not captured: compile only (autoReport.outputExecutionProfile is false).",
        },
    )


def write_small_report(path: Path, *, execution: bool = True, debug_info: bool = True, estimated: bool = False) -> Path:
    return write_report(path, small_spec(execution=execution, debug_info=debug_info, estimated=estimated))
