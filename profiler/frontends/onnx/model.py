"""Loading and checking an ONNX model: one clear line for a bad file, opset, batch-size override."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import onnx
from onnx import shape_inference
from onnx.external_data_helper import uses_external_data

from profiler.multi_ipu.sharding import INFERENCE_FLOAT_DATA, light_copy

from .errors import FrontendError, UnsupportedError, first_line
from .operators import HANDLERS

# Issue 5 asks for opset 9 and newer; the handlers also follow opsets 6-8 (their differences, such
# as the legacy broadcast/axis attributes of binary ops, are handled), so those import too.
MIN_OPSET = 6


def load_model(
    source: str | Path | onnx.ModelProto, check_operators: bool = True, values: bool = True
) -> onnx.ModelProto:
    """Read and check a model (a path or a ModelProto); FrontendError if it is not a valid ONNX model,
    or names the missing file of a weight held as external data, UnsupportedError listing every node
    whose operator tilescope cannot import. ``values=False`` (compile-only) reads no external data and
    drops the data of initializers the import will not read (frontends.onnx.shapes.keeps_value), so
    host memory does not follow the weights."""
    checked_as: str | onnx.ModelProto | None = None  # what the checker reads: the model, or its file
    if isinstance(source, onnx.ModelProto):
        model = source
        where = f"model {model.graph.name!r}"
    else:
        path = Path(source)
        where = str(path)
        if not path.is_file():
            raise FrontendError(f"{where}: no such file")
        try:
            model = onnx.load(str(path), load_external_data=False)
        except Exception as exc:  # protobuf DecodeError and friends: not ONNX or truncated
            raise FrontendError(f"{where}: not a readable ONNX model ({first_line(exc)})") from None
        if values and any(uses_external_data(t) for t in model.graph.initializer):
            _load_external_data(model, path)
        elif values:
            # the file as read, checked from its path: the checker otherwise serialises the loaded
            # model again to read it (ResNet-50's 98 MB: 0.44 s against 0.18)
            checked_as = str(path)
        if not model.graph.node and not model.graph.output:
            raise FrontendError(f"{where}: not an ONNX model (no graph)")
    if check_operators:  # before the checker, which stops at the first operator it does not know
        check_supported(model, HANDLERS)
    if not values:
        drop_unread_data(model)
    try:
        onnx.checker.check_model(checked_as or (model if values else _checkable(model)))
    except Exception as exc:
        raise FrontendError(f"{where}: invalid ONNX model: {first_line(exc)}") from None
    version = opset_version(model)
    if version < MIN_OPSET:
        raise FrontendError(f"{where}: opset {version} is too old; tilescope imports opset {MIN_OPSET} and newer")
    newest = onnx.defs.onnx_opset_version()  # the newest opset the installed onnx package defines
    if version > newest:
        raise FrontendError(f"{where}: opset {version} is newer than any ONNX defines (up to {newest})")
    return model


def _load_external_data(model: onnx.ModelProto, path: Path) -> None:
    """Read the weights ``model`` holds in files beside ``path``; FrontendError naming the first
    missing file (one line: a value run needs them, a compile-only one does not)."""
    from onnx.external_data_helper import ExternalDataInfo, load_external_data_for_model

    base = path.parent
    for t in model.graph.initializer:
        if uses_external_data(t):
            location = ExternalDataInfo(t).location
            if not (base / location).is_file():
                raise FrontendError(
                    f"{path}: weight {t.name!r} is held in {location!r}, which is missing; "
                    "--compile-only profiles the model without its weights"
                )
    try:
        load_external_data_for_model(model, str(base))
    except Exception as exc:  # a file shorter than its tensors, a location outside the model's directory
        raise FrontendError(f"{path}: cannot read its external data ({first_line(exc)})") from None


def drop_unread_data(model: onnx.ModelProto) -> None:
    """Clear the data of the initializers a compile-only import reads as shapes only, and their
    external-data records (their dims and type stay): the model then holds no weight bytes however
    large it declares them, and nothing looks for a weights file. Also what an imported model's
    ``onnx_model`` keeps once nothing will run it (profiler.frontends.onnx.profile): the graph holds
    the weights it uploads itself."""
    from .shapes import DATA_FIELDS, keeps_value

    for t in model.graph.initializer:
        if keeps_value(t):
            continue
        for name in (*DATA_FIELDS, "external_data", "data_location"):
            t.ClearField(name)


def _checkable(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy the ONNX checker accepts though some initializers hold no data (a compile-only load):
    those become typed graph inputs, which is what they are to a profile without values."""
    from onnx import helper

    from .shapes import holds_data

    light = onnx.ModelProto()
    light.CopyFrom(model)
    empty = [t for t in light.graph.initializer if not holds_data(t)]
    kept = [t for t in light.graph.initializer if holds_data(t)]
    del light.graph.initializer[:]
    light.graph.initializer.extend(kept)
    named = {vi.name for vi in light.graph.input}
    light.graph.input.extend(
        helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in empty if t.name not in named
    )
    return light


