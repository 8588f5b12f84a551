"""The viewer's boundary: every request is bounded, and every callback argument is checked before
any callback runs. A bad request gets a 4xx answer with one short line, never a 500 and never a
traceback in the log; nothing of the request's content is echoed back (messages name the component
and property, never the value).

Checked here, in one place, so pages stay thin:

* the body: at most ``MAX_REQUEST_BYTES`` (413 before it is read), valid JSON, no deeper than
  ``MAX_DEPTH``, strings at most ``MAX_STRING`` characters, at most ``MAX_ITEMS`` values in all;
* the callback: its output must be one the app registered;
* each argument: by property (``n_clicks`` a count, ``clickData`` an object, ``value`` a scalar or
  a list of scalars, ...) and, for the stores the pages keep state in, by component id (a tile
  selection is a list of tile numbers, a zoom range two numbers, a baseline a string);
* a grid's pattern id must name a grid kind the app serves;
* what still goes wrong inside a callback because of its arguments (a ValueError, TypeError,
  KeyError, ...) is answered 400 naming the callback, logged as one line.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

import flask
from dash import Dash
from dash.exceptions import CallbackException, DependencyException
from werkzeug.exceptions import HTTPException

from app import ids
from report_format.errors import ReportError

MAX_REQUEST_BYTES = 8 * 2**20  # a selection of every tile of a 16-IPU target is ~150 KB
MAX_STRING = 4096
MAX_ITEMS = 2_000_000
MAX_DEPTH = 32
_LOG = logging.getLogger("tilescope.viewer")
#: Host names a loopback viewer answers to (any port): a request naming another host came through a
#: name that resolves here without being this machine's (DNS rebinding), and is refused.
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
#: Bound addresses that mean "every interface": the user chose to serve the network, any Host goes.
ALL_INTERFACES = frozenset({"0.0.0.0", "::", "[::]"})

# Errors a callback raises when its arguments are of the wrong type or out of range.
BAD_ARGUMENT_ERRORS = (
    TypeError, ValueError, KeyError, IndexError, AttributeError, LookupError, OverflowError, ReportError,
    RecursionError, CallbackException,  # the last: outputs that do not match the callback's
)  # fmt: skip

Check = Callable[[Any], str | None]  # value -> problem (None: fine)


class BadRequest(Exception):
    """A request the viewer refuses; the message is one short line without the request's content."""


# -- value checks ------------------------------------------------------------------------------
def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return (_is_int(v) or isinstance(v, float)) and math.isfinite(v)


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, str | bool) or _is_number(v)


def count_or_none(v: Any) -> str | None:
    return None if v is None or (_is_int(v) and v >= 0) else "must be a count"


def object_or_none(v: Any) -> str | None:
    return None if v is None or isinstance(v, dict) else "must be an object"


def text_or_none(v: Any) -> str | None:
    return None if v is None or isinstance(v, str) else "must be text"


def scalar_or_list(v: Any) -> str | None:
    if _scalar(v) or (isinstance(v, list) and all(_scalar(x) for x in v)):
        return None
    return "must be a value or a list of values"


def ints(limit: int | None = None) -> Check:
    def check(v: Any) -> str | None:
        if v is None:
            return None
        if not isinstance(v, list) or not all(_is_int(x) and x >= 0 for x in v):
            return "must be a list of non-negative integers"
        if limit is not None and len(v) > limit:
            return f"must hold at most {limit} items"
        return None

    return check


def int_or_none(v: Any) -> str | None:
    return None if v is None or (_is_int(v) and v >= 0) else "must be a non-negative integer"


def range_or_none(v: Any) -> str | None:
    # "" is a zoom store before any zoom (a None store is set again when it mounts: app.pages.execution_trace,
    # app.pages.liveness)
    if v is None or v == "" or (isinstance(v, list) and len(v) == 2 and all(_is_number(x) for x in v)):
        return None
    return "must be two numbers"


def cell_or_cells(v: Any) -> str | None:
    # a grid's cellClicked: an object, or (pattern ALL) a list of them
    if v is None or isinstance(v, dict):
        return None
    if isinstance(v, list) and all(x is None or isinstance(x, dict) for x in v):
        return None
    return "must be an object or a list of objects"


