"""What a compiled program is made of: the typed action of each step and how it reads values.

Owns the plans the compiler hands the engine (``plans``: vertex batches and compute-set plans),
the step actions (``actions``), value accessors built once per field (``access``) and the half
precision conversions they use (``convert``, ``half_maps``).
May import: ``poplar``, ``chip``, ``host``.
"""
