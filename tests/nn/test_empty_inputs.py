"""Empty inputs PyTorch accepts: an empty batch through batch norm, attention over no
keys, a Linear layer with no input features. Known values (what torch 2.13 gives)."""
from __future__ import annotations

import numpy as np

import ember
import ember.nn.functional as F


def test_batch_norm_of_an_empty_batch_is_empty_and_leaves_the_running_stats():
    x = ember.randn(0, 3, 2, 2, requires_grad=True)
    w, b = ember.ones(3, requires_grad=True), ember.zeros(3, requires_grad=True)
    mean, var = ember.zeros(3), ember.ones(3)
    y = F.batch_norm(x, mean, var, w, b, training=True)
    y.sum().backward()
    assert y.shape == (0, 3, 2, 2) and x.grad.shape == (0, 3, 2, 2)
    np.testing.assert_array_equal(w.grad.numpy(), [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(b.grad.numpy(), [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(mean.numpy(), [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(var.numpy(), [1.0, 1.0, 1.0])


def test_attention_over_no_keys_is_zero():
    q = ember.randn(1, 2, 3, 4, requires_grad=True)
    out = F.scaled_dot_product_attention(q, ember.randn(1, 2, 0, 4), ember.randn(1, 2, 0, 5))
    out.sum().backward()
    assert out.shape == (1, 2, 3, 5)
    np.testing.assert_array_equal(out.detach().numpy(), np.zeros((1, 2, 3, 5), np.float32))
    np.testing.assert_array_equal(q.grad.numpy(), np.zeros((1, 2, 3, 4), np.float32))


def test_linear_with_no_input_features_is_its_bias():
    x = ember.randn(2, 3, 0, requires_grad=True)
    w, b = ember.randn(4, 0, requires_grad=True), ember.randn(4, requires_grad=True)
    y = F.linear(x, w, b)
    y.sum().backward()
    np.testing.assert_array_equal(y.detach().numpy(), np.broadcast_to(b.detach().numpy(),
                                                                        (2, 3, 4)))
    np.testing.assert_array_equal(b.grad.numpy(), [6.0] * 4)
    assert w.grad.shape == (4, 0) and x.grad.shape == (2, 3, 0)
