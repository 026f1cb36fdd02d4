"""In-place random fills (``uniform_``, ``normal_``, ...) used by weight initialisation."""
import numpy as np
import pytest

import ember


def test_uniform_range_and_mean():
    ember.manual_seed(0)
    x = ember.empty(100_000).uniform_(-2.0, 3.0)
    arr = x.numpy()
    assert arr.min() >= -2.0 and arr.max() < 3.0
    assert abs(arr.mean() - 0.5) < 0.02


def test_normal_moments():
    ember.manual_seed(0)
    arr = ember.empty(200_000, dtype=ember.float64).normal_(1.5, 0.5).numpy()
    assert abs(arr.mean() - 1.5) < 0.01 and abs(arr.std() - 0.5) < 0.01


def test_fills_repeat_under_a_seed():
    ember.manual_seed(7)
    a = ember.empty(5).normal_()
    ember.manual_seed(7)
    b = ember.empty(5).normal_()
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    g = ember.Generator().manual_seed(3)
    c = ember.empty(4).uniform_(generator=g)
    g.manual_seed(3)
    np.testing.assert_array_equal(c.numpy(), ember.empty(4).uniform_(generator=g).numpy())


def test_random_and_bernoulli_values():
    ember.manual_seed(0)
    r = ember.empty(1000, dtype=ember.int64).random_(5, 7).numpy()
    assert set(np.unique(r)) == {5, 6}
    b = ember.empty(10_000).bernoulli_(0.25).numpy()
    assert set(np.unique(b)) <= {0.0, 1.0} and abs(b.mean() - 0.25) < 0.02


def test_fill_keeps_storage_and_bumps_version():
    x = ember.zeros(3)
    view = x[1:]
    x.uniform_()
    assert view.numpy()[0] == x.numpy()[1] and x._version[0] == 1


def test_fill_of_a_leaf_that_requires_grad_needs_no_grad():
    p = ember.zeros(3, requires_grad=True)
    with pytest.raises(ember.EmberError, match="leaf Variable"):
        p.normal_()
    with ember.no_grad():
        p.normal_()
    assert p.requires_grad and p.is_leaf and p.numpy(force=True).any()
