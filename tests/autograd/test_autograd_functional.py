"""ember.autograd.functional (vjp, jvp, jacobian, hessian, vhp, hvp) against
torch.autograd.functional: values, return structures, requires_grad of the results,
create_graph, strict mode and the error messages."""
import numpy as np
import pytest

import ember
from ember import EmberError
from .oracle import check, needs_torch, torch

pytestmark = needs_torch

RNG = np.random.default_rng(1)
X, Y = RNG.uniform(-1, 1, 3), RNG.uniform(-1, 1, 3)
M = RNG.uniform(-1, 1, (2, 3))


def AF(m):
    return m.autograd.functional


def t(m, data, requires_grad=False):
    return m.tensor(data, dtype=m.float64, requires_grad=requires_grad)


def one_in_one_out(a):
    return a.exp() * a.sin()


def two_in_one_out(a, b):
    return (a * b).tanh() + a ** 2


def one_in_two_out(a):
    return a.cos(), (a ** 3).sum()


def two_in_two_out(a, b):
    return a * b.exp(), (a.sin() * b).sum()


def scalar(a, b):
    return (a.sin() * b ** 2).sum() + (a ** 3).prod()


@pytest.mark.parametrize("create_graph", [False, True])
def test_vjp(create_graph):
    def run(m):
        x, y = t(m, X, True), t(m, Y, True)
        af = AF(m)
        kw = {"create_graph": create_graph}
        return (af.vjp(one_in_one_out, x, t(m, Y), **kw),
                af.vjp(two_in_one_out, (x, y), t(m, X), **kw),
                af.vjp(one_in_two_out, x, (t(m, Y), t(m, 2.0)), **kw),
                af.vjp(two_in_two_out, (x, y), (t(m, Y), t(m, -1.0)), **kw),
                af.vjp(lambda a: (a ** 2).sum(), x, **kw),
                af.vjp(lambda a, b: a * 2, (x, y), t(m, Y), **kw))  # b unused: zeros
    check(run)


@pytest.mark.parametrize("create_graph", [False, True])
def test_jvp(create_graph):
    def run(m):
        x, y = t(m, X, True), t(m, Y, True)
        af = AF(m)
        kw = {"create_graph": create_graph}
        return (af.jvp(one_in_one_out, x, t(m, Y), **kw),
                af.jvp(two_in_one_out, (x, y), (t(m, Y), t(m, X)), **kw),
                af.jvp(one_in_two_out, x, t(m, Y), **kw),
                af.jvp(two_in_two_out, (x, y), (t(m, X), t(m, Y)), **kw),
                af.jvp(lambda a: a.sin() * 3, t(m, [0.5]), **kw),
                af.jvp(lambda a, b: a * 2, (x, y), (t(m, Y), t(m, X)), **kw))
    check(run)


def test_create_graph_results_can_be_differentiated_again():
    def run(m):
        x = t(m, X, True)
        _, g = AF(m).vjp(lambda a: (a ** 3).sum(), x, create_graph=True)
        jac = AF(m).jacobian(lambda a: a ** 3, x, create_graph=True)
        return m.autograd.grad((g * g).sum() + jac.sum(), x)
    check(run)


@pytest.mark.parametrize("fn, make_inputs", [
    (one_in_one_out, lambda m: t(m, X)),
    (two_in_one_out, lambda m: (t(m, X), t(m, Y))),
    (one_in_two_out, lambda m: t(m, X)),
    (two_in_two_out, lambda m: (t(m, X), t(m, Y))),
    (lambda w: (w @ w.T).tanh(), lambda m: t(m, M)),
    (lambda a: a.sum(), lambda m: t(m, np.zeros((0, 2)))),
    (lambda a: a * 2, lambda m: t(m, 1.5)),
])
@pytest.mark.parametrize("mode", [{}, {"create_graph": True}, {"vectorize": True},
                                  {"vectorize": True, "strategy": "forward-mode"}])
