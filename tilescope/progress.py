"""Progress of long work: ``done/total what``, the fraction done and the time left.

On a terminal the line is rewritten in place, at most a few times a second; a log that is not a
terminal gets the caller's phase lines and, once the work has run for ``LOG_EVERY_S``, a line that
often (a long compile in CI shows it is moving; a short one prints nothing extra).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

#: A log (not a terminal) gets a progress line at most this often, and none before.
LOG_EVERY_S = 15.0
#: The time left is shown once the work has run this long (earlier rates are mostly start-up).
ETA_AFTER_S = 2.0


def remaining(elapsed: float, done: int, total: int, work: float | None = None) -> float | None:
    """Seconds left at the mean rate so far (None before any progress, or when done): of ``work``,
    the fraction of the stage's work done, where the caller knows it (a compile's planning:
    ``profiler.compiler.pace``), else of ``done`` of ``total``."""
    if done <= 0 or done >= total:
        return None
    fraction = done / total if work is None else work
    if fraction <= 0:
        return None
    return elapsed * (1 - fraction) / fraction


def format_eta(seconds: float) -> str:
    """``12 s``, ``3 min 5 s``, ``1 h 2 min``: whole units, coarser as the wait grows."""
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"


class Counter:
    """``done/total what (P%, ~T left)`` for a long stage; ``prefix`` names the command and ``clock``
    (seconds, monotonic) is injectable for tests."""

    def __init__(
        self, what: str, stream: Any = None, prefix: str = "tilescope run:", clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.what, self.stream, self.prefix, self.clock = what, stream or sys.stderr, prefix, clock
        self.start = clock()
        self.last, self.shown, self.width = -1e9, False, 0
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def text(self, done: int, total: int, now: float, work: float | None = None) -> str:
        """The progress line (without the carriage return)."""
        line = f"{self.prefix}   {done}/{total} {self.what}"
        if total > 0 and done < total:
            line += f" ({done / total:.0%}"
            left = remaining(now - self.start, done, total, work)
            if left is not None and now - self.start >= ETA_AFTER_S:
                line += f", ~{format_eta(left)} left"
            line += ")"
        return line

    def __call__(self, done: int, total: int, work: float | None = None, what: str | None = None) -> None:
        if what is not None and what != self.what:  # the next stage of the work: its own line and clock
            self.close()
            self.what, self.start, self.last, self.shown, self.width = what, self.clock(), -1e9, False, 0
        now = self.clock()
        if self.tty:
            if now - self.last < 0.2 and done < total:
                return
            self.last, self.shown = now, True
            line = self.text(done, total, now, work)
            self.stream.write("\r" + line.ljust(self.width))  # spaces clear a longer previous line
            self.width = len(line)
            self.stream.flush()
        elif now - self.start >= LOG_EVERY_S and now - self.last >= LOG_EVERY_S and done < total:
            self.last = now
            self.stream.write(self.text(done, total, now, work) + "\n")
            self.stream.flush()

    def close(self) -> None:
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()

    def __enter__(self) -> Counter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
