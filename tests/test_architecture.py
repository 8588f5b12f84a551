"""The architecture docs/architecture.md draws, held: profiler's packages import only the layers its
table allows, every package says in its docstring what it may import, and no module of the project
is part of an import cycle (imports inside functions and under ``TYPE_CHECKING`` count: a cycle
there is still two modules that cannot be understood apart)."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOPS = ("report_format", "profiler", "app", "tilescope")


def module_files() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the project's packages."""
    out = {}
    for top in TOPS:
        for path in (ROOT / top).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """Project modules ``name`` imports anywhere in its file: ``from a import b`` is an import of
    ``a.b`` when that is a module, else of ``a``; relative imports resolved."""
    out = set()
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            out |= {f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names}
    return {m for m in out if m in known and m != name}


@functools.cache
def import_graph() -> dict[str, set[str]]:
    files = module_files()
    return {name: imports_of(name, path, set(files)) for name, path in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


@functools.cache
def layer_rule() -> dict[str, set[str]]:
    """profiler package -> the profiler packages it may import, read from docs/architecture.md."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    table = text.split("<!-- layers:", 1)[1].split("\n\n", 1)[0]
    rule = {}
    for row in table.splitlines()[3:]:
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        package = cells[0].strip("`")
        rule[package] = set() if cells[2] in {"—", "-", ""} else {p.strip() for p in cells[2].split(",")}
    return rule


def profiler_package(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "profiler" and len(parts) > 1 else None


def test_no_module_is_in_an_import_cycle() -> None:
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]


def test_every_profiler_package_is_in_the_table_and_only_those() -> None:
    packages = {p.name for p in (ROOT / "profiler").iterdir() if (p / "__init__.py").is_file()}
    assert set(layer_rule()) == packages


@pytest.mark.parametrize("package", sorted(layer_rule()))
def test_profiler_package_imports_only_its_lower_layers(package: str) -> None:
    allowed = layer_rule()[package] | {package}
    wrong = [
        f"{module} imports {dep}"
        for module, deps in sorted(import_graph().items())
        if profiler_package(module) == package
        for dep in sorted(deps)
        if dep.startswith("profiler.") and profiler_package(dep) not in allowed
    ]
    assert wrong == [], "\n".join(wrong)


@pytest.mark.parametrize("package", sorted(layer_rule()))
def test_package_docstring_says_what_it_may_import(package: str) -> None:
    doc = ast.get_docstring(ast.parse((ROOT / "profiler" / package / "__init__.py").read_text())) or ""
    named = set(re.findall(r"``(\w+)``", doc.split("May import", 1)[-1])) if "May import" in doc else None
    assert named is not None, f"profiler/{package}/__init__.py: docstring has no 'May import' line"
    assert named - {"report_format", "profiler"} == layer_rule()[package]


def test_the_rule_reader_sees_a_forbidden_layer(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("def f():\n    from profiler.engine.engine import Engine\n")
    assert imports_of("profiler.chip.m", tmp_path / "m.py", {"profiler.engine.engine"}) == {"profiler.engine.engine"}


def _plain_unique_calls(text: str) -> list[str]:
    """The ``np.unique(...)`` / ``np.union1d(...)`` calls in ``text`` that take numpy 2.3+'s hash
    path: no ``return_*`` and no ``axis`` argument (``profiler.host.sorting.unique`` instead)."""
    found = []
    for m in re.finditer(r"np\.(unique|union1d)\(", text):
        depth, k = 1, m.end()
        while depth and k < len(text):
            depth += {"(": 1, ")": -1}.get(text[k], 0)
            k += 1
        call = text[m.start() : k]
        if m.group(1) == "union1d" or ("return_" not in call and "axis=" not in call):
            found.append(call)
    return found


def test_the_simulator_takes_sorted_unique_not_numpys_hash_unique() -> None:
    """numpy 2.3+'s ``np.unique`` without ``return_*`` hashes, 50x slower than a sort on many
    distinct integers (``profiler.host.sorting.unique``): the simulator's hot paths use the sort."""
    offenders = {
        str(p.relative_to(ROOT)): calls
        for p in sorted((ROOT / "profiler").rglob("*.py"))
        if p != ROOT / "profiler" / "host" / "sorting.py" and (calls := _plain_unique_calls(p.read_text()))
    }
    assert not offenders, offenders


def test_the_unique_finder_sees_a_plain_call() -> None:
    assert _plain_unique_calls("a = np.unique(x)\nb = np.unique(y, return_counts=True)\nc = np.union1d(p, q)") == [
        "np.unique(x)",
        "np.union1d(p, q)",
    ]


def test_building_and_running_a_graph_imports_no_pandas() -> None:
    """pandas takes ~0.4 s to import: the simulator does without it (the report's reader and the
    viewer use it; pyarrow itself imports it when a report is written), and so does ``--help``."""
    import subprocess
    import sys

    code = (
        "import sys, numpy as np\n"
        "from profiler import Engine, Graph, Sequence, ipu_model, ops\n"
        "g = Graph(ipu_model(tiles_per_ipu=4))\n"
        "x = ops.add_mapped(g, 'float', (8, 16), 'x')\n"
        "p = Sequence()\n"
        "y = ops.add(g, x, x, p)\n"
        "e = Engine(g, [p], {'autoReport.all': 'false'})\n"
        "e.load(); e.run(0)\n"
        "import tilescope.cli\n"
        "assert 'pandas' not in sys.modules, 'pandas imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
