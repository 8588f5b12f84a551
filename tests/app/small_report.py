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
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from report_format.builder import ReportBuilder

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


def write_small_report(path: Path, *, execution: bool = True, debug_info: bool = True) -> Path:
    tiles = np.arange(NUM_TILES)
    ipu_of = tiles // TILES_PER_IPU
    with ReportBuilder(path, engine="main") as w:
        w.write(
            "target",
            {
                "name": ["IPUModel"],
                "type": ["IPUModel"],
                "architecture": ["ipu2"],
                "num_ipus": [NUM_IPUS],
                "tiles_per_ipu": [TILES_PER_IPU],
                "num_tiles": [NUM_TILES],
                "bytes_per_tile": [BYTES_PER_TILE],
                "bytes_per_ipu": [BYTES_PER_TILE * TILES_PER_IPU],
                "total_memory": [BYTES_PER_TILE * NUM_TILES],
                "clock_hz": [1.33e9],
                "num_replicas": [1],
                "ipus_per_replica": [NUM_IPUS],
                "num_worker_contexts": [6],
                "exchange_bytes_per_cycle": [4.0],
                "interleaved_memory_start": [524288],
                "fp16_flops_per_cycle": [64.0],
                "fp32_flops_per_cycle": [16.0],
            },
        )
        w.write("engine_options", {"name": ["autoReport.all"], "value": ["true"], "source": ["environment"]})
        # memory by category: vertex code (matmul codelet 100 B on tiles 0..5, add 50 B everywhere),
        # control code 20 B per tile, then the variables.
        cat: list[tuple[int, str, str, bool, int]] = []
        for t in range(NUM_TILES):
            cat.append((t, "vertexCode", "non_interleaved", True, 50 + (100 if t < 6 else 0)))
            cat.append((t, "controlCode", "non_interleaved", True, 20))
        for _vid, _n, _d, _s, always, const, placed, region, _dc, _live in VARIABLES:
            for t, b in placed.items():
                cat.append((t, "constant" if const else "variable", region, always, b))
        cat_arr = list(zip(*cat, strict=True))
        w.write(
            "tile_memory_by_category",
            {
                "tile": list(cat_arr[0]),
                "category": list(cat_arr[1]),
                "region": list(cat_arr[2]),
                "always_live": list(cat_arr[3]),
                "bytes": list(cat_arr[4]),
            },
        )
        excl = np.zeros(NUM_TILES, np.int64)
        always = np.zeros(NUM_TILES, np.int64)
        inter = np.zeros(NUM_TILES, np.int64)
        for t, _c, region, al, b in cat:
            excl[t] += b
            always[t] += b if al else 0
            inter[t] += b if region == "interleaved" else 0
        gaps = np.array([GAPS.get(t, 0) for t in range(NUM_TILES)])
        w.write(
            "tile_memory",
            {
                "tile": tiles,
                "ipu": ipu_of,
                "tile_in_ipu": tiles % TILES_PER_IPU,
                "total_bytes_including_gaps": excl + gaps,
                "total_bytes_excluding_gaps": excl,
                "always_live_bytes": always,
                "not_always_live_bytes": excl - always,
                "non_interleaved_bytes_including_gaps": excl - inter + gaps,
                "non_interleaved_bytes_excluding_gaps": excl - inter,
                "interleaved_bytes_including_gaps": inter,
                "interleaved_bytes_excluding_gaps": inter,
                "overflowed_bytes": np.zeros(NUM_TILES, np.int64),
            },
        )
        w.write(
            "variables",
            {
                "variable_id": [v[0] for v in VARIABLES],
                "name": [v[1] for v in VARIABLES],
                "dtype": [v[2] for v in VARIABLES],
                "shape": pa.array([v[3] for v in VARIABLES], pa.list_(pa.int64())),
                "bytes": [sum(v[6].values()) for v in VARIABLES],
                "always_live": [v[4] for v in VARIABLES],
                "constant": [v[5] for v in VARIABLES],
                "category": ["constant" if v[5] else "variable" for v in VARIABLES],
                "interleaved": [v[7] == "interleaved" for v in VARIABLES],
                "tiles": [len(v[6]) for v in VARIABLES],
                "debug_context_id": [v[8] for v in VARIABLES],
            },
        )
        place = [(v[0], t, b, v[7]) for v in VARIABLES for t, b in v[6].items()]
        w.write(
            "variable_placements",
            {
                "variable_id": [p[0] for p in place],
                "tile": [p[1] for p in place],
                "offset": [64 * i for i in range(len(place))],
                "bytes": [p[2] for p in place],
                "region": [p[3] for p in place],
            },
        )
        w.write(
            "liveness_intervals",
            {
                "variable_id": [v[0] for v in VARIABLES if v[9]],
                "first_step": [v[9][0] for v in VARIABLES if v[9]],
                "last_step": [v[9][1] for v in VARIABLES if v[9]],
            },
        )
        lv_step, lv_ipu, lv_bytes = [], [], []
        for s in range(7):
            for i in range(NUM_IPUS):
                b = sum(
                    bb
                    for v in VARIABLES
                    if v[9] and v[9][0] <= s <= v[9][1]
                    for t, bb in v[6].items()
                    if t // TILES_PER_IPU == i
                )
                lv_step.append(s), lv_ipu.append(i), lv_bytes.append(b)
        w.write("liveness", {"step": lv_step, "ipu": lv_ipu, "not_always_live_bytes": lv_bytes})
        cols = list(zip(*PROGRAMS, strict=True))
        code = {2: 6, 3: 6, 4: 6, 7: 12}
        w.write(
            "programs",
            {
                "program_id": cols[0],
                "parent_id": cols[1],
                "child_index": cols[2],
                "type": cols[3],
                "name": cols[4],
                "step": cols[5],
                "compute_set_id": cols[6],
                "debug_context_id": cols[7],
                "repeat_count": cols[8],
                "code_bytes": [code.get(p, 0) * NUM_TILES for p in cols[0]],
                "code_tiles": [NUM_TILES if p in code else 0 for p in cols[0]],
                "estimated_cycles": cols[9],
            },
        )
        w.write(
            "compute_sets",
            {
                "compute_set_id": [0, 1],
                "name": ["matmul", "add"],
                "debug_context_id": [1, 3],
                "vertices": [6, 8],
                "tiles": [6, 8],
            },
        )
        w.write(
            "codelets",
            {
                "codelet_id": [0, 1],
                "name": ["poplin::MatMul<half>", "popops::Add<float>"],
                "kind": ["MultiVertex", "Vertex"],
                "builtin": [True, True],
                "code_bytes": [100, 50],
            },
        )
        vt = [(0, t, 0, 1, 24, int(TILE_CYCLES[6][t]), 2 * int(TILE_CYCLES[6][t])) for t in range(6)]
        vt += [(1, t, 1, 1, 8, 5, 8) for t in range(NUM_TILES)]
        vc = list(zip(*vt, strict=True))
        w.write(
            "vertices",
            {
                "compute_set_id": vc[0],
                "tile": vc[1],
                "codelet_id": vc[2],
                "count": vc[3],
                "state_bytes": vc[4],
                "cycles": vc[5],
                "flops": vc[6],
            },
        )
        ex = [(7, t, 8, 8, 12) for t in range(NUM_TILES)] + [(3, t, 4, 0, 6) for t in range(NUM_TILES)]
        xc = list(zip(*ex, strict=True))
        w.write(
            "exchanges",
            {"program_id": xc[0], "tile": xc[1], "bytes_in": xc[2], "bytes_out": xc[3], "code_bytes": xc[4]},
        )
        w.write(
            "streams",
            {
                "stream_id": [0],
                "name": ["in"],
                "direction": ["host_to_device"],
                "dtype": ["float32"],
                "shape": pa.array([[8]], pa.list_(pa.int64())),
                "bytes": [32],
            },
        )
        if not debug_info:
            w.set_profile("debug_info", False, note="Debug information not captured.")
        else:
            _write_debug_contexts(w)
        if execution:
            _write_execution(w, ipu_of)
        else:
            w.set_profile(
                "execution",
                False,
                note="Execution profile not captured: compile only (autoReport.outputExecutionProfile is false).",
            )
    return path


