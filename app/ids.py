"""Every Dash component id of the app, in one place (page prefix, then what it is)."""

# shell
NAV = "shell-nav"
REPORT_TITLE = "shell-report-title"

# summary
SUMMARY_BODY = "summary-body"

# insights
INSIGHTS_BODY = "insights-body"

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
MEMORY_TILE_ADDRESS_MAP = "memory-tile-address-map"

# liveness
LIVENESS_GRAPH = "liveness-graph"
LIVENESS_ALWAYS_LIVE = "liveness-always-live"
LIVENESS_PER_IPU = "liveness-per-ipu"
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

# operations
OPERATIONS_LAYER = "operations-layer"
OPERATIONS_RUN = "operations-run"
OPERATIONS_COLUMNS = "operations-columns"
OPERATIONS_GRID = "operations-grid"
OPERATIONS_DETAILS = "operations-details"
OPERATIONS_GRAPH = "operations-graph"
OPERATIONS_GRAPH_COLOUR = "operations-graph-colour"
OPERATIONS_GRAPH_LAYER = "operations-graph-layer"

# execution trace
TRACE_RUN = "trace-run"
TRACE_VIEW = "trace-view"
TRACE_IPU = "trace-ipu"
TRACE_TIMELINE = "trace-timeline"
TRACE_RANGE = "trace-range"
TRACE_DETAIL = "trace-detail"
TRACE_TILES = "trace-tiles"
TRACE_SUMMARY = "trace-summary"
TRACE_RESET = "trace-reset"
TRACE_STEP_DETAILS = "trace-step-details"
