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


# Keyword forms PyTorch accepts ------------------------------------------------------------
_KEYWORD_CALLS = {
    "sum axis": lambda L, x: x.sum(axis=0),
    "top-level sum axis keepdims": lambda L, x: L.sum(x, axis=1, keepdims=True),
    "mean axis tuple": lambda L, x: x.mean(axis=(0, 2)),
    "max axis": lambda L, x: x.max(axis=2).values,
    "cat axis": lambda L, x: L.cat([x, x], axis=1),
    "softmax axis": lambda L, x: L.softmax(x, axis=-1),
    "permute dims=": lambda L, x: x.permute(dims=(2, 0, 1)),
    "top-level permute dims=": lambda L, x: L.permute(x, dims=(2, 0, 1)),
    "reshape shape=": lambda L, x: x.reshape(shape=(6, 4)),
    "view size=": lambda L, x: x.view(size=(4, 6)),
    "repeat repeats=": lambda L, x: x.repeat(repeats=(1, 2, 1)),
    "expand size=": lambda L, x: x[:1].expand(size=(3, 3, 4)),
    "broadcast_to size=": lambda L, x: L.broadcast_to(x[0], size=(2, 3, 4)),
    "tile dims=": lambda L, x: L.tile(x, dims=(2,)),
    "zeros size=": lambda L, x: L.zeros(size=(2, 3)),
    "ones size=": lambda L, x: L.ones(size=[2]),
    "new_zeros size=": lambda L, x: x.new_zeros(size=(2,)),
    "einsum sublist": lambda L, x: L.einsum(x, [0, 1, 2], x, [0, 1, 2], [0]),
    "einsum sublist ellipsis": lambda L, x: L.einsum(x, [Ellipsis, 1], x[0], [2, 1]),
}


@pytest.mark.parametrize("name", list(_KEYWORD_CALLS))
def test_keyword_forms_as_pytorch(name):
    torch = pytest.importorskip("torch")
    values = np.arange(24.0).reshape(2, 3, 4)
    want = _KEYWORD_CALLS[name](torch, torch.tensor(values)).numpy()
    got = _KEYWORD_CALLS[name](ember, ember.tensor(values)).numpy()
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_keyword_alias_and_its_name_together_is_an_error():
    with pytest.raises(ember.EmberTypeError, match="both 'dim' and its alias 'axis'"):
        ember.ones(2, 3).sum(dim=0, axis=1)
    with pytest.raises(ember.EmberTypeError, match="unexpected keyword argument 'shape'"):
        ember.ones(2, 3).permute(shape=(1, 0))
    with pytest.raises(ember.EmberTypeError, match="size both"):
        ember.zeros(2, size=(2,))


def test_channels_last_lays_out_nhwc_with_the_same_values():
    torch = pytest.importorskip("torch")
    values = np.random.default_rng(0).standard_normal((2, 3, 4, 5))
    x = ember.tensor(values)
    y = x.contiguous(memory_format=ember.channels_last)
    ty = torch.tensor(values).contiguous(memory_format=torch.channels_last)
    assert y.stride() == ty.stride() == (60, 1, 15, 3)
    assert y.is_contiguous(memory_format=ember.channels_last) and not y.is_contiguous()
    assert x.to(memory_format=ember.channels_last).stride() == (60, 1, 15, 3)
    assert x.clone(memory_format=ember.channels_last).stride() == (60, 1, 15, 3)
    np.testing.assert_array_equal(y.numpy(), values)
    conv = ember.nn.Conv2d(3, 4, 3, dtype=ember.float64)
    np.testing.assert_allclose(conv(y).detach().numpy(), conv(x).detach().numpy(), rtol=1e-12)
    with pytest.raises(ember.EmberError, match="channels_last needs a 4-D tensor"):
        ember.ones(2, 3).contiguous(memory_format=ember.channels_last)