def check_supported(model: onnx.ModelProto, handlers: Mapping[str, Any]) -> None:
    """UnsupportedError listing every node whose operator has no handler (all at once)."""
    bad = [
        (n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}", n.name or f"#{i}", "")
        for i, n in enumerate(model.graph.node)
        if n.domain not in ("", "ai.onnx") or n.op_type not in handlers
    ]
    if bad:
        raise UnsupportedError(bad, opset_version(model))


def opset_version(model: onnx.ModelProto) -> int:
    """The default-domain opset the model declares."""
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return int(imp.version)
    return 1


BATCH_SYMBOL = "__tilescope_batch__"
# Integer initializers up to this many elements stay in the probe model used to trace the batch
# (shape targets are small); bigger or float ones become typed inputs so inference does not copy them.
_PROBE_CONSTANT = 64


def override_batch(model: onnx.ModelProto, batch: int | None) -> onnx.ModelProto:
    """A copy of ``model`` whose graph inputs' first dimension (when 1 or symbolic) is ``batch``;
    constant Reshape targets that carry the old batch of 1 are rewritten to follow it (or a
    FrontendError names the node that pins the batch); output and intermediate shapes are re-inferred."""
    # a light copy: large float initializers as name, type and dims only (shape inference and the batch
    # rewrite never read them); their data is copied back once at the end, so the weights are copied once
    m, stripped = light_copy(model, _CONSTANT_ELEMENTS)
    init_names = {t.name for t in m.graph.initializer}
    if batch is not None:
        if batch < 1:
            raise FrontendError(f"batch size must be >= 1, got {batch}")
        if batch >= 2**63:  # ONNX dimensions are int64
            raise FrontendError(f"batch size {batch} is larger than an ONNX dimension can hold")
        batched = []
        for vi in m.graph.input:
            if vi.name in init_names or not vi.type.HasField("tensor_type"):
                continue
            dims = vi.type.tensor_type.shape.dim
            if dims and (dims[0].HasField("dim_param") or dims[0].dim_value in (-1, 0, 1)):  # -1: "dynamic"
                batched.append(vi.name)
        if batched and batch != 1:
            rewrite_batch_constants(m, batched, batch)
        for vi in m.graph.input:
            if vi.name in batched:
                d = vi.type.tensor_type.shape.dim[0]
                d.Clear()
                d.dim_value = batch
    # intermediate shapes are recomputed by the importer from the inputs; drop stale ones
    del m.graph.value_info[:]
    for out in m.graph.output:
        if out.type.HasField("tensor_type"):
            out.type.tensor_type.ClearField("shape")
    try:
        inferred = infer_shapes(m)
    except Exception as exc:
        raise FrontendError(f"model {model.graph.name!r}: shape inference failed: {first_line(exc)}") from None
    for i in stripped:  # the batch rewrite only appends initializers: the indices hold
        inferred.graph.initializer[i].CopyFrom(model.graph.initializer[i])
    return inferred


