"""The host allocator's policy for the simulator's large temporaries.

Compiling a big graph allocates and frees arrays of tens of megabytes thousands of times. glibc
serves those from fresh ``mmap`` pages and gives them back on free, so every one is paid again in
page faults: half of ResNet-50's compile time at batch 8 was the kernel's (105 of 220 CPU-s).
Raising the mmap threshold to glibc's largest (32 MiB) and keeping freed memory in the process
lets the allocator reuse it (measured: 155 CPU-s, same peak RSS). Set ``TILESCOPE_DEFAULT_MALLOC=1``
to keep the C library's defaults; elsewhere than glibc nothing changes.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

# glibc malloc.h: mallopt parameters
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
# glibc's upper limit for M_MMAP_THRESHOLD on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX, mallopt(3))
MMAP_THRESHOLD_MAX = 32 * 2**20
OPT_OUT = "TILESCOPE_DEFAULT_MALLOC"


def keep_freed_memory() -> bool:
    """Apply the policy above; True when it took effect."""
    if os.environ.get(OPT_OUT) or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    # the trim threshold as large as an int allows: freed memory stays for the next temporary
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX)) and bool(mallopt(M_TRIM_THRESHOLD, 2**31 - 1))
