"""profiler.allocator: glibc keeps freed temporaries for reuse, unless the user opts out."""

import subprocess
import sys

import pytest

from profiler import allocator


def test_the_user_can_keep_the_c_librarys_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(allocator.OPT_OUT, "1")
    assert allocator.keep_freed_memory() is False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_freed_large_arrays_are_reused_without_new_page_faults() -> None:
    # a 16 MiB array allocated, touched and freed 20 times: with glibc's defaults each one is fresh
    # mmap pages, faulted in again (at least 8 transparent huge pages a time, 508 faults measured);
    # kept by the process, the first one's pages serve them all (0 measured)
    code = (
        "import resource, sys, numpy as np\n"
        "if sys.argv[1] == 'on':\n"
        "    import profiler.allocator as a; assert a.keep_freed_memory()\n"
        "np.ones(1 << 21)\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
        "for _ in range(20):\n"
        "    a = np.ones(1 << 21); del a\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)\n"
    )
    env = {"TILESCOPE_DEFAULT_MALLOC": ""}
    faults = {}
    for mode in ("off", "on"):
        out = subprocess.run([sys.executable, "-c", code, mode], capture_output=True, text=True, check=True,
                             env={**__import__("os").environ, **env})  # fmt: skip
        faults[mode] = int(out.stdout)
    assert faults["off"] > 20 * 8  # a fresh 16 MiB each time (at least 8 transparent huge pages)
    assert faults["on"] < faults["off"] / 10


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_inside_heap_only_arrays_over_the_mmap_threshold_are_reused_too() -> None:
    # 64 MiB, over the largest mmap threshold: fresh pages every time, except inside heap_only
    code = (
        "import resource, sys, numpy as np\n"
        "import profiler.allocator as a; assert a.keep_freed_memory()\n"
        "def faults():\n"
        "    np.ones(1 << 23)\n"
        "    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
        "    for _ in range(10):\n"
        "        x = np.ones(1 << 23); del x\n"
        "    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before\n"
        "if sys.argv[1] == 'heap':\n"
        "    with a.heap_only():\n"
        "        print(faults())\n"
        "else:\n"
        "    print(faults())\n"
    )
    faults = {}
    for mode in ("mmap", "heap"):
        out = subprocess.run([sys.executable, "-c", code, mode], capture_output=True, text=True, check=True,
                             env={**__import__("os").environ, "TILESCOPE_DEFAULT_MALLOC": ""})  # fmt: skip
        faults[mode] = int(out.stdout)
    assert faults["mmap"] > 10 * 32  # at least 32 huge pages (or 16,384 small ones) a time
    assert faults["heap"] < faults["mmap"] / 10


def test_heap_only_switches_huge_page_advice_off_and_restores_both() -> None:
    from numpy._core.multiarray import _set_madvise_hugepage

    before = _set_madvise_hugepage(True)
    try:
        with allocator.heap_only():
            assert _set_madvise_hugepage(False) is False
        assert _set_madvise_hugepage(True) is True
    finally:
        _set_madvise_hugepage(before)
