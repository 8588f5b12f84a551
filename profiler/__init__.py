"""The simulated IPU: targets, graph API, compiler, BSP engine, capture."""
