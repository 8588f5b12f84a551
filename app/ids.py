"""Every Dash component id of the app, in one place (page prefix, then what it is)."""

# shell
NAV = "shell-nav"
REPORT_TITLE = "shell-report-title"

# summary
SUMMARY_BODY = "summary-body"
SUMMARY_RUNS = "summary-runs"
SUMMARY_NOTES = "summary-notes"

# insights
INSIGHTS_BODY = "insights-body"
INSIGHTS_WHATIF_RUN = "insights-whatif-run"  # pattern id {"type": this, "index": proposal number}
INSIGHTS_WHATIF_STATUS = "insights-whatif-status"
INSIGHTS_WHATIF_POLL = "insights-whatif-poll"

# memory
MEMORY_GRAPH = "memory-graph"
MEMORY_BREAKDOWN = "memory-breakdown"
MEMORY_INCLUDE_GAPS = "memory-include-gaps"
MEMORY_ORDER = "memory-order"
MEMORY_TILES_INPUT = "memory-tiles-input"
MEMORY_SELECTION = "memory-selection"
MEMORY_SELECTION_TEXT = "memory-selection-text"
MEMORY_TABS = "memory-tabs"
MEMORY_TAB_BODY = "memory-tab-body"
MEMORY_VARIABLES_GRID = "memory-variables-grid"
MEMORY_VARIABLES_PICK = "memory-variables-pick"
MEMORY_VARIABLES_GRAPH = "memory-variables-graph"
MEMORY_TILE_MAP = "memory-tile-map"
MEMORY_TILE_MAP_LAYOUT = "memory-tile-map-layout"
MEMORY_TILE_MAP_CONTROLS = "memory-tile-map-controls"
MEMORY_TILE_ADDRESS_MAP = "memory-tile-address-map"
MEMORY_IPU = "memory-ipu"
MEMORY_IPUS = "memory-ipus"
SUMMARY_IPUS = "summary-ipus"

# liveness
LIVENESS_GRAPH = "liveness-graph"
LIVENESS_ALWAYS_LIVE = "liveness-always-live"
LIVENESS_PER_IPU = "liveness-per-ipu"
LIVENESS_IPU = "liveness-ipu"
LIVENESS_HEADLINE = "liveness-headline"
LIVENESS_RANGE = "liveness-range"
LIVENESS_SELECTION = "liveness-selection"
LIVENESS_SELECTION_TEXT = "liveness-selection-text"
LIVENESS_TABS = "liveness-tabs"
LIVENESS_TAB_BODY = "liveness-tab-body"

# program tree
PROGRAM_TREE_GRID = "program-tree-grid"
PROGRAM_TREE_EXPANDED = "program-tree-expanded"
PROGRAM_TREE_DETAILS = "program-tree-details"
PROGRAM_TREE_EXPAND_ALL = "program-tree-expand-all"
PROGRAM_TREE_COLLAPSE_ALL = "program-tree-collapse-all"
PROGRAM_TREE_SEARCH = "program-tree-search"
PROGRAM_TREE_SEARCH_NOTE = "program-tree-search-note"

# operations
OPERATIONS_LAYER = "operations-layer"
OPERATIONS_RUN = "operations-run"
OPERATIONS_COLUMNS = "operations-columns"
OPERATIONS_GRID = "operations-grid"
OPERATIONS_DETAILS = "operations-details"
OPERATIONS_GRAPH = "operations-graph"
OPERATIONS_GRAPH_NOTE = "operations-graph-note"
OPERATIONS_GRAPH_COLOUR = "operations-graph-colour"
OPERATIONS_GRAPH_LAYER = "operations-graph-layer"
OPERATIONS_GRAPH_OPEN = "operations-graph-open"
OPERATIONS_GRAPH_CLOSE = "operations-graph-close"
OPERATIONS_GRAPH_LEGEND = "operations-graph-legend"
OPERATIONS_GRAPH_HEAVIEST = "operations-graph-heaviest"
OPERATIONS_GRAPH_DETAILS = "operations-graph-details"
OPERATIONS_GRAPH_PICK = "operations-graph-pick"
OPERATIONS_GRAPH_FIT = "operations-graph-fit"

