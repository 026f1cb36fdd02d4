"""Gradients of split/chunk/unbind pieces (accumulated into one buffer in a first-order
backward) against PyTorch, including partial use, other consumers and second order."""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def both(fn, shape=(4, 6), create_graph=False):
    data = np.random.default_rng(0).standard_normal(shape)
    e, t = ember.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
    eo, to = fn(ember, e), fn(torch, t)
    (eg,) = ember.autograd.grad(eo, e, create_graph=create_graph)
    (tg,) = torch.autograd.grad(to, t, create_graph=create_graph)
    np.testing.assert_allclose(eg.detach().numpy(), tg.detach().numpy(), rtol=1e-12, atol=1e-12)
    return eg, tg, e, t


@pytest.mark.parametrize("fn", [
    lambda lib, x: (x.split(2, dim=1)[0] * 3).sum(),                        # one piece used
    lambda lib, x: sum((p * (i + 1)).sum() for i, p in enumerate(x.split(2, dim=1))),
    lambda lib, x: (x.chunk(3, dim=0)[1] ** 2).sum() + x.sum(),             # another consumer
    lambda lib, x: sum((p ** 3).sum() for p in x.unbind(1)[::2]),
    lambda lib, x: (x.split([1, 5], dim=1)[1].exp() * x.split([1, 5], dim=1)[0]).sum(),
])
def test_split_pieces_gradients_match_torch(fn):
    both(fn)


def test_second_order_through_split_matches_torch():
    fn = lambda lib, x: (x.split(3, dim=1)[0] ** 3 * x.split(3, dim=1)[1]).sum()  # noqa: E731
    eg, tg, e, t = both(fn, create_graph=True)
    (egg,) = ember.autograd.grad(eg.sum(), e)
    (tgg,) = torch.autograd.grad(tg.sum(), t)
    np.testing.assert_allclose(egg.numpy(), tgg.numpy(), rtol=1e-12)


def test_leaf_hooks_and_retain_grad_see_the_summed_gradient():
    x = ember.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    seen = []
    x.register_hook(lambda g: seen.append(g.clone()))
    a, b = x.split([1, 2], dim=1)
    a.retain_grad()
    (a.sum() * 2 + (b * b).sum()).backward()
    expected = np.array([[2.0, 2.0, 4.0], [2.0, 8.0, 10.0]])
    np.testing.assert_array_equal(x.grad.numpy(), expected)
    np.testing.assert_array_equal(seen[0].numpy(), expected)
    np.testing.assert_array_equal(a.grad.numpy(), [[2.0], [2.0]])


def test_leaf_gradients_never_alias_each_other_or_the_callers_gradient():
    """.grad accumulates in place on later backwards, so each leaf must own its array:
    add's VJP hands the same gradient to both inputs, and the root gradient is the
    caller's tensor."""
    a = ember.ones(3, requires_grad=True)
    b = ember.ones(3, requires_grad=True)
    upstream = ember.tensor([1.0, 2.0, 3.0])
    (a + b).backward(upstream)
    (a * 2).sum().backward()
    assert a.grad.tolist() == [3.0, 4.0, 5.0]
    assert b.grad.tolist() == [1.0, 2.0, 3.0]
    assert upstream.tolist() == [1.0, 2.0, 3.0]
