"""The dependency rule the README states, enforced on every module (imports inside functions
included): ``report_format`` imports neither of the others; ``profiler`` imports only
``report_format``; ``app`` imports only ``report_format``; only ``tilescope`` composes all three."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT = {"report_format", "profiler", "app", "tilescope"}
#: package -> the project packages it may import (besides itself)
ALLOWED = {
    "report_format": set(),
    "profiler": {"report_format"},
    "app": {"report_format"},
    "tilescope": {"report_format", "profiler", "app"},
}


def imported_packages(path: Path) -> set[tuple[str, int]]:
    """(top-level project package, line) of every import in a module."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        out |= {(n.split(".")[0], node.lineno) for n in names if n.split(".")[0] in PROJECT}
    return out


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_imports_only_what_the_rule_allows(package: str) -> None:
    wrong = [
        f"{path.relative_to(ROOT)}:{line} imports {dep}"
        for path in sorted((ROOT / package).rglob("*.py"))
        for dep, line in sorted(imported_packages(path))
        if dep != package and dep not in ALLOWED[package]
    ]
    assert wrong == [], "\n".join(wrong)


def test_the_rule_catches_a_forbidden_import(tmp_path: Path) -> None:
    bad = tmp_path / "m.py"
    bad.write_text("def f():\n    from profiler import Engine\n    import app.views\n")
    assert imported_packages(bad) == {("profiler", 2), ("app", 3)}
