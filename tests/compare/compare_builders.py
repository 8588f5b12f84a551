"""Hand-made small reports with exact control over every figure, for comparison tests.

``build_report(path, Spec(...))`` writes a consistent report: a program ``Program(main) >
Sequence(body) > steps``; every step belongs to an operation (a poplibs debug context under an
onnx node); one IPU-Model IPU of ``tiles`` tiles; one run per entry of ``runs`` that executes
every step once in order on one IPU (cycles back to back). Liveness follows from the variables'
intervals. Everything a test asserts on is given here, so expected deltas are worked by hand.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from report_format.builder import ReportBuilder


@dataclass
class Step:
    type: str  # OnTileExecute, DoExchange, Sync…
    name: str
    op: str  # operation (poplibs debug context) name
    cycles: int = 100
    flops: int = 0
    tile_balance: float = 1.0


@dataclass
class Var:
    name: str
    bytes: int
    op: str
    first: int = -1  # program steps first..last; -1: always live
    last: int = -1
    tile: int = 0


@dataclass
class Spec:
    steps: list[Step]
    variables: list[Var] = field(default_factory=list)
    tiles: int = 4
    bytes_per_tile: int = 65536
    target: str = "IPUModel"
    clock_hz: float = 1.33e9
    options: dict[str, str] = field(default_factory=lambda: {"autoReport.all": "true"})
    code_bytes_per_tile: int = 1000  # vertexCode on every tile
    runs: int = 1
    execution: bool = True  # False: no execution profile (as with outputExecutionProfile false)
    #: operations in debug-context id order (names); default: order of first use by steps/variables
    op_order: list[str] | None = None


def op_types(name: str) -> str:
    """'matmul_1' -> 'MatMul': the op type is the name's prefix."""
    base = name.split("_")[0]
    return {"matmul": "MatMul", "add": "Add", "relu": "Relu", "conv": "Conv", "cast": "Cast"}.get(base, base.title())


