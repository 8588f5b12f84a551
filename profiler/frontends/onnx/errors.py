"""The importer's errors: one-line FrontendErrors for the user, Unsupported for a handler's refusal."""

from __future__ import annotations

from report_format.text import printable


class FrontendError(ValueError):
    """The model cannot be imported; ``str(e)`` is one line saying what and where."""


class UnsupportedError(FrontendError):
    """Operators (or operator attributes) the importer does not support.

    ``items`` lists (op type, node name, reason) of every unsupported node found."""

    def __init__(self, items: list[tuple[str, str, str]], opset: int | None = None) -> None:
        self.items, self.opset = items, opset
        by_op: dict[str, list[str]] = {}
        for op_type, node, reason in items:
            op, why = printable(op_type), printable(reason)
            by_op.setdefault(op + (f" ({why})" if why else ""), []).append(printable(node))
        parts = [f"{op} at {', '.join(nodes[:5])}{' ...' if len(nodes) > 5 else ''}" for op, nodes in by_op.items()]
        at = f" (model opset {opset})" if opset is not None else ""
        super().__init__(f"unsupported ONNX operator(s): {'; '.join(parts)}{at}")


class Unsupported(Exception):
    """Raised by an operator handler for an attribute or input it cannot take (the reason)."""


def first_line(exc: BaseException) -> str:
    """The first non-blank line of ``exc``'s message, or its type's name when it has none."""
    text = str(exc).strip()
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return type(exc).__name__
