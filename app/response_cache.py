"""Answers of the viewer's callbacks, shared by every client.

A callback's answer depends only on its arguments (the request body: output, inputs, state and which
input changed) and on the reports (which change only when a sweep's viewer opens another point; they are part of the key). So the serialised
answer of one client serves every other client asking the same: the Memory figure of a report,
its trace at the same zoom, a comparison with the same baseline. Building a figure and serialising
it is most of a callback's time; the cache answers a repeated request in well under a millisecond.

Concurrent identical requests are coalesced: the first computes, the others wait for its answer
(a view opened by 20 people at once is built once). Bounded by total bytes, least recently used
answers leave first; only successful answers (200) are kept.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from typing import Any

import flask

from app import ids

MAX_BYTES = 128 * 2**20
#: Component ids whose callbacks answer from the server's changing state (a re-simulation's
#: progress), not from their arguments and the reports alone: never cached.
UNCACHED_OUTPUTS: frozenset[str] = frozenset({ids.INSIGHTS_WHATIF_STATUS})
WAIT_SECONDS = 120.0  # how long a follower waits for the leader before computing itself


class ResponseCache:
    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._answers: OrderedDict[str, bytes] = OrderedDict()
        self._bytes = 0
        self._in_flight: dict[str, threading.Event] = {}
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    @staticmethod
    def key(body: dict[str, Any], reports: dict[str, str | None] | None = None) -> str:
        """The answer's key: the request, and the reports it is about (a sweep's viewer switches
        its report when a point is opened, so the same request may then mean another report)."""
        parts = {k: body.get(k) for k in ("output", "outputs", "inputs", "state", "changedPropIds")}
        parts["reports"] = reports
        return hashlib.sha256(json.dumps(parts, sort_keys=True, separators=(",", ":")).encode()).hexdigest()

    def lookup_or_lead(self, key: str) -> bytes | None:
        """The cached answer, or None when the caller must compute it (it then leads: it must call
        ``store`` or ``release``). Waits while another request computes the same answer."""
        while True:
            with self._lock:
                answer = self._answers.get(key)
                if answer is not None:
                    self._answers.move_to_end(key)
                    self.hits += 1
                    return answer
                event = self._in_flight.get(key)
                if event is None:
                    self._in_flight[key] = threading.Event()
                    self.misses += 1
                    return None
            if not event.wait(WAIT_SECONDS):
                return None  # the leader is stuck: compute without leading
            # loop: the answer is cached now, or the leader failed and this request may lead

    def store(self, key: str, answer: bytes) -> None:
        with self._lock:
            if len(answer) <= self.max_bytes // 8 and key not in self._answers:
                self._answers[key] = answer
                self._bytes += len(answer)
                while self._bytes > self.max_bytes:
                    _, old = self._answers.popitem(last=False)
                    self._bytes -= len(old)
        self.release(key)

    def release(self, key: str) -> None:
        with self._lock:
            event = self._in_flight.pop(key, None)
        if event is not None:
            event.set()


def install(server: flask.Flask, dispatch_path: str, cache: ResponseCache | None = None) -> ResponseCache:
    """Serve repeated callback requests from ``cache`` (call after the request checks are installed,
    so only checked requests are looked up)."""
    cache = cache or ResponseCache()

    @server.before_request
    def _cached() -> flask.Response | None:
        if flask.request.path != dispatch_path or flask.request.method != "POST":
            return None
        body = flask.request.get_json(silent=True)
        if not isinstance(body, dict) or _uncached(body):
            return None
        from app import state

        key = cache.key(body, state.started_with())
        answer = cache.lookup_or_lead(key)
        if answer is not None:
            return flask.Response(answer, status=200, mimetype="application/json")
        flask.g.tilescope_cache_key = key
        return None

    @server.after_request
    def _keep(response: flask.Response) -> flask.Response:
        key = flask.g.pop("tilescope_cache_key", None)
        if key is not None:
            if response.status_code == 200 and not response.direct_passthrough:
                cache.store(key, response.get_data())
            else:
                cache.release(key)
        return response

    @server.teardown_request
    def _release(_: BaseException | None) -> None:
        key = flask.g.pop("tilescope_cache_key", None)
        if key is not None:  # the request failed before after_request: let the waiters compute
            cache.release(key)

    return cache


def _uncached(body: dict[str, Any]) -> bool:
    """Whether the request's callback writes one of ``UNCACHED_OUTPUTS``."""
    outputs = body.get("outputs")
    outputs = outputs if isinstance(outputs, list) else [outputs]
    return any(isinstance(o, dict) and isinstance(o.get("id"), str) and o["id"] in UNCACHED_OUTPUTS for o in outputs)
