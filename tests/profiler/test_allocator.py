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
