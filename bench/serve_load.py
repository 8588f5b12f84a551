"""Load on the viewer: N concurrent clients over loopback against its heaviest callbacks (Memory
figure, Execution Trace timeline, compare), for a fixed time. Prints p50 / p95 / max latency,
requests and errors, overall and per callback.

The server is the real ``tilescope serve`` in its own process (as a user runs it); the clients are
threads here, each with one keep-alive connection, each sending the requests a browser sends when
a user switches views, zooms the trace or changes the compare baseline.

    python bench/serve_load.py REPORT --compare BASELINE      # 20 clients, 30 s
    python bench/serve_load.py REPORT --clients 5 --seconds 10
    python bench/serve_load.py REPORT --fresh      # no two zooms or selections alike: no cache hits
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


@dataclass
class Result:
    latencies: dict[str, list[float]] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    first_error: str = ""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(report: str, baseline: str | None, port: int, extra: list[str] | None = None) -> subprocess.Popen:
    argv = [sys.executable, "-m", "tilescope", "serve", report, "--port", str(port), "--no-browser", *(extra or [])]
    if baseline:
        argv += ["--compare", baseline]
    log = open(Path("/tmp") / f"tilescope-serve-load-{port}.log", "wb")  # noqa: SIM115 - kept open while it runs
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited; its output is in {log.name}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/_dash-layout")
            if conn.getresponse().status == 200:
                return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("server did not start in 120 s")


def _outputs(output: str) -> Any:
    outs = [o for o in output.strip(".").split("...") if o]
    specs = [{"id": o.rsplit(".", 1)[0], "property": o.rsplit(".", 1)[1]} for o in outs]
    return specs[0] if len(specs) == 1 else specs


def request_body(deps: list[dict[str, Any]], output: str, values: dict[str, Any], changed: str) -> dict[str, Any]:
    """The body a browser sends for callback ``output`` with argument ``values`` ("id.property" -> value)."""
    dep = next(d for d in deps if d["output"] == output)

    def args(items: list[dict[str, str]]) -> list[dict[str, Any]]:
        return [
            {"id": a["id"], "property": a["property"], "value": values.get(f"{a['id']}.{a['property']}")} for a in items
        ]

    return {
        "output": output,
        "outputs": _outputs(output),
        "inputs": args(dep["inputs"]),
        "state": args(dep["state"]),
        "changedPropIds": [changed],
    }


def catalogue(port: int, baseline: str | None) -> list[tuple[str, dict[str, Any]]]:
    """(name, body) of the requests the clients draw from."""
    from app import ids

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", "/_dash-dependencies")
    deps = json.loads(conn.getresponse().read())
    by_output = {d["output"]: d for d in deps}
    mem_out = f"{ids.MEMORY_GRAPH}.figure"
    trace_out = next(o for o in by_output if f"{ids.TRACE_TIMELINE}.figure" in o)
    out: list[tuple[str, dict[str, Any]]] = []
    for breakdown in ("category", "region", "liveness"):
        for order in ("tile", "sorted"):
            values = {
                f"{ids.MEMORY_BREAKDOWN}.value": breakdown,
                f"{ids.MEMORY_INCLUDE_GAPS}.value": ["gaps", "max"],
                f"{ids.MEMORY_ORDER}.value": order,
                f"{ids.MEMORY_SELECTION}.data": None,
            }
            out.append(("memory figure", request_body(deps, mem_out, values, f"{ids.MEMORY_BREAKDOWN}.value")))
    rng = random.Random(0)
    for run in (0, 1):
        for k in range(8):  # the whole run, then zoomed ranges
            span = None if k == 0 else sorted(rng.sample(range(0, 30000), 2))
            values = {
                f"{ids.TRACE_RUN}.value": run,
                f"{ids.TRACE_VIEW}.value": "flat" if k % 2 == 0 else "flame",
                f"{ids.TRACE_IPU}.value": "-1",
                f"{ids.TRACE_RANGE}.data": span,
            }
            out.append(("execution trace", request_body(deps, trace_out, values, f"{ids.TRACE_RANGE}.data")))
    if baseline:
        key = str(Path(baseline).absolute())
        for cid in (ids.COMPARE_SUMMARY, ids.COMPARE_MEMORY):
            o = f"{cid}.children"
            if o in by_output:
                body = request_body(deps, o, {f"{ids.COMPARE_BASELINE}.data": key}, f"{ids.COMPARE_BASELINE}.data")
                out.append(("compare " + cid.removeprefix("compare-"), body))
    return out


def _fresh(body: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """The same request with a zoom range or tile selection never asked before (a cache miss)."""
    from app import ids

    body = json.loads(json.dumps(body))
    for arg in body["inputs"] + body["state"]:
        if arg["id"] == ids.TRACE_RANGE:
            a = rng.randrange(0, 20000)
            arg["value"] = [a, a + rng.randrange(100, 10000)]
        elif arg["id"] == ids.MEMORY_SELECTION:
            a = rng.randrange(0, 1400)
            arg["value"] = list(range(a, a + rng.randrange(1, 60)))
    return body


def client(
    port: int,
    requests: list[tuple[str, dict[str, Any]]],
    stop: float,
    seed: int,
    result: Result,
    lock: threading.Lock,
    fresh: bool = False,
) -> None:
    rng = random.Random(seed)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    while time.monotonic() < stop:
        name, body = rng.choice(requests)
        if fresh:
            body = _fresh(body, rng)
        data = json.dumps(body).encode()
        t = time.perf_counter()
        try:
            conn.request("POST", "/_dash-update-component", data, {"Content-Type": "application/json"})
            resp = conn.getresponse()
            payload = resp.read()
            ok = resp.status == 200 and "response" in json.loads(payload)
            problem = "" if ok else f"{name}: HTTP {resp.status} {payload[:200]!r}"
        except (OSError, ValueError, http.client.HTTPException) as exc:
            problem = f"{name}: {type(exc).__name__}: {exc}"
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        dt = time.perf_counter() - t
        with lock:
            if problem:
                result.errors[name] = result.errors.get(name, 0) + 1
                result.first_error = result.first_error or problem
            else:
                result.latencies.setdefault(name, []).append(dt)


def drive(
    port: int, requests: list[tuple[str, dict[str, Any]]], clients: int, seconds: float, fresh: bool = False
) -> Result:
    result, lock = Result(), threading.Lock()
    stop = time.monotonic() + seconds
    threads = [
        threading.Thread(target=client, args=(port, requests, stop, i, result, lock, fresh)) for i in range(clients)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return result


def percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


def report(result: Result) -> dict[str, Any]:
    every = [x for v in result.latencies.values() for x in v]
    lines = {}
    for name, v in sorted(result.latencies.items()) + [("all", every)]:
        lines[name] = {
            "requests": len(v),
            "errors": sum(result.errors.values()) if name == "all" else result.errors.get(name, 0),
            "p50_ms": percentile(v, 0.5) * 1e3,
            "p95_ms": percentile(v, 0.95) * 1e3,
            "max_ms": max(v, default=float("nan")) * 1e3,
        }
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("report")
    ap.add_argument("--compare", metavar="BASELINE")
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument(
        "--fresh",
        action="store_true",
        help="give every trace and memory request a zoom range / tile selection never asked before (no cache hits)",
    )
    ap.add_argument("--serve-args", default="", help="extra arguments for tilescope serve, e.g. '--threads 8'")
    args = ap.parse_args()
    port = free_port()
    server = start_server(args.report, args.compare, port, args.serve_args.split())
    try:
        requests = catalogue(port, args.compare)
        for _, body in requests:  # what a first visitor pays is not load: warm the server once
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            conn.request("POST", "/_dash-update-component", json.dumps(body), {"Content-Type": "application/json"})
            conn.getresponse().read()
        result = drive(port, requests, args.clients, args.seconds, args.fresh)
    finally:
        server.terminate()
        server.wait(timeout=30)
    what = "every trace/memory request new" if args.fresh else f"{len(requests)} distinct requests"
    print(f"{args.clients} clients for {args.seconds:.0f} s, {what}")
    print(f"{'callback':20s} {'requests':>9s} {'errors':>7s} {'p50 ms':>8s} {'p95 ms':>8s} {'max ms':>8s}")
    for name, r in report(result).items():
        print(
            f"{name:20s} {r['requests']:9d} {r['errors']:7d} {r['p50_ms']:8.0f} {r['p95_ms']:8.0f} {r['max_ms']:8.0f}"
        )
    if result.first_error:
        print(f"first error: {result.first_error}")
    return 0 if not result.errors else 1


if __name__ == "__main__":
    sys.exit(main())
