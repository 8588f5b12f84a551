"""Equal index arrays of a graph held once.

A model's repeated layers build the same vertex fields and tile mappings again and again: a
field's runs are offsets within its variable (never a variable id or a tile) and a mapping's
interval starts are offsets too, so the 32 layers of a decoder make 32 equal copies of each
(~300 MiB a layer at a prefill of 2,048 tokens). ``shared`` hands back the copy already held,
found by a digest of the array's bytes, so the host keeps one. Cost follows the graph either way:
the first layer still holds its arrays; the others hold references.

A shared array is made read-only: it may be read by many fields, so none may write it (a write
would raise rather than change another layer's field). The table keeps no array alive; an array
goes when the last field holding it goes.
"""

from __future__ import annotations

import weakref

import numpy as np
import xxhash

# Arrays smaller than this are not shared: a table entry (~200 bytes) would cost more than it saves
MIN_BYTES = 512

_held: weakref.WeakValueDictionary[tuple[str, tuple[int, ...], bytes], np.ndarray] = weakref.WeakValueDictionary()


def shared(a: np.ndarray) -> np.ndarray:
    """``a``, or an array equal to it (same type, shape and bytes) held already; read-only either
    way. Arrays that view another's memory, or are small or not contiguous, come back as given:
    their memory could change through the array they view, or sharing them saves nothing."""
    if a.nbytes < MIN_BYTES or not a.flags.owndata or not a.flags.c_contiguous:
        return a
    # XXH3-128 over the bytes, with type and shape beside: two different arrays meeting one key is
    # a 2^-128 chance, as for the compiler's plan keys (profiler.compiler.plan_reuse)
    key = (a.dtype.str, a.shape, xxhash.xxh3_128_digest(a.data))
    held = _held.get(key)
    if held is not None:
        return held
    a.flags.writeable = False
    _held[key] = a
    return a
