"""Compare mode of the viewer: the baseline picker and banner in the shell
(``shell``), which baselines may be opened and their cached comparisons (``baselines``), and one
compare section per page (``summary``, ``memory``, ``liveness``, ``operations``,
``execution_trace``). Each page adds its section with one ``section()`` call at the end of its
layout (its own view comes first; the title links down to the section); the
section fills itself when the shell's baseline store holds a baseline and is empty otherwise.
The tables come from ``app.comparison``, the figures from ``app.comparison.figures``."""