# execution trace
TRACE_RUN = "trace-run"
TRACE_VIEW = "trace-view"
TRACE_IPU = "trace-ipu"
TRACE_TIMELINE = "trace-timeline"
TRACE_RANGE = "trace-range"
TRACE_DETAIL = "trace-detail"
TRACE_TILES = "trace-tiles"
TRACE_TILES_PANEL = "trace-tiles-panel"
TRACE_TILES_BODY = "trace-tiles-body"
TRACE_SUMMARY = "trace-summary"
TRACE_RESET = "trace-reset"
TRACE_STEP_DETAILS = "trace-step-details"
TRACE_STEP_GRID = "trace-step-grid"
TRACE_STEP_TILES = "trace-step-tiles"
TRACE_IPUS = "trace-ipus"
TRACE_IPU_TABLE = "trace-ipu-table"

# compare mode: the shell's baseline picker and banner, then each page's compare tab
COMPARE_BASELINE = "compare-baseline"  # dcc.Store: the chosen baseline's key (None: compare off)
COMPARE_PICKER = "compare-picker"
COMPARE_BANNER = "compare-banner"
COMPARE_BANNER_TEXT = "compare-banner-text"
COMPARE_OFF = "compare-off"
COMPARE_URL = "compare-url"  # dcc.Store: baseline keys -> their names in the URL (?compare=NAME), read in the browser
COMPARE_URL_SINK = "compare-url-sink"  # the browser's URL writer's (unused) output
SHELL_LOCATION = "shell-location"
#: A hidden slot in the shell that the browser gives a graph once the page is quiet, so plotly.js loads then
#: (app/assets/plotly_preload.js names it too).
PLOTLY_PRELOAD = "plotly-preload"
# pattern-matching types, one of each per page with a comparison (key "page"): the tab bar
# ("This report" | "Compare with <baseline>"), the page's own view, the comparison pane, and the
# store of the baseline the pane shows (set when its tab is first opened)
COMPARE_TAB_BAR = "compare-tab-bar"
COMPARE_TABS = "compare-tabs"
COMPARE_OWN_VIEW = "compare-own-view"
COMPARE_PANE = "compare-pane"
COMPARE_SHOWN = "compare-shown"
COMPARE_SUMMARY = "compare-summary"
COMPARE_SUMMARY_PARITY = "compare-summary-parity"
COMPARE_SUMMARY_TABLE = "compare-summary-table"
COMPARE_MEMORY = "compare-memory"
COMPARE_MEMORY_COUNTS = "compare-memory-counts"
COMPARE_MEMORY_VARIABLES = "compare-memory-variables"
COMPARE_LIVENESS = "compare-liveness"
COMPARE_LIVENESS_PEAK = "compare-liveness-peak"
COMPARE_LIVENESS_GRAPH = "compare-liveness-graph"
COMPARE_LIVENESS_STEP = "compare-liveness-step"
COMPARE_LIVENESS_STEP_INPUT = "compare-liveness-step-input"
COMPARE_LIVENESS_STEP_TEXT = "compare-liveness-step-text"
COMPARE_LIVENESS_TABS = "compare-liveness-tabs"
COMPARE_LIVENESS_TAB_BODY = "compare-liveness-tab-body"
COMPARE_OPERATIONS = "compare-operations"
COMPARE_TRACE = "compare-trace"
COMPARE_OPERATIONS_COUNTS = "compare-operations-counts"
COMPARE_TRACE_RUNS = "compare-trace-runs"
COMPARE_TRACE_TEXT = "compare-trace-text"
COMPARE_TRACE_STEPS = "compare-trace-steps"
COMPARE_OPERATIONS_DETAILS = "compare-operations-details"
COMPARE_OPERATIONS_CARD = "compare-operations-card"
COMPARE_PROGRAM_TREE = "compare-program-tree"
COMPARE_PROGRAM_TREE_COUNTS = "compare-program-tree-counts"
COMPARE_INSIGHTS = "compare-insights"
COMPARE_INSIGHTS_HINTS = "compare-insights-hints"

# Sweep page (a viewer started on a sweep directory)
SWEEP_GRAPH = "sweep-graph"
SWEEP_COLOUR = "sweep-colour"
SWEEP_GRID = "sweep-grid"
SWEEP_ACTIONS = "sweep-actions"
SWEEP_LOCATION = "sweep-location"