def build_report(path: Path, spec: Spec) -> Path:
    ops = spec.op_order or list(dict.fromkeys([s.op for s in spec.steps] + [v.op for v in spec.variables]))
    n_ops = len(ops)
    # debug contexts: one onnx node "model" (id 0), then one poplibs context per op
    dc_id = {op: 1 + i for i, op in enumerate(ops)}
    n_steps = len(spec.steps)
    tiles = np.arange(spec.tiles)
    always = np.zeros(spec.tiles, dtype=np.int64)
    nal_peak = np.zeros(spec.tiles, dtype=np.int64)
    live = np.zeros(max(n_steps, 1), dtype=np.int64)
    for v in spec.variables:
        if v.first < 0:
            always[v.tile] += v.bytes
        else:
            live[v.first : v.last + 1] += v.bytes
    # per-tile not-always-live: sum of each tile's variables' bytes at its own peak step
    for t in tiles:
        per_step = np.zeros(max(n_steps, 1), dtype=np.int64)
        for v in spec.variables:
            if v.first >= 0 and v.tile == t:
                per_step[v.first : v.last + 1] += v.bytes
        nal_peak[t] = per_step.max()
    code = np.full(spec.tiles, spec.code_bytes_per_tile, dtype=np.int64)
    excl = always + nal_peak + code
    with ReportBuilder(path, engine="test") as w:
        w.write(
            "target",
            {
                "name": [spec.target],
                "type": ["IPUModel"],
                "architecture": ["ipu2"],
                "num_ipus": [1],
                "tiles_per_ipu": [spec.tiles],
                "num_tiles": [spec.tiles],
                "bytes_per_tile": [spec.bytes_per_tile],
                "bytes_per_ipu": [spec.bytes_per_tile * spec.tiles],
                "total_memory": [spec.bytes_per_tile * spec.tiles],
                "clock_hz": [spec.clock_hz],
                "num_replicas": [1],
                "ipus_per_replica": [1],
                "num_worker_contexts": [6],
                "exchange_bytes_per_cycle": [4.0],
                "interleaved_memory_start": [spec.bytes_per_tile // 2],
                "fp16_flops_per_cycle": [128.0],
                "fp32_flops_per_cycle": [32.0],
            },
        )
        w.write(
            "engine_options",
            {
                "name": list(spec.options),
                "value": list(spec.options.values()),
                "source": ["environment"] * len(spec.options),
            },
        )
        w.write(
            "tile_memory",
            {
                "tile": tiles,
                "ipu": np.zeros(spec.tiles),
                "tile_in_ipu": tiles,
                "total_bytes_including_gaps": excl,
                "total_bytes_excluding_gaps": excl,
                "always_live_bytes": always + code,
                "not_always_live_bytes": nal_peak,
                "non_interleaved_bytes_including_gaps": excl,
                "non_interleaved_bytes_excluding_gaps": excl,
                "interleaved_bytes_including_gaps": np.zeros(spec.tiles),
                "interleaved_bytes_excluding_gaps": np.zeros(spec.tiles),
                "overflowed_bytes": np.maximum(excl - spec.bytes_per_tile, 0),
            },
        )
        cat_tile, cat_name, cat_al, cat_bytes = [], [], [], []
        for t in tiles:
            for name, al, b in (
                ("vertexCode", True, code[t]),
                ("variable", True, always[t]),
                ("variable", False, nal_peak[t]),
            ):
                if b:
                    cat_tile.append(t)
                    cat_name.append(name)
                    cat_al.append(al)
                    cat_bytes.append(b)
        w.write(
            "tile_memory_by_category",
            {
                "tile": cat_tile,
                "category": cat_name,
                "region": ["non_interleaved"] * len(cat_tile),
                "always_live": cat_al,
                "bytes": cat_bytes,
            },
        )
        nv = len(spec.variables)
        w.write(
            "variables",
            {
                "variable_id": np.arange(nv),
                "name": [v.name for v in spec.variables],
                "dtype": ["float32"] * nv,
                "shape": [[v.bytes // 4] for v in spec.variables],
                "bytes": [v.bytes for v in spec.variables],
                "always_live": [v.first < 0 for v in spec.variables],
                "constant": [False] * nv,
                "category": ["variable"] * nv,
                "interleaved": [False] * nv,
                "tiles": [1] * nv,
                "debug_context_id": [dc_id[v.op] for v in spec.variables],
            },
        )
        w.write(
            "variable_placements",
            {
                "variable_id": np.arange(nv),
                "tile": [v.tile for v in spec.variables],
                "offset": np.zeros(nv),
                "bytes": [v.bytes for v in spec.variables],
                "region": ["non_interleaved"] * nv,
            },
        )
        cs_ids = {}
        for i, s in enumerate(spec.steps):
            if s.type == "OnTileExecute":
                cs_ids[i] = len(cs_ids)
        w.write(
            "programs",
            {
                "program_id": np.arange(n_steps + 2),
                "parent_id": [-1, 0] + [1] * n_steps,
                "child_index": [0, 0] + list(range(n_steps)),
                "type": ["Program", "Sequence"] + [s.type for s in spec.steps],
                "name": ["main", "body"] + [s.name for s in spec.steps],
                "step": [-1, -1] + list(range(n_steps)),
                "compute_set_id": [-1, -1] + [cs_ids.get(i, -1) for i in range(n_steps)],
                "debug_context_id": [-1, -1] + [dc_id[s.op] for s in spec.steps],
                "repeat_count": np.zeros(n_steps + 2),
                "code_bytes": np.zeros(n_steps + 2),
                "code_tiles": np.zeros(n_steps + 2),
                "estimated_cycles": [0, 0] + [s.cycles for s in spec.steps],
            },
        )
        w.write(
            "compute_sets",
            {
                "compute_set_id": list(cs_ids.values()),
                "name": [spec.steps[i].name for i in cs_ids],
                "debug_context_id": [dc_id[spec.steps[i].op] for i in cs_ids],
                "vertices": [1] * len(cs_ids),
                "tiles": [1] * len(cs_ids),
            },
        )
        w.write(
            "liveness",
            {"step": np.arange(n_steps), "ipu": np.zeros(n_steps), "not_always_live_bytes": live[:n_steps]},
        )
        nal_vars = [(i, v) for i, v in enumerate(spec.variables) if v.first >= 0]
        w.write(
            "liveness_intervals",
            {
                "variable_id": [i for i, _ in nal_vars],
                "first_step": [v.first for _, v in nal_vars],
                "last_step": [v.last for _, v in nal_vars],
            },
        )
        w.write(
            "debug_contexts",
            {
                "debug_context_id": np.arange(n_ops + 1),
                "parent_id": [-1] + [0] * n_ops,
                "layer": ["onnx"] + ["poplibs"] * n_ops,
                "name": ["model"] + ops,
                "op_type": ["Model"] + [op_types(o) for o in ops],
                "file": [""] * (n_ops + 1),
                "line": np.zeros(n_ops + 1),
                "attributes": [json.dumps({})] * (n_ops + 1),
            },
        )
        cycles = np.array([s.cycles for s in spec.steps], dtype=np.int64)
        start = np.concatenate([[0], np.cumsum(cycles)[:-1]]) if n_steps else np.zeros(0, np.int64)
        for r in range(spec.runs if spec.execution else 0):
            w.append(
                "execution_steps",
                {
                    "run": np.full(n_steps, r),
                    "step": np.arange(n_steps),
                    "program_id": 2 + np.arange(n_steps),
                    "ipu": np.zeros(n_steps),
                    "cycles_from": start,
                    "cycles_to": start + cycles,
                    "active_tiles": np.ones(n_steps),
                    "tile_balance": [s.tile_balance for s in spec.steps],
                    "active_tile_balance": [s.tile_balance for s in spec.steps],
                    "data_in_bytes": np.zeros(n_steps),
                    "data_out_bytes": np.zeros(n_steps),
                    "flops": [s.flops for s in spec.steps],
                },
            )
        if not spec.execution:
            w.set_profile("execution", False, note="execution profile not captured")
            return path
        w.write(
            "runs",
            {
                "run": np.arange(spec.runs),
                "program_id": np.zeros(spec.runs),
                "name": [f"run {r}" for r in range(spec.runs)],
                "cycles": np.full(spec.runs, int(cycles.sum())),
                "flops": np.full(spec.runs, sum(s.flops for s in spec.steps)),
                "steps": np.full(spec.runs, n_steps),
            },
        )
    return path


def mlp_steps(extra: list[tuple[int, Step]] | None = None, drop: list[int] | None = None) -> list[Step]:
    """A small model: matmul_1, add_1, relu_1, matmul_2 (compute, exchange, sync each), with steps
    inserted at given positions (before the original step with that index) or dropped."""
    base: list[Step] = []
    for k, (op, cyc, flops) in enumerate(
        (("matmul_1", 1000, 64000), ("add_1", 200, 2000), ("relu_1", 150, 0), ("matmul_2", 800, 32000))
    ):
        base.append(Step("OnTileExecute", op, op, cycles=cyc, flops=flops, tile_balance=0.5 + 0.1 * k))
        base.append(Step("DoExchange", f"{op}/exchange", op, cycles=50))
        base.append(Step("Sync", f"{op}/sync", op, cycles=10))
    out = []
    inserts = dict(extra or [])
    for i, s in enumerate(base):
        if i in inserts:
            out.append(inserts[i])
        if i not in (drop or []):
            out.append(s)
    return out


def assert_signs(comparison: object, expected: dict[str, int]) -> None:
    """Assert the sign (+1, -1 or 0) of each named metric's delta, listing every mismatch at once.
    For pairs whose exact deltas are not worked by hand (simulator runs: batch 4 vs 8, ...)."""
    metrics = comparison.metrics  # type: ignore[attr-defined]
    wrong = []
    for name, sign in expected.items():
        d = metrics[name]["delta"]
        if d is None or int(np.sign(d)) != sign:
            wrong.append(f"{name}: delta {d}, expected sign {sign:+d}")
    assert not wrong, "; ".join(wrong)
