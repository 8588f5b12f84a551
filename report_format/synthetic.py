"""Synthetic reports of any size, for benchmarks and viewer tests (no simulator needed).

``synthetic_report(path, ...)`` writes a report whose tables are mutually consistent (category
rows sum to tile totals, liveness totals follow from the intervals and placements, step spans
follow from per-tile cycles) and whose shapes look like a real training step: compute sets over
ranges of tiles with per-tile jitter, exchanges, syncs that align IPUs, a Repeat body executed
many times. Addresses (``variable_placements.offset``) are plausible, not allocator-exact.

Everything is vectorised numpy; the per-tile cycles are generated and streamed chunk by chunk,
so a POD16-size report (16 IPUs x 1472 tiles, 20,000 executed steps) needs little memory.
Deterministic for a given ``seed``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from report_format.builder import ReportBuilder
from report_format.vocabulary import ControlType, Layer, MemoryCategory, MemoryRegion, StepType

_CODELETS = (
    ("poplin::ConvPartial1x1Out<half,float,true,false>", "SupervisorVertex", 2900, "MatMul", 4),
    ("popops::ScaledAddSupervisor<half,half,true>", "MultiVertex", 820, "Add", 2),
    ("popops::BinaryOp1D<popops::expr::BinaryOpType::ADD,half>", "MultiVertex", 640, "Add", 1),
    ("popnn::NonLinearity1D<half,popnn::NonLinearityType::RELU>", "MultiVertex", 560, "Relu", 1),
    ("popops::Reduce<popops::ReduceAdd,float,half,false,0>", "Vertex", 1400, "ReduceSum", 1),
    ("popops::Cast1D<float,half>", "MultiVertex", 480, "Cast", 1),
    ("poplin::ConvPartialnx1<half,float,true,false,true>", "SupervisorVertex", 4100, "Conv", 4),
)
_SYNC_CYCLES = 150  # typical internal sync (reference/ipu_model.md §8: about 100-150 cycles)
_KIND_OTE, _KIND_EXCH, _KIND_SYNC, _KIND_SCB, _KIND_SCM, _KIND_SCE, _KIND_GEX = range(7)
_TYPE_NAMES = {
    _KIND_OTE: StepType.ON_TILE_EXECUTE,
    _KIND_EXCH: StepType.DO_EXCHANGE,
    _KIND_SYNC: StepType.SYNC,
    _KIND_SCB: StepType.STREAM_COPY_BEGIN,
    _KIND_SCM: StepType.STREAM_COPY_MID,
    _KIND_SCE: StepType.STREAM_COPY_END,
    _KIND_GEX: StepType.GLOBAL_EXCHANGE,
}


def synthetic_report(
    path: str | Path,
    *,
    num_ipus: int = 1,
    tiles_per_ipu: int = 16,
    program_steps: int = 60,
    executed_steps: int = 200,
    variables: int = 300,
    runs: int = 2,
    oom_tiles: int = 0,
    bytes_per_tile: int = 638976,
    seed: int = 0,
    chunk_steps: int = 64,
) -> Path:
    """Write a synthetic report to ``path`` and return it.

    ``program_steps`` leaves (3 prologue stream-copy steps + a Repeat body); the body repeats so
    that about ``executed_steps`` steps execute per run.
    """
    rng = np.random.default_rng(seed)
    n_tiles = num_ipus * tiles_per_ipu
    body = max(program_steps - 3, 3)
    repeat = max(1, round((executed_steps - 3) / body))

    # -- program tree: Program > [SCB, SCM, SCE, Repeat > Sequence > body leaves] ----------------
    kinds = np.empty(body, dtype=np.int64)
    kinds[0::3], kinds[1::3], kinds[2::3] = _KIND_OTE, _KIND_EXCH, _KIND_SYNC
    if num_ipus > 1:
        kinds[(np.arange(body) % 48) == 46] = _KIND_GEX
    leaf_kind = np.concatenate([[_KIND_SCB, _KIND_SCM, _KIND_SCE], kinds])
    n_leaves = leaf_kind.size
    n_ops = int(np.ceil(body / 3))
    leaf_op = np.concatenate([[-1, -1, -1], np.arange(body) // 3])

    # debug contexts: onnx nodes (one per 4 ops) with poplibs ops beneath them
    n_nodes = int(np.ceil(n_ops / 4))
    op_codelet = rng.integers(0, len(_CODELETS), n_ops)
    dc_ids = np.arange(n_nodes + n_ops)
    dc_parent = np.concatenate([np.full(n_nodes, -1), np.arange(n_ops) // 4])
    dc_layer = [Layer.ONNX] * n_nodes + [Layer.POPLIBS] * n_ops
    node_type = [_CODELETS[op_codelet[min(4 * i, n_ops - 1)]][3] for i in range(n_nodes)]
    dc_name = [f"node_{i}/{node_type[i]}" for i in range(n_nodes)] + [
        f"block{i // 4}/{_CODELETS[c][3].lower()}_{i}" for i, c in enumerate(op_codelet)
    ]
    dc_type = node_type + [_CODELETS[c][3] for c in op_codelet]
    op_dc = n_nodes + np.arange(n_ops)

    prog_type = [
        ControlType.PROGRAM,
        StepType.STREAM_COPY_BEGIN,
        StepType.STREAM_COPY_MID,
        StepType.STREAM_COPY_END,
        ControlType.REPEAT,
        ControlType.SEQUENCE,
    ]
    prog_type += [_TYPE_NAMES[k] for k in kinds]
    n_prog = len(prog_type)
    prog_parent = np.array([-1, 0, 0, 0, 0, 4] + [5] * body, dtype=np.int32)
    child_index = np.array([0, 0, 1, 2, 3, 0] + list(range(body)), dtype=np.int32)
    step_of_prog = np.array([-1, 0, 1, 2, -1, -1] + list(range(3, n_leaves)), dtype=np.int32)
    leaf_prog = np.array([1, 2, 3] + list(range(6, n_prog)), dtype=np.int32)  # program id of each leaf
    cs_of_leaf = np.full(n_leaves, -1, dtype=np.int64)
    ote = np.flatnonzero(leaf_kind == _KIND_OTE)
    cs_of_leaf[ote] = np.arange(ote.size)
    n_cs = ote.size

    # -- compute sets: each covers a contiguous range of tiles ---------------------------------
    span = rng.integers(max(1, tiles_per_ipu // 8), tiles_per_ipu + 1, n_cs)
    span = np.minimum(span * rng.integers(1, num_ipus + 1, n_cs), n_tiles)
    start = rng.integers(0, n_tiles - span + 1)
    base = rng.integers(300, 20000, n_cs)
    cs_codelet = op_codelet[leaf_op[ote]]
    leaf_start = np.zeros(n_leaves, dtype=np.int64)
    leaf_end = np.zeros(n_leaves, dtype=np.int64)
    leaf_base = np.zeros(n_leaves, dtype=np.int64)
    leaf_start[ote], leaf_end[ote], leaf_base[ote] = start, start + span, base
    # exchanges feed the next compute set's tiles: ~bytes_per_tile in, 4 B/cycle (ref §1)
    ex = np.flatnonzero((leaf_kind == _KIND_EXCH) | (leaf_kind == _KIND_GEX))
    nxt = np.minimum(np.searchsorted(ote, ex), n_cs - 1)
    leaf_start[ex], leaf_end[ex] = start[nxt], start[nxt] + span[nxt]
    ex_bytes = rng.integers(64, 16384, ex.size) // 8 * 8
    leaf_bytes = np.zeros(n_leaves, dtype=np.int64)
    leaf_bytes[ex] = ex_bytes
    leaf_base[ex] = ex_bytes // 4 + 32
    leaf_base[leaf_kind == _KIND_GEX] *= 8  # IPU-Link is slower than on-chip exchange
    # stream copies: the input batch over the first 64 tiles of IPU 0
    io_tiles = min(64, tiles_per_ipu)
    leaf_start[:3], leaf_end[:3] = 0, io_tiles
    leaf_bytes[1] = 8192
    leaf_base[:3] = (40, 8192 // 2, 40)
    leaf_flops = np.zeros(n_leaves, dtype=np.int64)
    leaf_flops[ote] = base * np.array([_CODELETS[c][4] for c in cs_codelet]) * 16

    cs_tiles = [np.arange(s, s + n) for s, n in zip(start, span, strict=True)]
    v_cs = np.repeat(np.arange(n_cs), span)
    v_tile = np.concatenate(cs_tiles) if n_cs else np.zeros(0, dtype=np.int64)
    v_codelet = np.repeat(cs_codelet, span)
    v_count = rng.integers(1, 7, v_tile.size)
    v_cycles = _tile_cycles_for(np.repeat(ote, span), v_tile, np.repeat(base, span))
    v_flops = np.repeat(leaf_flops[ote], span)
    v_state = v_count * 32

    # -- variables and placements ---------------------------------------------------------------
    var_big = rng.random(variables) < 0.01
    var_ntiles = np.where(
        var_big, rng.integers(min(64, tiles_per_ipu), tiles_per_ipu + 1, variables), rng.integers(1, 9, variables)
    )
    var_ntiles = np.minimum(var_ntiles, tiles_per_ipu)
    var_ipu = rng.integers(0, num_ipus, variables)
    var_start = var_ipu * tiles_per_ipu + rng.integers(0, tiles_per_ipu - var_ntiles + 1)
    var_tile_bytes = rng.integers(8, 1025, variables) * 8
    always_live = rng.random(variables) < 0.3
    constant = always_live & (rng.random(variables) < 0.15)
    interleaved = rng.random(variables) < 0.3
    p_var = np.repeat(np.arange(variables), var_ntiles)
    p_tile = np.repeat(var_start, var_ntiles) + _ranges(var_ntiles)
    p_bytes = var_tile_bytes[p_var]
    first = rng.integers(0, n_leaves, variables)
    last = np.minimum(first + rng.geometric(1 / max(2, n_leaves // 10), variables), n_leaves - 1)
    nal = ~always_live

    # oom: one extra big always-live variable on each of the first `oom_tiles` tiles of IPU 0
    # (appended after the others so their ids are unchanged)
    # -- per-tile memory by category -------------------------------------------------------------
    cat_rows: list[tuple[np.ndarray, str, str, bool, np.ndarray]] = []

    def per_tile(tiles: np.ndarray, values: np.ndarray) -> np.ndarray:
        return np.bincount(tiles, weights=values, minlength=n_tiles).astype(np.int64)

    codelet_code = np.array([c[2] for c in _CODELETS], dtype=np.int64)
    tc = np.unique(v_tile * len(_CODELETS) + v_codelet)
    vertex_code = per_tile(tc // len(_CODELETS), codelet_code[tc % len(_CODELETS)])
    cat_rows.append((vertex_code, MemoryCategory.VERTEX_CODE, MemoryRegion.NON_INTERLEAVED, True, None))
    cat_rows.append(
        (per_tile(v_tile, v_state), MemoryCategory.VERTEX_INSTANCE_STATE, MemoryRegion.NON_INTERLEAVED, True, None)
    )
    cat_rows.append(
        (
            per_tile(v_tile, np.full(v_tile.size, 24)) + 1024,
            MemoryCategory.CONTROL_CODE,
            MemoryRegion.NON_INTERLEAVED,
            True,
            None,
        )
    )
    e_leaf = np.repeat(ex, leaf_end[ex] - leaf_start[ex])
    e_tile = np.concatenate([np.arange(leaf_start[i], leaf_end[i]) for i in ex]) if ex.size else np.zeros(0, np.int64)
    e_code = (leaf_bytes[e_leaf] // 64 + 12) * 4
    cat_rows.append(
        (per_tile(e_tile, e_code), MemoryCategory.INTERNAL_EXCHANGE_CODE, MemoryRegion.NON_INTERLEAVED, True, None)
    )
    cat_rows.append(
        (
            np.full(n_tiles, 6 * 512 + 1024, dtype=np.int64),
            MemoryCategory.STACK,
            MemoryRegion.NON_INTERLEAVED,
            True,
            None,
        )
    )
    cat_rows.append(
        (
            np.full(n_tiles, 8, dtype=np.int64),
            MemoryCategory.HOST_EXCHANGE_PACKET_HEADER,
            MemoryRegion.NON_INTERLEAVED,
            True,
            None,
        )
    )
    for cat, sel in ((MemoryCategory.VARIABLE, always_live & ~constant), (MemoryCategory.CONSTANT, constant)):
        for region, where in ((MemoryRegion.INTERLEAVED, interleaved), (MemoryRegion.NON_INTERLEAVED, ~interleaved)):
            m = sel[p_var] & where[p_var]
            cat_rows.append((per_tile(p_tile[m], p_bytes[m]), cat, region, True, None))
    nal_peak = _peak_per_tile(
        p_tile[nal[p_var]], first[p_var][nal[p_var]], last[p_var][nal[p_var]], p_bytes[nal[p_var]], n_tiles
    )
    cat_rows.append((nal_peak, MemoryCategory.VARIABLE, MemoryRegion.NON_INTERLEAVED, False, None))

    totals = np.sum([r[0] for r in cat_rows], axis=0)
    overflow = np.zeros(n_tiles, dtype=np.int64)
    if oom_tiles:
        extra = np.zeros(n_tiles, dtype=np.int64)
        extra[:oom_tiles] = bytes_per_tile - totals[:oom_tiles] + rng.integers(1024, 65536, oom_tiles)
        overflow[:oom_tiles] = extra[:oom_tiles]
        cat_rows.append((overflow, MemoryCategory.VARIABLE, MemoryRegion.OVERFLOWED, True, None))

    # gaps: alignment/bank holes, a few percent of each region
    ni = np.sum([r[0] for r in cat_rows if r[2] == MemoryRegion.NON_INTERLEAVED], axis=0)
    il = np.sum([r[0] for r in cat_rows if r[2] == MemoryRegion.INTERLEAVED], axis=0)
    ni_gap = (ni * rng.uniform(0.01, 0.06, n_tiles)).astype(np.int64) // 8 * 8
    il_gap = (il * rng.uniform(0.0, 0.04, n_tiles)).astype(np.int64) // 8 * 8
    excl = ni + il + overflow
    always = np.sum([r[0] for r in cat_rows if r[3]], axis=0)

    target = _target(num_ipus, tiles_per_ipu, bytes_per_tile)
    with ReportBuilder(path, engine="synthetic") as w:
        w.info["synthetic"] = {  # the arguments, so a test can regenerate the same report
            "num_ipus": num_ipus,
            "tiles_per_ipu": tiles_per_ipu,
            "program_steps": program_steps,
            "executed_steps": executed_steps,
            "variables": variables,
            "runs": runs,
            "oom_tiles": oom_tiles,
            "bytes_per_tile": bytes_per_tile,
            "seed": seed,
        }
        w.write("target", target)
        w.write(
            "engine_options",
            {
                "name": ["autoReport.all", "autoReport.directory", "autoReport.executionProfileProgramRunCount"],
                "value": ["true", "./report", str(runs)],
                "source": ["environment", "environment", "default"],
            },
        )
        tiles = np.arange(n_tiles)
        w.write(
            "tile_memory",
            {
                "tile": tiles,
                "ipu": tiles // tiles_per_ipu,
                "tile_in_ipu": tiles % tiles_per_ipu,
                "total_bytes_including_gaps": excl + ni_gap + il_gap,
                "total_bytes_excluding_gaps": excl,
                "always_live_bytes": always,
                "not_always_live_bytes": nal_peak,
                "non_interleaved_bytes_including_gaps": ni + ni_gap,
                "non_interleaved_bytes_excluding_gaps": ni,
                "interleaved_bytes_including_gaps": il + il_gap,
                "interleaved_bytes_excluding_gaps": il,
                "overflowed_bytes": overflow,
            },
        )
        cat_tile, cat_name, cat_region, cat_al, cat_bytes = [], [], [], [], []
        for values, cat, region, al, _ in cat_rows:
            nz = np.flatnonzero(values)
            cat_tile.append(nz)
            cat_bytes.append(values[nz])
            cat_name += [cat] * nz.size
            cat_region += [region] * nz.size
            cat_al.append(np.full(nz.size, al))
        order = np.argsort(np.concatenate(cat_tile), kind="stable")
        w.write(
            "tile_memory_by_category",
            {
                "tile": np.concatenate(cat_tile)[order],
                "category": np.array(cat_name, dtype=object)[order],
                "region": np.array(cat_region, dtype=object)[order],
                "always_live": np.concatenate(cat_al)[order],
                "bytes": np.concatenate(cat_bytes)[order],
            },
        )
        var_dtype = np.where(rng.random(variables) < 0.7, "float16", "float32")
        elem = np.where(var_dtype == "float16", 2, 4)
        w.write(
            "variables",
            {
                "variable_id": np.arange(variables),
                "name": [
                    f"{dc_name[n_nodes + i % n_ops] if n_ops else 'v'}/{'weights' if a else 'tmp'}_{i}"
                    for i, a in enumerate(always_live)
                ],
                "dtype": var_dtype.astype(object),
                "shape": [[int(n), int(b // e)] for n, b, e in zip(var_ntiles, var_tile_bytes, elem, strict=True)],
                "bytes": var_ntiles * var_tile_bytes,
                "always_live": always_live,
                MemoryCategory.CONSTANT: constant,
                "category": np.where(constant, MemoryCategory.CONSTANT, MemoryCategory.VARIABLE).astype(object),
                MemoryRegion.INTERLEAVED: interleaved,
                "tiles": var_ntiles,
                "debug_context_id": op_dc[np.arange(variables) % n_ops] if n_ops else np.full(variables, -1),
            },
        )
        p_off = np.where(interleaved[p_var], target["interleaved_memory_start"][0], 0) + _ranges_offset(p_tile, p_bytes)
        w.write(
            "variable_placements",
            {
                "variable_id": p_var,
                "tile": p_tile,
                "offset": p_off,
                "bytes": p_bytes,
                "region": np.where(interleaved[p_var], MemoryRegion.INTERLEAVED, MemoryRegion.NON_INTERLEAVED).astype(
                    object
                ),
            },
        )
        prog_cs = np.full(n_prog, -1)
        prog_dc = np.full(n_prog, -1)
        leaf_pos = leaf_prog
        prog_cs[leaf_pos] = cs_of_leaf
        prog_dc[leaf_pos[3:]] = op_dc[leaf_op[3:]]
        est = np.zeros(n_prog, dtype=np.int64)
        est[leaf_pos] = np.where(leaf_kind == _KIND_SYNC, _SYNC_CYCLES, leaf_base)
        code_tiles = np.zeros(n_prog, dtype=np.int64)
        code_tiles[leaf_pos] = np.where(leaf_kind == _KIND_SYNC, 0, leaf_end - leaf_start)
        names = ["main", "input", "input", "input", "repeat", "body"]
        names += [
            dc_name[op_dc[leaf_op[3 + j]]] + ("" if k == _KIND_OTE else f"/{_TYPE_NAMES[k]}")
            for j, k in enumerate(kinds)
        ]
        w.write(
            "programs",
            {
                "program_id": np.arange(n_prog),
                "parent_id": prog_parent,
                "child_index": child_index,
                "type": prog_type,
                "name": names,
                "step": step_of_prog,
                "compute_set_id": prog_cs,
                "debug_context_id": prog_dc,
                "repeat_count": np.where(np.arange(n_prog) == 4, repeat, 0),
                "code_bytes": code_tiles * 48,
                "code_tiles": code_tiles,
                "estimated_cycles": est,
            },
        )
        # data flow: each op's compute step writes the op's first variable and reads the previous op's
        ote_op = leaf_op[ote]
        wr = ote_op < variables
        rd = (ote_op >= 1) & (ote_op - 1 < variables)
        w.write(
            "program_variables",
            {
                "program_id": np.concatenate([leaf_prog[ote][wr], leaf_prog[ote][rd]]),
                "variable_id": np.concatenate([ote_op[wr], ote_op[rd] - 1]),
                "access": ["write"] * int(wr.sum()) + ["read"] * int(rd.sum()),
            },
        )
        w.write("replicas", {"replica": [0], "first_ipu": [0], "profiled": [True]})  # not replicated
        w.write(
            "compute_sets",
            {
                "compute_set_id": np.arange(n_cs),
                "name": [dc_name[op_dc[leaf_op[i]]] for i in ote],
                "debug_context_id": op_dc[leaf_op[ote]],
                "vertices": np.bincount(v_cs, weights=v_count, minlength=n_cs).astype(np.int64),
                "tiles": span,
            },
        )
        w.write(
            "codelets",
            {
                "codelet_id": np.arange(len(_CODELETS)),
                "name": [c[0] for c in _CODELETS],
                "kind": [c[1] for c in _CODELETS],
                "builtin": np.ones(len(_CODELETS), dtype=bool),
                "code_bytes": codelet_code,
            },
        )
        w.write(
            "vertices",
            {
                "compute_set_id": v_cs,
                "tile": v_tile,
                "codelet_id": v_codelet,
                "count": v_count,
                "state_bytes": v_state,
                "cycles": v_cycles,
                "flops": v_flops,
            },
        )
        w.write(
            "exchanges",
            {
                "program_id": leaf_prog[e_leaf],
                "tile": e_tile,
                "bytes_in": leaf_bytes[e_leaf],
                "bytes_out": leaf_bytes[e_leaf],
                "code_bytes": e_code,
            },
        )
        w.write(
            "streams",
            {
                "stream_id": [0, 1],
                "name": ["input", "output"],
                "direction": ["host_to_device", "device_to_host"],
                "dtype": ["float16", "float16"],
                "shape": [[4096], [1024]],
                "bytes": [8192, 2048],
            },
        )
        lv_ipu = var_ipu[nal]
        delta = np.zeros((n_leaves + 1, num_ipus), dtype=np.int64)
        vb = (var_ntiles * var_tile_bytes)[nal]
        np.add.at(delta, (first[nal], lv_ipu), vb)
        np.add.at(delta, (last[nal] + 1, lv_ipu), -vb)
        live = np.cumsum(delta, axis=0)[:n_leaves]
        w.write(
            "liveness",
            {
                "step": np.repeat(np.arange(n_leaves), num_ipus),
                "ipu": np.tile(np.arange(num_ipus), n_leaves),
                "not_always_live_bytes": live.reshape(-1),
            },
        )
        w.write(
            "liveness_intervals",
            {"variable_id": np.flatnonzero(nal), "first_step": first[nal], "last_step": last[nal]},
        )
        w.write(
            "debug_contexts",
            {
                "debug_context_id": dc_ids,
                "parent_id": dc_parent,
                "layer": dc_layer,
                "name": dc_name,
                "op_type": dc_type,
                "file": ["model.py"] * dc_ids.size,
                "line": 10 + dc_ids,
                "attributes": [json.dumps({"synthetic": True})] * dc_ids.size,
            },
        )
        exec_leaf = np.concatenate([np.arange(3), 3 + np.tile(np.arange(body), repeat)])
        run_rows = {k: [] for k in ("run", "program_id", "name", "cycles", "flops", "steps")}
        for r in range(runs):
            cycles, flops = _write_run(
                w,
                r,
                exec_leaf,
                leaf_kind,
                leaf_start,
                leaf_end,
                leaf_base,
                leaf_bytes,
                leaf_flops,
                leaf_prog,
                num_ipus,
                tiles_per_ipu,
                chunk_steps,
            )
            for k, v in zip(run_rows, (r, 0, f"run {r}", cycles, flops, exec_leaf.size), strict=True):
                run_rows[k].append(v)
        w.write("runs", run_rows)
    return Path(path)


def _write_run(
    w: ReportBuilder,
    run: int,
    exec_leaf: np.ndarray,
    kind: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    base: np.ndarray,
    nbytes: np.ndarray,
    flops: np.ndarray,
    leaf_prog: np.ndarray,
    num_ipus: int,
    tpi: int,
    chunk: int,
) -> tuple[int, int]:
    n_tiles = num_ipus * tpi
    tiles = np.arange(n_tiles)
    clock = np.zeros(num_ipus, dtype=np.int64)
    total_flops = 0
    for e0 in range(0, exec_leaf.size, chunk):
        s = exec_leaf[e0 : e0 + chunk]
        k = s.size
        active = (tiles[None, :] >= start[s, None]) & (tiles[None, :] < end[s, None])
        cyc = np.where(active, _tile_cycles_for(s[:, None], tiles[None, :], base[s, None]), 0)
        if run == 0:  # the first run waits longer for the host (REPTIL: first-run StreamCopyBegin skew)
            cyc[s == 0] = np.where(active[s == 0], 4000, 0)
        cyc[kind[s] == _KIND_SYNC] = _SYNC_CYCLES
        cyc = cyc.astype(np.int32).reshape(k, num_ipus, tpi)
        dur = cyc.max(axis=2).astype(np.int64)
        n_active = (cyc > 0).sum(axis=2)
        # per-step start per IPU; syncs and global exchanges align every IPU to the slowest
        align = (kind[s] == _KIND_SYNC) | (kind[s] == _KIND_GEX)
        frm = np.empty((k, num_ipus), dtype=np.int64)
        for i in range(k):  # k <= chunk steps: a short loop over steps, vectorised over IPUs/tiles
            if align[i]:
                clock[:] = clock.max()
            frm[i] = clock
            clock += dur[i]
        mean = cyc.mean(axis=2)
        maxc = np.maximum(dur, 1)
        act_mean = cyc.sum(axis=2) / np.maximum(n_active, 1)
        data = nbytes[s, None] * n_active
        step_flops = flops[s, None] * n_active
        total_flops += int(step_flops.sum())
        w.append(
            "execution_steps",
            {
                "run": np.full(k * num_ipus, run),
                "step": np.repeat(np.arange(e0, e0 + k), num_ipus),
                "program_id": np.repeat(leaf_prog[s], num_ipus),
                "ipu": np.tile(np.arange(num_ipus), k),
                "cycles_from": frm.reshape(-1),
                "cycles_to": (frm + dur).reshape(-1),
                "active_tiles": n_active.reshape(-1),
                "tile_balance": np.where(dur > 0, mean / maxc, 0).reshape(-1),
                "active_tile_balance": np.where(dur > 0, act_mean / maxc, 0).reshape(-1),
                "data_in_bytes": data.reshape(-1),
                "data_out_bytes": data.reshape(-1),
                "flops": step_flops.reshape(-1),
            },
        )
        w.append(
            "tile_cycles",
            {
                "run": np.full(k * num_ipus, run),
                "step": np.repeat(np.arange(e0, e0 + k), num_ipus),
                "ipu": np.tile(np.arange(num_ipus), k),
                "cycles": cyc.reshape(k * num_ipus, tpi),
            },
        )
    return int(clock.max()), total_flops


def _tile_cycles_for(leaf: np.ndarray, tile: np.ndarray, base: np.ndarray) -> np.ndarray:
    """Deterministic per-(step, tile) jitter of 0..15% below the step's base cost."""
    h = ((tile.astype(np.int64) * 2654435761 + leaf.astype(np.int64) * 40503) % 1024) / 1024.0
    return (base * (0.85 + 0.15 * h)).astype(np.int64)


