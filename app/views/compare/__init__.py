"""Comparison of two reports, labelled baseline and active (pure: no Dash, no plotly)."""
