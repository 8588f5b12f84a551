"""Dash Pages, one module per view; each only lays out components and connects views to figures."""
