"""Host memory checks: MemAvailable is read from /proc/meminfo, and compile stops with one line
when a compute set's exchange planning would not fit."""

from pathlib import Path

import numpy as np
import pytest

from profiler import Engine, Graph, HostMemoryError, Sequence, get_target, ipu_model, ops
from profiler.compiler import compile as compile_
from profiler.compiler.compute_sets import PLAN_BYTES_PER_REGION
from profiler.host import host_memory


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
    monkeypatch.setattr(compile_, "HOST_BYTES_PER_TILE", 0)  # this test is about the per-compute-set check
    need = regions * PLAN_BYTES_PER_REGION + host_memory.MARGIN_BYTES
    monkeypatch.setattr(host_memory, "available_bytes", lambda: need - 1)
    with pytest.raises(
        HostMemoryError, match=r"compiling compute set 'reduce/stage1' \(4 regions of field 'in'\) needs"
    ):
        e.compile()
    monkeypatch.setattr(host_memory, "available_bytes", lambda: need)
    e.compile()
    assert np.isfinite(e.info["compile_seconds"])


def test_compile_checks_the_per_tile_state_of_a_big_target_first(monkeypatch: pytest.MonkeyPatch) -> None:
    g = Graph(get_target("Bow", 1024))
    x = ops.add_mapped(g, "float", (64,), "x")
    prog = Sequence()
    ops.reduce_sum(g, x, 0, prog)
    monkeypatch.setattr(host_memory, "available_bytes", lambda: 2 * 10**9)
    with pytest.raises(HostMemoryError, match=r"compiling for 1024 IPUs \(1,507,328 tiles\) needs about 6.2 GB"):
        Engine(g, [prog]).compile()


def test_a_variable_that_cannot_fit_is_refused_before_its_element_ids_exist() -> None:
    g = Graph(ipu_model(tiles_per_ipu=4))
    with pytest.raises(HostMemoryError, match=r"variable 'huge' of shape \(1000000000000, 64\) needs about"):
        g.add_variable("float", (10**12, 64), "huge")
    with pytest.raises(HostMemoryError):  # a product past int64 must not wrap into a small size
        g.add_variable("float", (2**40, 2**40), "wraps")


def test_compiling_switches_numpys_huge_page_advice_off_and_back() -> None:
    from numpy._core.multiarray import _set_madvise_hugepage

    from profiler.host.allocator import small_pages

    before = _set_madvise_hugepage(True)
    try:
        with small_pages():
            assert _set_madvise_hugepage(False) is False  # off inside (setting it off again changes nothing)
        assert _set_madvise_hugepage(True) is True  # back on after
    finally:
        _set_madvise_hugepage(before)


def test_small_needs_trust_a_recent_reading_and_an_error_comes_only_from_a_fresh_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    readings = []
    free = [host_memory.MARGIN_BYTES + 300 * 2**20]  # 300 MiB beyond the margin

    def reader() -> int:
        readings.append(free[0])
        return free[0]

    monkeypatch.setattr(host_memory, "available_bytes", reader)
    mib = 2**20
    host_memory.ensure(100 * mib, "a")  # read: the reader is new
    host_memory.ensure(100 * mib, "b")  # 200 MiB since the reading, which had 300: trusted
    assert len(readings) == 1
    host_memory.ensure(100 * mib, "c")  # 300 MiB since: past TRUSTED_BYTES (256 MiB), read again
    assert len(readings) == 2
    free[0] = host_memory.MARGIN_BYTES + 50 * mib  # the machine filled up meanwhile
    host_memory.ensure(10 * mib, "d")  # 10 MiB since the last reading (of 300): trusted, no error yet
    assert len(readings) == 2
    host_memory.ensure(100 * mib, "e")  # 210 MiB since, within the reading's 300: still trusted
    assert len(readings) == 2
    with pytest.raises(HostMemoryError, match="f needs about 0.1 GB more"):  # 310 MiB since: read (50 left), refused
        host_memory.ensure(100 * mib, "f")
    assert len(readings) == 3