def _write_debug_contexts(w: ReportBuilder) -> None:
    w.write(
        "debug_contexts",
        {
            "debug_context_id": [0, 1, 2, 3, 4],
            "parent_id": [-1, 0, -1, 2, -1],
            "layer": ["onnx", "poplibs", "onnx", "poplibs", "user"],
            "name": ["MatMul_0", "matMul", "Add_1", "add", "input"],
            "op_type": ["MatMul", "MatMul", "Add", "Add", "Stream"],
            "file": ["model.onnx", "", "model.onnx", "", "train.py"],
            "line": [0, 0, 0, 0, 12],
            "attributes": ["{}"] * 5,
        },
    )


def _write_execution(w: ReportBuilder, ipu_of: np.ndarray) -> None:
    flops_per_tile = {6: 2 * TILE_CYCLES[6], 8: np.full(NUM_TILES, 8)}
    xbytes = {7: (8, 8), 3: (4, 0)}
    es: dict[str, list] = {
        k: []
        for k in (
            "run",
            "step",
            "program_id",
            "ipu",
            "cycles_from",
            "cycles_to",
            "active_tiles",
            "tile_balance",
            "active_tile_balance",
            "data_in_bytes",
            "data_out_bytes",
            "flops",
        )
    }
    tc_run, tc_step, tc_ipu, tc_cycles = [], [], [], []
    runs = {"run": [], "program_id": [], "name": [], "cycles": [], "flops": [], "steps": []}
    for run in (0, 1):
        clock = np.zeros(NUM_IPUS, np.int64)
        run_flops = 0
        for k, pid in enumerate(EXECUTED):
            cyc = TILE_CYCLES[pid] * (run + 1)
            for i in range(NUM_IPUS):
                c = cyc[ipu_of == i]
                dur = int(c.max())
                active = c[c > 0]
                fl = int(flops_per_tile.get(pid, np.zeros(NUM_TILES))[ipu_of == i].sum())
                bi, bo = xbytes.get(pid, (0, 0))
                for key, val in (
                    ("run", run),
                    ("step", k),
                    ("program_id", pid),
                    ("ipu", i),
                    ("cycles_from", int(clock[i])),
                    ("cycles_to", int(clock[i]) + dur),
                    ("active_tiles", int(active.size)),
                    ("tile_balance", float(c.mean() / dur)),
                    ("active_tile_balance", float(active.mean() / dur)),
                    ("data_in_bytes", bi * TILES_PER_IPU),
                    ("data_out_bytes", bo * TILES_PER_IPU),
                    ("flops", fl),
                ):
                    es[key].append(val)
                clock[i] += dur
                run_flops += fl
                tc_run.append(run), tc_step.append(k), tc_ipu.append(i), tc_cycles.append(c.astype(np.int32))
        for key, val in (
            ("run", run),
            ("program_id", 0),
            ("name", f"run {run}"),
            ("cycles", int(clock.max())),
            ("flops", run_flops),
            ("steps", len(EXECUTED)),
        ):
            runs[key].append(val)
    w.write("execution_steps", es)
    w.write("tile_cycles", {"run": tc_run, "step": tc_step, "ipu": tc_ipu, "cycles": np.array(tc_cycles)})
    w.write("runs", runs)
    w.write("truncations", {"kind": [], "captured": [], "total": [], "reason": []})
