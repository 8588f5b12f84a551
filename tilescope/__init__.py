"""tilescope: command-line entry point composing profiler, report_format and app."""
