"""Open a report in the viewer (a local web app; everything is served offline by the app itself).

The report is validated first: a path that is not a report stops here with a one-line reason.
With --compare, a baseline report is loaded too (compare views use it).

A sweep directory (`tilescope sweep --out DIR`) opens on its Sweep page: the points' table and
Pareto plot; the fastest point that fits is the report the other pages show until another point is
opened (one report at a time, for every tab of this viewer).
"""

from __future__ import annotations

import argparse

HELP = "open a report (and optionally a baseline) in the browser viewer"


# A browser keeps ~6 connections per host; a few tabs and a load test stay far below these.
CONNECTION_LIMIT = 1000
CHANNEL_TIMEOUT_S = 10  # a client that sends nothing for this long loses its connection
CLEANUP_INTERVAL_S = 2


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("report", help="report directory (holds manifest.json), or a sweep directory (holds sweep.arrow)")
    p.add_argument("--compare", metavar="BASELINE", help="a baseline report to compare against")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8050, help="port (default 8050)")
    p.add_argument("--no-browser", action="store_true", help="do not open a web browser")
    p.add_argument(
        "--threads", type=int, default=8, help="worker threads of the server (default 8; waiting requests queue)"
    )
    p.add_argument(
        "--allow-resimulate",
        action="store_true",
        help="show a 're-simulate' button on the Insights page's what-if proposals: it runs `tilescope whatif "
        "REPORT --apply N` on this machine (one at a time, at most 15 minutes each) and writes REPORT.whatif-N "
        "beside the report. Off by default: anyone who can open the viewer could start work on the server",
    )
    p.add_argument(
        "--debug",
        action="store_true",
        help="Dash debug mode (Flask's development server, reloader off) and a log line per request",
    )


def _check_address(host: str, port: int) -> None:
    """One line (exit 2) for a port out of range, an unknown host or an address in use, before
    the reports are loaded; the server itself would answer with a traceback or hang."""
    import socket

    from tilescope.errors import CommandError

    if not 1 <= port <= 65535:
        raise CommandError(f"--port {port}: must be between 1 and 65535")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise CommandError(f"--host {host}: not an address of this machine ({exc})") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds
        try:
            probe.bind(address)
        except OSError as exc:
            raise CommandError(f"cannot listen on {host}:{port}: {exc.strerror}") from None


def run(args: argparse.Namespace) -> int:
    from report_format.reader import open_report
    from tilescope.errors import CommandError

    if not 1 <= args.threads <= 256:
        raise CommandError(f"--threads {args.threads}: must be between 1 and 256")
    _check_address(args.host, args.port)
    sweep, report = _sweep_report(args.report)
    open_report(report)  # one-line ReportError (exit 2) before anything starts
    if args.compare:
        open_report(args.compare)
    from app import guard, resimulate
    from app.server import create_app

    resimulate.allow(args.allow_resimulate)
    app = create_app(report, args.compare, warm=True, sweep_path=sweep)
    # Host names answered: loopback and the bound address (DNS rebinding against a loopback viewer
    # is refused); bound to every interface, any
    app.server.config["TILESCOPE_ALLOWED_HOSTS"] = guard.allowed_hosts(args.host)
    url = f"http://{args.host}:{args.port}/" + ("sweep" if sweep else "")
    print(f"tilescope viewer on {url}  (Ctrl+C to stop)", flush=True)
    if not args.no_browser:
        import threading
        import webbrowser

        threading.Timer(1.0, webbrowser.open, args=(url,)).start()
    if args.debug:
        app.run(host=args.host, port=args.port, debug=True, use_reloader=False)
        return 0
    from app.logs import quiet_server_logs

    quiet_server_logs()
    # A production WSGI server (waitress: pure Python, no dependencies): a fixed pool of worker
    # threads, requests parsed and queued by its own I/O thread, bodies bounded before the app.
    import logging

    import waitress

    logging.getLogger("waitress.queue").setLevel(logging.ERROR)  # a busy queue is expected under load
    waitress.serve(
        app.server,
        host=args.host,
        port=args.port,
        threads=args.threads,
        ident="tilescope",
        max_request_body_size=guard.MAX_REQUEST_BYTES,
        # Connection slots and their timeout: waitress stops accepting at connection_limit (default
        # 100), so ~100 idle clients holding half-sent bodies froze the viewer. A slot idle for
        # CHANNEL_TIMEOUT_S is closed (checked every CLEANUP_INTERVAL_S), and there are more slots.
        connection_limit=CONNECTION_LIMIT,
        channel_timeout=CHANNEL_TIMEOUT_S,
        cleanup_interval=CLEANUP_INTERVAL_S,
        _quiet=True,
    )
    return 0


def _sweep_report(path: str) -> tuple[str | None, str]:
    """(sweep directory or None, the report to show first): for a sweep, the fastest point that fits,
    else its first point with a report (a sweep without any is a one-line error)."""
    from app.views.sweep import best_within
    from report_format.sweep import is_sweep, open_sweep
    from tilescope.errors import CommandError

    if not is_sweep(path):
        return None, path
    sweep = open_sweep(path)
    df = sweep.sweep()
    with_report = df[df["report"] != ""]
    if with_report.empty:
        raise CommandError(f"{path}: the sweep has no point with a report yet")
    best = best_within(with_report, int(with_report["max_tile_bytes"].max()))
    first = best if best is not None else with_report.iloc[0]
    return str(sweep.path), str(sweep.report_path(str(first["report"])))
