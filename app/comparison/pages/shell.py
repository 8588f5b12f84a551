"""Compare mode in the shell: the baseline picker in the navbar, the "Comparing ACTIVE against
BASELINE" banner with its off switch, and the store of the chosen baseline (each page's compare tab follows it).

The choice is kept in the URL (``?compare=NAME``, the baseline's name as the picker lists it, or
``?compare=off``), so a reload or a shared link opens with the same baseline: the browser writes the
URL (``history.replaceState``: no navigation, no page rebuilt) and the server reads it on load,
accepting only names of baselines it listed."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

import dash
import dash_bootstrap_components as dbc
from dash import Input, Output, State, callback, clientside_callback, ctx, dcc, html

from app import ids, state
from app.comparison.pages import baselines

#: The picker's value while compare is off (not "": a select shows an empty value as blank).
OFF = "off"


def picker() -> html.Div:
    """Navbar item: a select of the baselines this viewer may open ("compare: off" first)."""
    options = [{"label": "compare: off", "value": OFF}] + [
        {"label": f"vs {lab}", "value": key} for key, lab in baselines.candidates().items()
    ]
    return html.Div(
        [
            dbc.Select(
                id=ids.COMPARE_PICKER,
                options=options,
                value=baselines.default_key() or OFF,
                size="sm",
                style={"width": "10rem"},
                disabled=len(options) == 1,
            ),
        ],
        title="Compare this report with a baseline: reports beside the ones this viewer was started with",
        className="d-flex align-items-center me-2",
    )


def banner() -> html.Div:
    """Below the navbar: the store of the chosen baseline and the banner (hidden when compare is off).
    The off button is always in the layout (hidden with the banner) so its callback always fires."""
    key = baselines.default_key()
    text, colour = banner_body(key)
    return html.Div(
        [
            dcc.Store(id=ids.COMPARE_BASELINE, data=key),
            dcc.Store(id=ids.COMPARE_URL, data={"names": baselines.candidates(), "default": key}),
            html.Div(id=ids.COMPARE_URL_SINK, hidden=True),
            dbc.Alert(
                [
                    html.Div(text, id=ids.COMPARE_BANNER_TEXT, className="me-3"),
                    dbc.Button("Turn compare off", id=ids.COMPARE_OFF, size="sm", color="primary", outline=True),
                ],
                id=ids.COMPARE_BANNER,
                color=colour,
                is_open=bool(key),
                fade=False,
                className="py-2 mx-3 d-flex align-items-center justify-content-between flex-wrap",
            ),
        ]
    )


def banner_body(key: str | None) -> tuple[Any, str]:
    """The banner's text and colour for baseline ``key``."""
    if not key:
        return None, "info"
    error = (
        baselines.load_error(key)
        if baselines.is_allowed(key)
        else "not an allowed baseline (the viewer opens only reports it was started with or beside them)"
    )
    if error:
        return error, "danger"
    c = baselines.comparison(key)
    parity = html.Div("Differences: " + "; ".join(c.parity), className="small") if c.parity else None
    return [
        html.Span("Comparing "),
        html.Strong(state.report().path.name),
        html.Span(" (active) against "),
        html.Strong(baselines.label(key)),
        html.Span(" (baseline). Deltas are active − baseline; red costs more, green less."),
        parity,
    ], "info"


@callback(
    Output(ids.COMPARE_BASELINE, "data"),
    Output(ids.COMPARE_PICKER, "value"),
    Input(ids.COMPARE_PICKER, "value"),
    Input(ids.COMPARE_OFF, "n_clicks"),
    Input(ids.SHELL_LOCATION, "search"),
)
def choose(value: str | None, _off: Any, search: str | None) -> tuple[Any, Any]:
    if ctx.triggered_id in (None, ids.SHELL_LOCATION):  # a page (re)loaded: the URL's choice, if any
        return from_url(search)
    return next_baseline(ctx.triggered_id == ids.COMPARE_OFF, value)


def from_url(search: str | None) -> tuple[Any, Any]:
    """(store, picker) from a URL's query: ``compare=off``, or ``compare=NAME`` for a baseline the
    server listed under that name; no ``compare`` (a link inside the app), or a name it did not
    list, changes nothing."""
    name = parse_qs((search or "").lstrip("?")).get("compare", [None])[0]
    if name == OFF:
        return None, OFF
    key = next((k for k, lab in baselines.candidates().items() if lab == name), None)
    if key is None:
        return dash.no_update, dash.no_update
    return key, key


# the URL follows the choice (and keeps it across links between pages, which drop the query)
clientside_callback(
    """function (key, _pathname, url) {
        const params = new URLSearchParams(window.location.search);
        if (key && url.names[key]) params.set("compare", url.names[key]);
        else if (!key && url.default) params.set("compare", "off");  // off, although started with --compare
        else params.delete("compare");
        const query = params.toString();
        const next = window.location.pathname + (query ? "?" + query : "") + window.location.hash;
        if (next !== window.location.pathname + window.location.search + window.location.hash) {
            window.history.replaceState(window.history.state, "", next);
        }
        return window.dash_clientside.no_update;
    }""",
    Output(ids.COMPARE_URL_SINK, "className"),
    Input(ids.COMPARE_BASELINE, "data"),
    Input(ids.SHELL_LOCATION, "pathname"),
    State(ids.COMPARE_URL, "data"),
)


def next_baseline(turned_off: bool, picked: str | None) -> tuple[Any, Any]:
    """(store, picker) after the off button or a pick: only keys the server listed are accepted,
    never a path sent by the browser."""
    if turned_off:
        return None, OFF
    if not picked or picked == OFF:
        return None, dash.no_update
    if not baselines.is_allowed(picked):
        return dash.no_update, OFF
    return picked, dash.no_update


@callback(
    Output(ids.COMPARE_BANNER_TEXT, "children"),
    Output(ids.COMPARE_BANNER, "color"),
    Output(ids.COMPARE_BANNER, "is_open"),
    Input(ids.COMPARE_BASELINE, "data"),
    prevent_initial_call=True,
)
def show_banner(key: str | None) -> tuple[Any, str, bool]:
    text, colour = banner_body(key)
    return text, colour, bool(key)
