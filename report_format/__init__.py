"""tilescope's report format: schema (the contract), atomic writer, validating lazy reader.

Imports neither ``profiler`` nor ``app``.
"""

from report_format.errors import ReportError
from report_format.reader import Report, TargetInfo, open_report
from report_format.schema import FORMAT_VERSION, SUPPORTED_VERSIONS, TABLE_NAMES, TABLES
from report_format.writer import ReportWriter

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
