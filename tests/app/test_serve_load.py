"""Load: 20 concurrent clients over loopback against the real ``tilescope serve`` (waitress, worker
threads) on the viewer's heaviest callbacks (Memory figure, Execution Trace timeline, compare), for
a bounded time; every answer must be a 200 holding the callback's response. Latency figures are
bench/serve_load.py's job (this machine is shared: timing is not asserted here)."""

from __future__ import annotations

import http.client
import sys
import threading
import time
from pathlib import Path

import pytest

from app.response_cache import ResponseCache

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import serve_load  # noqa: E402  (bench/ is not a package)


@pytest.mark.slow  # ~14 s at load 4: twenty clients against a real server
def test_twenty_clients_get_every_answer(small_report, compile_only_report) -> None:  # type: ignore[no-untyped-def]
    port = serve_load.free_port()
    server = serve_load.start_server(str(small_report.path), str(compile_only_report.path), port)
    try:
        requests = serve_load.catalogue(port, str(compile_only_report.path))
        names = {name for name, _ in requests}
        assert {"memory figure", "execution trace", "compare summary", "compare memory"} <= names
        warm = serve_load.drive(port, requests, clients=20, seconds=6)  # repeated views: shared answers
        fresh = serve_load.drive(port, requests, clients=20, seconds=6, fresh=True)  # every zoom new
    finally:
        server.terminate()
        server.wait(timeout=30)
    for result in (warm, fresh):
        assert not result.errors, result.first_error
        assert set(result.latencies) == names  # every kind of request was answered
        assert sum(len(v) for v in result.latencies.values()) >= 40


def test_identical_concurrent_requests_are_computed_once() -> None:
    cache, computed = ResponseCache(), []
    answers: list[bytes] = []

    def request() -> None:
        answer = cache.lookup_or_lead("k")
        if answer is None:  # the leader computes; the others wait for it
            computed.append(1)
            time.sleep(0.2)
            answer = b"figure"
            cache.store("k", answer)
        answers.append(answer)

    threads = [threading.Thread(target=request) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(computed) == 1 and answers == [b"figure"] * 20
    assert cache.hits == 19 and cache.misses == 1


def test_a_failed_leader_lets_the_next_request_compute() -> None:
    cache = ResponseCache()
    assert cache.lookup_or_lead("k") is None
    cache.release("k")  # the leader's request failed: nothing kept
    assert cache.lookup_or_lead("k") is None  # the next one leads instead of waiting forever
    cache.store("k", b"x")
    assert cache.lookup_or_lead("k") == b"x"


def test_the_cache_is_bounded_by_bytes() -> None:
    cache = ResponseCache(max_bytes=800)
    for i in range(10):
        assert cache.lookup_or_lead(str(i)) is None
        cache.store(str(i), bytes(100))
    assert cache.lookup_or_lead("0") is None  # the oldest left
    cache.release("0")
    assert cache.lookup_or_lead("9") == bytes(100)


@pytest.mark.slow  # ~15 s: a real server, 150 idle clients, and its idle timeout
def test_idle_clients_holding_half_sent_bodies_neither_freeze_the_server_nor_keep_their_slots(small_report) -> None:  # type: ignore[no-untyped-def]
    import socket

    from tilescope.commands.serve import CHANNEL_TIMEOUT_S, CLEANUP_INTERVAL_S

    port = serve_load.free_port()
    server = serve_load.start_server(str(small_report.path), None, port)
    idle: list[socket.socket] = []
    try:
        for _ in range(150):  # more than waitress's default 100 connection slots
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(b'POST /_dash-update-component HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n{"out')
            idle.append(s)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/_dash-layout")
        assert conn.getresponse().status == 200  # answered while 150 bodies are half sent
        time.sleep(CHANNEL_TIMEOUT_S + 2 * CLEANUP_INTERVAL_S + 1)
        closed = 0
        for s in idle:
            s.settimeout(5)
            try:
                closed += s.recv(1) == b""  # the server closed the idle connection
            except ConnectionResetError:
                closed += 1
            except TimeoutError:  # still open: the slot was kept
                pass
        assert closed == len(idle)
    finally:
        for s in idle:
            s.close()
        server.terminate()
        server.wait(timeout=30)
