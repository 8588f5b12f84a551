"""The ONNX frontend's modules, held: no module imports another's private (underscore) names, each
operator group says in one line what it holds, and the registry is filled by the groups alone, one
handler per op type."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from profiler.frontends.onnx import operators
from profiler.frontends.onnx.operators import GROUPS, HANDLERS, SUPPORTED, handles

ROOT = Path(__file__).resolve().parents[2]
FRONTEND = ROOT / "profiler" / "frontends" / "onnx"


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_imports(path: Path) -> list[str]:
    """``line: what`` for each private name ``path`` takes from another module: ``from m import _x``,
    ``import m._x``, or ``m._x`` where ``m`` is a module it imported (``import m``, ``from p import m``)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found, modules = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            found += [f"{node.lineno}: from {'.' * node.level}{node.module or ''} import {a.name}"
                      for a in node.names if private(a.name)]  # fmt: skip
            modules |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names if any(map(private, a.name.split(".")))]
            modules |= {a.asname or a.name.split(".")[0] for a in node.names}
    for node in ast.walk(tree):
        attribute = isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
        if attribute and node.value.id in modules and private(node.attr):
            found.append(f"{node.lineno}: {node.value.id}.{node.attr}")
    return found


def frontend_modules() -> list[Path]:
    return sorted(FRONTEND.rglob("*.py"))


@pytest.mark.parametrize("path", frontend_modules(), ids=lambda p: str(p.relative_to(FRONTEND)))
def test_no_module_imports_another_modules_private_names(path: Path) -> None:
    assert private_imports(path) == []


def test_the_private_import_finder_finds_them(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        "from __future__ import annotations\n"
        "import os.path\n"
        "from . import common\n"
        "from .operators import _axis, attrs\n"
        "import pkg._impl\n"
        "def f():\n"
        "    from .builder import _nd\n"
        "    return common._shape(1), attrs.__name__, os.path.join('a')\n"
    )
    assert private_imports(tmp_path / "m.py") == [
        "4: from .operators import _axis",
        "5: import pkg._impl",
        "7: from .builder import _nd",
        "8: common._shape",
    ]


OPERATOR_MODULES = sorted(p for p in (FRONTEND / "operators").glob("*.py") if p.name != "__init__.py")


@pytest.mark.parametrize("path", OPERATOR_MODULES, ids=lambda p: p.stem)
def test_each_operator_module_says_in_one_line_what_it_holds(path: Path) -> None:
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    assert doc and "\n" not in doc.strip(), f"{path.name}: wants a one-line docstring, has {doc!r}"


def test_every_handler_is_registered_by_an_operator_group() -> None:
    by_module: dict[str, set[str]] = {}
    for op_type, fn in HANDLERS.items():
        by_module.setdefault(fn.__module__, set()).add(op_type)
    groups = {g.__name__ for g in GROUPS}
    assert set(by_module) == groups  # every group registers handlers; nothing else does
    assert {f"{operators.__name__}.{p.stem}" for p in OPERATOR_MODULES} == groups | {
        f"{operators.__name__}.common",
        f"{operators.__name__}.registry",
    }
    assert tuple(sorted(HANDLERS)) == SUPPORTED


def test_an_op_type_has_one_handler() -> None:
    before = dict(HANDLERS)
    with pytest.raises(ValueError, match=r"Relu: handled by .*elementwise\._unary and "):
        handles("Relu")(lambda b, node, inputs: [])
    assert before == HANDLERS
