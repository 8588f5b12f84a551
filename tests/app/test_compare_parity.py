"""Compare mode on a pair that differs in setup: the baseline ran on a GC200 without an execution
profile, the active on a Bow with one. The banner and Summary say what differs; the Execution
Trace section says why it has no step deltas; the other sections still compare what both have."""

from __future__ import annotations

from pathlib import Path

import pytest

from app import ids, state
from app.comparison.pages import memory as cmp_memory
from app.comparison.pages import operations as cmp_operations
from app.comparison.pages import shell
from app.comparison.pages import summary as cmp_summary
from app.comparison.pages.execution_trace import render as trace_render
from tests.app.dash_tree import find, text
from tests.compare.compare_builders import Spec, build_report, mlp_steps


@pytest.fixture(scope="module")
def key(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("parity")
    b = build_report(root / "gc200", Spec(mlp_steps(), target="GC200", execution=False))
    a = build_report(root / "bow", Spec(mlp_steps(), target="Bow", clock_hz=1.85e9))
    state.configure(a, b)
    return str(Path(b).absolute())


def test_banner_and_summary_list_the_differences(key):
    banner, colour = shell.banner_body(key)
    assert colour == "info"
    assert "Differences: different target: GC200 vs Bow; target clock_hz: 1330000000 vs 1850000000" in text(banner)
    parity = find(cmp_summary.render(key), ids.COMPARE_SUMMARY_PARITY)
    items = [text(li) for li in parity.children[1].children]
    assert items[:2] == ["different target: GC200 vs Bow", "target clock_hz: 1330000000 vs 1850000000"]


def test_trace_explains_a_baseline_without_execution_profile(key):
    assert "The baseline has no execution profile." in text(trace_render(key, "0"))


def test_memory_and_operations_still_compare(key):
    # same program and variables: nothing added or removed
    assert text(find(cmp_memory.render(key), ids.COMPARE_MEMORY_COUNTS)).startswith("0 added, 0 removed")
    ops = cmp_operations.operation_rows(key, "poplibs", None)
    assert set(ops["status"]) <= {"same", "changed"} and len(ops) == 4
