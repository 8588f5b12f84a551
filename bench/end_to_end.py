"""End-to-end calibration figures: measured once, recorded, then checked.

    python -m bench.end_to_end            # ResNet-50 on C600, fp16, batches 32 and 4 (~30 s, ~1.6 GiB)

ResNet-50 runs at ByteMLPerf's own batch sizes (32 and 4; ref §6): its simulated throughput is
batch x clock / cycles of one run. The run writes ``bench/end_to_end.json``: per batch the value, the
memory categories and each matmul/conv plan's shape and estimated cycles, with the command and the
date. tests/profiler/test_fidelity.py holds the recorded ratios to their tolerance and checks the
record is current by re-planning the recorded shapes (a second): a model change that alters any
plan makes the record stale.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from report_format.vocabulary import MemoryCategory

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "bench" / "end_to_end.json"
COMMAND = "python -m bench.end_to_end"
RESNET_BATCHES = (32, 4)  # ByteMLPerf resnet50-torch-fp32 on C600, FP16 (ref §6)
# The partials type ByteMLPerf's IPU backend compiles with: compile_backend_ipu.py sets PopRT's
# ``options.partials_type = compiler_options.get("partials_type", "half")`` and resnet50's
# interact_infos/resnet50-torch-fp32.json sets no partials_type (bytedance/ByteMLPerf a30b4f97).
RESNET_PARTIALS = "float16"


def matmul_plans(graph: Any) -> list[dict[str, Any]]:
    """Every MatMul op's shape, dtype and plan (estimated cycles, splits) from its debug context."""
    out = []
    for c in graph.debug_contexts:
        if c.op_type != "MatMul":
            continue
        a = json.loads(c.attributes)
        if "shape" not in a:
            continue
        s = a["shape"]
        out.append({"G": s["G"], "M": s["M"], "K": s["K"], "N": s["N"], "dtype": a["dtype"],
                    "partials": a["partials_dtype"], "cycles": a["cycles"]}
                   | ({"conv": a["conv"]} if "conv" in a else {}))  # fmt: skip
    return out


def replan(plans: list[dict[str, Any]], target_name: str) -> int:
    """Sum of the planner's estimated cycles for the recorded shapes, recomputed now."""
    from profiler.chip.targets import get_target
    from profiler.ops.matmul import plan_matmul

    t = get_target(target_name)
    return sum(
        plan_matmul(
            t, p["G"], p["M"], p["K"], p["N"], p["dtype"], p["partials"], conv=tuple(p.get("conv") or ()) or None
        ).cycles
        for p in plans
    )


def resnet50(batch: int, target_name: str = "C600") -> dict[str, Any]:
    """Simulated ResNet-50 (224², fp16, half partials as ByteMLPerf compiles it) inference on
    ``target_name``: cycles of one run, img/s, and the memory categories (internalExchangeCode's share)."""
    from profiler.chip.targets import get_target
    from profiler.frontends.onnx import Session, examples, import_model, load_model

    target = get_target(target_name)
    t0 = time.perf_counter()
    imported = import_model(
        load_model(examples.resnet()), target, batch_size=batch, dtype="float16", partials=RESNET_PARTIALS
    )
    session = Session(imported, {"debug.instrument": "false"}, name="end_to_end")
    session.compile()
    session.upload_weights()
    shape = [batch, *imported.inputs[0].shape[1:]]
    session.run({imported.inputs[0].name: np.random.default_rng(0).standard_normal(shape).astype(np.float32)})
    cycles = int(session.cycles[-1])
    mem = session.engine.memory
    bc = mem.by_category
    cats: dict[str, float] = {}
    for cat, b in zip(bc["category"], bc["bytes"], strict=True):
        cats[str(cat)] = cats.get(str(cat), 0.0) + float(b)
    total = float(np.sum(mem.tile_memory["total_bytes_excluding_gaps"]))
    plans = matmul_plans(imported.graph)
    return {
        "model": "ResNet-50 (profiler.frontends.onnx.examples.resnet(), 224x224)", "target": target_name,
        "dtype": "float16", "partials": RESNET_PARTIALS, "batch": batch, "cycles": cycles, "clock_hz": target.clock_hz,
        "img_per_s": batch * target.clock_hz / cycles, "total_bytes": total,
        "categories": {k: cats[k] for k in sorted(cats)},
        "exchange_code_share": cats.get(MemoryCategory.INTERNAL_EXCHANGE_CODE, 0.0) / total,
        "host_seconds": round(time.perf_counter() - t0, 1),
        "plans": plans, "plans_cycles": int(sum(p["cycles"] for p in plans)),
    }  # fmt: skip


def load() -> dict[str, Any]:
    return json.loads(RECORD.read_text())


def recorded(batch: int) -> dict[str, Any]:
    """The recorded ResNet-50 figures at ``batch``."""
    return load()["resnet50"][str(batch)]


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(
        prog="python -m bench.end_to_end",
        description="Simulate ResNet-50 inference on a C600 (float16, half partials) at ByteMLPerf's batch "
        "sizes 32 and 4 and record the figures (cycles, img/s, memory by category, each conv/Gemm plan) in "
        "bench/end_to_end.json, which docs/fidelity.md's end-to-end rows and tests/profiler/test_fidelity.py "
        "read. About 30 s and 1.6 GiB of host memory.",
    ).parse_args(argv)
    runs = {}
    for batch in RESNET_BATCHES:
        r = runs[str(batch)] = resnet50(batch)
        print(f"ResNet-50 {r['target']} {r['dtype']} batch {r['batch']}: {r['cycles']:,} cycles, "
              f"{r['img_per_s']:,.0f} img/s; exchange code {100 * r['exchange_code_share']:.1f} % of "
              f"{r['total_bytes'] / 2**20:.0f} MiB; {r['host_seconds']} s", flush=True)  # fmt: skip
    rec = {"command": COMMAND, "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
           "resnet50": runs}  # fmt: skip
    RECORD.write_text(json.dumps(rec, indent=1) + "\n")
    print(f"wrote {RECORD.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
