"""Poplar's compiler: lower programs to steps, plan compute sets and exchanges, place memory.

Owns lowering (``compile``), exchange planning and exchange code size (``exchange``, with receive
buffers in ``receive_buffers``), memory placement on tiles (``memory``, ``first_fit``) and
liveness per program step (``liveness``).
May import: ``executable``, ``poplar``, ``chip``, ``host``.
"""
