"""ember.ctc_loss (torch's integer-reduction signature), ember.nonzero_static and
ember.embedding_renorm_ against PyTorch."""
import numpy as np
import pytest

import ember
from ember.errors import EmberError, EmberIndexError, EmberTypeError, ShapeError

torch = pytest.importorskip("torch")


def _ctc_inputs(seed=0):
    rng = np.random.default_rng(seed)
    lp = rng.standard_normal((6, 3, 5))
    lp = lp - np.log(np.exp(lp).sum(-1, keepdims=True))
    targets = np.array([[1, 2, 2], [3, 1, 0], [4, 4, 4]])
    return lp, targets, [6, 5, 6], [3, 2, 1]


@pytest.mark.parametrize("args,kwargs", [((), {}), ((0, 0), {}), ((0, 1), {}), ((0, 2), {}),
                                         ((0, 3), {}), ((), {"reduction": 1}),
                                         ((), {"reduction": 2, "zero_infinity": True})])
def test_ctc_loss_matches_torch(args, kwargs):
    lp, tg, il, tl = _ctc_inputs()
    e = ember.tensor(lp, requires_grad=True)
    t = torch.tensor(lp, requires_grad=True)
    out = ember.ctc_loss(e, ember.tensor(tg), il, tl, *args, **kwargs)
    ref = torch.ctc_loss(t, torch.tensor(tg), torch.tensor(il), torch.tensor(tl),
                         *args, **kwargs)
    assert tuple(out.shape) == tuple(ref.shape)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-10)
    out.sum().backward()
    ref.sum().backward()
    np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=1e-8, atol=1e-12)


def test_ctc_loss_rejects_string_reduction():
    lp, tg, il, tl = _ctc_inputs()
    with pytest.raises(EmberTypeError, match="reduction"):
        ember.ctc_loss(ember.tensor(lp), ember.tensor(tg), il, tl, reduction="sum")


@pytest.mark.parametrize("data", [[[1, 0], [3, 2]], [0, 0, 0], 3.0, 0.0, [[0.5, 0, -1]],
                                  np.zeros((0, 3)), np.arange(24).reshape(2, 3, 4) % 3,
                                  [True, False, True]])
@pytest.mark.parametrize("size", [0, 1, 2, 4, 7])
@pytest.mark.parametrize("fill", [-1, 9])
def test_nonzero_static_matches_torch(data, size, fill):
    a = np.asarray(data)
    out = ember.nonzero_static(ember.tensor(a), size=size, fill_value=fill)
    ref = torch.nonzero_static(torch.tensor(a), size=size, fill_value=fill)
    assert out.dtype is ember.int64
    assert tuple(out.shape) == tuple(ref.shape)
    np.testing.assert_array_equal(out.numpy(), ref.numpy())


def test_nonzero_static_non_contiguous():
    a = np.arange(12).reshape(3, 4) % 2
    out = ember.nonzero_static(ember.tensor(a).t(), size=5)
    ref = torch.nonzero_static(torch.tensor(a).t(), size=5)
    np.testing.assert_array_equal(out.numpy(), ref.numpy())


def test_nonzero_static_errors():
    x = ember.tensor([1, 0])
    with pytest.raises(EmberError, match="non-negative"):
        ember.nonzero_static(x, size=-1)
    with pytest.raises(EmberTypeError, match="must be int, not float"):
        ember.nonzero_static(x, size=2.0)
    with pytest.raises(TypeError):
        ember.nonzero_static(x, 2)
    with pytest.raises(EmberTypeError, match="Tensor"):
        ember.nonzero_static([1, 0], size=2)


@pytest.mark.parametrize("max_norm,norm_type", [(1.0, 2.0), (0.5, 1.0), (0.3, float("inf")),
                                                (1.5, 3.0), (100.0, 2.0)])
@pytest.mark.parametrize("idx", [[0, 2, 2], [[1, 3], [0, 1]], [], [4, -1]])
def test_embedding_renorm_matches_torch(max_norm, norm_type, idx):
    w = np.random.default_rng(0).standard_normal((6, 3))
    e, t = ember.tensor(w), torch.tensor(w)
    ie, it = ember.tensor(np.asarray(idx, np.int64)), torch.tensor(np.asarray(idx, np.int64))
    out = ember.embedding_renorm_(e, ie, max_norm, norm_type)
    torch.embedding_renorm_(t, it, max_norm, norm_type)
    assert out is e
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-12)


def test_embedding_renorm_float32_int32_indices():
    w = np.random.default_rng(1).standard_normal((4, 5)).astype(np.float32)
    e, t = ember.tensor(w), torch.tensor(w)
    ember.embedding_renorm_(e, ember.tensor([1, 3], dtype=ember.int32), 0.7, 2.0)
    torch.embedding_renorm_(t, torch.tensor([1, 3], dtype=torch.int32), 0.7, 2.0)
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-6)


def test_embedding_renorm_grad_and_errors():
    w = ember.randn(4, 3, requires_grad=True)
    with pytest.raises(EmberError, match="no_grad"):
        ember.embedding_renorm_(w, ember.tensor([0]), 0.1, 2.0)
    with ember.no_grad():
        ember.embedding_renorm_(w, ember.tensor([0]), 0.1, 2.0)
    assert abs(w[0].norm().item() - 0.1) < 1e-5 and w.requires_grad
    x = ember.randn(4, 3)
    with pytest.raises(ShapeError, match="2-D"):
        ember.embedding_renorm_(ember.zeros(3), ember.tensor([0]), 0.1, 2.0)
    with pytest.raises(EmberTypeError, match="float32"):
        ember.embedding_renorm_(x, ember.tensor([0.0]), 0.1, 2.0)
    with pytest.raises((EmberIndexError, IndexError)):
        ember.embedding_renorm_(x, ember.tensor([7]), 0.1, 2.0)


def test_nonzero_static_under_jit_raises_clearly():
    f = ember.jit(lambda x: ember.nonzero_static(x, size=3))
    with pytest.raises(Exception, match="depends on the values"):
        f(ember.tensor([1.0, 0.0, 1.0]))
