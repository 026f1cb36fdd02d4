"""ember.native_layer_norm, native_batch_norm, native_group_norm, native_dropout and
native_norm against PyTorch: values, statistics, running-stat updates and gradients."""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(1)


def pair(*shape):
    a = RNG.standard_normal(shape)
    return (ember.tensor(a, dtype=ember.float64, requires_grad=True),
            torch.tensor(a, dtype=torch.float64, requires_grad=True))


def close(e, t, tol=1e-10):
    assert tuple(e.shape) == tuple(t.shape)
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=tol, atol=tol)


def check_grads(outs, touts, leaves, tleaves):
    """Gradients of a weighted sum of every output (so each output's backward counts)."""
    loss = sum((o * (k + 1.5)).sin().sum() for k, o in enumerate(outs) if o.numel())
    tloss = sum((o * (k + 1.5)).sin().sum() for k, o in enumerate(touts) if o.numel())
    for g, tg in zip(ember.autograd.grad(loss, leaves), torch.autograd.grad(tloss, tleaves)):
        close(g, tg)


@pytest.mark.parametrize("shape,norm", [((4, 3, 5), [3, 5]), ((2, 7), [7]),
                                        ((3, 1, 4), [4]), ((0, 6), [6])])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm(shape, norm, affine):
    x, tx = pair(*shape)
    w, tw = pair(*norm) if affine else (None, None)
    b, tb = pair(*norm) if affine else (None, None)
    outs = ember.native_layer_norm(x, norm, w, b, 1e-5)
    touts = torch.native_layer_norm(tx, norm, tw, tb, 1e-5)
    for o, to in zip(outs, touts):
        close(o, to)
    assert [o.requires_grad for o in outs] == [to.requires_grad for to in touts]
    if x.numel():
        extra = [w, b] if affine else []
        check_grads(outs, touts, [x] + extra, [tx] + ([tw, tb] if affine else []))


@pytest.mark.parametrize("shape", [(8, 3), (4, 3, 5), (2, 3, 2, 2)])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_training(shape, affine):
    x, tx = pair(*shape)
    w, tw = pair(3) if affine else (None, None)
    b, tb = pair(3) if affine else (None, None)
    rm, trm = ember.zeros(3, dtype=ember.float64), torch.zeros(3, dtype=torch.float64)
    rv, trv = ember.ones(3, dtype=ember.float64), torch.ones(3, dtype=torch.float64)
    outs = ember.native_batch_norm(x, w, b, rm, rv, True, 0.3, 1e-5)
    touts = torch.native_batch_norm(tx, tw, tb, trm, trv, True, 0.3, 1e-5)
    for o, to in zip(outs, touts):
        close(o, to)
    assert [o.requires_grad for o in outs] == [to.requires_grad for to in touts]
    close(rm, trm)
    close(rv, trv)
    leaves, tleaves = ([x, w, b], [tx, tw, tb]) if affine else ([x], [tx])
    check_grads(outs, touts, leaves, tleaves)


def test_batch_norm_eval_and_no_running_stats():
    x, tx = pair(4, 3, 2)
    w, tw = pair(3)
    rm = RNG.standard_normal(3)
    rv = RNG.random(3) + 0.5
    outs = ember.native_batch_norm(x, w, None, ember.tensor(rm), ember.tensor(rv), False,
                                   0.1, 1e-5)
    touts = torch.native_batch_norm(tx, tw, None, torch.tensor(rm), torch.tensor(rv), False,
                                    0.1, 1e-5)
    for o, to in zip(outs, touts):
        close(o, to)
    check_grads(outs, touts, [x, w], [tx, tw])
    outs = ember.native_batch_norm(x, None, None, None, None, True, 0.1, 1e-5)
    touts = torch.native_batch_norm(tx, None, None, None, None, True, 0.1, 1e-5)
    for o, to in zip(outs, touts):
        close(o, to)
    with pytest.raises(ember.EmberValueError, match="native_batch_norm: running_mean and "
                                                    "running_var must be given"):
        ember.native_batch_norm(x, None, None, None, None, False, 0.1, 1e-5)
    with pytest.raises(ember.EmberValueError, match="native_batch_norm: input tensor must "
                                                    "have at least one element"):
        ember.native_batch_norm(x[:0], None, None, None, None, True, 0.1, 1e-5)
    with pytest.raises(ember.EmberValueError, match="native_batch_norm: expected more than 1 "
                                                    "value per channel"):
        ember.native_batch_norm(x[:1, :, :1], None, None, None, None, True, 0.1, 1e-5)
    with pytest.raises(ember.ShapeError, match=r"native_batch_norm: expected weight with 3 "
                                               r"elements, got shape \(4,\)"):
        ember.native_batch_norm(x, ember.ones(4, dtype=ember.float64), None, None, None,
                                True, 0.1, 1e-5)


@pytest.mark.parametrize("shape,group", [((2, 6, 5), 3), ((3, 4), 2), ((2, 4, 2, 3), 1),
                                         ((1, 4, 3), 4)])
def test_group_norm(shape, group):
    x, tx = pair(*shape)
    w, tw = pair(shape[1])
    b, tb = pair(shape[1])
    hxw = int(np.prod(shape[2:]))
    outs = ember.native_group_norm(x, w, b, shape[0], shape[1], hxw, group, 1e-5)
    touts = torch.native_group_norm(tx, tw, tb, shape[0], shape[1], hxw, group, 1e-5)
    for o, to in zip(outs, touts):
        close(o, to)
    check_grads(outs, touts, [x, w, b], [tx, tw, tb])


