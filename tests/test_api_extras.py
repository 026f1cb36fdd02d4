"""Smaller PyTorch conveniences: the split/stack variants, unravel_index, rsub, flip's
varargs, type_as and the size attributes, copy_ from a number, comparing with None.
Known values (what torch 2.13 gives)."""
from __future__ import annotations

import numpy as np
import pytest

import ember


def test_split_and_stack_variants():
    a = ember.arange(12.0).reshape(3, 4)
    assert [tuple(p.shape) for p in ember.hsplit(a, 2)] == [(3, 2), (3, 2)]
    assert [tuple(p.shape) for p in a.vsplit([1])] == [(1, 4), (2, 4)]
    assert [tuple(p.shape) for p in ember.dsplit(a.reshape(1, 3, 4), [1, 3])] == \
        [(1, 3, 1), (1, 3, 2), (1, 3, 1)]
    assert [p.tolist() for p in ember.hsplit(ember.arange(4), 2)] == [[0, 1], [2, 3]]
    with pytest.raises(ember.ShapeError, match="hsplit: .*dimension 4 is not divisible by "
                                               "the split_size 3"):
        ember.hsplit(a, 3)
    with pytest.raises(ember.ShapeError, match="vsplit: requires a tensor with at least 2"):
        ember.vsplit(ember.arange(4), 2)
    assert ember.column_stack([ember.tensor([1, 2]), ember.tensor([[3], [4]]),
                               ember.tensor([5, 6])]).tolist() == [[1, 3, 5], [2, 4, 6]]
    assert ember.row_stack([ember.tensor([1, 2]), ember.tensor([3, 4])]).tolist() == \
        [[1, 2], [3, 4]]


def test_unravel_index_wraps_like_floor_division():
    rows, cols = ember.unravel_index(ember.tensor([4, 1, 8, 10, -1]), (3, 3))
    assert rows.tolist() == [1, 0, 2, 0, 2] and cols.tolist() == [1, 1, 2, 1, 2]
    assert rows.dtype is ember.int64


def test_rsub_flip_varargs_and_tensor_attributes():
    np.testing.assert_array_equal(ember.rsub(ember.tensor([1.0, 2.0]), 5, alpha=2).numpy(),
                                  [3.0, 1.0])
    a = ember.arange(6.0).reshape(2, 3)
    assert a.flip(0, 1).tolist() == a.flip((0, 1)).tolist() == [[5, 4, 3], [2, 1, 0]]
    assert a.type_as(ember.tensor([1])).dtype is ember.int64
    assert a.is_signed() and not ember.tensor([1], dtype=ember.uint8).is_signed()
    assert (a.nbytes, a.itemsize) == (24, 4)
    assert (a == None) is False and (a != None) is True  # noqa: E711
    b = ember.zeros(3)
    b.copy_(2)
    assert b.tolist() == [2.0, 2.0, 2.0]
