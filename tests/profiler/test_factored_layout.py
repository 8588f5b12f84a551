"""Factored views (profiler.poplar.layout.Factored): dims made of several factor dims, as a grouped store
``[C/16][B][H][W][16]`` is seen as ``[B, C, H, W]``. Each operation is checked against numpy on the
index array of the same view, written separately: the view must select exactly the elements, in
exactly the order, that numpy's fancy indexing of that array selects."""

import numpy as np
import pytest

from profiler.poplar.layout import Affine, Factored, factored, group_dims


def _store(shape: tuple[int, ...]) -> Affine:
    return Affine.contiguous(shape)


def _grouped_nchw(b: int = 2, c: int = 32, h: int = 3, w: int = 4, grp: int = 8) -> tuple[Factored, np.ndarray]:
    """[B, C, H, W] over a store [C/grp][B][H][W][grp]: the view and its index array by hand."""
    store = _store((c // grp, b, h, w, grp))
    view = group_dims(store.transpose((1, 0, 4, 2, 3)), (1, 2, 1, 1))
    ref = np.empty((b, c, h, w), dtype=np.int64)
    for bi in range(b):
        for ci in range(c):
            for hi in range(h):
                for wi in range(w):
                    ref[bi, ci, hi, wi] = (((ci // grp) * b + bi) * h + hi) * w * grp + wi * grp + ci % grp
    return view, ref


def test_a_grouped_store_viewed_as_nchw_holds_each_element_where_written_by_hand() -> None:
    view, ref = _grouped_nchw()
    assert isinstance(view, Factored)
    assert view.shape == ref.shape
    np.testing.assert_array_equal(view.indices(), ref)


KEYS = [
    (slice(None), slice(8, 24)),  # whole groups
    (slice(None), slice(9, 14)),  # inside one group
    (slice(None), slice(3, 30, 8)),  # the same lane of every group
    (1, 5),
    (slice(None), slice(4, 12)),  # across a group boundary: not affine
    (None, Ellipsis, 2),
    (slice(None), slice(None, None, 2)),  # every other lane: across groups
    (slice(1, 2), slice(31, 32), slice(None, None, -1)),
    (slice(None), slice(5, 5)),
]


@pytest.mark.parametrize("key", range(len(KEYS)))
def test_indexing_a_factored_view_selects_what_numpy_selects(key: int) -> None:
    view, ref = _grouped_nchw()
    got = view.getitem(KEYS[key])
    want = ref[KEYS[key]]
    if got is None:  # only where no factor set describes it: those elements are not one strided set
        assert key in (4, 6)
        return
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.indices(), want)


RESHAPES = [
    (2, 32, 12),  # H, W merged
    (64, 12),  # B, C merged with the channel factors kept
    (-1,),
    (2, 4, 8, 3, 4),  # C cut back into its factors
    (2, 2, 16, 12),  # C cut at a coarser boundary
    (2, 32, 3, 2, 2),
    (2, 16, 2, 12),  # a factor cut across the group boundary that does divide
    (1, 2, 32, 1, 12),
]


@pytest.mark.parametrize("shape", range(len(RESHAPES)))
def test_reshaping_a_factored_view_keeps_numpy_order(shape: int) -> None:
    view, ref = _grouped_nchw()
    got = view.reshape(RESHAPES[shape])
    want = ref.reshape(RESHAPES[shape])
    assert got is not None
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.indices(), want)


def test_a_reshape_that_needs_part_of_a_factor_is_refused() -> None:
    view, _ = _grouped_nchw(c=24, grp=8)  # C = 3 x 8: no cut into 2 x 12 keeps whole factors
    assert view.reshape((2, 2, 12, 12)) is None


def test_transpose_expand_and_broadcast_follow_numpy() -> None:
    view, ref = _grouped_nchw()
    for got, want in [
        (view.transpose((0, 2, 3, 1)), ref.transpose(0, 2, 3, 1)),
        (view.transpose(None), ref.transpose()),
        (view.expand(1), np.expand_dims(ref, 1)),
        (view.getitem((slice(0, 1),)).broadcast_to((3, 32, 3, 4)), np.broadcast_to(ref[0:1], (3, 32, 3, 4))),
    ]:
        assert got.shape == want.shape
        np.testing.assert_array_equal(got.indices(), want)


def test_views_whose_factors_nest_become_plain_affine_again() -> None:
    view, ref = _grouped_nchw()
    one_group = view.getitem((slice(None), slice(8, 16)))  # one group of 8 lanes: strides nest again
    assert isinstance(one_group, Affine)
    np.testing.assert_array_equal(one_group.indices(), ref[:, 8:16])
    back = factored(0, [[(4, 8), (8, 1)]])  # a dim of two factors that nest: one factor of 32
    assert back == Affine(0, (32,), (1,))


def test_random_chains_of_views_match_numpy() -> None:
    """Random sequences of transposes, reshapes and slices on a random grouped store, each step
    against numpy on the index array (a step numpy would copy for may fall back: then it stops)."""
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(300):
        view, ref = _grouped_nchw(b=int(rng.integers(1, 4)), c=16, h=int(rng.integers(1, 4)), w=2,
                                  grp=int(rng.choice([2, 4, 8])))  # fmt: skip
        lay: Affine | Factored | None = view
        for _ in range(4):
            op = int(rng.integers(3))
            if op == 0:
                axes = tuple(int(a) for a in rng.permutation(ref.ndim))
                lay, ref = lay.transpose(axes), ref.transpose(axes)
            elif op == 1:
                sizes = _random_split(rng, ref.size)
                lay, ref = lay.reshape(sizes), ref.reshape(sizes)
            else:
                d = int(rng.integers(ref.ndim))
                n = ref.shape[d]
                a = int(rng.integers(n))
                key = (slice(None),) * d + (slice(a, int(rng.integers(a, n)) + 1, int(rng.choice([1, 1, 2]))),)
                lay, ref = lay.getitem(key), ref[key]
            if lay is None:
                break
            assert lay.shape == ref.shape
            np.testing.assert_array_equal(lay.indices(), ref)
            checked += 1
    assert checked > 600


def _random_split(rng: np.random.Generator, size: int) -> tuple[int, ...]:
    out, left = [], size
    while left > 1 and len(out) < 4:
        divs = [d for d in range(2, left + 1) if left % d == 0]
        d = int(rng.choice(divs))
        out.append(d)
        left //= d
    if left > 1:
        out.append(left)
    return tuple(out) or (1,)
