"""Quiet server output: the viewer prints one line saying where it listens, not a line per
request (werkzeug's access log), not Flask's banner or its development-server warning, and not
Dash's own "running on" line. Errors still reach the terminal."""

from __future__ import annotations

import logging


def quiet_server_logs() -> None:
    """Silence the per-request log and the start-up banners of the server the viewer runs on."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # access log and the dev-server warning
    logging.getLogger("dash.dash").setLevel(logging.WARNING)  # "Dash is running on ..."
    try:
        import flask.cli

        flask.cli.show_server_banner = lambda *args, **kwargs: None  # " * Serving Flask app ..."
    except (ImportError, AttributeError):  # another Flask: its banner is harmless
        pass
