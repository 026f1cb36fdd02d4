"""ember.conv_tbc against PyTorch: values, gradients (float64), padding and errors."""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(3)


def pair(*shape):
    a = RNG.standard_normal(shape)
    return (ember.tensor(a, dtype=ember.float64, requires_grad=True),
            torch.tensor(a, dtype=torch.float64, requires_grad=True))


def close(e, t, tol=1e-10):
    assert tuple(e.shape) == tuple(t.shape)
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("T,B,cin,cout,K,pad", [(7, 2, 3, 4, 3, 0), (7, 2, 3, 4, 3, 2),
                                                (5, 1, 1, 2, 1, 0), (6, 3, 2, 2, 2, -1),
                                                (2, 2, 3, 4, 3, 0), (4, 0, 2, 3, 2, 1)])
def test_conv_tbc(T, B, cin, cout, K, pad):
    x, tx = pair(T, B, cin)
    w, tw = pair(K, cin, cout)
    b, tb = pair(cout)
    out = ember.conv_tbc(x, w, b, pad)
    tout = torch.conv_tbc(tx, tw, tb, pad)
    close(out, tout)
    loss, tloss = (out.sin() * 1.3).sum(), (tout.sin() * 1.3).sum()
    for g, tg in zip(ember.autograd.grad(loss, [x, w, b]),
                     torch.autograd.grad(tloss, [tx, tw, tb])):
        close(g, tg)


def test_conv_tbc_non_contiguous_and_jit():
    x, tx = pair(3, 8, 2)
    w, tw = pair(2, 3, 4)
    b, tb = pair(4)
    xe, xt = x.transpose(0, 2), tx.transpose(0, 2)  # (2, 8, 3), not contiguous
    close(ember.conv_tbc(xe, w, b, 1), torch.conv_tbc(xt.contiguous(), tw, tb, 1))
    fn = lambda x: ember.conv_tbc(x, w.detach(), b.detach(), 1)  # noqa: E731
    close(ember.jit(fn)(xe.detach()), fn(xe.detach()))


def test_conv_tbc_errors():
    x, w, b = ember.zeros(7, 2, 3), ember.zeros(3, 3, 4), ember.zeros(4)
    with pytest.raises(ember.ShapeError, match="conv_tbc: Input must have 3 dims"):
        ember.conv_tbc(x[0], w, b)
    with pytest.raises(ember.ShapeError, match=r"conv_tbc: Input dim 2 \(input channels\) "
                                               r"is not == dim 1 in the weight tensor"):
        ember.conv_tbc(x, w[:, :2], b)
    with pytest.raises(ember.ShapeError, match="conv_tbc: Bias size must equal dim 2"):
        ember.conv_tbc(x, w, b[:3])
    with pytest.raises(ember.EmberTypeError, match="conv_tbc: pad must be an int"):
        ember.conv_tbc(x, w, b, 1.5)
