"""Poplar's graph API: graphs, variables and their tile mappings, tensor views, programs, streams.

Owns what a user's program is made of, held as Poplar holds it: tile mappings and tensor views as
intervals and affine layouts (``layout``), vertex fields as regions (``regions``, ``tile_fields``).
May import: ``chip``, ``host``.
"""
