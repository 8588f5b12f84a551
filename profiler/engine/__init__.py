"""The engine: runs a compiled graph (values in numpy, the BSP clock per tile) and captures it.

May import every profiler package below it: ``capture``, ``multi_ipu``, ``compiler``,
``executable``, ``poplar``, ``chip``, ``host``.
"""
