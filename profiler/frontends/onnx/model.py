"""Loading and checking an ONNX model: one clear line for a bad file, opset, batch-size override."""

from __future__ import annotations

from pathlib import Path

import onnx
from onnx import shape_inference

# Issue 5 asks for opset 9 and newer; the handlers also follow opsets 6-8 (their differences, such
# as the legacy broadcast/axis attributes of binary ops, are handled), so those import too.
MIN_OPSET = 6


class FrontendError(ValueError):
    """The model cannot be imported; ``str(e)`` is one line saying what and where."""


class UnsupportedError(FrontendError):
    """Operators (or operator attributes) the importer does not support.

    ``items`` lists (op type, node name, reason) of every unsupported node found."""

    def __init__(self, items: list[tuple[str, str, str]]) -> None:
        self.items = items
        by_op: dict[str, list[str]] = {}
        for op_type, node, reason in items:
            op, why = printable(op_type), printable(reason)
            by_op.setdefault(op + (f" ({why})" if why else ""), []).append(printable(node))
        parts = [f"{op} at {', '.join(nodes[:5])}{' ...' if len(nodes) > 5 else ''}" for op, nodes in by_op.items()]
        super().__init__(f"unsupported ONNX operator(s): {'; '.join(parts)}")


def printable(text: object, limit: int = 120) -> str:
    """A name from a model, safe for a one-line message: decoded (protobuf hands invalid UTF-8
    back as bytes), control characters escaped, and cut to ``limit`` characters."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    s = "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return type(exc).__name__


def load_model(source: str | Path | onnx.ModelProto, check_operators: bool = True) -> onnx.ModelProto:
    """Read and check a model (a path or a ModelProto); FrontendError if it is not a valid ONNX model,
    UnsupportedError listing every node whose operator tilescope cannot import."""
    if isinstance(source, onnx.ModelProto):
        model = source
        where = f"model {model.graph.name!r}"
    else:
        path = Path(source)
        where = str(path)
        if not path.is_file():
            raise FrontendError(f"{where}: no such file")
        try:
            model = onnx.load(str(path), load_external_data=True)
        except Exception as exc:  # protobuf DecodeError and friends: not ONNX or truncated
            raise FrontendError(f"{where}: not a readable ONNX model ({_first_line(exc)})") from None
        if not model.graph.node and not model.graph.output:
            raise FrontendError(f"{where}: not an ONNX model (no graph)")
    if check_operators:  # before the checker, which stops at the first operator it does not know
        from .builder import check_supported
        from .operators import HANDLERS

        check_supported(model, HANDLERS)
    try:
        onnx.checker.check_model(model)
    except Exception as exc:
        raise FrontendError(f"{where}: invalid ONNX model: {_first_line(exc)}") from None
    version = opset_version(model)
    if version < MIN_OPSET:
        raise FrontendError(f"{where}: opset {version} is too old; tilescope imports opset {MIN_OPSET} and newer")
    return model


def opset_version(model: onnx.ModelProto) -> int:
    """The default-domain opset the model declares."""
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return int(imp.version)
    return 1


def override_batch(model: onnx.ModelProto, batch: int | None) -> onnx.ModelProto:
    """A copy of ``model`` whose graph inputs' first dimension (when 1 or symbolic) is ``batch``;
    output and intermediate shapes are re-inferred."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    init_names = {t.name for t in m.graph.initializer}
    if batch is not None:
        if batch < 1:
            raise FrontendError(f"batch size must be >= 1, got {batch}")
        if batch >= 2**63:  # ONNX dimensions are int64
            raise FrontendError(f"batch size {batch} is larger than an ONNX dimension can hold")
        for vi in m.graph.input:
            if vi.name in init_names or not vi.type.HasField("tensor_type"):
                continue
            dims = vi.type.tensor_type.shape.dim
            if dims and (dims[0].HasField("dim_param") or dims[0].dim_value in (0, 1)):
                dims[0].Clear()
                dims[0].dim_value = batch
    # intermediate shapes are recomputed by the importer from the inputs; drop stale ones
    del m.graph.value_info[:]
    for out in m.graph.output:
        if out.type.HasField("tensor_type"):
            out.type.tensor_type.ClearField("shape")
    try:
        return shape_inference.infer_shapes(m)
    except Exception as exc:
        raise FrontendError(f"model {model.graph.name!r}: shape inference failed: {_first_line(exc)}") from None
