"""Hand-made small reports with exact control over every figure, for comparison tests.

``build_report(path, Spec(...))`` writes a consistent report (``Spec.report_spec()`` is its
``report_format.fabricate`` spec): a program ``Program(main) > Sequence(body) > steps``; every step
belongs to an operation (a poplibs debug context under an onnx node); one IPU-Model IPU of
``tiles`` tiles; ``runs`` runs that each execute every step once in order (cycles back to back;
costs per step, no per-tile cycles). Memory and liveness follow from the variables' tiles and
intervals. Everything a test asserts on is given here, so expected deltas are worked by hand.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from report_format.fabricate import (
    ComputeSets,
    DebugContexts,
    Execution,
    Memory,
    Placements,
    Programs,
    ReportSpec,
    Run,
    StepCosts,
    Target,
    TileBytes,
    Variables,
    variable_tile_bytes,
    write_report,
)
from report_format.vocabulary import ControlType, Layer, MemoryCategory, StepType


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

    def report_spec(self) -> ReportSpec:
        """The fabricator's spec of this report (``report_format.fabricate``)."""
        ops = self.op_order or list(dict.fromkeys([s.op for s in self.steps] + [v.op for v in self.variables]))
        dc_id = {op: 1 + i for i, op in enumerate(ops)}  # 0: the onnx node "model"
        n, nv = len(self.steps), len(self.variables)
        cs = [i for i, s in enumerate(self.steps) if s.type == StepType.ON_TILE_EXECUTE]
        cs_of = dict(zip(cs, range(len(cs)), strict=True))
        variables = Variables(
            name=[v.name for v in self.variables],
            dtype=["float32"] * nv,
            shape=[[v.bytes // 4] for v in self.variables],
            debug_context_id=[dc_id[v.op] for v in self.variables],
            first_step=[v.first for v in self.variables],
            last_step=[v.last for v in self.variables],
            constant=np.zeros(nv, bool),
            interleaved=np.zeros(nv, bool),
            placements=Placements(
                variable_id=np.arange(nv),
                tile=[v.tile for v in self.variables],
                bytes=[v.bytes for v in self.variables],
                offset=np.zeros(nv),
            ),
        )
        code = TileBytes(np.full(self.tiles, self.code_bytes_per_tile, dtype=np.int64), MemoryCategory.VERTEX_CODE)

        def per_step(name: str, dtype: type) -> np.ndarray:  # one column: this report's only IPU
            return np.array([getattr(s, name) for s in self.steps], dtype=dtype).reshape(n, 1)

        balance = per_step("tile_balance", float)
        costs = StepCosts(
            cycles=per_step("cycles", np.int64),
            active_tiles=np.ones((n, 1)),
            tile_balance=balance,
            active_tile_balance=balance,
            data_in_bytes=np.zeros((n, 1)),
            data_out_bytes=np.zeros((n, 1)),
            flops=per_step("flops", np.int64),
        )
        return ReportSpec(
            target=Target(1, self.tiles, self.bytes_per_tile, name=self.target, clock_hz=self.clock_hz),
            engine="test",
            options=[(k, v, "environment") for k, v in self.options.items()],
            programs=Programs(
                parent_id=[-1, 0] + [1] * n,
                child_index=[0, 0, *range(n)],
                type=[ControlType.PROGRAM, ControlType.SEQUENCE] + [s.type for s in self.steps],
                name=["main", "body"] + [s.name for s in self.steps],
                compute_set_id=[-1, -1] + [cs_of.get(i, -1) for i in range(n)],
                debug_context_id=[-1, -1] + [dc_id[s.op] for s in self.steps],
                estimated_cycles=[0, 0] + [s.cycles for s in self.steps],
            ),
            variables=variables,
            memory=Memory.from_tiles([code, *variable_tile_bytes(variables, self.tiles)]),
            compute_sets=ComputeSets(
                name=[self.steps[i].name for i in cs],
                debug_context_id=[dc_id[self.steps[i].op] for i in cs],
                vertices=[1] * len(cs),
                tiles=[1] * len(cs),
            ),
            debug_contexts=DebugContexts(
                parent_id=[-1] + [0] * len(ops),
                layer=[Layer.ONNX] + [Layer.POPLIBS] * len(ops),
                name=["model", *ops],
                op_type=["Model"] + [op_types(o) for o in ops],
                file=[""] * (len(ops) + 1),
                line=np.zeros(len(ops) + 1),
                attributes=["{}"] * (len(ops) + 1),
            ),
            execution=Execution([Run(np.arange(n), costs, f"run {r}") for r in range(self.runs)])
            if self.execution
            else None,
            notes={"execution": "execution profile not captured"},
        )


def op_types(name: str) -> str:
    """'matmul_1' -> 'MatMul': the op type is the name's prefix."""
    base = name.split("_")[0]
    return {"matmul": "MatMul", "add": "Add", "relu": "Relu", "conv": "Conv", "cast": "Cast"}.get(base, base.title())


def build_report(path: Path, spec: Spec) -> Path:
    return write_report(path, spec.report_spec())


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
