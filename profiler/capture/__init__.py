"""Capture: engine options (``POPLAR_ENGINE_OPTIONS``) and writing the autoReport.

Owns which options exist and what they mean (``options``) and turning a compiled, run engine into
a report (``autoreport``: the writer of every table, through report_format's writer).
May import: ``compiler``, ``executable``, ``poplar``, ``chip``, ``host`` and
``report_format``; never the engine (it is handed one).
"""
