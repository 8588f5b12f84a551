"""Everything that compares two reports, labelled baseline and active. Its tables (the modules
here, pure: no Dash, no plotly) are read by the viewer's compare tabs (``pages/``), drawn by
``figures`` and printed by ``tilescope diff`` (``app.render.text``, ``app.render.html``).

Entry point: ``comparison.Comparison(baseline, active, run=None, layer=None)``; every table is a
cached property computed on first use:

- ``parity`` (sentences), ``metrics`` (name -> baseline/active/delta/ratio; summary's names)
- ``memory_totals``, ``memory_categories``, ``tile_memory`` (per tile, matched by id)
- ``steps`` (program steps along the alignment), ``liveness``, ``liveness_peaks``,
  ``executed_steps(run)`` (executed steps of one run along the alignment)
- ``variables``, ``source_target`` (PopVision's Source / Target / Diff table)
- ``operations`` (matched by debug-context path), ``runs`` (matched by index)
- ``top_changes(n)``, ``step_counts()``, ``peak_sentence()``

Modules: ``align`` (sequence alignment), ``keys`` (identity across reports), ``parity``,
``steps``, ``liveness``, ``memory``, ``variables`` (also ``step_variable_comparison`` for a
selected step pair), ``operations``, ``execution``, ``metrics``, ``thresholds`` (--fail-if).
Figures for these tables: ``figures``; the viewer's compare tabs: ``pages``.
"""
