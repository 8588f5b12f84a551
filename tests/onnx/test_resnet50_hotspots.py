"""The hotspot order of ResNet-50 at the real-size sample's shapes: convolutions first."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from profiler.chip.targets import get_target
from profiler.frontends.onnx import Session, examples, import_model, load_model
from profiler.frontends.onnx.builder import INPUT_OP, OUTPUT_OP, WEIGHT_UPLOAD_OP
from tilescope.samples import REAL_SIZE_SAMPLES


@pytest.mark.slow  # imports and compiles ResNet-50 at batch 32 on a C600: ~35 s
def test_resnet50_hotspots_are_its_convolutions() -> None:
    """ResNet-50 inference as the resnet50_b32 sample builds it (C600, batch 32, float16, half
    partials), compiled: each ONNX node's steps' cycles (the slowest tile of each step, the
    compile-time estimate the trace is made of). An IPU engineer opening the report must be led to
    the convolutions: the ten costliest nodes are convolutions, convolutions take most of the cycles,
    and the stem, whose 3 input channels cannot fill the AMP, runs the plan PopLibs would choose (4
    channels a group, 4 kernel rows a pass: 147 of every 224 MACs its own)."""
    sample = next(s for s in REAL_SIZE_SAMPLES if s.name == "resnet50_b32")
    model = import_model(load_model(examples.resnet(image=sample.image)), get_target(sample.target), sample.batch,
                         sample.dtype, partials=sample.partials)  # fmt: skip
    session = Session(model, {"debug.instrument": "false"}, name="hotspots")
    session.compile()
    contexts = model.graph.debug_contexts

    def node_of(ctx: int) -> int:  # the ONNX node a step's debug context lies in (-1: none)
        while ctx >= 0 and contexts[ctx].layer != "onnx":
            ctx = contexts[ctx].parent_id
        return ctx

    # the model's nodes: its host transfers (the input, the weights' upload) are operations too, but
    # of the host link, not of the model (the input's 9.6 MB upload alone outweighs any one conv)
    transfers = {i for i, c in enumerate(contexts) if c.op_type in (INPUT_OP, OUTPUT_OP, WEIGHT_UPLOAD_OP)}
    cycles: Counter[int] = Counter()
    for step in session.engine.compiled.steps:
        node = node_of(step.debug_context_id)
        if node >= 0 and node not in transfers and step.cost is not None:
            cycles[node] += int(step.cost.tile_cycles.max())
    top = [contexts[n].op_type for n, _ in cycles.most_common(10)]
    assert top == ["Conv"] * 10, top
    by_type: Counter[str] = Counter()
    for n, c in cycles.items():
        by_type[contexts[n].op_type] += c
    assert by_type.most_common(1)[0][0] == "Conv" and by_type["Conv"] > 0.7 * sum(by_type.values())
    session.close()

    stem = next(c for c in contexts if c.op_type == "Conv" and json.loads(c.attributes).get("conv", {}).get(
        "input", [0, 0])[1] == 3)  # fmt: skip
    plan = json.loads(stem.attributes)["plan"]
    assert plan["conv"][0:2] == [7, 7] and plan["conv"][3] == 3 and plan["block"][2] == 147
    assert (plan["in_chans_per_group"], plan["kernel_rows_per_pass"]) == (4, 4)
    assert plan["amp_mac_utilisation"] == pytest.approx(147 / 224, abs=1e-4)
