"""Host memory checks: MemAvailable is read from /proc/meminfo, and compile stops with one line
when a compute set's exchange planning would not fit."""

from pathlib import Path

import numpy as np
import pytest

from profiler import Engine, Graph, HostMemoryError, Sequence, host_memory, ipu_model, ops
from profiler.compile import PLAN_BYTES_PER_REGION


def test_available_bytes_reads_mem_available(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    info = tmp_path / "meminfo"
    info.write_text("MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   2000000 kB\n")
    monkeypatch.setattr(host_memory, "MEMINFO", str(info))
    monkeypatch.setattr(host_memory, "CGROUP", str(tmp_path / "no-cgroup"))
    assert host_memory.available_bytes() == 2_000_000 * 1024
    # a container limit leaving less wins; "max" means no limit
    (tmp_path / "memory.max").write_text("1000000000\n")
    (tmp_path / "memory.current").write_text("400000000\n")
    monkeypatch.setattr(host_memory, "CGROUP", str(tmp_path))
    assert host_memory.available_bytes() == 600_000_000
    (tmp_path / "memory.max").write_text("max\n")
    assert host_memory.available_bytes() == 2_000_000 * 1024
    monkeypatch.setattr(host_memory, "MEMINFO", str(tmp_path / "missing"))
    assert host_memory.available_bytes() > 1 << 60  # unknown: no limit


def test_compile_stops_before_planning_a_compute_set_that_would_not_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    g = Graph(ipu_model(tiles_per_ipu=4))
    x = ops.add_mapped(g, "float", (64,), "x")
    prog = Sequence()
    ops.reduce_sum(g, x, 0, prog)
    e = Engine(g, [prog])
    # stage 1: one vertex per tile reads the 16 elements its tile holds: one region each, 4 in all
    regions = 4
    need = regions * PLAN_BYTES_PER_REGION + host_memory.MARGIN_BYTES
    monkeypatch.setattr(host_memory, "available_bytes", lambda: need - 1)
    with pytest.raises(
        HostMemoryError, match=r"compiling compute set 'reduce/stage1' \(4 regions of field 'in'\) needs"
    ):
        e.compile()
    monkeypatch.setattr(host_memory, "available_bytes", lambda: need)
    e.compile()
    assert np.isfinite(e.info["compile_seconds"])