def test_jacobian_structures(fn, make_inputs, mode):
    def run(m):
        inputs = make_inputs(m)
        if mode.get("strategy") and m is torch and not isinstance(inputs, tuple) \
                and inputs.numel() == 0:
            pytest.skip("PyTorch's forward-mode jacobian has no vmap rule for empty inputs")
        return AF(m).jacobian(fn, inputs, **mode)
    check(run)


def test_jacobian_of_input_requiring_grad_and_independent_input():
    def run(m):
        x, y = t(m, X, True), t(m, Y, True)
        af = AF(m)
        return (af.jacobian(lambda a, b: a * 2, (x, y)),
                af.jacobian(lambda a, b: a * 2, (x, y), create_graph=True),
                af.jacobian(lambda a: a * x, x))  # the closure use of x is a constant
    check(run)


def _hessians(m, mode):
    af = AF(m)
    return (af.hessian(lambda a: (a.sin() * a).sum() ** 2, t(m, X), **mode),
            af.hessian(scalar, (t(m, X), t(m, Y)), **mode),
            af.hessian(lambda w: (w.exp() * w).sum().reshape(1), t(m, M), **mode),
            af.hessian(lambda a, b: (a * 3).sum(), (t(m, X), t(m, Y)), **mode))


@pytest.mark.parametrize("mode", [{}, {"create_graph": True}])
def test_hessian(mode):
    check(lambda m: _hessians(m, mode))


def _detached(tree):
    return tuple(map(_detached, tree)) if isinstance(tree, (tuple, list)) else tree.detach()


def test_hessian_outer_forward_mode():
    def run(m):  # (PyTorch's results keep a graph here: it makes the inputs require grad)
        mode = {"vectorize": True, "outer_jacobian_strategy": "forward-mode"}
        return _detached(_hessians(m, mode))
    check(run)


@pytest.mark.parametrize("name", ["vhp", "hvp"])
@pytest.mark.parametrize("create_graph", [False, True])
def test_vhp_and_hvp(name, create_graph):
    def run(m):
        x, y = t(m, X, True), t(m, Y, True)
        fn = getattr(AF(m), name)
        kw = {"create_graph": create_graph}
        return (fn(lambda a: (a.sin() * a ** 2).sum(), x, t(m, Y), **kw),
                fn(scalar, (x, y), (t(m, Y), t(m, X)), **kw),
                fn(lambda a: (a ** 4).reshape(1), t(m, [0.5], True), **kw),
                fn(lambda a, b: (a ** 3).sum(), (x, y), (t(m, Y), t(m, X)), **kw))
    check(run)


def _same_error(fn):
    with pytest.raises(Exception) as expected:
        fn(torch)
    with pytest.raises((EmberError, NotImplementedError)) as got:
        fn(ember)
    assert isinstance(got.value, type(expected.value)), (got.value, expected.value)
    assert str(got.value).replace("ember.", "torch.") == str(expected.value)


