"""Figure builders: pure functions from view tables to plotly figures (no Dash, no Report)."""
