"""profiler.host.allocator: glibc keeps freed temporaries for reuse, unless the user opts out."""

import os
import subprocess
import sys

import pytest

from profiler.host import allocator


def test_the_user_can_keep_the_c_librarys_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(allocator.OPT_OUT, "1")
    assert allocator.keep_freed_memory() is False


# Allocates, touches and frees an array of 2**argv[2] float64 20 times and prints the page faults
# that took (after a first one). Modes: "off" (the C library's defaults: profiler not imported),
# "on" (profiler.host.allocator's policy), "heap" (that policy inside heap_only).
FAULTS = (
    "import resource, sys, numpy as np\n"
    "mode, n = sys.argv[1], 1 << int(sys.argv[2])\n"
    "if mode != 'off':\n"
    "    import profiler.host.allocator as a; assert a.keep_freed_memory()\n"
    "def faults():\n"
    "    np.ones(n)\n"
    "    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
    "    for _ in range(20):\n"
    "        x = np.ones(n); del x\n"
    "    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before\n"
    "if mode == 'heap':\n"
    "    with a.heap_only():\n"
    "        print(faults())\n"
    "else:\n"
    "    print(faults())\n"
)


def _faults(log2_elements: int, modes: tuple[str, ...]) -> dict[str, int]:
    """FAULTS' count in a fresh interpreter per mode, the allocator policy allowed (no opt-out)."""
    env = {**os.environ, "TILESCOPE_DEFAULT_MALLOC": ""}
    cmd = [sys.executable, "-c", FAULTS]
    runs = {m: subprocess.run([*cmd, m, str(log2_elements)], capture_output=True, text=True, check=True, env=env)
            for m in modes}  # fmt: skip
    return {m: int(out.stdout) for m, out in runs.items()}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_freed_large_arrays_are_reused_without_new_page_faults() -> None:
    # a 16 MiB array: with glibc's defaults each one is fresh mmap pages, faulted in again (at least 8
    # transparent huge pages a time, 508 faults measured); kept by the process, the first one's pages
    # serve them all (0 measured)
    faults = _faults(21, ("off", "on"))
    assert faults["off"] > 20 * 8  # a fresh 16 MiB each time (at least 8 transparent huge pages)
    assert faults["on"] < faults["off"] / 10


@pytest.mark.slow  # ~3.2 s at load 4
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_inside_heap_only_arrays_over_the_mmap_threshold_are_reused_too() -> None:
    # 64 MiB, over the largest mmap threshold: fresh pages every time, except inside heap_only
    faults = _faults(23, ("on", "heap"))
    assert faults["on"] > 20 * 32  # at least 32 huge pages (or 16,384 small ones) a time
    assert faults["heap"] < faults["on"] / 10


def test_heap_only_switches_huge_page_advice_off_and_restores_both() -> None:
    from numpy._core.multiarray import _set_madvise_hugepage

    before = _set_madvise_hugepage(True)
    try:
        with allocator.heap_only():
            assert _set_madvise_hugepage(False) is False
        assert _set_madvise_hugepage(True) is True
    finally:
        _set_madvise_hugepage(before)


# Inside heap_only (the policy on): 16 arrays of 16 MiB made, touched and freed, then the RSS (MiB)
# before and after give_back_freed_memory.
TRIM = (
    "import sys, numpy as np\n"
    "import profiler.host.allocator as a; assert a.keep_freed_memory()\n"
    "def rss():\n"
    "    return int(open('/proc/self/statm').read().split()[1]) * 4096 >> 20\n"
    "with a.heap_only():\n"
    "    xs = [np.ones(1 << 21) for _ in range(16)]\n"
    "    del xs\n"
    "before = rss()\n"
    "print(a.give_back_freed_memory(), before, rss())\n"
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_memory_the_heap_kept_is_given_back() -> None:
    env = {**os.environ, "TILESCOPE_DEFAULT_MALLOC": ""}
    out = subprocess.run([sys.executable, "-c", TRIM], capture_output=True, text=True, check=True, env=env)
    done, before, after = out.stdout.split()
    # the 256 MiB freed stayed in the process (the policy); given back, the RSS drops by about that
    assert done == "True" and int(before) - int(after) > 200
