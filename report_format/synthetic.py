"""Synthetic reports of any size, for benchmarks and viewer tests (no simulator needed).

``synthetic_spec(...)`` makes the ``report_format.fabricate.ReportSpec`` of a report shaped like a
real training step: compute sets over ranges of tiles with per-tile jitter, exchanges, syncs that
align IPUs, a Repeat body executed many times; ``synthetic_report(path, ...)`` writes it. The
fabricator makes the tables agree (category rows sum to tile totals, liveness follows from the
intervals and placements, step spans from per-tile cycles). Addresses
(``variable_placements.offset``) are plausible, not allocator-exact.

Everything is vectorised numpy: per-tile cycles are made once per program step, so a POD16-size
report (16 IPUs x 1472 tiles, 20,000 executed steps) is quick and needs little memory.
Deterministic for a given ``seed``.
"""

from __future__ import annotations

import json
from dataclasses import replace
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
    ProgramVariables,
    ReportSpec,
    Run,
    Streams,
    Target,
    TileBytes,
    TileCycles,
    Variables,
    Vertices,
    ranges,
    sum_by,
    variable_tile_bytes,
    write_report,
)
from report_format.vocabulary import ControlType, Layer, MemoryCategory, MemoryRegion, StepType

_CODELETS = (  # name, kind, code bytes, op type, FLOPs per cycle
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


def synthetic_report(path: str | Path, **kwargs: int) -> Path:
    """Write ``synthetic_spec(**kwargs)`` to ``path`` and return it."""
    return write_report(path, synthetic_spec(**kwargs))


def synthetic_spec(
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
) -> ReportSpec:
    """A synthetic report: ``program_steps`` leaves (3 prologue stream-copy steps + a Repeat body);
    the body repeats so that about ``executed_steps`` steps execute per run; ``oom_tiles`` tiles
    of IPU 0 hold more than ``bytes_per_tile``. The arguments are recorded in the manifest's info."""
    args = dict(locals())
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
    node_type = [_CODELETS[op_codelet[min(4 * i, n_ops - 1)]][3] for i in range(n_nodes)]
    dc_name = [f"node_{i}/{node_type[i]}" for i in range(n_nodes)] + [
        f"block{i // 4}/{_CODELETS[c][3].lower()}_{i}" for i, c in enumerate(op_codelet)
    ]
    dc_ids = np.arange(n_nodes + n_ops)
    debug_contexts = DebugContexts(
        parent_id=np.concatenate([np.full(n_nodes, -1), np.arange(n_ops) // 4]),
        layer=[Layer.ONNX] * n_nodes + [Layer.POPLIBS] * n_ops,
        name=dc_name,
        op_type=node_type + [_CODELETS[c][3] for c in op_codelet],
        file=["model.py"] * dc_ids.size,
        line=10 + dc_ids,
        attributes=[json.dumps({"synthetic": True})] * dc_ids.size,
    )
    op_dc = n_nodes + np.arange(n_ops)
    leaf_prog = np.concatenate([[1, 2, 3], np.arange(6, 6 + body)])  # program id of each leaf
    ote = np.flatnonzero(leaf_kind == _KIND_OTE)
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
    leaf_start[:3], leaf_end[:3] = 0, min(64, tiles_per_ipu)
    leaf_bytes[1] = 8192
    leaf_base[:3] = (40, 8192 // 2, 40)
    cs_flops = base * np.array([_CODELETS[c][4] for c in cs_codelet], dtype=np.int64) * 16

    v_cs = np.repeat(np.arange(n_cs), span)
    v_tile = np.repeat(start, span) + ranges(span)
    v_codelet = np.repeat(cs_codelet, span)
    v_count = rng.integers(1, 7, v_tile.size)
    vertices = Vertices(
        compute_set_id=v_cs,
        tile=v_tile,
        codelet_id=v_codelet,
        count=v_count,
        state_bytes=v_count * 32,
        cycles=_jitter(np.repeat(ote, span), v_tile, np.repeat(base, span)),
        flops=np.repeat(cs_flops, span),
    )
    e_leaf = np.repeat(ex, leaf_end[ex] - leaf_start[ex])
    e_tile = leaf_start[e_leaf] + ranges(leaf_end[ex] - leaf_start[ex])
    e_code = (leaf_bytes[e_leaf] // 64 + 12) * 4
    exchanges = Exchanges(
        program_id=leaf_prog[e_leaf],
        tile=e_tile,
        bytes_in=leaf_bytes[e_leaf],
        bytes_out=leaf_bytes[e_leaf],
        code_bytes=e_code,
    )

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
    p_tile = np.repeat(var_start, var_ntiles) + ranges(var_ntiles)
    p_bytes = var_tile_bytes[p_var]
    p_offset = np.where(interleaved[p_var], bytes_per_tile // 2, 0) + _packed(p_tile, p_bytes)
    first = rng.integers(0, n_leaves, variables)
    last = np.minimum(first + rng.geometric(1 / max(2, n_leaves // 10), variables), n_leaves - 1)
    var_spec = Variables(
        name=[
            f"{dc_name[n_nodes + i % n_ops] if n_ops else 'v'}/{'weights' if a else 'tmp'}_{i}"
            for i, a in enumerate(always_live)
        ],
        dtype=(),  # dtype and shape are drawn below, after the memory's random numbers
        shape=(),
        debug_context_id=op_dc[np.arange(variables) % n_ops] if n_ops else np.full(variables, -1),
        first_step=np.where(always_live, -1, first),
        last_step=np.where(always_live, -1, last),
        constant=constant,
        interleaved=interleaved,
        placements=Placements(variable_id=p_var, tile=p_tile, bytes=p_bytes, offset=p_offset),
    )

    # -- per-tile memory by category -------------------------------------------------------------
    codelet_code = np.array([c[2] for c in _CODELETS], dtype=np.int64)
    tc = np.unique(v_tile * len(_CODELETS) + v_codelet)
    parts = [
        TileBytes(sum_by(tc // len(_CODELETS), codelet_code[tc % len(_CODELETS)], n_tiles), MemoryCategory.VERTEX_CODE),
        TileBytes(sum_by(v_tile, v_count * 32, n_tiles), MemoryCategory.VERTEX_INSTANCE_STATE),
        TileBytes(sum_by(v_tile, np.full(v_tile.size, 24), n_tiles) + 1024, MemoryCategory.CONTROL_CODE),
        TileBytes(sum_by(e_tile, e_code, n_tiles), MemoryCategory.INTERNAL_EXCHANGE_CODE),
        TileBytes(np.full(n_tiles, 6 * 512 + 1024, dtype=np.int64), MemoryCategory.STACK),
        TileBytes(np.full(n_tiles, 8, dtype=np.int64), MemoryCategory.HOST_EXCHANGE_PACKET_HEADER),
        *variable_tile_bytes(var_spec, n_tiles),
    ]
    if oom_tiles:  # an overflow on each of the first `oom_tiles` tiles of IPU 0
        overflow = np.zeros(n_tiles, dtype=np.int64)
        totals = np.sum([p.bytes for p in parts], axis=0)
        overflow[:oom_tiles] = bytes_per_tile - totals[:oom_tiles] + rng.integers(1024, 65536, oom_tiles)
        parts.append(TileBytes(overflow, MemoryCategory.VARIABLE, MemoryRegion.OVERFLOWED))
    # gaps: alignment/bank holes, a few percent of each region
    ni = np.sum([p.bytes for p in parts if p.region == MemoryRegion.NON_INTERLEAVED], axis=0)
    il = np.sum([p.bytes for p in parts if p.region == MemoryRegion.INTERLEAVED], axis=0)
    memory = Memory.from_tiles(
        parts,
        gaps_non_interleaved=(ni * rng.uniform(0.01, 0.06, n_tiles)).astype(np.int64) // 8 * 8,
        gaps_interleaved=(il * rng.uniform(0.0, 0.04, n_tiles)).astype(np.int64) // 8 * 8,
    )
    var_dtype = np.where(rng.random(variables) < 0.7, "float16", "float32")
    elem = np.where(var_dtype == "float16", 2, 4)
    var_spec = replace(
        var_spec, dtype=var_dtype.astype(object), shape=np.stack([var_ntiles, var_tile_bytes // elem], 1)
    )

    # -- programs ----------------------------------------------------------------------------------
    prog_type = [
        ControlType.PROGRAM,
        StepType.STREAM_COPY_BEGIN,
        StepType.STREAM_COPY_MID,
        StepType.STREAM_COPY_END,
        ControlType.REPEAT,
        ControlType.SEQUENCE,
    ] + [_TYPE_NAMES[k] for k in kinds.tolist()]
    n_prog = len(prog_type)
    prog_cs = np.full(n_prog, -1)
    prog_cs[leaf_prog[ote]] = np.arange(n_cs)
    prog_dc = np.full(n_prog, -1)
    prog_dc[leaf_prog[3:]] = op_dc[leaf_op[3:]]
    est = np.zeros(n_prog, dtype=np.int64)
    est[leaf_prog] = np.where(leaf_kind == _KIND_SYNC, _SYNC_CYCLES, leaf_base)
    code_tiles = np.zeros(n_prog, dtype=np.int64)
    code_tiles[leaf_prog] = np.where(leaf_kind == _KIND_SYNC, 0, leaf_end - leaf_start)
    names = ["main", "input", "input", "input", "repeat", "body"] + [
        dc_name[op_dc[leaf_op[3 + j]]] + ("" if k == _KIND_OTE else f"/{_TYPE_NAMES[k]}")
        for j, k in enumerate(kinds.tolist())
    ]
    programs = Programs(
        parent_id=[-1, 0, 0, 0, 0, 4] + [5] * body,
        child_index=[0, 0, 1, 2, 3, 0] + list(range(body)),
        type=prog_type,
        name=names,
        compute_set_id=prog_cs,
        debug_context_id=prog_dc,
        repeat_count=np.where(np.arange(n_prog) == 4, repeat, 0),
        code_bytes=code_tiles * 48,
        code_tiles=code_tiles,
        estimated_cycles=est,
    )
    # data flow: each op's compute step writes the op's first variable and reads the previous op's
    ote_op = leaf_op[ote]
    wr = ote_op < variables
    rd = (ote_op >= 1) & (ote_op - 1 < variables)
    program_variables = ProgramVariables(
        program_id=np.concatenate([leaf_prog[ote][wr], leaf_prog[ote][rd]]),
        variable_id=np.concatenate([ote_op[wr], ote_op[rd] - 1]),
        access=["write"] * int(wr.sum()) + ["read"] * int(rd.sum()),
    )

    # -- execution: every tile's cycles in each program step ------------------------------------
    cycles = _leaf_tile_cycles(leaf_kind, leaf_start, leaf_end, leaf_base, n_tiles)
    first_run = cycles if runs == 1 else cycles.copy()
    # the first run waits longer for the host (REPTIL: first-run StreamCopyBegin skew)
    first_run[0] = np.where((np.arange(n_tiles) >= leaf_start[0]) & (np.arange(n_tiles) < leaf_end[0]), 4000, 0)
    executed = np.concatenate([np.arange(3), 3 + np.tile(np.arange(body), repeat)])
    later, first_costs = (TileCycles(c, bytes_in=leaf_bytes, bytes_out=leaf_bytes) for c in (cycles, first_run))
    execution = Execution(
        runs=[Run(executed, first_costs if r == 0 else later, name=f"run {r}") for r in range(runs)],
        synchronised=(leaf_kind == _KIND_SYNC) | (leaf_kind == _KIND_GEX),
    )

    return ReportSpec(
        target=Target(
            num_ipus,
            tiles_per_ipu,
            bytes_per_tile,
            # GC200-like constants (reference/ipu_model.md §1): 1.33 GHz, 6 workers, 4 B/cycle
            # exchange, 128 fp16 / 32 fp32 FLOPs per tile-cycle
            name="GC200" if tiles_per_ipu == 1472 else "IPUModel",
            type="IPU" if tiles_per_ipu == 1472 else "IPUModel",
        ),
        engine="synthetic",
        options=[
            ("autoReport.all", "true", "environment"),
            ("autoReport.directory", "./report", "environment"),
            ("autoReport.executionProfileProgramRunCount", str(runs), "default"),
        ],
        programs=programs,
        program_variables=program_variables,
        variables=var_spec,
        memory=memory,
        replicas=1,  # not replicated
        compute_sets=ComputeSets(name=[dc_name[op_dc[leaf_op[i]]] for i in ote], debug_context_id=op_dc[leaf_op[ote]]),
        codelets=Codelets(
            name=[c[0] for c in _CODELETS],
            kind=[c[1] for c in _CODELETS],
            builtin=np.ones(len(_CODELETS), dtype=bool),
            code_bytes=codelet_code,
        ),
        vertices=vertices,
        exchanges=exchanges,
        streams=Streams(
            name=["input", "output"],
            direction=["host_to_device", "device_to_host"],
            dtype=["float16", "float16"],
            shape=[[4096], [1024]],
            bytes=[8192, 2048],
        ),
        debug_contexts=debug_contexts,
        execution=execution,
        info={"synthetic": args},  # the arguments, so a test can regenerate the same report
    )


def _leaf_tile_cycles(
    kind: np.ndarray, start: np.ndarray, end: np.ndarray, base: np.ndarray, n_tiles: int
) -> np.ndarray:
    """Every tile's cycles in each program step (int32, steps x tiles): the step's base cost with
    per-tile jitter on its tiles, 0 elsewhere; a sync costs every tile the same."""
    out = np.zeros((kind.size, n_tiles), dtype=np.int32)
    tiles = np.arange(n_tiles)
    step = max(1, (1 << 22) // max(n_tiles, 1))  # a few MB of temporaries at a time
    for s0 in range(0, kind.size, step):
        s = np.arange(s0, min(s0 + step, kind.size))
        active = (tiles >= start[s, None]) & (tiles < end[s, None])
        out[s] = np.where(active, _jitter(s[:, None], tiles, base[s, None]), 0)
    out[kind == _KIND_SYNC] = _SYNC_CYCLES
    return out


def _jitter(leaf: np.ndarray, tile: np.ndarray, base: np.ndarray) -> np.ndarray:
    """Deterministic per-(step, tile) jitter of 0..15% below the step's base cost."""
    h = ((tile.astype(np.int64) * 2654435761 + leaf.astype(np.int64) * 40503) % 1024) / 1024.0
    return (base * (0.85 + 0.15 * h)).astype(np.int64)


def _packed(tile: np.ndarray, nbytes: np.ndarray) -> np.ndarray:
    """Pack allocations on each tile one after another (plausible addresses)."""
    order = np.argsort(tile, kind="stable")
    t, b = tile[order], nbytes[order]
    csum = np.cumsum(b) - b
    first = np.searchsorted(t, t)
    out = np.empty_like(csum)
    out[order] = csum - csum[first]
    return out
