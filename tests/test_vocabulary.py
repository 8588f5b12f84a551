"""The report's vocabularies are spelled in one place: no module of the project's code writes a
step type, a control-program type, a memory category or the non-interleaved region as a string
literal outside ``report_format/vocabulary.py``; they name the enum member instead.

Values that are also ordinary words used for other things (``constant`` and ``interleaved`` are
column names, ``stack`` a plotly bar mode, ``user``/``onnx`` model names and ONNX attributes) are
not checked; tests are not checked either, since they hold the on-disk strings to the contract
independently of the enums."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from report_format.vocabulary import ControlType, MemoryCategory, MemoryRegion, StepType

ROOT = Path(__file__).resolve().parents[1]
CODE = ("report_format", "profiler", "app", "tilescope", "bench")
HOME = ROOT / "report_format" / "vocabulary.py"
ORDINARY_WORDS = {MemoryCategory.CONSTANT, MemoryCategory.VARIABLE, MemoryCategory.STACK}
SPELLED_ONCE = (
    {m.value for m in StepType}
    | {m.value for m in ControlType}
    | {m.value for m in MemoryCategory if m not in ORDINARY_WORDS}
    | {MemoryRegion.NON_INTERLEAVED.value}
)


def literals(path: Path) -> list[tuple[int, str]]:
    """(line, value) of each string literal of the vocabulary in ``path``: docstrings, f-string
    text and the names a package's ``__all__`` exports (the API classes ``Sequence``, ``Call``...)
    aside."""
    tree = ast.parse(path.read_text(), filename=str(path))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}

    def exported(node: ast.AST) -> bool:
        while node in parents:
            node = parents[node]
            if isinstance(node, ast.Assign):
                return any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
        return False

    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and node.value in SPELLED_ONCE
        and not isinstance(parents.get(node), ast.Expr | ast.JoinedStr)
        and not exported(node)
    ]


@pytest.mark.parametrize("package", CODE)
def test_vocabulary_strings_live_only_in_their_enums(package: str) -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}: {value!r}"
        for path in sorted((ROOT / package).rglob("*.py"))
        if path != HOME
        for line, value in literals(path)
    ]
    assert found == [], "name the enum member (report_format.vocabulary) instead:\n" + "\n".join(found)


def test_the_check_finds_a_spelled_step_type(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('"""doc: OnTileExecute"""\n__all__ = ["Sequence"]\nkind = "OnTileExecute"\nx = f"{kind} Sync"\n')
    assert literals(module) == [(3, "OnTileExecute")]


def test_a_member_is_its_string() -> None:
    # what lets the enums replace the strings in the code without changing a report
    assert StepType.ON_TILE_EXECUTE == "OnTileExecute" and hash(StepType.SYNC) == hash("Sync")
    assert {MemoryCategory.VERTEX_CODE: 1}["vertexCode"] == 1 and f"{ControlType.REPEAT}" == "Repeat"