def _ranges(lengths: np.ndarray) -> np.ndarray:
    """[3, 2] -> [0, 1, 2, 0, 1]."""
    ends = np.cumsum(lengths)
    return np.arange(ends[-1] if lengths.size else 0) - np.repeat(ends - lengths, lengths)


def _ranges_offset(tile: np.ndarray, nbytes: np.ndarray) -> np.ndarray:
    """Pack allocations on each tile one after another (plausible addresses)."""
    order = np.argsort(tile, kind="stable")
    t, b = tile[order], nbytes[order]
    csum = np.cumsum(b) - b
    first = np.searchsorted(t, t)
    out = np.empty_like(csum)
    out[order] = csum - csum[first]
    return out


def _peak_per_tile(
    tile: np.ndarray, first: np.ndarray, last: np.ndarray, nbytes: np.ndarray, n_tiles: int
) -> np.ndarray:
    """Max over program steps of live bytes per tile (what a perfect allocator needs)."""
    if tile.size == 0:
        return np.zeros(n_tiles, dtype=np.int64)
    ev_tile = np.concatenate([tile, tile])
    ev_step = np.concatenate([first, last + 1])
    ev_delta = np.concatenate([nbytes, -nbytes])
    order = np.lexsort((ev_delta, ev_step, ev_tile))  # frees before allocations at the same step
    t, d = ev_tile[order], ev_delta[order]
    csum = np.cumsum(d)
    starts = np.flatnonzero(np.r_[True, t[1:] != t[:-1]])
    base = np.repeat(csum[starts] - d[starts], np.diff(np.r_[starts, t.size]))
    peaks = np.maximum.reduceat(csum - base, starts)
    out = np.zeros(n_tiles, dtype=np.int64)
    out[t[starts]] = peaks
    return out


