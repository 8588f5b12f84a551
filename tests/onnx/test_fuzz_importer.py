"""Property: the ONNX importer, given a mutated model, either imports it or raises one of its
documented errors (FrontendError, UnsupportedError, HostMemoryError) with a one-line message.

Two kinds of mutation: bytes of the serialised model (flipped, truncated), and structure (an
operator swapped for another supported one, an attribute or a dimension set to an odd value, an
input renamed to something undefined, an initializer reshaped). Budget: a few seconds each.
"""

from __future__ import annotations

import onnx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from profiler import HostMemoryError, ipu_model
from profiler.frontends.onnx import FrontendError, examples, import_model, load_model
from profiler.frontends.onnx.operators import HANDLERS

BASE = examples.mlp((8, 4, 2))
BASE_BYTES = BASE.SerializeToString()
DOCUMENTED = (FrontendError, HostMemoryError)
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _import(model: onnx.ModelProto) -> None:
    try:
        import_model(load_model(model), ipu_model(tiles_per_ipu=4), batch_size=2)
    except DOCUMENTED as exc:
        assert "\n" not in str(exc), str(exc)


@SETTINGS
@given(
    edits=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(1, 255)), min_size=1, max_size=6),
    cut=st.one_of(st.none(), st.floats(0, 1, exclude_max=True)),
)
def test_mutated_bytes(edits: list[tuple[float, int]], cut: float | None) -> None:
    data = bytearray(BASE_BYTES)
    for pos, xor in edits:
        data[int(pos * len(data))] ^= xor
    if cut is not None:
        data = data[: int(cut * len(data))]
    try:
        model = onnx.load_from_string(bytes(data))
    except Exception:  # noqa: BLE001 - protobuf's own refusal; load_model wraps it for files
        return
    _import(model)


_OPS = sorted(HANDLERS)
mutation = st.one_of(
    st.tuples(st.just("op"), st.integers(0, 10), st.sampled_from(_OPS)),
    st.tuples(st.just("attr"), st.integers(0, 10), st.integers(-3, 10**6)),
    st.tuples(st.just("ghost_input"), st.integers(0, 10), st.integers(0, 3)),
    st.tuples(st.just("drop_input"), st.integers(0, 10), st.integers(0, 3)),
    st.tuples(st.just("input_dim"), st.integers(0, 3), st.integers(-2, 70)),
    st.tuples(st.just("init_dims"), st.integers(0, 10), st.lists(st.integers(0, 9), max_size=3)),
    st.tuples(st.just("output_name"), st.integers(0, 3), st.text(max_size=5)),
)


def _mutate(model: onnx.ModelProto, kind: str, index: int, value: object) -> None:
    g = model.graph
    if kind == "op" and g.node:
        g.node[index % len(g.node)].op_type = str(value)
    elif kind == "attr" and g.node:
        node = g.node[index % len(g.node)]
        if node.attribute:
            a = node.attribute[0]
            if a.type == onnx.AttributeProto.INT:
                a.i = int(value)  # type: ignore[call-overload]
            elif a.type == onnx.AttributeProto.FLOAT:
                a.f = float(value)  # type: ignore[arg-type]
        else:
            node.attribute.append(onnx.helper.make_attribute("axis", int(value)))  # type: ignore[call-overload]
    elif kind in ("ghost_input", "drop_input") and g.node:
        node = g.node[index % len(g.node)]
        if node.input:
            k = int(value) % len(node.input)  # type: ignore[call-overload]
            if kind == "ghost_input":
                node.input[k] = "ghost"
            else:
                del node.input[k]
    elif kind == "input_dim" and g.input:
        dims = g.input[0].type.tensor_type.shape.dim
        if dims:
            dims[index % len(dims)].dim_value = int(value)  # type: ignore[call-overload]
    elif kind == "init_dims" and g.initializer:
        t = g.initializer[index % len(g.initializer)]
        del t.dims[:]
        t.dims.extend(value)  # type: ignore[arg-type]
    elif kind == "output_name" and g.output:
        g.output[index % len(g.output)].name = str(value)


@SETTINGS
@given(mutations=st.lists(mutation, min_size=1, max_size=3))
def test_mutated_structure(mutations: list[tuple[str, int, object]]) -> None:
    model = onnx.ModelProto()
    model.CopyFrom(BASE)
    for kind, index, value in mutations:
        _mutate(model, kind, index, value)
    _import(model)
