"""The built-in workload scripts (``python -m profiler.workloads.mlp``): real training and
inference programs written against the graph API and ops, each capturing a report.

May import: ``frontends``, ``engine``, ``capture``, ``multi_ipu``, ``ops``, ``compiler``,
``executable``, ``poplar``, ``chip``, ``host``.
"""