def _target(num_ipus: int, tiles_per_ipu: int, bytes_per_tile: int) -> dict[str, list]:
    # GC200-like constants (reference/ipu_model.md §1): 1.33 GHz, 6 workers, 4 B/cycle exchange,
    # 128 fp16 / 32 fp32 FLOPs per tile-cycle.
    return {
        "name": ["GC200" if tiles_per_ipu == 1472 else "IPUModel"],
        "type": ["IPU" if tiles_per_ipu == 1472 else "IPUModel"],
        "architecture": ["ipu2"],
        "num_ipus": [num_ipus],
        "tiles_per_ipu": [tiles_per_ipu],
        "num_tiles": [num_ipus * tiles_per_ipu],
        "bytes_per_tile": [bytes_per_tile],
        "bytes_per_ipu": [bytes_per_tile * tiles_per_ipu],
        "total_memory": [bytes_per_tile * tiles_per_ipu * num_ipus],
        "clock_hz": [1.33e9],
        "num_replicas": [1],
        "ipus_per_replica": [num_ipus],
        "num_worker_contexts": [6],
        "exchange_bytes_per_cycle": [4.0],
        "interleaved_memory_start": [bytes_per_tile // 2],
        "fp16_flops_per_cycle": [128.0],
        "fp32_flops_per_cycle": [32.0],
    }
