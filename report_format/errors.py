"""The one error type of the report format: every problem reading or writing a report."""

from __future__ import annotations

from pathlib import Path


class ReportError(Exception):
    """A report could not be read or written. The message is one line: where, then what."""

    def __init__(self, where: str | Path, problem: str) -> None:
        self.where = str(where)
        self.problem = problem
        super().__init__(f"{self.where}: {problem}")
