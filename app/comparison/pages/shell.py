"""Compare mode in the shell: the baseline picker in the navbar, the "Comparing ACTIVE against
BASELINE" banner with its off switch, and the store of the chosen baseline (each page's compare tab follows it)."""

from __future__ import annotations

from typing import Any

import dash
import dash_bootstrap_components as dbc
from dash import Input, Output, callback, ctx, dcc, html

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
    prevent_initial_call=True,
)
def choose(value: str | None, _off: Any) -> tuple[Any, Any]:
    return next_baseline(ctx.triggered_id == ids.COMPARE_OFF, value)


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
