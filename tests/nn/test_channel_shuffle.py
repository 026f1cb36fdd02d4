"""ember.channel_shuffle, F.channel_shuffle / F.native_channel_shuffle and
nn.ChannelShuffle against PyTorch: values, gradients, errors, jit."""
import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.errors import EmberError, ShapeError

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _pair(shape, dtype=np.float64, seed=0):
    a = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    return (ember.tensor(a, requires_grad=True),
            torch.tensor(a, requires_grad=True))


FORMS = [(ember.channel_shuffle, torch.channel_shuffle),
         (F.channel_shuffle, TF.channel_shuffle),
         (F.native_channel_shuffle, TF.native_channel_shuffle),
         (ember.native_channel_shuffle, torch.native_channel_shuffle)]


@pytest.mark.parametrize("form", range(len(FORMS)))
@pytest.mark.parametrize("shape,groups", [((2, 6, 3, 4), 3), ((1, 4, 5), 2), ((2, 8, 2, 2, 2), 4),
                                          ((3, 5, 2), 1), ((2, 4, 1, 1), 4), ((0, 4, 3), 2),
                                          ((2, 6, 0), 3)])
def test_values_and_grads(form, shape, groups):
    ours, ref = FORMS[form]
    e, t = _pair(shape)
    y = ours(e, groups)
    with torch.no_grad():
        np.testing.assert_array_equal(y.detach().numpy(), ref(t, groups).numpy())
    # torch's native form has no derivative; ember's does, the same as channel_shuffle's
    yt = torch.channel_shuffle(t, groups)
    g = np.random.default_rng(1).standard_normal(shape)
    y.backward(ember.tensor(g))
    yt.backward(torch.tensor(g))
    np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=1e-10)


def test_non_contiguous_and_int_dtypes():
    a = np.arange(48.0).reshape(2, 4, 6)
    e = ember.tensor(a).transpose(1, 2)
    t = torch.tensor(a).transpose(1, 2)
    np.testing.assert_array_equal(ember.channel_shuffle(e, 3).numpy(),
                                  torch.channel_shuffle(t, 3).numpy())
    ei = ember.arange(8, dtype=ember.int32).reshape(1, 4, 2)
    out = ember.channel_shuffle(ei, 2)
    assert out.dtype is ember.int32
    np.testing.assert_array_equal(out.numpy(), torch.channel_shuffle(
        torch.arange(8, dtype=torch.int32).reshape(1, 4, 2), 2).numpy())


def test_layer_matches_torch():
    e, t = _pair((2, 6, 3), np.float32)
    layer, ref = ember.nn.ChannelShuffle(3), torch.nn.ChannelShuffle(3)
    np.testing.assert_array_equal(layer(e).detach().numpy(), ref(t).detach().numpy())
    assert layer.state_dict() == {} and "groups=3" in repr(layer)


def test_jit_matches_eager():
    x = ember.randn(2, 6, 3, requires_grad=True)
    f = ember.jit(lambda a: (ember.channel_shuffle(a, 2) * ember.arange(3.0)).sum())
    loss = f(x)
    loss.backward()
    g = x.grad.numpy().copy()
    x.grad = None
    (ember.channel_shuffle(x, 2) * ember.arange(3.0)).sum().backward()
    np.testing.assert_allclose(g, x.grad.numpy(), rtol=1e-6)


@pytest.mark.parametrize("shape,groups,err,msg", [((1, 3, 2), 2, ShapeError, "divisible"),
                                                  ((6,), 2, ShapeError, "shape"),
                                                  ((4, 1), 2, ShapeError, "shape"),
                                                  ((1, 4, 2), 0, EmberError, "positive"),
                                                  ((1, 4, 2), -2, EmberError, "positive"),
                                                  ((1, 4, 2), 2.0, EmberError, "int")])
def test_errors(shape, groups, err, msg):
    with pytest.raises(err, match=msg):
        ember.channel_shuffle(ember.zeros(*shape), groups)
