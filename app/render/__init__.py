"""Renderers of views outside the browser: ``text`` (what ``tilescope summary`` and ``tilescope
diff`` print, and the diff's JSON document) and ``html`` (the self-contained pages of ``export
--html`` and ``diff --html``). Figures come from ``app.figures`` and ``app.comparison.figures``,
the numbers from the views, as in the viewer."""