def test_norm_errors():
    x = ember.zeros(4, 3, 5)
    with pytest.raises(ember.ShapeError, match=r"native_layer_norm: Given "
                                               r"normalized_shape=\[4\], expected input "
                                               r"with shape \[\*, 4\], but got input of "
                                               r"size \[4, 3, 5\]"):
        ember.native_layer_norm(x, [4], None, None, 1e-5)
    with pytest.raises(ember.ShapeError, match="native_group_norm: Expected number of "
                                               "channels in input to be divisible"):
        ember.native_group_norm(x, None, None, 4, 3, 5, 2, 1e-5)
    with pytest.raises(ember.ShapeError, match=r"native_group_norm: expected input of shape "
                                               r"\(N=4, C=3, \*\) with N \* C \* HxW = 24"):
        ember.native_group_norm(x, None, None, 4, 3, 2, 3, 1e-5)


@pytest.mark.parametrize("which", ["layer", "batch", "group"])
def test_half_precision_statistics_dtype(which):
    a = RNG.standard_normal((4, 6)).astype(np.float32)
    x, tx = ember.tensor(a).to(ember.bfloat16), torch.tensor(a).to(torch.bfloat16)
    if which == "layer":
        outs = ember.native_layer_norm(x, [6], None, None, 1e-5)
        touts = torch.native_layer_norm(tx, [6], None, None, 1e-5)
    elif which == "batch":
        outs = ember.native_batch_norm(x, None, None, None, None, True, 0.1, 1e-5)
        touts = torch.native_batch_norm(tx, None, None, None, None, True, 0.1, 1e-5)
    else:
        outs = ember.native_group_norm(x, None, None, 4, 6, 1, 2, 1e-5)
        touts = torch.native_group_norm(tx, None, None, 4, 6, 1, 2, 1e-5)
    assert [o.dtype.name for o in outs] == ["bfloat16"] * 3
    for o, to in zip(outs, touts):
        np.testing.assert_allclose(o.float().numpy(), to.float().numpy(), rtol=2e-2,
                                   atol=2e-2)


def test_float32_matches():
    x, tx = pair(3, 4, 5)
    xf, txf = x.detach().float(), tx.detach().float()
    for o, to in zip(ember.native_batch_norm(xf, None, None, None, None, True, 0.1, 1e-5),
                     torch.native_batch_norm(txf, None, None, None, None, True, 0.1, 1e-5)):
        close(o, to, 1e-5)
    for o, to in zip(ember.native_layer_norm(xf, [5], None, None, 1e-5),
                     torch.native_layer_norm(txf, [5], None, None, 1e-5)):
        close(o, to, 1e-5)


def test_dropout():
    x, tx = pair(200, 50)
    out, mask = ember.native_dropout(x, 0.3, True)
    assert mask.dtype == ember.bool and tuple(mask.shape) == (200, 50)
    keep = mask.numpy()
    assert abs(keep.mean() - 0.7) < 0.02
    np.testing.assert_allclose(out.detach().numpy(), x.detach().numpy() * keep / 0.7,
                               rtol=1e-12)
    (g,) = ember.autograd.grad(out.sum(), [x])
    np.testing.assert_allclose(g.numpy(), keep / 0.7, rtol=1e-12)
    out, mask = ember.native_dropout(x, 0.3, False)
    tout, tmask = torch.native_dropout(tx, 0.3, False)
    close(out, tout)
    assert mask.numpy().all() and tmask.numpy().all() and mask.dtype == ember.bool
    out, mask = ember.native_dropout(x, 1.0, True)
    assert not out.detach().numpy().any() and not mask.numpy().any()
    out, mask = ember.native_dropout(x, 0.0, None)
    assert mask.numpy().all()
    close(out, tx)
    with pytest.raises(ember.EmberValueError, match="native_dropout: dropout probability "
                                                    "has to be between 0 and 1, but got "
                                                    "p=1.5"):
        ember.native_dropout(x, 1.5, True)


@pytest.mark.parametrize("p", [2, 3, 1, float("inf"), 0])
def test_native_norm(p):
    x, tx = pair(4, 3, 5)
    out = ember.native_norm(x, p)
    tout = torch.native_norm(tx.detach().to_sparse(), p)
    close(out, tout)
    if p != 0:
        (g,) = ember.autograd.grad(out, [x])
        (tg,) = torch.autograd.grad(torch.linalg.vector_norm(tx, p), [tx])
        close(g, tg)


def test_native_norm_dim_overload():
    x, tx = pair(4, 3, 5)
    out = ember.native_norm(x, 3, [1], True, None)
    close(out, torch.linalg.vector_norm(tx, 3, dim=[1], keepdim=True))
    out = ember.native_norm(x, None, [0, 2], False, ember.float32)
    assert out.dtype == ember.float32
    close(out, torch.linalg.vector_norm(tx, 2, dim=[0, 2]).float(), 1e-5)
    with pytest.raises(ember.EmberTypeError, match="native_norm: expected a floating-point"):
        ember.native_norm(ember.tensor([1, 2]))


def test_jit_matches_eager():
    x = ember.randn(4, 6, 3, dtype=ember.float64)

    def fn(x):
        out, mean, rstd = ember.native_group_norm(x, None, None, 4, 6, 3, 2, 1e-5)
        out2, m2, r2 = ember.native_layer_norm(x, [3], None, None, 1e-5)
        return out.sum() + rstd.sum() + (out2 * out2).sum() + r2.sum()

    close(ember.jit(fn)(x), fn(x))