def graph_groups(v: Any) -> str | None:
    # the Operations Graph's open groups: {"layer": text, "open": [group ids], "focus": group id}
    if v is None:
        return None
    if not isinstance(v, dict) or not isinstance(v.get("layer", ""), str) or not isinstance(v.get("focus", ""), str):
        return "must be an object with a layer, open groups and a focus"
    groups = v.get("open", [])
    if not isinstance(groups, list) or len(groups) > 10_000 or not all(isinstance(g, str) for g in groups):
        return "must list open groups by name"
    return None


def anything(v: Any) -> str | None:
    return None  # bounded by the body checks


#: Checks by property name (any component).
BY_PROPERTY: dict[str, Check] = {
    "n_clicks": count_or_none,
    "clickData": object_or_none,
    "hoverData": object_or_none,
    "selectedData": object_or_none,
    "relayoutData": object_or_none,
    "getRowsRequest": object_or_none,
    "cellClicked": cell_or_cells,
    "tapNodeData": object_or_none,
    "active_tab": text_or_none,
    "pathname": text_or_none,
    "search": text_or_none,
    "hash": text_or_none,
    "href": text_or_none,
    "value": scalar_or_list,
    "id": anything,  # pattern ids: checked by _check_id
}
#: Checks of the stores' ``data`` by component id (what the pages keep there).
STORE_DATA: dict[str, Check] = {
    ids.LIVENESS_SELECTION: ints(limit=2),
    ids.MEMORY_SELECTION: ints(),
    ids.MEMORY_VARIABLES_PICK: ints(limit=1000),
    ids.PROGRAM_TREE_EXPANDED: ints(),
    ids.TRACE_RANGE: range_or_none,
    ids.LIVENESS_RANGE: range_or_none,  # the liveness zoom: "" / null (whole line) or [x0, x1] in steps
    ids.COMPARE_LIVENESS_STEP: int_or_none,
    ids.OPERATIONS_GRAPH_OPEN: graph_groups,
    ids.COMPARE_BASELINE: text_or_none,
    ids.COMPARE_SHOWN: text_or_none,  # pattern id: checked by its type
    ids.COMPARE_URL: anything,  # read by the browser's URL writer only (a clientside callback)
    "_pages_store": anything,  # Dash Pages' own store
}


