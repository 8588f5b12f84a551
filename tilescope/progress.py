"""Progress of long work on a terminal: ``done/total what`` rewritten in place."""

from __future__ import annotations

import sys
import time
from typing import Any


class Counter:
    """``done/total what`` rewritten in place on a terminal, at most a few times a second (logs
    that are not terminals get the caller's phase lines only); ``prefix`` names the command."""

    def __init__(self, what: str, stream: Any = None, prefix: str = "tilescope run:") -> None:
        self.what, self.stream, self.prefix, self.last, self.shown = what, stream or sys.stderr, prefix, 0.0, False

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if not self.stream.isatty() or (now - self.last < 0.2 and done < total):
            return
        self.last, self.shown = now, True
        self.stream.write(f"\r{self.prefix}   {done}/{total} {self.what}")
        self.stream.flush()

    def close(self) -> None:
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()

    def __enter__(self) -> Counter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
