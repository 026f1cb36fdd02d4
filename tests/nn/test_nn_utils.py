"""nn.utils (gradient clipping, parameter vectors) against PyTorch."""
import math

import numpy as np
import pytest

import ember
from ember import nn

torch = pytest.importorskip("torch")


def _pair(seed=0):
    rng = np.random.default_rng(seed)
    shapes = [(3, 4), (5,), (2, 2, 2)]
    values = [rng.standard_normal(s) for s in shapes]
    grads = [rng.standard_normal(s) * 3 for s in shapes]
    e = [nn.Parameter(ember.tensor(v)) for v in values]
    t = [torch.nn.Parameter(torch.tensor(v)) for v in values]
    for p, g in zip(e, grads):
        p.grad = ember.tensor(g)
    for p, g in zip(t, grads):
        p.grad = torch.tensor(g)
    return e, t


@pytest.mark.parametrize("norm_type", [2.0, 1, 3.5, math.inf, 0.5])
@pytest.mark.parametrize("max_norm", [0.5, 1e6])
def test_clip_grad_norm_matches_torch(norm_type, max_norm):
    e, t = _pair()
    e_total = nn.utils.clip_grad_norm_(e, max_norm, norm_type)
    t_total = torch.nn.utils.clip_grad_norm_(t, max_norm, norm_type)
    assert e_total.item() == pytest.approx(t_total.item(), rel=1e-12)
    for p, q in zip(e, t):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-12)


def test_clip_grad_norm_edge_cases():
    e, _ = _pair()
    e[0].grad = None
    single = nn.utils.clip_grad_norm_(e[1], 0.1)  # a lone tensor
    assert single.item() > 0.1 and float(nn.utils.get_total_norm([e[1].grad])) < 0.1 + 1e-6
    assert nn.utils.clip_grad_norm_([nn.Parameter(ember.zeros(2))], 1.0).item() == 0.0
    e[1].grad = ember.tensor([math.nan, 1.0, 0, 0, 0], dtype=ember.float64)
    with pytest.raises(ember.EmberError, match="non-finite"):
        nn.utils.clip_grad_norm_(e, 1.0, error_if_nonfinite=True)


def test_clip_grad_value_matches_torch():
    e, t = _pair(1)
    assert nn.utils.clip_grad_value_(e, 0.7) is None
    torch.nn.utils.clip_grad_value_(t, 0.7)
    for p, q in zip(e, t):
        np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())


def test_parameters_to_vector_and_back():
    e, t = _pair(2)
    v = nn.utils.parameters_to_vector(e)
    np.testing.assert_array_equal(v.detach().numpy(),
                                  torch.nn.utils.parameters_to_vector(t).detach().numpy())
    assert v.requires_grad  # differentiable, like torch
    new = ember.arange(v.numel(), dtype=ember.float64)
    nn.utils.vector_to_parameters(new, e)
    assert e[0].tolist()[0] == [0.0, 1.0, 2.0, 3.0] and e[2].shape == (2, 2, 2)
    assert e[2].detach().numpy().ravel().tolist() == list(range(17, 25))
    with pytest.raises(ember.EmberTypeError, match="expected ember.Tensor"):
        nn.utils.vector_to_parameters([1.0], e)
    with pytest.raises(ember.EmberError, match="hold 25 values"):
        nn.utils.vector_to_parameters(ember.zeros(3), e)