def _check_bounds(value: Any) -> None:
    """Depth, string lengths and item count of a parsed JSON body (iterative: no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    items = 0
    while stack:
        v, depth = stack.pop()
        items += 1
        if items > MAX_ITEMS:
            raise BadRequest(f"request holds more than {MAX_ITEMS:,} values")
        if depth > MAX_DEPTH:
            raise BadRequest(f"request is nested deeper than {MAX_DEPTH} levels")
        if isinstance(v, str):
            if len(v) > MAX_STRING:
                raise BadRequest(f"request holds a string longer than {MAX_STRING:,} characters")
        elif isinstance(v, dict):
            stack.extend((k, depth + 1) for k in v)
            stack.extend((x, depth + 1) for x in v.values())
        elif isinstance(v, list):
            stack.extend((x, depth + 1) for x in v)
        elif isinstance(v, float) and not math.isfinite(v):
            raise BadRequest("request holds a number that is not finite")


def _name(component_id: Any) -> str:
    text = component_id if isinstance(component_id, str) else str(component_id)
    return text[:80]


def _check_id(component_id: Any, grid_kinds: frozenset[str], grid_type: str) -> None:
    if isinstance(component_id, str):
        return
    if not isinstance(component_id, dict) or not all(isinstance(k, str) for k in component_id):
        raise BadRequest("a component id must be text or an object")
    if component_id.get("type") == grid_type:
        kind, args = component_id.get("kind"), component_id.get("args")
        if kind not in grid_kinds or not isinstance(args, str):
            raise BadRequest("a grid id names no grid this viewer serves")


def _check_argument(item: Any, grid_kinds: frozenset[str], grid_type: str) -> None:
    if isinstance(item, list):  # pattern ALL: a list of {id, property, value}
        for x in item:
            _check_argument(x, grid_kinds, grid_type)
        return
    if not isinstance(item, dict) or not isinstance(item.get("property"), str) or "id" not in item:
        raise BadRequest("each callback argument must be an object with id, property and value")
    cid, prop, value = item["id"], item["property"], item.get("value")
    _check_id(cid, grid_kinds, grid_type)
    if prop == "id" and value != cid:  # a component's id property is its id (grids read kind and args from it)
        raise BadRequest(f"{_name(cid)}.id does not match the component")
    if prop == "data":
        # a store not listed is bounded by the body checks only (tests/app/test_guard.py asks
        # for a check of every store a callback reads)
        check = STORE_DATA.get(cid if isinstance(cid, str) else cid.get("type"), anything)
    else:
        check = BY_PROPERTY.get(prop, anything)
    problem = check(value)
    if problem:
        raise BadRequest(f"{_name(cid)}.{prop[:40]} {problem}")


def check_callback_request(body: Any, callbacks: dict[str, Any], grid_kinds: frozenset[str], grid_type: str) -> None:
    """Raise BadRequest unless ``body`` is a well-formed, bounded request of a known callback."""
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    _check_bounds(body)
    output = body.get("output")
    if not isinstance(output, str) or output not in callbacks:
        raise BadRequest("no such callback")
    for key in ("inputs", "state"):
        arguments = body.get(key, [])
        if not isinstance(arguments, list):
            raise BadRequest(f"'{key}' must be a list")
        for item in arguments:
            _check_argument(item, grid_kinds, grid_type)


# -- installation ---------------------------------------------------------------------------------
def _answer(status: int, message: str) -> flask.Response:
    response = flask.jsonify({"error": message})
    response.status_code = status
    return response


def allowed_hosts(bound: str) -> frozenset[str] | None:
    """The Host names a viewer bound to ``bound`` answers to; None: any (bound to every interface)."""
    return None if bound in ALL_INTERFACES else LOOPBACK_HOSTS | {bound}


def _host_name(host: str) -> str:
    """``host[:port]`` without the port (an IPv6 literal keeps its brackets)."""
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def install(app: Dash, hosts: frozenset[str] | None = LOOPBACK_HOSTS) -> None:
    """Apply the limits and checks to ``app``'s server (call after every callback is registered);
    ``hosts``: the Host names it answers to (``allowed_hosts``), None for any."""
    from app import grid

    server = app.server
    server.config["TILESCOPE_ALLOWED_HOSTS"] = hosts
    server.config["MAX_CONTENT_LENGTH"] = MAX_REQUEST_BYTES
    dispatch_path = app.config.routes_pathname_prefix + "_dash-update-component"
    grid_kinds = frozenset(grid.kinds())

    @server.before_request
    def _guard() -> flask.Response | None:
        allowed = server.config.get("TILESCOPE_ALLOWED_HOSTS")
        if allowed is not None and _host_name(flask.request.host.lower()) not in allowed:
            return _answer(403, "this viewer answers only to its own address")  # the name is not echoed
        length = flask.request.content_length
        if length is not None and length > MAX_REQUEST_BYTES:  # refused before it is read
            return _answer(413, f"request larger than {MAX_REQUEST_BYTES // 2**20} MiB")
        if flask.request.path != dispatch_path or flask.request.method != "POST":
            return None
        try:
            body = flask.request.get_json(silent=True)
            if body is None:
                raise BadRequest("the body must be JSON")
            check_callback_request(body, app.callback_map, grid_kinds, grid.GRID_TYPE)
        except BadRequest as exc:
            _LOG.warning("400 %s: %s", flask.request.path, exc)
            return _answer(400, str(exc))
        except RecursionError:
            return _answer(400, "request is nested too deeply")
        except HTTPException as exc:  # e.g. 413 while streaming a body without a length
            return _answer(exc.code or 400, exc.description or exc.name)
        return None

    from app import response_cache

    response_cache.install(server, dispatch_path)  # after _guard: only checked requests are looked up

    @server.errorhandler(Exception)
    def _error(exc: Exception) -> Any:
        if isinstance(exc, HTTPException):
            return _answer(exc.code or 500, exc.name)
        if isinstance(exc, DependencyException):  # an asset path no component registered: not found
            return _answer(404, "not found")
        if flask.request.path == dispatch_path and isinstance(exc, BAD_ARGUMENT_ERRORS):
            body = flask.request.get_json(silent=True) or {}
            output = _name(body.get("output", "?"))
            _LOG.warning("400 callback %s: its arguments could not be used (%s)", output, type(exc).__name__)
            return _answer(400, f"callback {output}: its arguments could not be used ({type(exc).__name__})")
        _LOG.exception("500 %s", flask.request.path[:200])  # a real fault: keep the traceback
        return _answer(500, "internal error")