def infer_shapes(model: onnx.ModelProto) -> onnx.ModelProto:
    """``shape_inference.infer_shapes(model)``, without serializing the weights: large floating-point
    initializers go in as their name, type and dims only, and get their data back in the result (a
    BERT-base's 340 MB took 1.4 s to infer, most of it copying them there and back)."""
    light, stripped = light_copy(model, INFERENCE_FLOAT_DATA)
    inferred = shape_inference.infer_shapes(light)
    for i in stripped:
        inferred.graph.initializer[i].CopyFrom(model.graph.initializer[i])
    return inferred


# Elements a float initializer may have and still be copied whole into override_batch's working copy:
# the batch rewrite reads constants up to this size (_constants); anything larger is a weight
_CONSTANT_ELEMENTS = 4096


def _probe(model: onnx.ModelProto, batched: list[str]) -> onnx.ModelProto:
    """A light copy for tracing the batch: the batch inputs' first dimension is the symbol
    BATCH_SYMBOL, large or float initializers are typed graph inputs (their values do not matter)."""
    from onnx import helper

    p = onnx.ModelProto()
    p.CopyFrom(model)
    keep, moved = [], []
    for t in p.graph.initializer:
        small_int = (
            t.data_type in (onnx.TensorProto.INT64, onnx.TensorProto.INT32) and _numel(t.dims) <= _PROBE_CONSTANT
        )
        if small_int:
            keep.append(t)
        else:
            moved.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    names = {vi.name for vi in p.graph.input}
    del p.graph.initializer[:]
    p.graph.initializer.extend(keep)
    p.graph.input.extend(vi for vi in moved if vi.name not in names)
    for vi in p.graph.input:
        if vi.name in batched:
            d = vi.type.tensor_type.shape.dim[0]
            d.Clear()
            d.dim_param = BATCH_SYMBOL
    del p.graph.value_info[:]
    for out in p.graph.output:
        out.type.tensor_type.ClearField("shape")
    return p


def _numel(dims: object) -> int:
    n = 1
    for d in dims:  # type: ignore[attr-defined]
        n *= int(d)
    return n


def _has_values(t: onnx.TensorProto) -> bool:
    """Whether an initializer holds its values in the model (not external data left unloaded)."""
    fields = (t.raw_data, t.float_data, t.int32_data, t.int64_data, t.double_data, t.uint64_data, t.string_data)
    return _numel(t.dims) == 0 or any(len(f) for f in fields)


def _constants(graph: onnx.GraphProto) -> dict[str, object]:
    """Literal values by name: initializers and Constant node outputs (as numpy arrays)."""
    from onnx import numpy_helper

    # a small initializer whose data is external and not loaded (a compile-only import) has no values
    # here: one that is a Reshape target would then pin the batch, which the rewrite below says
    out: dict[str, object] = {
        t.name: numpy_helper.to_array(t) for t in graph.initializer if _numel(t.dims) <= 4096 and _has_values(t)
    }
    for n in graph.node:
        if n.op_type == "Constant" and n.domain in ("", "ai.onnx"):
            for a in n.attribute:
                if a.name == "value":
                    out[n.output[0]] = numpy_helper.to_array(a.t)
                elif a.name == "value_ints":
                    out[n.output[0]] = list(a.ints)
    return out


