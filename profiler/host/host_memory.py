"""Host memory the simulator may still use, checked before its large allocations.

Vertex fields are element-index arrays and compile plans exchanges per element, so a big model at a
big batch can need more memory than the host has. Without a check the kernel's OOM killer ends the
process with no message (and may take other processes with it); with it, building or compiling
stops with one line saying how much is needed and how much is available.
"""

from __future__ import annotations

from collections.abc import Callable

MEMINFO = "/proc/meminfo"
CGROUP = "/sys/fs/cgroup"  # cgroup v2: a container's limit (memory.max) can be below the host's
GB = 1e9
# Kept free beyond each estimate: the allocations between two checks (views, temporaries) are not estimated.
MARGIN_BYTES = 512 * 2**20


class HostMemoryError(MemoryError):
    """The simulation would need more host memory than is available (one line: what, how much)."""


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def available_bytes() -> int:
    """Memory the system can still give this process without swapping: MemAvailable, or less when
    the process's cgroup limit leaves less; unlimited where neither says."""
    available = 1 << 62
    info = "\n" + _read(MEMINFO)
    at = info.find("\nMemAvailable:")  # one line looked up, not every line split (checked per field)
    if at >= 0:
        fields = info[at + 1 :].split(None, 2)
        if fields[1:2] and fields[1].isdigit():
            available = int(fields[1]) * 1024
    limit, used = _read(f"{CGROUP}/memory.max").strip(), _read(f"{CGROUP}/memory.current").strip()
    if limit.isdigit() and used.isdigit():
        available = min(available, max(int(limit) - int(used), 0))
    return available


# Needs summed since the last reading of /proc/meminfo below which a check trusts that reading: a
# compile checks before every compute-set field (tens of thousands for GPT-2 XL, each a read of three
# files); the reading is taken again past this, and always before an error is raised.
TRUSTED_BYTES = 256 * 2**20


class _Reading:
    """The last reading: bytes available, the needs checked against it since, and the function that
    read it (a reader replaced, as tests do, is read afresh)."""

    available = 0.0
    since = float("inf")
    reader: Callable[[], int] | None = None


def ensure(need_bytes: float, what: str) -> None:
    """Raise HostMemoryError unless about ``need_bytes`` more are available for ``what``."""
    last = _Reading
    since = last.since + max(need_bytes, 0)
    if last.reader is available_bytes and since <= TRUSTED_BYTES and since + MARGIN_BYTES <= last.available:
        last.since = since  # a recent reading had room for this and every need since
        return
    available = available_bytes()
    last.available, last.since, last.reader = available, max(need_bytes, 0), available_bytes
    if need_bytes + MARGIN_BYTES > available:
        raise HostMemoryError(
            f"{what} needs about {_amount(need_bytes)} more host memory and {_amount(MARGIN_BYTES)} kept free; "
            f"{_amount(available)} is available (other processes may hold the rest; a smaller batch or model, "
            "or a target with fewer tiles, needs less)"
        )


def _amount(n: float) -> str:
    """Bytes as GB from 0.1 GB, else MB: a small need is never printed as "0.0 GB"."""
    return f"{n / GB:.1f} GB" if n >= 0.1 * GB else f"{max(n, 0) / 1e6:.0f} MB"
