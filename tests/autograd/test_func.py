"""ember.func (grad, grad_and_value, vjp, jvp, jacrev, jacfwd, hessian) against
torch.func on the same functions: values, structure, and requires_grad of results."""
import numpy as np
import pytest

import ember
from ember import EmberError
from .oracle import check, needs_torch, torch

pytestmark = [needs_torch,
              pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated")]

RNG = np.random.default_rng(0)
X, Y = RNG.uniform(-1, 1, 3), RNG.uniform(-1, 1, 3)
M = RNG.uniform(-1, 1, (2, 3))


def F(m):
    return ember.func if m is ember else torch.func


def t(m, data, requires_grad=False):
    return m.tensor(data, dtype=m.float64, requires_grad=requires_grad)


def scalar_fn(x, y):
    return (x.sin() * y).sum() + (x ** 3 * y.exp()).sum()


def test_grad_argnums_and_has_aux():
    def run(m):
        x, y = t(m, X), t(m, Y)
        f = F(m)
        return (f.grad(scalar_fn)(x, y), f.grad(scalar_fn, argnums=1)(x, y),
                f.grad(scalar_fn, argnums=(0, 1))(x, y),
                f.grad(lambda a: ((a ** 2).sum(), a * 3), has_aux=True)(x))
    check(run)


def test_grad_and_value():
    def run(m):
        x, y = t(m, X), t(m, Y)
        f = F(m)
        return (f.grad_and_value(scalar_fn)(x, y),
                f.grad_and_value(lambda a: ((a ** 2).sum(), {"k": a.cos()}), has_aux=True)(x))
    check(run)


def test_grad_of_grad_and_third_order():
    def run(m):
        x = t(m, 0.7)
        f = F(m)
        g = lambda a: a.sin() * a ** 4  # noqa: E731
        return f.grad(g)(x), f.grad(f.grad(g))(x), f.grad(f.grad(f.grad(g)))(x)
    check(run)


def test_grad_of_dict_argument():
    def run(m):
        params = {"w": t(m, M), "b": t(m, Y[:2])}
        x = t(m, X)
        loss = lambda p, x: ((p["w"] @ x + p["b"]).tanh() ** 2).sum()  # noqa: E731
        return F(m).grad(loss)(params, x)
    check(run)


def test_grad_unused_argument_is_zero():
    def run(m):
        x, y = t(m, X), t(m, Y)
        return F(m).grad(lambda a, b: (a * 2).sum(), argnums=1)(x, y)
    check(run)


def test_grad_requires_scalar_output():
    with pytest.raises(EmberError, match="Expected f\\(\\*args\\) to return a scalar"):
        ember.func.grad(lambda a: a * 2)(ember.ones(2))


def test_vjp():
    def run(m):
        x, y = t(m, X), t(m, Y)
        out, fn = F(m).vjp(lambda a, b: (a.exp() * b, a.sum()), x, y)
        ct = (t(m, [1.0, -2.0, 0.5]), t(m, 3.0))
        return out, fn(ct), fn(ct)  # vjp_fn can be called again
    check(run)


def test_vjp_has_aux():
    def run(m):
        x = t(m, X)
        out, fn, aux = F(m).vjp(lambda a: (a.sin(), a * 2), x, has_aux=True)
        return out, fn(t(m, Y)), aux
    check(run)


def test_jvp():
    def run(m):
        x, y = t(m, X), t(m, Y)
        f = F(m)
        return (f.jvp(lambda a, b: (a.tanh() * b, (a * b).sum()), (x, y), (y, x)),
                f.jvp(lambda a: a.sin(), (x,), (t(m, [1.0, 0.0, 2.0]),)),
                f.jvp(lambda a: a * 0 + 1, (x,), (y,)))
    check(run)


def test_jacrev_and_jacfwd_structures():
    def run(m):
        x, y = t(m, X), t(m, Y)
        f = F(m)
        two_out = lambda a, b: (a * b, (a ** 2).sum())  # noqa: E731
        return [jac(fn, **kw)(x, y) for jac in (f.jacrev, f.jacfwd)
                for fn, kw in ((lambda a, b: a.exp() * b, {}),
                               (lambda a, b: a.exp() * b, {"argnums": (0, 1)}),
                               (two_out, {"argnums": (0, 1)}),
                               (two_out, {}))]
    check(run)


def test_jacobian_of_matrix_function():
    def run(m):
        w = t(m, M)
        f = F(m)
        g = lambda w: (w @ w.T).tanh()  # noqa: E731
        return f.jacrev(g)(w), f.jacfwd(g)(w)
    check(run)


def test_jac_has_aux():
    def run(m):
        x = t(m, X)
        f = F(m)
        g = lambda a: (a.sin(), a.sum())  # noqa: E731
        return f.jacrev(g, has_aux=True)(x), f.jacfwd(g, has_aux=True)(x)
    check(run)


def test_hessian():
    def run(m):
        x, y = t(m, X), t(m, Y)
        f = F(m)
        return (f.hessian(lambda a: (a.sin() * a).sum() ** 2)(x),
                f.hessian(lambda a, b: (a * b * b).sum(), argnums=1)(x, y),
                f.hessian(scalar_fn, argnums=(0, 1))(x, y))
    check(run)


def test_transforms_compose():
    def run(m):
        x = t(m, X)
        f = F(m)
        g = lambda a: a.sin().prod()  # noqa: E731
        return (f.jacrev(f.jacrev(g))(x), f.jacfwd(f.jacfwd(g))(x),
                f.jacrev(f.grad(g))(x), f.grad(lambda a: f.grad(g)(a).sum())(x))
    check(run)


def test_results_keep_graph_only_with_outside_dependency():
    def run(m):
        f = F(m)
        x = t(m, X, True)
        w = t(m, Y, True)
        plain = t(m, X)
        out = [f.grad(lambda a: (a * a).sum())(plain),  # nothing outside: detached
               f.grad(lambda a: (a * w).sum())(plain),  # closure w requires grad
               f.grad(lambda a: (a ** 3).sum())(x)]     # the argument requires grad
        out.append(f.vjp(lambda a: a * 2, plain)[0])
        # differentiate through a transform with ordinary autograd
        loss = (f.grad(lambda a: (a.sin() * a).sum())(x) ** 2).sum()
        out.append(m.autograd.grad(loss, x))
        return out
    check(run)


def test_only_the_argument_is_differentiated_not_closure_uses():
    def run(m):
        x = t(m, X)
        # x is also used through the closure: that use is a constant for grad
        return F(m).grad(lambda a: (a * x).sum())(x)
    check(run)


def test_inside_no_grad_still_works():
    def run(m):
        with m.no_grad():
            return F(m).grad(lambda a: (a ** 2).sum())(t(m, X))
    check(run)


def test_argument_errors():
    with pytest.raises(EmberError, match="floating point"):
        ember.func.grad(lambda a: a.sum())(ember.tensor([1, 2]))
    with pytest.raises(EmberError, match="argnums"):
        ember.func.grad(lambda a: a.sum(), argnums=2)(ember.ones(2))
    with pytest.raises(EmberError, match="tuples"):
        ember.func.jvp(ember.sin, ember.ones(2), ember.ones(2))
    with pytest.raises(EmberError, match="shape"):
        ember.func.jvp(ember.sin, (ember.ones(2),), (ember.ones(3),))
