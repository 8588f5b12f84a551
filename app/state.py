"""Server-side state: which reports the app was started with, and the loaded Reports.

Reports stay on the server (cached by path); the browser only ever receives what a page shows.
The app opens only the reports it was started with, never a path sent by the browser.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from report_format.reader import Report, open_report

_paths: dict[str, str | None] = {"active": None, "baseline": None}


def configure(report_path: str | Path, baseline_path: str | Path | None = None) -> None:
    """Validate and load the reports up front so a bad path fails before the server starts."""
    _paths["active"] = str(Path(report_path).absolute())
    _paths["baseline"] = str(Path(baseline_path).absolute()) if baseline_path else None
    load(_paths["active"])
    if _paths["baseline"]:
        load(_paths["baseline"])


@lru_cache(maxsize=8)
def load(path: str) -> Report:
    return open_report(path)


def report() -> Report:
    if _paths["active"] is None:
        raise RuntimeError("app.state.configure() was not called")
    return load(_paths["active"])


def baseline() -> Report | None:
    """The baseline report of compare mode, or None."""
    return load(_paths["baseline"]) if _paths["baseline"] else None


def started_with() -> dict[str, str | None]:
    """The absolute paths the app was started with: {"active": ..., "baseline": ... or None}."""
    return dict(_paths)
