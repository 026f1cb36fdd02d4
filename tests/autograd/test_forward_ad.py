"""ember.autograd.forward_ad (dual_level, make_dual, unpack_dual) against
torch.autograd.forward_ad: primals and tangents of the same computations, errors."""
import numpy as np
import pytest

import ember
from ember import EmberError
from .oracle import assert_same, check, needs_torch, torch

pytestmark = needs_torch

RNG = np.random.default_rng(2)
X, TX = RNG.uniform(-1, 1, (3, 4)), RNG.uniform(-1, 1, (3, 4))
W, TW = RNG.uniform(-1, 1, (4, 2)), RNG.uniform(-1, 1, (4, 2))
IMG, KER = RNG.uniform(-1, 1, (1, 2, 5, 5)), RNG.uniform(-1, 1, (3, 2, 3, 3))


def t(m, data, requires_grad=False):
    return m.tensor(data, dtype=m.float64, requires_grad=requires_grad)


def fw(m):
    return m.autograd.forward_ad


@pytest.mark.parametrize("fn", [
    lambda m, x, w: x.sin() * x.exp(),
    lambda m, x, w: (x @ w).tanh(),
    lambda m, x, w: m.softmax(x, dim=-1).sum(0),
    lambda m, x, w: (x ** 2).mean(),
    lambda m, x, w: x.reshape(4, 3).t()[1:] / 2,
    lambda m, x, w: m.nn.functional.layer_norm(x, (4,)),
    lambda m, x, w: x.max(dim=1).values * w.sum(),
])
def test_tangents_match_torch(fn):
    def run(m):
        with fw(m).dual_level():
            x = fw(m).make_dual(t(m, X), t(m, TX))
            w = fw(m).make_dual(t(m, W), t(m, TW))
            primal, tangent = fw(m).unpack_dual(fn(m, x, w))
            return primal, tangent
    check(run)


def test_conv2d_tangent():
    def run(m):
        with fw(m).dual_level():
            img = fw(m).make_dual(t(m, IMG), t(m, IMG[:, ::-1].copy()))
            out = m.nn.functional.conv2d(img, t(m, KER), padding=1)
            return tuple(fw(m).unpack_dual(out))
    check(run)


def test_unpack_of_the_dual_itself_of_a_plain_tensor_and_after_the_level():
    def run(m):
        with fw(m).dual_level():
            d = fw(m).make_dual(t(m, X), t(m, TX))
            inside = (tuple(fw(m).unpack_dual(d)), tuple(fw(m).unpack_dual(t(m, W))),
                      fw(m).unpack_dual(d.detach()).tangent)
        return inside, fw(m).unpack_dual(d).tangent
    check(run)


def test_unpacked_result_is_a_namedtuple():
    with ember.autograd.forward_ad.dual_level():
        d = ember.autograd.forward_ad.make_dual(ember.ones(2), ember.ones(2) * 3)
        res = ember.autograd.forward_ad.unpack_dual(d * d)
    assert isinstance(res, ember.autograd.forward_ad.UnpackedDualTensor)
    assert res.primal.tolist() == [1.0, 1.0] and res.tangent.tolist() == [6.0, 6.0]
    assert res._fields == ("primal", "tangent")


def test_backward_through_the_dual_reaches_the_primal():
    def run(m):
        x = t(m, X, True)
        with fw(m).dual_level():
            d = fw(m).make_dual(x, t(m, TX))
            _, tangent = fw(m).unpack_dual(d.sin() * 3)
            (d.sin() * 3).sum().backward()
        return tangent.detach(), x.grad
    check(run)


def test_gradient_through_the_tangent():
    def run(m):
        tan = t(m, TX, True)
        with fw(m).dual_level():
            d = fw(m).make_dual(t(m, X), tan)
            _, tangent = fw(m).unpack_dual((d ** 3).sum())
            (g,) = m.autograd.grad(tangent, tan)
        return tangent.detach(), g
    check(run)


