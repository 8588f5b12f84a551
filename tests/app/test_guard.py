"""The viewer's boundary (app.guard): every callback, given arguments of the wrong type or shape,
answers a client error or a normal answer, never a 500 and never a traceback in the log; the body
size is limited; nothing of the request is echoed back."""

from __future__ import annotations

import json
import logging
import socket
import threading
from typing import Any

import pytest
from werkzeug.serving import make_server

from app import grid, guard, ids
from app.server import create_app

MARK = "ECHO-ME-"
BAD_VALUES: list[Any] = [
    ["a", "b"],  # a list where a path or a number is expected
    {"x": [1, 2]},
    "not-a-number",
    -5,
    10**12,
    1e308,
    None,
    True,
    [10**12, -1],
    MARK * 600,  # ~5,000 characters: longer than any argument the viewer takes
    [[[[1]]]],
]


@pytest.fixture(scope="module")
def client(small_report, compile_only_report):  # type: ignore[no-untyped-def]
    app = create_app(small_report.path, compile_only_report.path)  # compare mode: every callback live
    c = app.server.test_client()
    assert c.get("/_dash-layout").status_code == 200
    return c, json.loads(c.get("/_dash-dependencies").data)


def _concrete(component_id: str) -> Any:
    if not component_id.startswith("{"):
        return component_id
    pattern = json.loads(component_id)  # a pattern id: fill wildcards with a real grid
    return {k: ("liveness-always" if k == "kind" else "{}") if isinstance(v, list) else v for k, v in pattern.items()}


def _body(dep: dict[str, Any], value: Any) -> dict[str, Any]:
    outs = [o for o in dep["output"].strip(".").split("...") if o]
    outputs = [{"id": _concrete(o.rsplit(".", 1)[0]), "property": o.rsplit(".", 1)[1]} for o in outs]
    args = lambda deps: [{"id": _concrete(d["id"]), "property": d["property"], "value": value} for d in deps]  # noqa: E731
    return {
        "output": dep["output"],
        "outputs": outputs[0] if len(outputs) == 1 else outputs,
        "inputs": args(dep["inputs"]),
        "state": args(dep["state"]),
        "changedPropIds": [f"{dep['inputs'][0]['id']}.{dep['inputs'][0]['property']}"] if dep["inputs"] else [],
    }


def test_every_callback_answers_bad_arguments_without_a_500(client, caplog) -> None:  # type: ignore[no-untyped-def]
    c, deps = client
    assert len(deps) >= 25
    statuses: dict[int, int] = {}
    with caplog.at_level(logging.WARNING):
        for dep in deps:
            for value in BAD_VALUES:
                r = c.post("/_dash-update-component", json=_body(dep, value))
                statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
                assert r.status_code in (200, 204, 400), (dep["output"], value, r.status_code)
                assert MARK.encode() not in r.data  # never echoed back
                if r.status_code == 400:
                    assert len(r.data) < 400 and b"Traceback" not in r.data
    assert statuses.get(400, 0) > 100  # most bad arguments are refused at the boundary
    assert "Traceback" not in caplog.text
    assert all(rec.levelno < logging.ERROR for rec in caplog.records)


@pytest.mark.parametrize(
    ("make", "status", "says"),
    [
        (lambda: b"\x00not json", 400, "must be JSON"),
        (lambda: json.dumps([1, 2]).encode(), 400, "JSON object"),
        (lambda: json.dumps({"output": "no-such.children", "inputs": []}).encode(), 400, "no such callback"),
        (lambda: ("[" * 5000 + "]" * 5000).encode(), 400, ""),
        pytest.param(
            lambda: json.dumps(
                {"output": "x", "inputs": [{"id": "a", "property": "value", "value": 1.0}] * 2_100_000}
            ).encode(),
            413,
            "larger than",
            marks=pytest.mark.slow,  # ~2.5 s at load 4 making the body (a real server refuses one below too)
        ),
    ],
)
def test_malformed_bodies_are_client_errors(client, make, status: int, says: str) -> None:  # type: ignore[no-untyped-def]
    c, _ = client
    r = c.post("/_dash-update-component", data=make(), content_type="application/json")
    assert r.status_code == status and says in r.get_json()["error"]


