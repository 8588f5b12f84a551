"""The IPU as hardware: targets, element types, and the cost model of every cycle and byte.

Owns the target constants (tiles, memory, clock, exchange and link rates: each with its source),
the cycle formulas of codelets, exchange and IPU-Links, and code/vertex-state sizes. A codelet's
cost lives in ``cost_model`` and ``codelets``; a link's in ``ipu_links``.
May import: nothing in profiler (it is data and formulas).
"""
