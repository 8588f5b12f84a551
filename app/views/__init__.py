"""Views: pure functions from a Report to tables/dicts. No Dash, no plotly here."""
