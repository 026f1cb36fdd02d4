"""The C row adder (ops/index_kernels.py) behind the embedding backward: the sums of
np.add.at, the same on one thread and on several, bad indices left to the NumPy path."""
import numpy as np
import pytest

import ember
from ember.ops import index_kernels

pytestmark = pytest.mark.skipif(index_kernels.LOOP.get(np.float32) is None,
                                reason="no C compiler")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n,d,num", [(1, 1, 1), (1024, 128, 256), (3000, 97, 40)])
def test_add_rows_sums_like_add_at(dtype, n, d, num):
    rng = np.random.default_rng(n)
    idx = rng.integers(0, num, n)
    rows = rng.standard_normal((n, d)).astype(dtype)
    out = rng.standard_normal((num, d)).astype(dtype)
    expected = out.astype(np.float64)
    np.add.at(expected, idx, rows.astype(np.float64))
    assert index_kernels.add_rows(out, idx, rows)
    np.testing.assert_allclose(out, expected, rtol=1e-5 if dtype == np.float32 else 1e-12,
                               atol=1e-5 if dtype == np.float32 else 1e-12)


def test_threads_do_not_change_the_bits(monkeypatch):
    rng = np.random.default_rng(0)
    idx = rng.integers(0, 50, 4096)
    rows = rng.standard_normal((4096, 96)).astype(np.float32)
    one, many = np.zeros((50, 96), np.float32), np.zeros((50, 96), np.float32)
    monkeypatch.setattr(index_kernels, "MIN_PARALLEL", 1 << 40)
    assert index_kernels.add_rows(one, idx, rows)
    monkeypatch.setattr(index_kernels, "MIN_PARALLEL", 1)
    assert index_kernels.add_rows(many, idx, rows)
    np.testing.assert_array_equal(one, many)


@pytest.mark.parametrize("bad", [-1, 7])
def test_an_index_out_of_range_writes_nothing(bad):
    out = np.zeros((7, 3), np.float32)
    idx = np.array([0, bad, 2])
    assert not index_kernels.add_rows(out, idx, np.ones((3, 3), np.float32))
    np.testing.assert_array_equal(out, 0)


def test_embedding_gradient_against_counts():
    weight = ember.zeros(10, 4, requires_grad=True)
    idx = ember.tensor([[1, 3, 1], [9, 1, 0]])
    ember.nn.functional.embedding(idx, weight).sum().backward()
    counts = np.bincount(idx.numpy().reshape(-1), minlength=10).astype(np.float32)
    np.testing.assert_array_equal(weight.grad.numpy(), np.repeat(counts[:, None], 4, 1))