def test_in_place_op_on_a_dual():
    def run(m):
        with fw(m).dual_level():
            d = fw(m).make_dual(t(m, X), t(m, TX))
            y = d * 1.0
            y.mul_(d)
            return tuple(fw(m).unpack_dual(y))
    check(run)


def test_decorator_and_jvp_agreement():
    fwad = ember.autograd.forward_ad

    @fwad.dual_level()
    def tangent_of_sin(x, v):
        return fwad.unpack_dual(fwad.make_dual(x, v).sin()).tangent
    x, v = ember.tensor(X), ember.tensor(TX)
    _, expected = ember.func.jvp(ember.sin, (x,), (v,))
    np.testing.assert_allclose(tangent_of_sin(x, v).numpy(), expected.numpy(), rtol=1e-6)


def test_tangent_dtype_follows_primal():
    with ember.autograd.forward_ad.dual_level():
        d = ember.autograd.forward_ad.make_dual(ember.ones(2), ember.ones(2, dtype=ember.float64))
        tangent = ember.autograd.forward_ad.unpack_dual(d * 2).tangent
    assert tangent.dtype is ember.float32 and tangent.tolist() == [2.0, 2.0]


def _same_error(fn):
    with pytest.raises(Exception) as expected:
        fn(torch)
    with pytest.raises(EmberError) as got:
        fn(ember)
    assert isinstance(got.value, type(expected.value)), (got.value, expected.value)
    assert str(got.value).replace("ember.", "torch.") == str(expected.value)


def _inside(body):
    def run(m):
        with m.autograd.forward_ad.dual_level():
            return body(m, m.autograd.forward_ad)
    return run


@pytest.mark.parametrize("case", [
    lambda m: m.autograd.forward_ad.make_dual(m.ones(2), m.ones(2)),
    _inside(lambda m, f: f.make_dual(m.ones(2), m.ones(3))),
    _inside(lambda m, f: f.make_dual(m.ones(2, dtype=m.int64), m.ones(2))),
    _inside(lambda m, f: f.make_dual(m.ones(2), m.ones(2, dtype=m.int64))),
    _inside(lambda m, f: f.make_dual(f.make_dual(m.ones(2), m.ones(2)), m.ones(2))),
    _inside(lambda m, f: f.make_dual(f.make_dual(m.ones(2), m.ones(2)) * 2, m.ones(2))),
    _inside(lambda m, f: f.dual_level().__enter__()),
])
def test_errors_match_torch(case):
    _same_error(case)
    ember.autograd.forward_ad._level = None  # (a failed case may leave its level open)


def test_unpack_of_a_non_tensor():
    with ember.autograd.forward_ad.dual_level():
        with pytest.raises(ember.EmberTypeError, match="must be Tensor, not float"):
            ember.autograd.forward_ad.unpack_dual(3.0)


def test_exit_of_a_level_that_is_not_current():
    with pytest.raises(EmberError, match="not the last one"):
        ember.autograd.forward_ad.exit_dual_level()


def test_plain_autograd_is_unaffected_after_the_level():
    x = ember.tensor(X, requires_grad=True)
    with ember.autograd.forward_ad.dual_level():
        ember.autograd.forward_ad.make_dual(ember.tensor(W), ember.tensor(TW))
    y = (x * x).sum()
    y.backward()
    assert_same(x.grad, torch.tensor(2 * X))
    assert not ember.autograd.forward_ad._markers


def test_under_jit_matches_eager():
    fwad = ember.autograd.forward_ad

    def tangent(x):
        with fwad.dual_level():
            return fwad.unpack_dual((fwad.make_dual(x, ember.ones(3, 4)) ** 2).tanh()).tangent
    compiled = ember.jit(tangent)
    for scale in (1.0, 3.0):
        x = ember.tensor(X * scale)
        np.testing.assert_allclose(compiled(x).numpy(), tangent(x).numpy(), rtol=1e-5)
