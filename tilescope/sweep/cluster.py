"""The Dask client a sweep runs on: a LocalCluster sized to this machine, or an existing scheduler.

Workers are processes with one thread each: the simulator holds the GIL for most of a point, so
threads in one process would take turns. A LocalCluster has as many workers as there are cores and
as host memory allows (a point may need as much as ResNet-50 at batch 32, ``PER_WORKER_BYTES``), at
least one and never more than there are points. With ``--scheduler ADDRESS`` the sweep runs on that
cluster's workers, which write the reports into the sweep directory themselves: they must share this
machine's file system at the same path (``check_shared`` asks one of them before any point starts).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tilescope.errors import CommandError
from tilescope.measured import RESNET50_B32

#: Host memory one worker may need: ResNet-50 float16 batch 32 on a C600 peaks at this resident size
#: (tilescope/measured.py, RESNET50_B32: /usr/bin/time -v of `tilescope run`), the largest model the
#: project measures; a smaller model leaves the rest unused, a larger one is what --workers is for.
PER_WORKER_BYTES = max(RESNET50_B32.peak_rss_kib) * 1024
#: A point's task is retried this many times when it raises (a worker's file system hiccup); a
#: worker lost mid-point is Dask's "allowed failures" (ALLOWED_FAILURES), after which the point is a
#: failed row and the sweep goes on.
RETRIES = 1
ALLOWED_FAILURES = 3


def available_memory() -> int:
    """Bytes of host memory available now (``MemAvailable``), else the machine's total."""
    with contextlib.suppress(OSError, ValueError, StopIteration):
        with open("/proc/meminfo") as f:
            line = next(x for x in f if x.startswith("MemAvailable:"))
        return int(line.split()[1]) * 1024
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def default_workers(points: int) -> int:
    """Workers of the LocalCluster: cores, as many as memory holds, at least 1, at most ``points``."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    by_memory = available_memory() // PER_WORKER_BYTES
    return max(1, min(cores, by_memory, points))


@contextlib.contextmanager
def client(scheduler: str | None, workers: int) -> Iterator[Any]:
    """A ``distributed.Client`` on ``scheduler``, or on a LocalCluster of ``workers`` processes
    (closed on exit, whatever happens)."""
    import dask
    from distributed import Client, LocalCluster

    dask.config.set({"distributed.scheduler.allowed-failures": ALLOWED_FAILURES})
    if scheduler:
        try:
            c = Client(scheduler, timeout="10s")
        except (OSError, TimeoutError, ValueError) as exc:
            raise CommandError(f"--scheduler {scheduler}: cannot connect ({' '.join(str(exc).split())})") from None
        with c:
            yield c
        return
    # The scheduler serves HTTP (health, metrics) even without a dashboard, on 8787 or, when that is
    # taken (another sweep), on another port with a warning: which port does not matter here.
    warnings.filterwarnings("ignore", message="Port .* is already in use", category=UserWarning)
    # Ctrl-C reaches the terminal's whole process group: the worker processes start with SIGINT
    # ignored (an ignored signal stays ignored across exec, and Python keeps it so), so only this
    # process answers it (exit 130, tilescope/cli.py) and closes the cluster, no worker tracebacks
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        cluster = LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,  # no web server nobody asked for
            silence_logs=logging.ERROR,
        )
    finally:
        signal.signal(signal.SIGINT, previous)
    with cluster, Client(cluster) as c:
        yield c


def _probe(directory: str) -> str:
    """In a worker: "" when it can write into ``directory``, else why not."""
    import tempfile

    try:
        fd, path = tempfile.mkstemp(prefix=".probe-", dir=directory)
        os.close(fd)
        os.unlink(path)
    except OSError as exc:
        return f"{exc.strerror or exc}"
    return ""


def check_shared(c: Any, directory: Path) -> None:
    """CommandError unless a worker of the cluster can write into ``directory`` (same path, shared file system)."""
    problem = c.submit(_probe, str(directory), pure=False).result()
    if problem:
        raise CommandError(
            f"the cluster's workers cannot write into {directory} ({problem}): a sweep on --scheduler needs "
            "workers that share this file system at the same path"
        )
