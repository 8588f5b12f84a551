"""Frontends that build simulator graphs from models made elsewhere (PopART's role): ONNX.

May import: ``engine``, ``capture``, ``multi_ipu``, ``ops``, ``compiler``, ``executable``,
``poplar``, ``chip``, ``host``.
"""
