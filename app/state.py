"""Server-side state: which reports the app was started with, and the loaded Reports.

Reports stay on the server (cached by path); the browser only ever receives what a page shows.
The app opens only the reports it was started with, never a path sent by the browser.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from report_format.reader import Report, open_report
from report_format.schema import SWEEP_FILE
from report_format.sweep import Sweep, open_sweep

_paths: dict[str, str | None] = {"active": None, "baseline": None}
#: The sweep directory the viewer was started on (``tilescope serve SWEEP_DIR``), else None.
_sweep: dict[str, str | None] = {"path": None}


def configure(
    report_path: str | Path, baseline_path: str | Path | None = None, sweep_path: str | Path | None = None
) -> None:
    """Validate and load the reports up front so a bad path fails before the server starts."""
    _paths["active"] = str(Path(report_path).absolute())
    _paths["baseline"] = str(Path(baseline_path).absolute()) if baseline_path else None
    _sweep["path"] = str(Path(sweep_path).absolute()) if sweep_path else None
    if _sweep["path"]:
        sweep()
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


def sweep() -> Sweep | None:
    """The sweep the viewer was started on (re-read when its table changes: a running sweep), or None."""
    path = _sweep["path"]
    if path is None:
        return None
    table = Path(path) / SWEEP_FILE
    return _open_sweep(path, table.stat().st_mtime_ns if table.exists() else 0)


@lru_cache(maxsize=2)
def _open_sweep(path: str, _mtime_ns: int) -> Sweep:
    return open_sweep(path)


def select(report_path: str | Path) -> None:
    """Make one of the sweep's reports the active one (every page then shows it). ValueError for a
    path that is not a report of the sweep: the browser never chooses what the server opens."""
    s = sweep()
    target = Path(report_path).absolute()
    allowed = {s.report_path(r) for r in s.sweep()["report"]} if s is not None else set()
    if target not in allowed:
        raise ValueError(f"not a report of this viewer's sweep: {target}")
    load(str(target))  # a damaged report fails here, before the switch
    _paths["active"] = str(target)
