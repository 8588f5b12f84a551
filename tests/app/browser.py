"""Helpers for browser tests: serve a report with `tilescope serve` in a subprocess, drive headless
Debian Chromium with Playwright (never a downloaded browser)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ROOT = Path(__file__).resolve().parents[2]
PAGES = (
    "/",
    "/insights",
    "/memory",
    "/liveness",
    "/program-tree",
    "/operations",
    "/operations-graph",
    "/execution-trace",
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def served(report: Path, *options: str) -> Iterator[str]:
    """Run the viewer on ``report`` (with extra serve ``options``, e.g. --compare BASELINE) until the
    block ends; yields its base URL."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tilescope", "serve", str(report), "--no-browser", "--port", str(port), *options],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 30
        while True:
            try:
                urllib.request.urlopen(url + "/_dash-layout", timeout=1)
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    out = proc.stdout.read().decode() if proc.stdout else ""
                    raise RuntimeError(f"viewer did not start: {out[-2000:]}") from None
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


class PageWatch:
    """Collects console errors, page errors and requests that leave the app's origin."""

    def __init__(self, page, base: str) -> None:
        self.errors: list[str] = []
        self.external: list[str] = []
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        page.on(
            "request", lambda r: None if r.url.startswith((base, "data:", "blob:")) else self.external.append(r.url)
        )


# Dash's renderer is idle: its store exists and the initial layout is hydrated, no callback is
# requested, queued, running or waiting to be applied, and no component is marked loading.
# (window.store and the callbacks queues are dash-renderer's own; dash.testing reads the same.)
_DASH_IDLE = """() => {
  const s = window.store && window.store.getState();
  if (!s || s.appLifecycle !== 'HYDRATED' || s.isLoading) return false;
  const c = s.callbacks || {};
  for (const k of ['requested', 'prioritized', 'blocked', 'executing', 'watched', 'executed'])
    if (c[k] && c[k].length) return false;
  return !document.querySelector('[data-dash-is-loading="true"]');
}"""


def settle(page, ms: int = 400, timeout_s: float = 60.0) -> None:
    """Wait until Dash has no callback in flight and has stayed so for ``ms``.

    Idle is checked again after the pause: on a loaded machine the renderer may start (or chain)
    callbacks after the network first goes quiet, so one idle moment is not enough."""
    page.wait_for_load_state("networkidle")
    deadline = time.monotonic() + timeout_s
    while True:
        left_ms = max(1000, int((deadline - time.monotonic()) * 1000))
        page.wait_for_function(_DASH_IDLE, timeout=left_ms)
        page.wait_for_timeout(ms)
        if page.evaluate(_DASH_IDLE) or time.monotonic() > deadline:
            return


def click_centre(page, locator) -> None:
    """A real mouse click at the centre of an SVG element (Plotly's drag layer receives it, as
    it does a user's click)."""
    box = locator.bounding_box()
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
