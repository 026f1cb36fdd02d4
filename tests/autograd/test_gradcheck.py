"""gradcheck / gradgradcheck: pass on correct gradients, fail (with the Jacobians in the
message) on wrong ones; PyTorch's signature and behaviour."""
import inspect

import numpy as np
import pytest

import ember
from ember.autograd import GradcheckError, gradcheck, gradgradcheck
from .oracle import needs_torch, torch


def rand(*shape, requires_grad=True, seed=0):
    data = np.random.default_rng(seed).uniform(0.5, 1.5, shape)
    return ember.tensor(data, dtype=ember.float64, requires_grad=requires_grad)


class WrongExp(ember.autograd.Function):
    """exp with a backward that is off by a factor of 1.1."""
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        y, = ctx.saved_tensors
        return g * y * 1.1


class RightCubeWrongSecond(ember.autograd.Function):
    """x³ whose backward is right but not differentiable correctly (uses 3x²·const
    computed from a detached x, so the second derivative is 0)."""
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * 3 * x.detach() ** 2


class SwappedGrads(ember.autograd.Function):
    """x*y whose backward swaps the two gradients."""
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        return g * x, g * y


class NoisyBackward(ember.autograd.Function):
    """Identity whose backward adds a different tiny value on every call."""
    calls = 0

    @staticmethod
    def forward(ctx, x):
        return x * 1

    @staticmethod
    def backward(ctx, g):
        NoisyBackward.calls += 1
        return g + NoisyBackward.calls * 1e-9


def test_passes_on_correct_ops():
    x, y = rand(2, 3), rand(3, seed=1)
    assert gradcheck(lambda a, b: (a * b).sin() / (a + b), (x, y))
    assert gradcheck(lambda a: (a.exp().sum(0), a * 2), (x,))  # several outputs
    assert gradcheck(ember.sin, x)  # a single tensor, not a tuple
    assert gradcheck(lambda a, k: a ** k, (x, 3))  # non-tensor argument


def test_passes_with_inputs_not_requiring_grad():
    x, c = rand(3), rand(3, requires_grad=False, seed=2)
    assert gradcheck(lambda a, b: a * b.exp(), (x, c))


def test_fails_on_wrong_backward():
    x = rand(3)
    with pytest.raises(GradcheckError, match="Jacobian mismatch for output 0 with respect "
                                             "to input 0") as info:
        gradcheck(WrongExp.apply, (x,))
    message = str(info.value)
    assert "numerical:" in message and "analytical:" in message
    assert isinstance(info.value, RuntimeError)


def test_fails_on_second_input():
    with pytest.raises(GradcheckError, match="with respect to input 0"):
        gradcheck(SwappedGrads.apply, (rand(3), rand(3, seed=1)))
    assert gradcheck(SwappedGrads.apply, (rand(3), rand(3, seed=1, requires_grad=False)),
                     raise_exception=False) is False


def test_raise_exception_false_returns_false():
    assert gradcheck(WrongExp.apply, (rand(3),), raise_exception=False) is False


def test_fast_mode():
    x = rand(4)
    assert gradcheck(lambda a: a.sin() * a, (x,), fast_mode=True)
    with pytest.raises(GradcheckError, match="Jacobian mismatch"):
        gradcheck(WrongExp.apply, (x,), fast_mode=True)


def test_tolerances_are_used():
    x = rand(3)
    assert gradcheck(WrongExp.apply, (x,), rtol=0.2, atol=0)
    assert not gradcheck(WrongExp.apply, (x,), rtol=0.01, atol=0, raise_exception=False)


def test_non_reentrant_backward_fails_unless_tolerated():
    NoisyBackward.calls = 0
    x = rand(3)
    with pytest.raises(GradcheckError, match="Backward is not reentrant"):
        gradcheck(NoisyBackward.apply, (x,))
    assert gradcheck(NoisyBackward.apply, (x,), nondet_tol=1e-6, check_undefined_grad=False)


def test_output_not_requiring_grad_must_not_depend_on_input():
    x = rand(3)
    assert gradcheck(lambda a: (a * 2, a.detach() * 0), (x,))
    with pytest.raises(GradcheckError, match="expected to be zero"):
        gradcheck(lambda a: (a * 2, a.detach() * 3), (x,))


def test_warns_on_single_precision_inputs():
    x = ember.tensor([0.5, 1.0], requires_grad=True)
    with pytest.warns(UserWarning, match="not a double precision"):
        assert gradcheck(lambda a: a * 2, (x,), eps=1e-2, atol=1e-3, rtol=1e-3)


def test_needs_an_input_requiring_grad():
    with pytest.raises(ValueError, match="at least one input tensor to require gradient"):
        gradcheck(lambda a: a * 2, (rand(2, requires_grad=False),))


def test_unsupported_modes_raise():
    with pytest.raises(NotImplementedError, match="check_forward_ad"):
        gradcheck(lambda a: a * 2, (rand(2),), check_forward_ad=True)


def test_gradgradcheck_passes_and_fails():
    x, y = rand(3), rand(3, seed=1)
    assert gradgradcheck(lambda a, b: (a * a * b).sin(), (x, y))
    assert gradgradcheck(lambda a: a.exp() * a, (x,), gen_non_contig_grad_outputs=True)
    assert gradgradcheck(lambda a: a ** 3, (x,), (ember.ones(3, dtype=ember.float64),))
    # first order is right, second order is not
    assert gradcheck(RightCubeWrongSecond.apply, (x,))
    with pytest.raises(GradcheckError, match="Jacobian mismatch"):
        gradgradcheck(RightCubeWrongSecond.apply, (x,))


def test_gradcheck_error_is_importable_from_module():
    from ember.autograd.gradcheck import GradcheckError as FromModule
    assert FromModule is GradcheckError
    assert callable(ember.autograd.gradcheck)


@needs_torch
def test_signature_matches_torch():
    for ours, theirs in ((gradcheck, torch.autograd.gradcheck),
                         (gradgradcheck, torch.autograd.gradgradcheck)):
        a = inspect.signature(ours).parameters
        b = inspect.signature(theirs).parameters
        assert list(a) == list(b)
        assert [p.default for p in a.values()] == [p.default for p in b.values()]


@needs_torch
def test_agrees_with_torch_on_pass_and_fail():
    class TorchWrongExp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            y, = ctx.saved_tensors
            return g * y * 1.1
    data = np.array([0.5, 1.0, 1.5])
    tx = torch.tensor(data, requires_grad=True)
    ex = ember.tensor(data, requires_grad=True)
    assert gradcheck(ember.sin, (ex,)) == torch.autograd.gradcheck(torch.sin, (tx,))
    assert gradcheck(WrongExp.apply, (ex,), raise_exception=False) == \
        torch.autograd.gradcheck(TorchWrongExp.apply, (tx,), raise_exception=False)