def test_a_100_mb_body_is_refused_before_it_is_read(small_report) -> None:  # type: ignore[no-untyped-def]
    # A real server on loopback: the client announces 100 MB, sends 64 KB and waits for the answer.
    app = create_app(small_report.path)
    server = make_server("127.0.0.1", 0, app.server, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with socket.create_connection(("127.0.0.1", server.server_port), timeout=10) as sock:
            head = (
                "POST /_dash-update-component HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Content-Length: {100 * 2**20}\r\n\r\n"
            )
            sock.sendall(head.encode() + b" " * 65536)
            reply = sock.recv(4096)
        assert reply.startswith(b"HTTP/1.1 413")
    finally:
        server.shutdown()


def test_grids_and_stores_are_checked_by_what_they_hold(client) -> None:  # type: ignore[no-untyped-def]
    c, deps = client
    rows = next(d for d in deps if "getRowsResponse" in d["output"])
    body = _body(rows, {"startRow": 0, "endRow": 10})
    forged = {"type": grid.GRID_TYPE, "kind": "no-such-kind", "args": "{}"}
    body["state"][0].update(id=forged, value=forged)
    r = c.post("/_dash-update-component", json=body)
    assert r.status_code == 400 and "no grid" in r.get_json()["error"]
    uses = next(d for d in deps if any(a["id"] == ids.COMPARE_BASELINE for a in d["inputs"] + d["state"]))
    body = _body(uses, None)
    for arg in body["inputs"] + body["state"]:
        if arg["property"] == "data":
            arg["value"] = ["/etc", "/"]  # a list where a baseline key (text) is expected
    r = c.post("/_dash-update-component", json=body)
    assert r.status_code == 400 and "compare-baseline.data must be text" in r.get_json()["error"]


def test_a_grid_filter_that_is_not_a_number_is_a_client_error(client) -> None:  # type: ignore[no-untyped-def]
    c, deps = client
    rows = next(d for d in deps if "getRowsResponse" in d["output"])
    request = {
        "startRow": 0,
        "endRow": 10,
        "filterModel": {"bytes": {"filterType": "number", "type": "equals", "filter": "abc"}},
    }
    body = _body(rows, request)
    body["state"][0]["value"] = body["state"][0]["id"]
    r = c.post("/_dash-update-component", json=body)
    assert r.status_code == 400 and "its arguments could not be used (ValueError)" in r.get_json()["error"]
    request["filterModel"]["bytes"]["filter"] = 0  # the same grid with a number works
    body = _body(rows, request)
    body["state"][0]["value"] = body["state"][0]["id"]
    r = c.post("/_dash-update-component", json=body)
    assert r.status_code == 200 and "rowCount" in r.get_data(as_text=True)


def test_every_store_a_callback_reads_has_a_check(client) -> None:  # type: ignore[no-untyped-def]
    _, deps = client
    # a pattern id arrives as its JSON text; the guard checks it by its type
    stores = {
        json.loads(a["id"])["type"] if a["id"].startswith("{") else a["id"]
        for d in deps
        for a in d["inputs"] + d["state"]
        if a["property"] == "data"
    }
    assert stores <= set(guard.STORE_DATA), (
        f"add a check to app.guard.STORE_DATA for {sorted(stores - set(guard.STORE_DATA))}"
    )


def test_trace_range_store_takes_a_zoom_or_the_whole_run() -> None:
    # None or "" (the store's first value): the whole run; a zoom is two numbers
    assert guard.range_or_none(None) is None and guard.range_or_none("") is None
    assert guard.range_or_none([0, 10]) is None
    assert guard.range_or_none("0..10") == guard.range_or_none([1]) == "must be two numbers"


def test_a_loopback_viewer_refuses_other_host_names_without_echoing_them(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from app import guard
    from app.server import create_app
    from report_format.synthetic import synthetic_report

    app = create_app(synthetic_report(tmp_path / "r", num_ipus=1, tiles_per_ipu=4))
    client = app.server.test_client()
    assert client.get("/", headers={"Host": "127.0.0.1:8050"}).status_code == 200
    assert client.get("/", headers={"Host": "localhost"}).status_code == 200
    refused = client.get("/", headers={"Host": "rebind.attacker.example:8050"})
    assert refused.status_code == 403 and b"attacker" not in refused.data
    app.server.config["TILESCOPE_ALLOWED_HOSTS"] = guard.allowed_hosts("0.0.0.0")  # serving the network
    assert client.get("/", headers={"Host": "my-workstation:8050"}).status_code == 200
    assert guard.allowed_hosts("192.168.1.5") == guard.LOOPBACK_HOSTS | {"192.168.1.5"}


def test_an_asset_path_no_component_registered_is_404_not_500(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from app.server import create_app
    from report_format.synthetic import synthetic_report

    client = create_app(synthetic_report(tmp_path / "r", num_ipus=1, tiles_per_ipu=4)).server.test_client()
    for path in ("/_dash-component-suites/os/__init__.py", "/_dash-component-suites/dash/../../x.js"):
        assert client.get(path).status_code == 404
