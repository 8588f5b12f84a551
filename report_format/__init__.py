"""tilescope's report format: schema (the contract), atomic writer, validating lazy reader.

Imports neither ``profiler`` nor ``app``. The reader (and with it pandas, ~0.4 s to import) is
loaded when first asked for: writing a report (``tilescope run``, the simulator) needs neither.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from report_format.errors import ReportError
from report_format.schema import FORMAT_VERSION, SUPPORTED_VERSIONS, TABLE_NAMES, TABLES
from report_format.writer import ReportWriter

if TYPE_CHECKING:
    from report_format.reader import Report, TargetInfo, open_report

__all__ = [
    "FORMAT_VERSION",
    "SUPPORTED_VERSIONS",
    "TABLES",
    "TABLE_NAMES",
    "Report",
    "ReportError",
    "ReportWriter",
    "TargetInfo",
    "open_report",
]

_READER = ("Report", "TargetInfo", "open_report")


def __getattr__(name: str) -> Any:
    if name in _READER:
        from report_format import reader

        return getattr(reader, name)
    raise AttributeError(f"module 'report_format' has no attribute {name!r}")