@pytest.mark.parametrize("case", [
    lambda m: m.autograd.functional.vjp(lambda a: a, [m.ones(2)]),
    lambda m: m.autograd.functional.vjp(lambda a, b: a, (m.ones(2), 3.0)),
    lambda m: m.autograd.functional.vjp(lambda a: 3.0, m.ones(2)),
    lambda m: m.autograd.functional.vjp(lambda a: a * 2, m.ones(2)),
    lambda m: m.autograd.functional.vjp(lambda a: a * 2, m.ones(2), m.ones(3)),
    lambda m: m.autograd.functional.vjp(lambda a: (a, a), m.ones(2), (m.ones(2),)),
    lambda m: m.autograd.functional.vjp(lambda a: (a, a), m.ones(2), (m.ones(2), m.ones(1))),
    lambda m: m.autograd.functional.vjp(lambda a: a * 2, m.ones(2), (m.ones(2), m.ones(2))),
    lambda m: m.autograd.functional.jvp(lambda a: a * 2, m.ones(2)),
    lambda m: m.autograd.functional.vjp(lambda a: m.ones(2), m.ones(2), m.ones(2),
                                        strict=True),
    lambda m: m.autograd.functional.vjp(lambda a, b: a * 2, (m.ones(2), m.ones(2)),
                                        m.ones(2), strict=True),
    lambda m: m.autograd.functional.vjp(lambda a: a * 2, m.ones(2), m.ones(2), strict=True,
                                        create_graph=True),
    lambda m: m.autograd.functional.jvp(lambda a: m.ones(2) * 0 + a.sum().detach(),
                                        m.ones(2), m.ones(2), strict=True),
    lambda m: m.autograd.functional.jacobian(lambda a, b: a * 2, (m.ones(2), m.ones(2)),
                                             strict=True),
    lambda m: m.autograd.functional.jacobian(lambda a: a * 2, m.ones(2), strict=True,
                                             create_graph=True),
    lambda m: m.autograd.functional.jacobian(lambda a: a * 2, m.ones(2), strict=True,
                                             vectorize=True),
    lambda m: m.autograd.functional.jacobian(lambda a: a, m.ones(2), vectorize=True,
                                             strategy="forward-mode", create_graph=True),
    lambda m: m.autograd.functional.hessian(lambda a: a * 2, m.ones(2)),
    lambda m: m.autograd.functional.hessian(lambda a: (a, a), m.ones(1)),
    lambda m: m.autograd.functional.hessian(lambda a: (a * 2).sum(), m.ones(2), strict=True),
    lambda m: m.autograd.functional.vhp(lambda a: a * 2, m.ones(2), m.ones(2)),
    lambda m: m.autograd.functional.vhp(lambda a: (a * 2).sum(), m.ones(2)),
    lambda m: m.autograd.functional.hvp(lambda a: (a * 2).sum(), m.ones(2), m.ones(2),
                                        strict=True),
    lambda m: m.autograd.functional.hvp(lambda a: (a * a).sum(), m.ones(2), m.ones(2),
                                        strict=True, create_graph=True),
    lambda m: m.autograd.functional.vhp(lambda a: (a * a).sum(), m.ones(2), m.ones(2),
                                        strict=True, create_graph=True),
])
def test_errors_match_torch(case):
    _same_error(case)


def test_forward_mode_needs_vectorize_and_bad_strategy():
    with pytest.raises(NotImplementedError, match="only implemented for `vectorize=True`"):
        ember.autograd.functional.jacobian(lambda a: a, ember.ones(2), strategy="forward-mode")
    with pytest.raises(ValueError, match='either "forward-mode" or "reverse-mode"'):
        ember.autograd.functional.jacobian(lambda a: a, ember.ones(2), strategy="sideways")


def test_no_grad_outside_is_respected():
    x = ember.tensor(X, requires_grad=True)
    with ember.no_grad():
        out, g = ember.autograd.functional.vjp(lambda a: (a ** 2).sum(), x)
    np.testing.assert_allclose(g.numpy(), 2 * X, rtol=1e-6)
    assert not g.requires_grad and not out.requires_grad


def test_under_jit_matches_eager():
    af = ember.autograd.functional
    jac = ember.jit(lambda a: af.jacobian(lambda b: b ** 3, a))
    hess = ember.jit(lambda a: af.hessian(lambda b: (b.sin() * b).sum(), a))
    for scale in (1.0, 2.0):
        x = ember.tensor(X * scale)
        np.testing.assert_allclose(jac(x).numpy(), af.jacobian(lambda b: b ** 3, x).numpy(),
                                   rtol=1e-6)
        np.testing.assert_allclose(hess(x).numpy(),
                                   af.hessian(lambda b: (b.sin() * b).sum(), x).numpy(),
                                   rtol=1e-5, atol=1e-6)
