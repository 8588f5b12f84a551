"""Compare mode in the viewer: the baseline picker and banner in the shell (``shell``), which
baselines may be opened and their cached comparisons (``baselines``), each page's compare tab and
the pieces the comparisons share (``components``), and one comparison per page (``summary``,
``insights``, ``memory``, ``liveness``, ``program_tree``, ``operations``, ``execution_trace``;
the Operations Graph colours its own graph by Δ cycles instead). A page wraps its own view with
``components.compare_tabs(page, own_view, section())``; the section fills itself from the page's
shown-baseline store, which is set when its "Compare with <baseline>" tab first opens."""
