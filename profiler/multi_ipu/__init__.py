"""Several IPUs: sharding a model by memory or cycles, pipelining, replication and all-reduce.

May import: ``ops``, ``compiler``, ``executable``, ``poplar``, ``chip``, ``host``.
"""