def rewrite_batch_constants(model: onnx.ModelProto, batched: list[str], batch: int) -> None:
    """Rewrite (in place) the constant target shapes of Reshape nodes whose input carries the batch
    in its first dimension and whose target hard-codes the old batch of 1: the target's first entry
    becomes 0 ("copy the input's dimension", so any batch works) or, with allowzero=1, ``batch``.
    Which tensors carry the batch is traced by shape inference with the batch as a symbol; each
    rewrite lets the symbol flow further, so passes repeat until nothing changes.
    FrontendError when a constant target cannot follow the batch (it pins it)."""
    import numpy as np
    from onnx import numpy_helper

    g = model.graph
    probe = _probe(model, batched)
    consts = _constants(g)
    done: set[int] = set()
    for _ in range(len(g.node) + 1):
        try:
            inferred = shape_inference.infer_shapes(probe)
        except Exception:
            return  # tracing is best effort: the importer reports a shape that does not fit, by node
        dims: dict[str, list] = {}
        for vi in list(inferred.graph.value_info) + list(inferred.graph.input):
            if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape"):
                dims[vi.name] = list(vi.type.tensor_type.shape.dim)
        changed = False
        for i, (node, pnode) in enumerate(zip(g.node, probe.graph.node, strict=True)):
            if i in done or node.op_type != "Reshape" or node.domain not in ("", "ai.onnx") or len(node.input) < 2:
                continue
            d = dims.get(node.input[0])
            if not d or d[0].dim_param != BATCH_SYMBOL or node.input[1] not in consts:
                continue
            target = np.asarray(consts[node.input[1]], dtype=np.int64).reshape(-1)
            allowzero = any(a.name == "allowzero" and a.i for a in node.attribute)
            done.add(i)
            if target.size == 0 or target[0] == -1 or (target[0] == 0 and not allowzero):
                continue  # copies or infers the batch dimension: nothing pinned
            if target[0] != 1:
                if (target == -1).any():
                    continue  # the inferred dimension absorbs the batch (the layout is the exporter's)
                raise FrontendError(
                    f"node {node.name or f'#{i}'!r} (Reshape) pins the batch: its constant target shape "
                    f"{target.tolist()} holds the batch-1 sizes, so --batch {batch} cannot apply; "
                    "export the model with a dynamic batch"
                )
            new = target.copy()
            new[0] = batch if allowzero else 0
            name = f"{node.input[1]}/batch_{i}"
            g.initializer.append(numpy_helper.from_array(new, name))
            node.input[1] = name
            pt = target.copy()
            pt[0] = 0
            probe.graph.initializer.append(numpy_helper.from_array(pt, name))
            pnode.input[1] = name
            del pnode.attribute[:]  # allowzero off in the probe: 0 copies the symbol
            pnode.attribute.extend(a for a in node.attribute if a.name != "allowzero")
            changed = True
        if not changed:
            break
    _rewrite_batch_producers(g, probe, dims, consts, batch)


_SHAPE_INPUT = {"Expand": 1, "ConstantOfShape": 0, "Tile": 1}


def _rewrite_batch_producers(
    g: onnx.GraphProto, probe: onnx.ModelProto, dims: dict[str, list], consts: dict[str, object], batch: int
) -> None:
    """Concat (on an axis other than 0) of a tensor carrying the batch with one whose first dimension
    is a literal 1 (a class token Expanded to [1, 1, C], a ConstantOfShape([1, S]) state, a Tile): the
    latter's shape constant hard-codes the old batch; its first entry becomes ``batch`` (a Tile's
    repeat count), or FrontendError names the node that produces it."""
    import numpy as np
    from onnx import numpy_helper

    producer = {o: (i, n) for i, n in enumerate(g.node) for o in n.output}
    for node in probe.graph.node:
        if node.op_type != "Concat" or not node.input:
            continue
        axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
        shapes = [dims.get(x) for x in node.input]
        if axis == 0 or any(not d for d in shapes) or not any(d[0].dim_param == BATCH_SYMBOL for d in shapes):
            continue
        for x, d in zip(node.input, shapes, strict=True):
            if d[0].dim_param or d[0].dim_value != 1 or len(d) <= axis % len(d) or axis % len(d) == 0:
                continue
            i, src = producer.get(x, (-1, None))
            pos = _SHAPE_INPUT.get(src.op_type) if src is not None else None
            value = consts.get(src.input[pos]) if src is not None and pos is not None and len(src.input) > pos else None
            if value is None:
                what = f"node {src.name or f'#{i}'!r} ({src.op_type})" if src is not None else f"the constant {x!r}"
                raise FrontendError(
                    f"{what} pins the batch: its output {x!r} has a first dimension of 1 and is concatenated "
                    f"with the batch, so --batch {batch} cannot apply; export the model with a dynamic batch"
                )
            new = np.asarray(value, dtype=np.int64).reshape(-1).copy()
            new[0] = batch  # Expand/ConstantOfShape: the batch size; Tile of a first dimension of 1: as many repeats
            name = f"{src.input[pos]}/batch_{i}"
            g.initializer.append(numpy_helper.from_array(new, name))
            src.input[pos] = name
